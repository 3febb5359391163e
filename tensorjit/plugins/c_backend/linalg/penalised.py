"""The C kernel of ``PenalisedGemm`` (an L2-penalised weight's update and its penalty's
sum of squares, see tensor/blas.py), part of the BLAS library of ``blas.py``:
``out = beta * c + alpha * a . b`` and ``sum(c ** 2)``, with ``out`` a new array or, for
the in-place variant (a weight update), ``c`` itself.

A minibatch's weight gradient ``X^T G`` has few terms per element (k, the minibatch
size), so its GEMM is bound by passes over the weight: the penalty's sum reads it, the
decay reads and writes it, the GEMM reads and writes it again. For float32 with k up to
``FUSED_MAX_K``, on one thread, one kernel makes a single pass: b is packed into panels
of two vectors' width, six rows of a at a time get their products in registers (the
terms summed in order with FMAs, as OpenBLAS's kernels do), then those rows of c are
squared, decayed and accumulated into out while the next rows are prefetched. Otherwise
(more terms, more threads, other layouts) the decay pass runs, then ``tj_gemm``
accumulates into out. The squares are taken in the weight's dtype; the decay pass sums
them in eight double sums, the one pass in vector lanes of the weight's dtype along each
row (n / 16 terms a lane), the rows' sums in double.

The one pass runs on one thread only (as skinny.py's kernels): with its row blocks split
over two threads it was faster alone but slower inside the MLP step, where the pool's
worker contended with OpenBLAS's spinning ones.

The one pass is float32's only: in float64 the products (twice the FMAs) dominate and it
gained nothing over the decay pass and OpenBLAS, so float64 keeps BLAS's order
(benchmarks/penalised_update.py; the times are in benchmarks/RESULTS.md, "The penalised
update in one pass" and "Numbers out of docstrings").

Whole-graph programs call the same function (program.c's penalised step).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.tensor.blas import PenalisedGemm

OPS = (PenalisedGemm,)

FUSED_MAX_K = 32  # more terms per element: the products' own cost outweighs the passes
FUSED_MAX_PACKED = 1 << 18  # bytes of packed b: beyond, its panels leave the L2 cache

TEMPLATE = r"""
#if defined(__FMA__)
#define TJ_PEN_FMA_{p}(a, b, c) __builtin_ia32_vfmadd{FMA}256(a, b, c)
#define TJ_PEN_FMA1_{p}(a, b, c) __builtin_fma{f}(a, b, c)
#else
#define TJ_PEN_FMA_{p}(a, b, c) ((a) * (b) + (c))
#define TJ_PEN_FMA1_{p}(a, b, c) ((a) * (b) + (c))
#endif
/* A vector of x in every lane ("0 + x" would cost an addition: -0.0 + 0 is 0) */
#define TJ_PEN_SPLAT_{p}(x) ((tj_vec_{p}){{SPLAT}})

/* out[i] = beta * c[i] for n contiguous elements; returns the sum of the c[i] * c[i]
   (eight double partial sums). */
static inline __attribute__((always_inline)) double
tj_decay_body_{p}(const {T} *c, {T} *out, long long n, {T} beta)
{
    double s[8] = {0};
    long long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            const {T} v = c[i + j];
            s[j] = s[j] + (double)(v * v);
            out[i + j] = v * beta;
        }
    double total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) {
        total = total + (double)(c[i] * c[i]);
        out[i] = c[i] * beta;
    }
    return total;
}

/* In place (out == c) the loop runs on one pointer: with two that may overlap, the
   vectoriser's run-time check sends it to scalar code. */
static double tj_decay_{p}(const {T} *c, {T} *out, long long n, {T} beta)
{
    if ((const {T} *)out == c)
        return tj_decay_body_{p}(out, out, n, beta);
    return tj_decay_body_{p}(c, out, n, beta);
}

/* The one-pass kernel: c and out m x n C-contiguous, b's rows contiguous (row stride
   bs0 bytes), a at any byte strides. 1 when its scratch can not be allocated. */
