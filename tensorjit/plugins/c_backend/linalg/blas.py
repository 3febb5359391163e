"""C kernels for Dot, Gemm and Ger that call an installed BLAS through pointers.

The BLAS is the OpenBLAS NumPy's wheels bundle (ILP64: 64-bit integers, routines named
``scipy_dgemm_64_``), looked up in the library NumPy loaded, or else SciPy's:
``scipy.linalg.cython_blas`` exports its BLAS routines as PyCapsules holding C function
pointers (read with ``PyCapsule_GetPointer``); config ``blas`` chooses. Either way the
routines use the Fortran calling convention (every argument by pointer) and their
addresses are handed to the compiled library's ``tj_blas_init`` once per process, so
nothing is linked against BLAS and no link flags are needed.

Row-major arrays are column-major transposes: the C code maps each operand's strides to
a transpose flag and a leading dimension (C-ordered, Fortran-ordered and sliced
submatrices need no copy) and computes ``C = A B`` as ``C.T = B.T A.T`` when C is
row-major. An operand BLAS cannot address (negative or zero strides, overlapping rows,
misaligned data) is reported back and copied to a C-contiguous array, once; an inplace
target BLAS cannot address is computed in a contiguous copy and written back. Empty
dimensions never reach BLAS: the C code returns (m or n is 0) or scales the output by
beta (k is 0).
"""

from __future__ import annotations

import ctypes
import pathlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensorjit.core.config import config
from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import compiler, parallel, threads
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.plugins.c_backend.linalg import blas_threads, penalised
from tensorjit.plugins.c_backend.linalg.skinny import skinny_source
from tensorjit.plugins.device_kernels.blas_plan import BlasPlanner
from tensorjit.tensor.blas import Gemm, Ger
from tensorjit.tensor.math import Dot

Run = Callable[[list, list], None]

DTYPES = {"float64": ("d", "double"), "float32": ("s", "float")}
ROUTINES = ("dgemm", "sgemm", "dgemv", "sgemv", "dger", "sger", "ddot", "sdot")
LL = "long long"

