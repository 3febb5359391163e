"""C kernels for 2-D convolution (``Conv2d``) and its two gradients
(``Conv2dGradInputs``, ``Conv2dGradWeights``), float32 and float64: im2col + GEMM, one
image at a time, the products on one BLAS thread; with config ``threads`` above 1 the
images are split over the worker pool (see the source's comment).

For image ``n`` the windows are unrolled into ``cols`` (K x P: K = channels x filter
rows x filter cols, P = output pixels; zeros where a window covers padding), small enough
to stay in cache, and each op is one GEMM through the BLAS NumPy or SciPy ships (the
pointers the BLAS kernels use, blas.py):

- forward: ``out[n] (F x P) = W (F x K) cols``;
- weights: ``dW (F x K) += g[n] (F x P) cols^T`` over the images;
- inputs: ``dcols (K x P) = W^T g[n]``, then ``col2im`` adds each column back into the
  window it came from.

``filter_flip`` (a true convolution) uses the flipped filters, copied once per call
(the weights gradient is flipped back). The geometry (padding of every border mode,
strides, output size, the checks and their messages) is the op's ``checked_geometry``, so the
kernels agree with ``Op.perform`` by construction. Inputs that are not C-contiguous
are copied first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import compiler, parallel, threads
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.plugins.c_backend.linalg import blas, blas_threads
from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights

Run = Callable[[list, list], None]
OPS = (Conv2d, Conv2dGradInputs, Conv2dGradWeights)
FLOATS = {"float32": ("s", "float"), "float64": ("d", "double")}

# n images of c channels (h x w), f filters (kh x kw), output (oh x ow), stride, the
# padding before the first row and column.
GEOMETRY = (
    "int64_t n, int64_t c, int64_t h, int64_t w, int64_t f, int64_t kh, int64_t kw, "
    "int64_t oh, int64_t ow, int64_t sh, int64_t sw, int64_t pt, int64_t pl"
)
SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef %(I)s tj_int;
typedef %(T)s T;
%(PARALLEL)s
typedef void (*tj_gemm_t)(char *, char *, tj_int *, tj_int *, tj_int *, T *, T *, tj_int *,
                          T *, tj_int *, T *, T *, tj_int *);
static tj_gemm_t tj_gemm;

%(BLAS_THREADS)s
int tj_conv_init(void *gemm, void *local_threads, void *set_threads, void *get_threads) {
    tj_gemm = (tj_gemm_t)gemm;
    tj_blas_threads_init(local_threads, set_threads, get_threads);
    return gemm == NULL;
}

/* Row-major C (m x k2) = op(A) op(B) (+ beta C): the column-major C^T = op(B)^T op(A)^T. */
static void tj_mm(char ta, char tb, int64_t m, int64_t nn, int64_t k, const T *a,
                  int64_t lda, const T *b, int64_t ldb, T beta, T *cc, int64_t ldc) {
    tj_int M = (tj_int)nn, N = (tj_int)m, K = (tj_int)k;
    tj_int la = (tj_int)lda, lb = (tj_int)ldb, lc = (tj_int)ldc;
    T one = 1;
    tj_gemm(&tb, &ta, &M, &N, &K, &one, (T *)b, &lb, (T *)a, &la, &beta, cc, &lc);
}

/* The output columns [*lo, *hi) whose window column kx lies inside the image:
   0 <= ox*sw + kx - pl < w. Outside them a window reads padding (zeros). */
static inline void tj_inside(int64_t kx, int64_t sw, int64_t pl, int64_t w, int64_t ow,
                             int64_t *lo, int64_t *hi) {
    int64_t first = pl - kx > 0 ? (pl - kx + sw - 1) / sw : 0;
    int64_t last = w - 1 - kx + pl >= 0 ? (w - 1 - kx + pl) / sw + 1 : 0;
    *lo = first < ow ? first : ow;
    *hi = last < ow ? (last > *lo ? last : *lo) : ow;
}

/* cols[(ci*kh + ky)*kw + kx][oy*ow + ox] = image[ci][oy*sh + ky - pt][ox*sw + kx - pl]:
   each row segment inside the image is one copy (a memcpy at stride 1), the padding
   around it zeros. */
static void tj_im2col(const T *x, T *cols, int64_t c, int64_t h, int64_t w, int64_t kh,
                      int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw,
                      int64_t pt, int64_t pl) {
    for (int64_t ci = 0; ci < c; ci++)
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++) {
                T *row = cols + ((ci * kh + ky) * kw + kx) * oh * ow;
                int64_t lo, hi;
                tj_inside(kx, sw, pl, w, ow, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++) {
                    int64_t iy = oy * sh + ky - pt;
                    T *dst = row + oy * ow;
                    if (iy < 0 || iy >= h) {
                        memset(dst, 0, sizeof(T) * ow);
                        continue;
                    }
                    const T *src = x + (ci * h + iy) * w;
                    memset(dst, 0, sizeof(T) * lo);
                    if (sw == 1 && hi > lo) {
                        memcpy(dst + lo, src + (lo + kx - pl), sizeof(T) * (hi - lo));
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++) dst[ox] = src[ox * sw + kx - pl];
                    }
                    memset(dst + hi, 0, sizeof(T) * (ow - hi));
                }
            }
}

/* The adjoint of im2col: every column element added back to its image pixel. */
static void tj_col2im(const T *cols, T *x, int64_t c, int64_t h, int64_t w, int64_t kh,
                      int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw,
                      int64_t pt, int64_t pl) {
    memset(x, 0, sizeof(T) * c * h * w);
    for (int64_t ci = 0; ci < c; ci++)
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++) {
                const T *row = cols + ((ci * kh + ky) * kw + kx) * oh * ow;
                int64_t lo, hi;
                tj_inside(kx, sw, pl, w, ow, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++) {
                    int64_t iy = oy * sh + ky - pt;
                    if (iy < 0 || iy >= h) continue;
                    T *dst = x + (ci * h + iy) * w;
                    const T *src = row + oy * ow;
                    if (sw == 1 && hi > lo) {
                        T *restrict d = dst + (lo + kx - pl);
                        const T *restrict s = src + lo;
                        #pragma omp simd
                        for (int64_t k = 0; k < hi - lo; k++) d[k] += s[k];
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++) dst[ox * sw + kx - pl] += src[ox];
                    }
                }
            }
}

/* The products run on one BLAS thread (OpenBLAS's thread-local count, where the library
   has it): a product per image is too small for BLAS's own threads, whose hand-offs cost
   more than they share (the CNN step took twice as long on two cores as on one). With
   config `threads` above 1 the images are split over the worker pool instead, each part
   with its own columns (and, for the weights' gradient, its own sum, the parts' sums
   added in part order). */
typedef struct {
    const T *x, *wt, *g;
    T *out;
    int64_t n, c, h, w, f, kh, kw, oh, ow, sh, sw, pt, pl;
    int kind; /* 0 forward, 1 weights, 2 inputs */
} tj_conv_args;

/* Runs one kind over every image (the weights' gradient summed into a zeroed buffer);
   -1 where the columns buffer could not be allocated. */
static int tj_conv_run(tj_conv_args *a) {
    const int64_t k = a->c * a->kh * a->kw, p = a->oh * a->ow, image = a->c * a->h * a->w;
    T *cols = (T *)malloc(sizeof(T) * (k * p > 0 ? k * p : 1)), *gw = a->out;
    if (cols == NULL)
        return -1;
    if (a->kind == 1)
        memset(gw, 0, sizeof(T) * a->f * k);
    tj_blas_part_threads(1); /* (blas_threads.py) */
    for (int64_t i = 0; i < a->n; i++) {
        if (a->kind == 0) {
            tj_im2col(a->x + i * image, cols, a->c, a->h, a->w, a->kh, a->kw, a->oh, a->ow,
                      a->sh, a->sw, a->pt, a->pl);
            tj_mm('N', 'N', a->f, p, k, a->wt, k, cols, p, (T)0, a->out + i * a->f * p, p);
        } else if (a->kind == 1) {
            tj_im2col(a->x + i * image, cols, a->c, a->h, a->w, a->kh, a->kw, a->oh, a->ow,
                      a->sh, a->sw, a->pt, a->pl);
            tj_mm('N', 'T', a->f, k, p, a->g + i * a->f * p, p, cols, p, (T)1, gw, k);
        } else {
            tj_mm('T', 'N', k, p, a->f, a->wt, k, a->g + i * a->f * p, p, (T)0, cols, p);
            tj_col2im(cols, a->out + i * image, a->c, a->h, a->w, a->kh, a->kw, a->oh, a->ow,
                      a->sh, a->sw, a->pt, a->pl);
        }
    }
    tj_blas_part_threads(0);
    free(cols);
    return 0;
}

typedef struct {
    tj_conv_args a;
    T *sums; /* the weights' gradient: one f x k sum per part */
    int parts;
    int status[TJ_MAX_PARTS];
} tj_conv_job;

/* Images [lo, hi) of the job on one thread. */
static void tj_conv_part(void *ctx, int64_t lo, int64_t hi, int part) {
    tj_conv_job *job = (tj_conv_job *)ctx;
    tj_conv_args a = job->a;
    const int64_t k = a.c * a.kh * a.kw, p = a.oh * a.ow, image = a.c * a.h * a.w;
    if (part >= job->parts) { /* more parts than the sums allocated: never, by the pool */
        job->status[part] = -1;
        return;
    }
    a.n = hi - lo;
    if (a.x)
        a.x += lo * image;
    if (a.g)
        a.g += lo * a.f * p;
    a.out = a.kind == 0 ? a.out + lo * a.f * p
          : a.kind == 2 ? a.out + lo * image
                        : job->sums + (int64_t)part * a.f * k;
    job->status[part] = tj_conv_run(&a);
}

/* The kind over the images, split over the pool when `threads` > 1 (images of a part
   adjacent; the weights' gradient summed part by part, in part order). */
static int tj_conv_split_parts(tj_conv_args *a, int threads) {
    if (!tj_parallel || threads < 2 || a->n < 2)
        return tj_conv_run(a);
    tj_conv_job job;
    memset(&job, 0, sizeof job);
    job.a = *a;
    job.parts = threads < TJ_MAX_PARTS ? threads : TJ_MAX_PARTS;
    const int64_t fk = a->f * a->c * a->kh * a->kw;
    if (a->kind == 1) {
        job.sums = (T *)calloc((size_t)(fk * job.parts > 0 ? fk * job.parts : 1), sizeof(T));
        if (job.sums == NULL)
            return -1;
    }
    const int used = tj_parallel(tj_conv_part, &job, a->n, 1, 1);
    int status = 0;
    for (int part = 0; part < used; part++)
        status = status ? status : job.status[part];
    if (a->kind == 1 && status == 0) {
        memcpy(a->out, job.sums, sizeof(T) * fk);
        for (int part = 1; part < used; part++) {
            const T *sum = job.sums + (int64_t)part * fk;
            for (int64_t i = 0; i < fk; i++) a->out[i] += sum[i];
        }
    }
    free(job.sums);
    return status;
}

static int tj_conv_split(tj_conv_args *a, int threads) {
    const int restore = tj_blas_single();
    const int status = tj_conv_split_parts(a, threads);
    tj_blas_restore(restore);
    return status;
}

int tj_conv_forward(const T *x, const T *wt, T *out, %(G)s, int threads) {
    tj_conv_args a = {x, wt, NULL, out, n, c, h, w, f, kh, kw, oh, ow, sh, sw, pt, pl, 0};
    return tj_conv_split(&a, threads);
}

int tj_conv_grad_weights(const T *x, const T *g, T *gw, %(G)s, int threads) {
    tj_conv_args a = {x, NULL, g, gw, n, c, h, w, f, kh, kw, oh, ow, sh, sw, pt, pl, 1};
    return tj_conv_split(&a, threads);
}

int tj_conv_grad_inputs(const T *wt, const T *g, T *gx, %(G)s, int threads) {
    tj_conv_args a = {NULL, wt, g, gx, n, c, h, w, f, kh, kw, oh, ow, sh, sw, pt, pl, 2};
    return tj_conv_split(&a, threads);
}
"""
CDEF = """
int tj_conv_init(void *gemm, void *local_threads, void *set_threads, void *get_threads);
int tj_conv_forward(const {T} *x, const {T} *wt, {T} *out, {G}, int threads);
int tj_conv_grad_weights(const {T} *x, const {T} *g, {T} *gw, {G}, int threads);
int tj_conv_grad_inputs(const {T} *wt, const {T} *g, {T} *gx, {G}, int threads);
"""
SYMBOLS = ("tj_conv_init", "tj_conv_forward", "tj_conv_grad_weights", "tj_conv_grad_inputs")
_LOCK = threading.Lock()
_READY: dict[tuple[str, str], tuple[Any, Any]] = {}