static int tj_penalised_fused_{p}(const char *a, long long m, long long k, long long as0,
                                  long long as1, const char *b, long long n, long long bs0,
                                  const {T} *c, {T} *out, {T} alpha, {T} beta,
                                  double *squares)
{
    enum { L = sizeof(tj_vec_{p}) / sizeof({T}), W = 2 * L, R = 6 };
    const long long panels = (n + W - 1) / W, full = n / W * W;
    const size_t packed_bytes = (size_t)(panels * k * W) * sizeof({T});
    const size_t product_bytes = (size_t)(R * panels * W) * sizeof({T});
    {T} *packed = aligned_alloc(32, (packed_bytes + 31) / 32 * 32);
    {T} *products = aligned_alloc(32, (product_bytes + 31) / 32 * 32);
    if (packed == NULL || products == NULL) {
        free(packed);
        free(products);
        return 1;
    }
    for (long long t = 0; t < panels; t++) {
        const long long cols = n - t * W < W ? n - t * W : W;
        for (long long q = 0; q < k; q++) {
            {T} *dst = packed + (t * k + q) * W;
            memcpy(dst, b + q * bs0 + t * W * (long long)sizeof({T}), (size_t)cols * sizeof({T}));
            for (long long j = cols; j < W; j++)
                dst[j] = 0;
        }
    }
    const tj_vec_{p} va = TJ_PEN_SPLAT_{p}(alpha), vb = TJ_PEN_SPLAT_{p}(beta);
    const long long row_lines = n * (long long)sizeof({T}) * R / 64;
    double total = 0;
    for (long long i = 0; i < m; i += R) {
        const int rows = m - i < R ? (int)(m - i) : R;
        const char *arow[R];
        for (int r = 0; r < R; r++) /* rows past m repeat row i: computed, never stored */
            arow[r] = a + (i + (r < rows ? r : 0)) * as0;
        /* The next rows of c and out are fetched while these rows' products run. */
        const char *next_c = (const char *)(c + (i + R) * n);
        const char *next_out = (const char *)(out + (i + R) * n);
        const long long lines = i + 2 * R <= m ? row_lines : 0;
        const long long per_panel = (lines + panels - 1) / panels;
        for (long long t = 0; t < panels; t++) {
            for (long long q = t * per_panel; q < (t + 1) * per_panel && q < lines; q++) {
                __builtin_prefetch(next_c + q * 64, 0, 3);
                __builtin_prefetch(next_out + q * 64, 1, 3);
            }
            tj_vec_{p} acc[R][2];
            for (int r = 0; r < R; r++)
                acc[r][0] = acc[r][1] = (tj_vec_{p}){0};
            const {T} *bp = packed + t * k * W;
            for (long long q = 0; q < k; q++) {
                const tj_vec_{p} b0 = *(const tj_vec_{p} *)(bp + q * W);
                const tj_vec_{p} b1 = *(const tj_vec_{p} *)(bp + q * W + L);
                for (int r = 0; r < R; r++) {
                    const {T} e = *(const {T} *)(arow[r] + q * as1);
                    const tj_vec_{p} s = TJ_PEN_SPLAT_{p}(e);
                    acc[r][0] = TJ_PEN_FMA_{p}(s, b0, acc[r][0]);
                    acc[r][1] = TJ_PEN_FMA_{p}(s, b1, acc[r][1]);
                }
            }
            for (int r = 0; r < R; r++) {
                *(tj_vec_{p} *)(products + (r * panels + t) * W) = acc[r][0];
                *(tj_vec_{p} *)(products + (r * panels + t) * W + L) = acc[r][1];
            }
        }
        for (int r = 0; r < rows; r++) {
            const {T} *crow = c + (i + r) * n, *prow = products + r * panels * W;
            {T} *orow = out + (i + r) * n;
            tj_vec_{p} q0 = {0}, q1 = {0};
            long long j = 0;
            for (; j < full; j += W) {
                tj_vec_{p} c0, c1;
                memcpy(&c0, crow + j, sizeof(c0));
                memcpy(&c1, crow + j + L, sizeof(c1));
                q0 += c0 * c0;
                q1 += c1 * c1;
                const tj_vec_{p} *p0 = (const tj_vec_{p} *)(prow + j);
                const tj_vec_{p} o0 = TJ_PEN_FMA_{p}(va, p0[0], vb * c0);
                const tj_vec_{p} o1 = TJ_PEN_FMA_{p}(va, p0[1], vb * c1);
                memcpy(orow + j, &o0, sizeof(o0));
                memcpy(orow + j + L, &o1, sizeof(o1));
            }
            /* A row's vector sums hold few terms each; rows are summed in double. */
            const tj_vec_{p} q = q0 + q1;
            for (int l = 0; l < L; l++)
                total += (double)q[l];
            for (; j < n; j++) {
                const {T} v = crow[j];
                total += (double)(v * v);
                orow[j] = TJ_PEN_FMA1_{p}(alpha, prow[j], beta * v);
            }
        }
    }
    free(packed);
    free(products);
    *squares = total;
    return 0;
}

/* out (m x n) = alpha * a (m x k) . b (k x n) + beta * c and *squares = sum(c * c), c
   and out C-contiguous; out may be c (in place), a and b must not overlap it. Statuses
   as tj_gemm's (bits 1 and 2: a and b to be copied), returned before anything is
   written: an in-place call repeated with copies decays c once. */