_HEADER = r"""
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* C11's, which <stdlib.h> does not declare under the kernels' -std=gnu99 (newer
   compilers refuse a call to an undeclared function). */
void *aligned_alloc(size_t alignment, size_t size);

/* BLAS's integer: int (LP64, SciPy's) or int64_t (ILP64, NumPy's scipy-openblas64). */
typedef {I} tj_int;
#define TJ_INT_MAX {IMAX}
{THREADS}
/* Status of every entry point: 0 done; -1 a dimension does not fit BLAS's int (the
   caller falls back); otherwise a bit mask of the array arguments (1: first, 2: second,
   4: third) BLAS cannot address as they are, to be copied by the caller and retried. */

static void *tj_fn[8];

/* 1 while one thread runs the products (skinny.py's kernels are single-threaded; with
   more, BLAS's own threads share the work; a pool's part is on one thread either way). */
static int tj_skinny_on = 1;

void tj_skinny_enable(int on)
{
    tj_skinny_on = on;
}

int tj_blas_init(void **fns)
{
    for (int i = 0; i < 8; i++) {
        if (fns[i] == NULL)
            return 1;
        tj_fn[i] = fns[i];
    }
    return 0;
}

void tj_blas_threads(void *local_threads, void *set_threads, void *get_threads)
{
    tj_blas_threads_init(local_threads, set_threads, get_threads);
}

/* An r x c matrix at byte strides (sr, sc) as a column-major BLAS operand: *trans 'N'
   when the memory holds the matrix with leading dimension *ld, 'T' when it holds its
   transpose. 0 when neither works (negative, zero or overlapping strides). */
static int tj_layout(long long r, long long c, long long sr, long long sc, long long size,
                     char *data, char *trans, tj_int *ld)
{
    long long mr = r > 1 ? r : 1, mc = c > 1 ? c : 1, l;
    if ((uintptr_t)data % (uintptr_t)size || sr % size || sc % size)
        return 0;
    sr /= size;
    sc /= size;
    if ((r <= 1 || sr == 1) && (c <= 1 || sc >= mr)) {
        *trans = 'N';
        l = c <= 1 ? mr : sc;
    } else if ((c <= 1 || sc == 1) && (r <= 1 || sr >= mc)) {
        *trans = 'T';
        l = r <= 1 ? mc : sr;
    } else {
        return 0;
    }
    if (l > TJ_INT_MAX)
        return 0;
    *ld = (tj_int)l;
    return 1;
}

/* A vector of n elements at byte stride s as a BLAS increment (positive only). */
static int tj_inc(long long n, long long s, long long size, char *data, tj_int *inc)
{
    if (n <= 1) {
        *inc = 1;
        return 1;
    }
    if ((uintptr_t)data % (uintptr_t)size || s <= 0 || s % size || s / size > TJ_INT_MAX)
        return 0;
    *inc = (tj_int)(s / size);
    return 1;
}

static int tj_too_big(long long a, long long b, long long c)
{
    return a > TJ_INT_MAX || b > TJ_INT_MAX || c > TJ_INT_MAX;
}

/* A stack of products C[i] = A[i] . B[i] (MatMul's batches): i runs over a batch shape
   of nd axes, each operand at its own byte strides along them (0 where it is broadcast),
   every product an m x k by k x n tj_gemm_<p> at the matrices' strides. */
#define TJ_BATCH_DIMS 32
typedef int (*tj_gemm_call)(char *, long long, long long, long long, long long, char *,
                            long long, long long, long long, char *, long long, long long,
                            double, double);
typedef struct {
    tj_gemm_call gemm, one; /* a product as the caller's; on the calling thread alone */
    char *a, *b, *c;
    long long m, k, n, as0, as1, bs0, bs1, cs0, cs1;
    int nd;
    long long shape[TJ_BATCH_DIMS], sa[TJ_BATCH_DIMS], sb[TJ_BATCH_DIMS], sc[TJ_BATCH_DIMS];
    int status[TJ_MAX_PARTS];
} tj_batch;

/* Products [lo, hi) of the stack, each by `gemm`; the first nonzero tj_gemm status. */
static int tj_batch_range(const tj_batch *j, tj_gemm_call gemm, long long lo, long long hi)
{
    for (long long i = lo; i < hi; i++) {
        long long r = i;
        char *a = j->a, *b = j->b, *c = j->c;
        for (int d = j->nd - 1; d >= 0; d--) {
            const long long q = r % j->shape[d];
            r /= j->shape[d];
            a += q * j->sa[d];
            b += q * j->sb[d];
            c += q * j->sc[d];
        }
        const int status = gemm(a, j->m, j->k, j->as0, j->as1, b, j->n, j->bs0, j->bs1, c,
                                j->cs0, j->cs1, 1.0, 0.0);
        if (status)
            return status;
    }
    return 0;
}

static void tj_batch_part(void *ctx, int64_t lo, int64_t hi, int part)
{
    tj_batch *j = (tj_batch *)ctx;
    tj_blas_part_threads(1);
    j->status[part] = tj_batch_range(j, j->one, lo, hi);
    tj_blas_part_threads(0);
}

/* The stack, its products split over the pool (adjacent ones in a part, each on one
   BLAS thread) when `threads` > 1 and every thread gets two or more: products of a
   stack are often small (attention's 64 x 64 per head), where the BLAS's own threading
   of each wins little; with fewer, each product is the BLAS's to thread. */
static int tj_batch_run(tj_batch *j, long long count, int threads)
{
    if (!tj_parallel || threads < 2 || count < 2 * (long long)threads)
        return tj_batch_range(j, j->gemm, 0, count);
    memset(j->status, 0, sizeof j->status);
    const int restore = tj_blas_single();
    const int used = tj_parallel(tj_batch_part, j, count, 1, 1);
    tj_blas_restore(restore);
    for (int part = 0; part < used; part++)
        if (j->status[part])
            return j->status[part];
    return 0;
}

/* GEMM's operands C (m x n) = A (m x k) . B (k x n), elements of z bytes, as BLAS
   operands: a row-major C is computed as C.T = B.T . A.T (*flip). Returns tj_gemm's
   status bits of the operands BLAS can not address (4: C), 0 when all can. */
static int tj_gemm_operands(char *a, long long m, long long k, long long as0, long long as1,
                            char *b, long long n, long long bs0, long long bs1, char *c,
                            long long cs0, long long cs1, long long z, char *ta, char *tb,
                            tj_int *lda, tj_int *ldb, tj_int *ldc, int *flip)
{
    char tc;
    int need = 0;
    if (!tj_layout(m, n, cs0, cs1, z, c, &tc, ldc))
        return 4;
    *flip = tc == 'T';
    if (*flip) {
        if (!tj_layout(n, k, bs1, bs0, z, b, tb, ldb)) need |= 2;
        if (!tj_layout(k, m, as1, as0, z, a, ta, lda)) need |= 1;
    } else {
        if (!tj_layout(m, k, as0, as1, z, a, ta, lda)) need |= 1;
        if (!tj_layout(k, n, bs0, bs1, z, b, tb, ldb)) need |= 2;
    }
    return need;
}
"""