def source_of(dtype: str, ilp64: bool | None = None) -> tuple[str, str]:
    if ilp64 is None:
        ilp64 = blas.provider().ilp64
    t = FLOATS[dtype][1]
    subs = {"I": "int64_t" if ilp64 else "int", "T": t, "G": GEOMETRY}
    subs["PARALLEL"] = parallel.DECLARATIONS
    subs["BLAS_THREADS"] = blas_threads.SOURCE
    return SOURCE % subs, parallel.CDEF + blas_threads.CDEF + CDEF.format(T=t, G=GEOMETRY)


def library(dtype: str) -> tuple[Any, Any, bool]:
    """(ffi, lib, ilp64) of the kernels for ``dtype``, given the configured BLAS's GEMM
    (``ilp64``: its integers, the kernels' too, are 64-bit)."""
    chosen = blas.provider()
    key = (dtype, chosen.name)
    with _LOCK:
        ready = _READY.get(key)
        if ready is None:
            source, cdef = source_of(dtype, chosen.ilp64)
            ffi, lib = compiler.load(source, cdef, SYMBOLS, f"convolution kernels ({dtype})")
            gemm = chosen.pointers[blas.ROUTINES.index(FLOATS[dtype][0] + "gemm")]
            controls = threads.blas_thread_controls(chosen.where)
            if lib.tj_conv_init(
                ffi.cast("void *", gemm), *(ffi.cast("void *", c) for c in controls)
            ):
                raise RuntimeError(f"convolution kernels: no GEMM in {chosen.where}")
            threads.attach(ffi, lib)
            ready = _READY[key] = (ffi, lib, chosen.ilp64)
        return ready