int tj_penalised_{p}(char *a, long long m, long long k, long long as0, long long as1,
                     char *b, long long n, long long bs0, long long bs1, char *c, char *out,
                     double alpha, double beta, double *squares)
{
    const long long z = sizeof({T});
    if ({FUSED} && tj_skinny_on && m > 0 && n > 0 && k > 0 && alpha != 0 &&
        k <= {MAX_K} &&
        (n == 1 || bs1 == z) && ((n + 2 * 32 / z - 1) / (2 * 32 / z)) * k * 64 <= {MAX_PACKED} &&
        tj_penalised_fused_{p}(a, m, k, as0, as1, b, n, bs0, (const {T} *)c, ({T} *)out,
                               ({T})alpha, ({T})beta, squares) == 0)
        return 0;
    if (m > 0 && n > 0 && k > 0 && alpha != 0) { /* tj_gemm's checks, before the decay */
        char ta, tb;
        tj_int lda, ldb, ldc;
        int flip, need;
        if (tj_too_big(m, n, k))
            return -1;
        need = tj_gemm_operands(a, m, k, as0, as1, b, n, bs0, bs1, out, n * z, z, z, &ta, &tb,
                                &lda, &ldb, &ldc, &flip);
        if (need)
            return need;
    }
    *squares = tj_decay_{p}((const {T} *)c, ({T} *)out, m * n, ({T})beta);
    if (k == 0 || alpha == 0) /* no products (alpha 0 reads neither a nor b, as tj_gemm) */
        return 0;
    return tj_gemm_{p}(a, m, k, as0, as1, b, n, bs0, bs1, out, n * z, z, alpha, 1.0);
}
"""

CDEF = """
int tj_penalised_{p}(char *, long long, long long, long long, long long, char *, long long,
                     long long, long long, char *, char *, double, double, double *);
"""

_FMA = {"d": ("pd", ""), "s": ("ps", "f")}
_PREFIXES = {"float64": "d", "float32": "s"}  # blas.DTYPES' (blas.py includes this source)


def source(p: str, ctype: str) -> str:
    """The kernel for BLAS prefix ``p`` ("s"/"d") and C type ``ctype`` (after tj_gemm)."""
    fma, suffix = _FMA[p]
    text = TEMPLATE.replace("{p}", p).replace("{T}", ctype).replace("{FMA}", fma)
    lanes = 32 // (8 if p == "d" else 4)
    text = text.replace("{SPLAT}", ", ".join(["(x)"] * lanes)).replace("{f}", suffix)
    text = text.replace("{MAX_K}", str(FUSED_MAX_K)).replace("{FUSED}", "1" if p == "s" else "0")
    return text.replace("{MAX_PACKED}", str(FUSED_MAX_PACKED))


def function_name(dtype: str) -> str:
    """The kernel for a weight of ``dtype``."""
    return f"tj_penalised_{_PREFIXES[dtype]}"


def supported(node: Apply) -> bool:
    """Float weights, x and y of the weight's dtype, a float sum (the kernel's double
    total is cast to it)."""
    z, alpha, x, y, beta = node.inputs
    return (
        z.type.dtype in _PREFIXES
        and x.type.dtype == y.type.dtype == z.type.dtype
        and node.outputs[1].type.dtype in _PREFIXES
    )


def factory(node: Apply) -> Callable[[list, list], None]:
    """The per-node kernel: the C function on C-contiguous (and, in place, writeable)
    weights of the node's dtype, Op.perform otherwise. In place, an x or y that shares
    memory with the weight is read from a copy."""
    from tensorjit.plugins.c_backend.linalg import blas

    ffi, lib = blas.library()
    dtype = node.inputs[0].type.numpy_dtype
    fn = getattr(lib, function_name(dtype.name))
    sum_dtype = node.outputs[1].type.numpy_dtype
    op = node.op
    check = op.input_check(node)
    inplace = op.inplace
    new_double, address = ffi.new, ffi.cast

    def ptr(a: np.ndarray):
        return address("char *", a.ctypes.data)

    def run(inputs: list, output_storage: list) -> None:
        z, alpha, x, y, beta = inputs
        check(inputs)
        if not (z.dtype == x.dtype == y.dtype == dtype) or not (
            z.flags.c_contiguous and z.flags.aligned and (z.flags.writeable or not inplace)
        ):
            op.perform(node, inputs, output_storage)  # another layout: NumPy's passes
            return
        if inplace:
            out = z
            x = x.copy() if np.may_share_memory(x, z) else x
            y = y.copy() if np.may_share_memory(y, z) else y
        else:
            out = output_buffer(output_storage[0][0], z.shape, dtype, inputs)
        squares = new_double("double *")
        m, k = x.shape
        n = y.shape[1] if y.ndim == 2 else 1

        def call(x: np.ndarray, y: np.ndarray) -> int:
            ys = y.strides if y.ndim == 2 else (y.strides[0], y.itemsize)
            return fn(ptr(x), m, k, x.strides[0], x.strides[1], ptr(y), n, ys[0], ys[1],
                      ptr(z), ptr(out), float(alpha), float(beta), squares)  # fmt: skip

        status = call(x, y)
        if status < 0:  # a dimension past BLAS's int (nothing written yet): NumPy's way
            op.perform(node, inputs, output_storage)
            return
        if status != 0:
            blas._retry(call, status, [x, y], (1, 2))
        output_storage[0][0] = out
        output_storage[1][0] = np.asarray(squares[0], dtype=sum_dtype)

    return run


factory.kernel_name = "penalised"