_TEMPLATE = r"""
typedef void (*tj_gemm_{p}_t)(char *, char *, tj_int *, tj_int *, tj_int *, {T} *, {T} *,
                              tj_int *, {T} *, tj_int *, {T} *, {T} *, tj_int *);
typedef void (*tj_gemv_{p}_t)(char *, tj_int *, tj_int *, {T} *, {T} *, tj_int *, {T} *,
                              tj_int *, {T} *, {T} *, tj_int *);
typedef void (*tj_ger_{p}_t)(tj_int *, tj_int *, {T} *, {T} *, tj_int *, {T} *, tj_int *,
                             {T} *, tj_int *);
typedef {T} (*tj_dot_{p}_t)(tj_int *, {T} *, tj_int *, {T} *, tj_int *);

/* m x n matrix at byte strides (s0, s1) = beta * itself (0 when beta is 0). */
static void tj_scale_{p}(char *c, long long m, long long n, long long s0, long long s1,
                         double beta)
{
    {T} b = ({T})beta;
    for (long long i = 0; i < m; i++)
        for (long long j = 0; j < n; j++) {
            {T} *q = ({T} *)(c + i * s0 + j * s1);
            *q = b == 0 ? 0 : *q * b;
        }
}

/* count contiguous elements = b * themselves: one vectorised pass. */
static void tj_scale_contig_{p}({T} *c, long long count, {T} b)
{
    for (long long i = 0; i < count; i++)
        c[i] *= b;
}

/* C (m x n) = alpha * A (m x k) . B (k x n) + beta * C, on the calling thread (and the
   BLAS's own threads); C is not read when beta is 0. `skinny`: few-column products may
   take skinny.py's single-threaded kernels. */
static int tj_gemm_by_{p}(char *a, long long m, long long k, long long as0, long long as1,
                          char *b, long long n, long long bs0, long long bs1,
                          char *c, long long cs0, long long cs1, double alpha, double beta,
                          int skinny)
{
    const long long z = sizeof({T});
    char ta, tb;
    tj_int lda, ldb, ldc, im, in, ik;
    int need, flip;
    if (m == 0 || n == 0)
        return 0;
    if (tj_too_big(m, n, k))
        return -1;
    if (k == 0 || alpha == 0) {
        /* no products; alpha 0 reads neither A nor B (reference BLAS's rule, kept on
           every CPU: OpenBLAS's AVX-512 small-matrix kernels read them, NaNs and all) */
        tj_scale_{p}(c, m, n, cs0, cs1, beta);
        return 0;
    }
    /* few columns: one pass over A (skinny.py; float64 only) */
    if ({SKINNY} && skinny &&
        tj_skinny_{p}(a, m, k, as0, as1, b, n, bs0, bs1, c, cs0, cs1, alpha, beta) == 0)
        return 0;
    need = tj_gemm_operands(a, m, k, as0, as1, b, n, bs0, bs1, c, cs0, cs1, z, &ta, &tb,
                            &lda, &ldb, &ldc, &flip);
    if (need)
        return need;
    {
        {T} al = ({T})alpha, be = ({T})beta;
        if (beta != 0 && beta != 1 && ldc == (flip ? n : m)) {
            /* A contiguous C scaled here, then accumulated into: OpenBLAS's own scaling
               pass is about three times slower (an L2 penalty's decay of a weight). */
            tj_scale_contig_{p}(({T} *)c, m * n, be);
            be = 1;
        }
        im = (tj_int)m;
        in = (tj_int)n;
        ik = (tj_int)k;
        if (flip)
            ((tj_gemm_{p}_t)tj_fn[{gemm}])(&tb, &ta, &in, &im, &ik, &al, ({T} *)b, &ldb,
                                          ({T} *)a, &lda, &be, ({T} *)c, &ldc);
        else
            ((tj_gemm_{p}_t)tj_fn[{gemm}])(&ta, &tb, &im, &in, &ik, &al, ({T} *)a, &lda,
                                          ({T} *)b, &ldb, &be, ({T} *)c, &ldc);
    }
    return 0;
}

/* A product on one thread: a pool's part, where skinny.py's kernels serve. */
static int tj_gemm_one_{p}(char *a, long long m, long long k, long long as0, long long as1,
                           char *b, long long n, long long bs0, long long bs1, char *c,
                           long long cs0, long long cs1, double alpha, double beta)
{
    return tj_gemm_by_{p}(a, m, k, as0, as1, b, n, bs0, bs1, c, cs0, cs1, alpha, beta, 1);
}

/* C (m x n) = alpha * A (m x k) . B (k x n) + beta * C; C is not read when beta is 0.
   With config threads above 1 the BLAS threads it (its own workers). */
int tj_gemm_{p}(char *a, long long m, long long k, long long as0, long long as1,
               char *b, long long n, long long bs0, long long bs1,
               char *c, long long cs0, long long cs1, double alpha, double beta)
{
    return tj_gemm_by_{p}(a, m, k, as0, as1, b, n, bs0, bs1, c, cs0, cs1, alpha, beta,
                          tj_skinny_on);
}

/* The stack of products of tj_batch (nd axes of batch shape, the operands' byte strides
   along them); 0 done, -1 a batch of more than TJ_BATCH_DIMS axes, else the first
   product's tj_gemm status (the caller copies and runs its own loop). */
int tj_gemm_batched_{p}(char *a, char *b, char *c, long long m, long long k, long long n,
                        long long as0, long long as1, long long bs0, long long bs1,
                        long long cs0, long long cs1, int nd, const long long *shape,
                        const long long *sa, const long long *sb, const long long *sc,
                        int threads)
{
    tj_batch j = {tj_gemm_{p}, tj_gemm_one_{p}, a, b, c, m, k, n, as0, as1, bs0, bs1, cs0,
                  cs1, nd};
    long long count = 1;
    if (nd > TJ_BATCH_DIMS)
        return -1;
    for (int d = 0; d < nd; d++) {
        j.shape[d] = shape[d];
        j.sa[d] = sa[d];
        j.sb[d] = sb[d];
        j.sc[d] = sc[d];
        count *= shape[d];
    }
    return count ? tj_batch_run(&j, count, threads) : 0;
}

/* y (m) = alpha * A (m x k) . x (k) + beta * y; y is not read when beta is 0. */
int tj_gemv_{p}(char *a, long long m, long long k, long long as0, long long as1,
               char *x, long long xs, char *y, long long ys, double alpha, double beta)
{
    const long long z = sizeof({T});
    char ta;
    tj_int lda, incx, incy, r, c;
    int need = 0;
    if (m == 0)
        return 0;
    if (tj_too_big(m, k, 0))
        return -1;
    if (k == 0 || alpha == 0) {  /* as tj_gemm: alpha 0 reads neither A nor x */
        tj_scale_{p}(y, m, 1, ys, 0, beta);
        return 0;
    }
    if (!tj_layout(m, k, as0, as1, z, a, &ta, &lda)) need |= 1;
    if (!tj_inc(k, xs, z, x, &incx)) need |= 2;
    if (!tj_inc(m, ys, z, y, &incy)) need |= 4;
    if (need)
        return need;
    {
        {T} al = ({T})alpha, be = ({T})beta;
        /* 'T': the memory holds A.T (k x m), so y = op(A.T) x with op = transpose. */
        r = ta == 'N' ? (tj_int)m : (tj_int)k;
        c = ta == 'N' ? (tj_int)k : (tj_int)m;
        ((tj_gemv_{p}_t)tj_fn[{gemv}])(&ta, &r, &c, &al, ({T} *)a, &lda, ({T} *)x, &incx,
                                      &be, ({T} *)y, &incy);
    }
    return 0;
}

/* A (m x n) += alpha * x (m) . y (n)^T */
int tj_ger_{p}(char *a, long long m, long long n, long long as0, long long as1,
              char *x, long long xs, char *y, long long ys, double alpha)
{
    const long long z = sizeof({T});
    char ta;
    tj_int lda, incx, incy, im, in;
    int need = 0;
    if (m == 0 || n == 0 || alpha == 0)  /* alpha 0: x and y are not read */
        return 0;
    if (tj_too_big(m, n, 0))
        return -1;
    if (!tj_layout(m, n, as0, as1, z, a, &ta, &lda)) need |= 1;
    if (!tj_inc(m, xs, z, x, &incx)) need |= 2;
    if (!tj_inc(n, ys, z, y, &incy)) need |= 4;
    if (need)
        return need;
    {
        {T} al = ({T})alpha;
        im = (tj_int)m;
        in = (tj_int)n;
        if (ta == 'N')
            ((tj_ger_{p}_t)tj_fn[{ger}])(&im, &in, &al, ({T} *)x, &incx, ({T} *)y, &incy,
                                        ({T} *)a, &lda);
        else  /* the memory holds A.T (n x m): A.T += alpha * y . x^T */
            ((tj_ger_{p}_t)tj_fn[{ger}])(&in, &im, &al, ({T} *)y, &incy, ({T} *)x, &incx,
                                        ({T} *)a, &lda);
    }
    return 0;
}

/* *out = x (n) . y (n) */
int tj_dot_{p}(char *x, long long n, long long xs, char *y, long long ys, char *out)
{
    const long long z = sizeof({T});
    tj_int incx, incy, in;
    int need = 0;
    if (n == 0) {
        *({T} *)out = 0;
        return 0;
    }
    if (tj_too_big(n, 0, 0))
        return -1;
    if (!tj_inc(n, xs, z, x, &incx)) need |= 1;
    if (!tj_inc(n, ys, z, y, &incy)) need |= 2;
    if (need)
        return need;
    in = (tj_int)n;
    *({T} *)out = ((tj_dot_{p}_t)tj_fn[{dot}])(&in, ({T} *)x, &incx, ({T} *)y, &incy);
    return 0;
}
"""