def supported(node: Apply) -> bool:
    """Float operands sharing the output's dtype (mixed dtypes run Op.perform)."""
    arrays = [v for v in node.inputs if v.type.ndim == 4]
    dtypes = {v.type.dtype for v in arrays} | {node.outputs[0].type.dtype}
    return len(dtypes) == 1 and dtypes <= set(FLOATS)


def factory(node: Apply) -> Run:
    op, dtype = node.op, np.dtype(node.outputs[0].type.dtype)
    ffi, lib, ilp64 = library(dtype.name)
    t = FLOATS[dtype.name][1] + " *"
    perform = op.perform

    def fits(*sizes: int) -> bool:
        """Whether the GEMMs' dimensions fit the BLAS integers the kernels were built
        with (else Op.perform computes it)."""
        return ilp64 or all(s < 2**31 for s in sizes)

    def ptr(a: np.ndarray) -> Any:
        # (the cast does not keep ``a`` alive: callers hold every array in a variable)
        return ffi.cast(t, ffi.from_buffer(a))

    def checked(status: int) -> None:
        if status:
            raise MemoryError(f"{op}: out of memory for the columns of its images")

    def flipped(w: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(op._effective(w), dtype=dtype)

    def geometry(n, c, hw, f, k_hw, pads, out_hw) -> list[int]:
        return [n, c, *hw, f, *k_hw, *out_hw, *op.subsample, pads[0][0], pads[1][0]]

    if type(op) is Conv2d:

        def run(inputs: list, output_storage: list) -> None:
            x, w = (np.ascontiguousarray(v, dtype=dtype) for v in inputs)
            pads, _, out_hw = op.checked_geometry(x.shape, w.shape)
            n, c, f = x.shape[0], x.shape[1], w.shape[0]
            k, p = c * w.shape[2] * w.shape[3], out_hw[0] * out_hw[1]
            if not fits(f * p, k * p, f * k):
                return perform(node, inputs, output_storage)
            out = output_buffer(output_storage[0][0], (n, f, *out_hw), dtype, inputs)
            if out.size and k:
                g = geometry(n, c, x.shape[2:], f, w.shape[2:], pads, out_hw)
                wf = flipped(w)
                checked(lib.tj_conv_forward(ptr(x), ptr(wf), ptr(out), *g, threads.thread_count()))
            elif out.size:
                out[...] = 0
            output_storage[0][0] = out

    elif type(op) is Conv2dGradWeights:

        def run(inputs: list, output_storage: list) -> None:
            x, g = (np.ascontiguousarray(v, dtype=dtype) for v in inputs[:2])
            k_hw = (int(inputs[2]), int(inputs[3]))
            pads, _, out_hw = op.checked_geometry(x.shape, g.shape, *k_hw)
            n, c, f = x.shape[0], x.shape[1], g.shape[1]
            k, p = c * k_hw[0] * k_hw[1], out_hw[0] * out_hw[1]
            if not fits(f * p, k * p, f * k):
                return perform(node, inputs, output_storage)
            gw = np.empty((f, c, *k_hw), dtype)
            if gw.size and n and p:
                geo = geometry(n, c, x.shape[2:], f, k_hw, pads, out_hw)
                checked(
                    lib.tj_conv_grad_weights(ptr(x), ptr(g), ptr(gw), *geo, threads.thread_count())
                )
            else:
                gw[...] = 0
            output_storage[0][0] = flipped(gw)

    else:

        def run(inputs: list, output_storage: list) -> None:
            w, g = (np.ascontiguousarray(v, dtype=dtype) for v in inputs[:2])
            hw = (int(inputs[2]), int(inputs[3]))
            pads, _, out_hw = op.checked_geometry(w.shape, g.shape, *hw)
            n, c, f = g.shape[0], w.shape[1], w.shape[0]
            k, p = c * w.shape[2] * w.shape[3], out_hw[0] * out_hw[1]
            if not fits(f * p, k * p, f * k):
                return perform(node, inputs, output_storage)
            gx = output_buffer(output_storage[0][0], (n, c, *hw), dtype, inputs)
            if gx.size and f and p:
                geo = geometry(n, c, hw, f, w.shape[2:], pads, out_hw)
                wf = flipped(w)
                checked(
                    lib.tj_conv_grad_inputs(ptr(wf), ptr(g), ptr(gx), *geo, threads.thread_count())
                )
            elif gx.size:
                gx[...] = 0
            output_storage[0][0] = gx

    return run