_CDEF_TEMPLATE = """
int tj_gemm_{p}(char *, {LL}, {LL}, {LL}, {LL}, char *, {LL}, {LL}, {LL}, char *, {LL},
                {LL}, double, double);
int tj_gemv_{p}(char *, {LL}, {LL}, {LL}, {LL}, char *, {LL}, char *, {LL}, double, double);
int tj_ger_{p}(char *, {LL}, {LL}, {LL}, {LL}, char *, {LL}, char *, {LL}, double);
int tj_dot_{p}(char *, {LL}, {LL}, char *, {LL}, char *);
int tj_gemm_batched_{p}(char *, char *, char *, {LL}, {LL}, {LL}, {LL}, {LL}, {LL}, {LL},
                        {LL}, {LL}, int, const {LL} *, const {LL} *, const {LL} *,
                        const {LL} *, int);
"""


def blas_source(ilp64: bool | None = None) -> tuple[str, str]:
    """(C source, cffi cdef) of the BLAS kernels for both float dtypes, for BLAS integers
    of 64 bits (``ilp64``) or of C's int; None: those of the configured provider."""
    if ilp64 is None:
        ilp64 = provider().ilp64
    header = _HEADER.replace("{I}", "int64_t" if ilp64 else "int")
    header = header.replace("{THREADS}", parallel.DECLARATIONS + blas_threads.SOURCE)
    parts = [header.replace("{IMAX}", "INT64_MAX" if ilp64 else "INT_MAX")]
    cdefs = [
        parallel.CDEF,
        blas_threads.CDEF,
        "int tj_blas_init(void **);",
        "void tj_blas_threads(void *, void *, void *);",
        "void tj_skinny_enable(int);",
    ]
    for p, ctype in DTYPES.values():
        index = {name: ROUTINES.index(p + name) for name in ("gemm", "gemv", "ger", "dot")}
        # str.format would trip over C braces: substitute the few names directly.
        text = skinny_source(p, ctype) + _TEMPLATE.replace("{p}", p).replace("{T}", ctype)
        text += penalised.source(p, ctype)
        text = text.replace("{SKINNY}", "1" if ctype == "double" else "0")
        for name, i in index.items():
            text = text.replace("{" + name + "}", str(i))
        parts.append(text)
        cdefs.append(_CDEF_TEMPLATE.replace("{p}", p).replace("{LL}", LL))
        cdefs.append(penalised.CDEF.replace("{p}", p))
    return "".join(parts), "".join(cdefs)


@dataclass(frozen=True)
class Provider:
    """A BLAS the kernels call: its routines' addresses (``ROUTINES`` order)."""

    name: str  # "numpy" or "scipy"
    ilp64: bool  # 64-bit integer arguments
    pointers: tuple[int, ...]
    where: str  # the library, for messages and reports


def _scipy_blas() -> Provider:
    """SciPy's BLAS, from the capsules of ``scipy.linalg.cython_blas``."""
    from scipy.linalg import cython_blas

    api = ctypes.pythonapi
    # Private prototypes: the shared ctypes.pythonapi attributes stay untouched.
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", api))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", api)
    )
    capsules = cython_blas.__pyx_capi__
    pointers = []
    for name in ROUTINES:
        capsule = capsules[name]
        address = get_pointer(capsule, get_name(capsule))
        if not address:
            raise RuntimeError(f"scipy.linalg.cython_blas exports no pointer for {name}")
        pointers.append(address)
    return Provider("scipy", False, tuple(pointers), "scipy.linalg.cython_blas")


def _numpy_openblas() -> Provider | None:
    """The ILP64 OpenBLAS that NumPy's wheels bundle (scipy-openblas64, exporting
    ``scipy_dgemm_64_`` ...), or None when this NumPy has none (another BLAS, a
    source build)."""
    root = pathlib.Path(np.__file__).parent
    candidates = [
        *sorted((root.parent / "numpy.libs").glob("libscipy_openblas64_*")),  # Linux, Windows
        *sorted((root / ".dylibs").glob("libscipy_openblas64_*")),  # macOS
    ]
    for path in candidates:
        try:
            lib = ctypes.CDLL(str(path))  # NumPy has loaded it: this finds the same copy
            functions = [getattr(lib, f"scipy_{name}_64_") for name in ROUTINES]
        except (OSError, AttributeError):
            continue
        pointers = tuple(ctypes.cast(f, ctypes.c_void_p).value or 0 for f in functions)
        if all(pointers):
            return Provider("numpy", True, pointers, str(path))
    return None


_providers: dict[str, Provider] = {}


def provider() -> Provider:
    """The BLAS of config ``blas``: "auto" takes NumPy's bundled OpenBLAS when there is
    one (a newer OpenBLAS than SciPy's in current wheels: its sgemm is ~10% faster on
    the MLP benchmark's products here, and its 64-bit integers have no 2^31 limit), else
    SciPy's."""
    choice = config.blas
    if choice not in _providers:
        found = None if choice == "scipy" else _numpy_openblas()
        if found is None and choice == "numpy":
            raise RuntimeError(
                "config blas='numpy': this NumPy bundles no scipy-openblas64 library"
            )
        _providers[choice] = found or _scipy_blas()
    return _providers[choice]


def blas_pointers() -> list[int]:
    """Addresses of the configured BLAS's routines (``ROUTINES`` order)."""
    return list(provider().pointers)


_lock = threading.Lock()
_libraries: dict[str, tuple] = {}


def library():
    """(ffi, lib) of the compiled BLAS kernels, initialised with the configured BLAS's
    pointers."""
    chosen = provider()
    source, cdef = blas_source(chosen.ilp64)
    ffi, lib = compiler.load(source, cdef, ("tj_blas_init", "tj_gemm_d"), what="BLAS kernels")
    with _lock:
        known = _libraries.get(chosen.name)
        if known is None or known[1] is not lib:
            table = ffi.new("void *[]", [ffi.cast("void *", p) for p in chosen.pointers])
            if lib.tj_blas_init(table) != 0:
                raise RuntimeError(f"BLAS kernels: a NULL pointer from {chosen.where}")
            controls = threads.blas_thread_controls(chosen.where)
            lib.tj_blas_threads(*(ffi.cast("void *", c) for c in controls))
            threads.attach(ffi, lib)
            _libraries[chosen.name] = (ffi, lib)
            _use_skinny_kernels()
    return ffi, lib


def _use_skinny_kernels(_value: object = None) -> None:
    """Few-column products in our own kernels on one thread only (see skinny.py)."""
    one = threads.thread_count() == 1
    for _, lib in list(_libraries.values()):
        lib.tj_skinny_enable(int(one))


config.watch("threads", _use_skinny_kernels)


# ---------------------------------------------------------------- selection
# Which products run on BLAS, decided as for every device (device_kernels/blas_plan.py):
# one float dtype for every operand and the output, alpha and beta scalars.
PLANS = BlasPlanner(lambda node: True)


def supported(node: Apply) -> bool:
    op = node.op
    if type(op) is Dot:
        return PLANS.dot_plan(node) is not None
    if type(op) in (Gemm, Ger):
        return PLANS.gemm_plan(node) is not None
    return False


def _fix(status: int, arrays: list, bits: tuple[int, ...]) -> None:
    """Copies the arrays a kernel could not address (``status`` bits) into new C-ordered,
    aligned arrays (a misaligned array may already be C-contiguous: it is copied too)."""
    if status < 0:
        raise OverflowError("a dimension does not fit BLAS's int")
    copied = False
    for i, bit in enumerate(bits):
        if status & bit:
            arrays[i] = np.array(arrays[i], order="C")
            copied = True
    if not copied:  # pragma: no cover - a C-ordered output is always addressable
        raise RuntimeError(f"BLAS kernel: unexpected status {status}")


def _retry(call: Callable[..., int], status: int, arrays: list, bits: tuple[int, ...]) -> list:
    """Copies what ``status`` names and calls again, until the kernel has run.

    Returns the arrays of the successful call (an inplace target may be a copy, to be
    written back). Three rounds suffice: a copied target changes its orientation, and
    with it which operands must be copied.
    """
    for _ in range(3):
        _fix(status, arrays, bits)
        status = call(*arrays)
        if status == 0:
            return arrays
    raise RuntimeError("BLAS kernel refused C-ordered copies")  # pragma: no cover


def factory(node: Apply) -> Run:
    """The C kernel of a Dot, Gemm or Ger node (``supported(node)`` holds)."""
    ffi, lib = library()
    op = node.op
    p = DTYPES[node.outputs[0].type.dtype][0]
    if type(op) is Dot:
        return _dot_kernel(node, ffi, lib, p)
    if type(op) is Gemm:
        return _gemm_kernel(node, ffi, lib, p)
    return _ger_kernel(node, ffi, lib, p)


def _helpers(ffi, dtype: np.dtype):
    """ptr(array): a char * to element 0; output(cell value, shape): the result array."""
    from_buffer, cast = ffi.from_buffer, ffi.cast

    def ptr(a: np.ndarray):
        try:
            return from_buffer(a)
        except ValueError:  # not C-contiguous: the address of element 0
            return cast("char *", a.ctypes.data)

    def output(buf, shape: tuple):
        """``buf`` if the result may be written into it (C-ordered, writeable), else new."""
        return output_buffer(buf, shape, dtype, [])

    return ptr, output


def _dot_kernel(node: Apply, ffi, lib, p: str) -> Run:
    perform = node.op.perform
    ptr, output = _helpers(ffi, node.outputs[0].type.numpy_dtype)
    from_buffer = ffi.from_buffer
    nx, ny = node.inputs[0].type.ndim, node.inputs[1].type.ndim
    gemm, gemv = getattr(lib, f"tj_gemm_{p}"), getattr(lib, f"tj_gemv_{p}")
    dot = getattr(lib, f"tj_dot_{p}")

    if nx == 2 and ny == 2:

        def call(x, y, out):
            m, k = x.shape
            return gemm(
                ptr(x), m, k, *x.strides, ptr(y), y.shape[1], *y.strides,
                from_buffer(out), *out.strides, 1.0, 0.0,
            )  # fmt: skip

        bits = (1, 2, 4)
    elif nx == 2:

        def call(x, y, out):
            m, k = x.shape
            return gemv(
                ptr(x), m, k, *x.strides, ptr(y), y.strides[0], from_buffer(out),
                out.strides[0], 1.0, 0.0,
            )  # fmt: skip

        bits = (1, 2, 4)
    elif ny == 2:

        def call(x, y, out):  # x . y = y.T x, y.T being (n x k) at swapped strides
            k, n = y.shape
            s0, s1 = y.strides
            return gemv(
                ptr(y), n, k, s1, s0, ptr(x), x.strides[0], from_buffer(out),
                out.strides[0], 1.0, 0.0,
            )  # fmt: skip

        bits = (2, 1, 4)
    else:

        def call(x, y, out):
            return dot(ptr(x), x.shape[0], x.strides[0], ptr(y), y.strides[0], from_buffer(out))

        bits = (1, 2, 4)

    def run(inputs: list, output_storage: list) -> None:
        x, y = inputs
        xs, ys = x.shape, y.shape
        if xs[-1] != ys[0]:
            perform(node, inputs, output_storage)  # the reference error
            return
        out = output(output_storage[0][0], xs[:-1] + ys[1:])
        status = call(x, y, out)
        if status:
            try:
                _retry(call, status, [x, y, out], bits)
            except OverflowError:
                perform(node, inputs, output_storage)
                return
        output_storage[0][0] = out

    return run


def _gemm_kernel(node: Apply, ffi, lib, p: str) -> Run:
    op = node.op
    perform = op.perform
    inplace = op.inplace
    ptr, output = _helpers(ffi, node.outputs[0].type.numpy_dtype)
    may_share, copyto = np.may_share_memory, np.copyto

    if node.inputs[3].type.ndim == 2:
        gemm = getattr(lib, f"tj_gemm_{p}")

        def call(x, y, t, alpha, beta):
            m, k = x.shape
            return gemm(
                ptr(x), m, k, *x.strides, ptr(y), y.shape[1], *y.strides, ptr(t), *t.strides,
                alpha, beta,
            )  # fmt: skip

    else:
        gemv = getattr(lib, f"tj_gemv_{p}")

        def call(x, y, t, alpha, beta):
            m, k = x.shape
            return gemv(
                ptr(x), m, k, *x.strides, ptr(y), y.strides[0], ptr(t), t.strides[0],
                alpha, beta,
            )  # fmt: skip

    def run(inputs: list, output_storage: list) -> None:
        z, alpha, x, y, beta = inputs
        if x.shape[1] != y.shape[0] or z.shape != x.shape[:1] + y.shape[1:]:
            perform(node, inputs, output_storage)  # the reference error
            return
        a, b = float(alpha), float(beta)
        if inplace:
            target = z
            if may_share(x, z):  # an operand overlapping the target is read from a copy
                x = x.copy()
            if may_share(y, z):
                y = y.copy()
        else:
            target = output(output_storage[0][0], z.shape)
            if b != 0.0:  # with beta 0 BLAS does not read the target
                copyto(target, z)
        status = call(x, y, target, a, b)
        if status:
            try:
                done = _retry(lambda *xyt: call(*xyt, a, b), status, [x, y, target], (1, 2, 4))
            except OverflowError:
                perform(node, inputs, output_storage)
                return
            if done[2] is not target:  # an inplace target BLAS could not address
                target[...] = done[2]
        output_storage[0][0] = target

    return run


def _ger_kernel(node: Apply, ffi, lib, p: str) -> Run:
    op = node.op
    perform = op.perform
    inplace = op.inplace
    ptr, output = _helpers(ffi, node.outputs[0].type.numpy_dtype)
    may_share, copyto = np.may_share_memory, np.copyto
    ger = getattr(lib, f"tj_ger_{p}")

    def call(t, x, y, alpha):
        m, n = t.shape
        return ger(ptr(t), m, n, *t.strides, ptr(x), x.strides[0], ptr(y), y.strides[0], alpha)

    def run(inputs: list, output_storage: list) -> None:
        z, alpha, x, y = inputs
        if z.shape != (x.shape[0], y.shape[0]):
            perform(node, inputs, output_storage)  # the reference error
            return
        a = float(alpha)
        if inplace:
            target = z
            if may_share(x, z):
                x = x.copy()
            if may_share(y, z):
                y = y.copy()
        else:
            target = output(output_storage[0][0], z.shape)
            copyto(target, z)
        status = call(target, x, y, a)
        if status:
            try:
                done = _retry(lambda *txy: call(*txy, a), status, [target, x, y], (1, 2, 4))
            except OverflowError:
                perform(node, inputs, output_storage)
                return
            if done[0] is not target:
                target[...] = done[0]
        output_storage[0][0] = target

    return run


factory.kernel_name = "blas"
