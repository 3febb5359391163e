"""C kernels for 2-D pooling (``Pool``: max, sum, average with or without padding) and
its gradients (``MaxPoolGrad``, ``AveragePoolGrad``), float32 and float64.

Every leading axis is a stack of (rows, cols) planes. A window is clipped to the image:
padding never wins a max and adds nothing to a sum, so no padded copy is made (NumPy's
reference pads, then views the windows). Averages divide by the count of
``Op.perform`` (``average_inc_pad``: the window clipped to the padded image;
``average_exc_pad``: to the image). Sums accumulate in double. The gradients write
every image element once (zeros first), accumulating over the windows that cover it in
window order; a max window passes its gradient to every element equal to its maximum
(all of them on ties, as Theano). Inputs that are not C-contiguous are copied first.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import compiler, parallel
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool

Run = Callable[[list, list], None]
OPS = (Pool, MaxPoolGrad, AveragePoolGrad)
MODES = {"max": 0, "sum": 1, "average_inc_pad": 2, "average_exc_pad": 3}
FLOATS = {"float32": "float", "float64": "double"}

# The geometry every kernel takes: planes, image (h, w), output (oh, ow), window,
# stride, padding; window (r, c) covers image rows [r0, r1) and cols [c0, c1).
GEOMETRY_PARAMS = [("int64_t", n) for n in "planes h w oh ow wh ww sh sw ph pw".split()]
GEOMETRY_PARAMS.append(("int", "mode"))
GEOMETRY = ", ".join(f"{t} {n}" for t, n in GEOMETRY_PARAMS)
SOURCE = """
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
typedef %(T)s T;
typedef %(U)s U; /* T's bits */

/* v where take holds, else +0: a mask of T's bits, not a select, which gcc makes a
   branch in scalar loops; which window element holds the max is random. */
static inline T tj_pick(int take, T v) {
    U bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= (U)0 - (U)(take != 0);
    memcpy(&v, &bits, sizeof v);
    return v;
}
%(PARALLEL)s

/* The rows (or cols) window k covers in the image, and its averaging count. */
static inline void tj_span(int64_t k, int64_t s, int64_t win, int64_t pad, int64_t n,
                           int mode, int64_t *lo, int64_t *hi, int64_t *count) {
    int64_t start = k * s;                 /* in padded coordinates */
    *lo = MAX(start - pad, 0);
    *hi = MIN(start + win - pad, n);
    int64_t c = mode == 2 ? MIN(start + win, n + 2 * pad) - start : *hi - *lo;
    *count = c > 1 ? c : 1;
}

/* The output columns [*c0, *c1) whose window holds column offset j inside the image:
   0 <= c*sw + j - pw < w. Loops over them run along contiguous output columns (and
   vectorise), one window offset at a time. */
static inline void tj_cols(int64_t j, int64_t sw, int64_t pw, int64_t w, int64_t ow,
                           int64_t *c0, int64_t *c1) {
    int64_t lo = pw - j > 0 ? (pw - j + sw - 1) / sw : 0;
    int64_t hi = w - 1 - j + pw >= 0 ? (w - 1 - j + pw) / sw + 1 : 0;
    *c0 = MIN(lo, ow);
    *c1 = MAX(MIN(hi, ow), *c0);
}

/* Max pooling over tiles (window == stride, no padding: every CNN's 2x2 pool): each
   image element is in at most one window, so no window is clipped and the gradient
   writes each element once. Both run along contiguous image rows, a chunk at a time
   (loops over the windows' strided elements, or branches on which one wins, are several
   times slower): the maximum over the windows' rows first, then over each tile's
   columns. A chunk holds whole rows of tiles, as many as fit, so a small image (rows of
   30) is one chunk and the column step one long vector loop, not one per row. */
#define TJ_TILE_CHUNK 1024
/* NaN wins. Two selects, not one of an "or": gcc makes that one branches in the loops'
   scalar remainders (most of a row of 30), 3x slower on random data than these two. */
static inline T tj_max_nan(T m, T v) {
    const T larger = v > m ? v : m;
    return v != v ? v : larger;
}
#define TJ_MAX_NAN(m, v) tj_max_nan(m, v)
static inline int tj_tiled(int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t wh,
                           int64_t ww, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                           int mode) {
    return mode == 0 && wh == sh && ww == sw && ph == 0 && pw == 0 && ww <= TJ_TILE_CHUNK
           && oh * wh <= h && ow * ww <= w; /* no partial window (ignore_border=False) */
}

/* A chunk: tile rows [r0, r0 + k) of a plane, and tile columns [c0, c0 + n) of each
   (all of them when a whole row of tiles fits). */
typedef struct { int64_t r0, k, c0, n; } tj_chunk;

static inline int64_t tj_chunk_rows(int64_t ow, int64_t ww) {
    return ow * ww <= TJ_TILE_CHUNK && ow > 0 ? TJ_TILE_CHUNK / (ow * ww) : 1;
}

static inline int64_t tj_chunk_cols(int64_t ow, int64_t ww) {
    return ow * ww <= TJ_TILE_CHUNK ? ow : TJ_TILE_CHUNK / ww;
}

static void tj_max_pool_tiled(const T *x, T *out, int64_t planes, int64_t h, int64_t w,
                              int64_t oh, int64_t ow, int64_t wh, int64_t ww) {
    T rows[TJ_TILE_CHUNK];
    const int64_t per_rows = tj_chunk_rows(ow, ww), per_cols = tj_chunk_cols(ow, ww);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t r0 = 0; r0 < oh; r0 += per_rows)
            for (int64_t c0 = 0; c0 < ow; c0 += per_cols) {
                const tj_chunk ch = {r0, MIN(per_rows, oh - r0), c0, MIN(per_cols, ow - c0)};
                const int64_t span = ch.n * ww; /* elements of one tile row in the chunk */
                for (int64_t k = 0; k < ch.k; k++) {
                    const T *restrict top = x + (p * h + (ch.r0 + k) * wh) * w + ch.c0 * ww;
                    T *restrict dst = rows + k * span;
                    for (int64_t j = 0; j < span; j++) dst[j] = top[j];
                    for (int64_t i = 1; i < wh; i++) {
                        const T *restrict row = top + i * w;
                        #pragma omp simd
                        for (int64_t j = 0; j < span; j++) dst[j] = TJ_MAX_NAN(dst[j], row[j]);
                    }
                }
                /* the chunk's outputs are contiguous: whole tile rows, or a part of one */
                T *restrict orow = out + (p * oh + ch.r0) * ow + ch.c0;
                const int64_t tiles = ch.k * ch.n;
                if (ww == 2) {
                    #pragma omp simd
                    for (int64_t c = 0; c < tiles; c++)
                        orow[c] = TJ_MAX_NAN(rows[2 * c], rows[2 * c + 1]);
                } else {
                    for (int64_t c = 0; c < tiles; c++) {
                        T m = rows[c * ww];
                        for (int64_t j = 1; j < ww; j++) m = TJ_MAX_NAN(m, rows[c * ww + j]);
                        orow[c] = m;
                    }
                }
            }
}

static void tj_max_pool_grad_tiled(const T *x, const T *z, const T *g, T *gx,
                                   int64_t planes, int64_t h, int64_t w, int64_t oh,
                                   int64_t ow, int64_t wh, int64_t ww) {
    T zs[TJ_TILE_CHUNK], gs[TJ_TILE_CHUNK]; /* each tile's max and gradient, repeated */
    const int64_t per_rows = tj_chunk_rows(ow, ww), per_cols = tj_chunk_cols(ow, ww);
    if (oh * wh != h || ow * ww != w) /* border rows or columns no window covers */
        memset(gx, 0, sizeof(T) * planes * h * w);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t r0 = 0; r0 < oh; r0 += per_rows)
            for (int64_t c0 = 0; c0 < ow; c0 += per_cols) {
                const tj_chunk ch = {r0, MIN(per_rows, oh - r0), c0, MIN(per_cols, ow - c0)};
                const int64_t span = ch.n * ww, tiles = ch.k * ch.n;
                /* the chunk's outputs are contiguous: whole tile rows, or a part of one */
                const T *zrow = z + (p * oh + ch.r0) * ow + ch.c0;
                const T *grow = g + (p * oh + ch.r0) * ow + ch.c0;
                if (ww == 2) { /* (a constant width: pairs interleave in vector registers) */
                    #pragma omp simd
                    for (int64_t c = 0; c < tiles; c++) {
                        zs[2 * c] = zs[2 * c + 1] = zrow[c];
                        gs[2 * c] = gs[2 * c + 1] = grow[c];
                    }
                } else {
                    for (int64_t j = 0; j < ww; j++)
                        for (int64_t c = 0; c < tiles; c++) {
                            zs[c * ww + j] = zrow[c];
                            gs[c * ww + j] = grow[c];
                        }
                }
                for (int64_t k = 0; k < ch.k; k++)
                    for (int64_t i = 0; i < wh; i++) {
                        const int64_t first = (p * h + (ch.r0 + k) * wh + i) * w + ch.c0 * ww;
                        const T *restrict src = x + first;
                        T *restrict dst = gx + first;
                        const T *restrict zk = zs + k * span, *restrict gk = gs + k * span;
                        #pragma omp simd
                        for (int64_t j = 0; j < span; j++)
                            dst[j] = tj_pick(src[j] == zk[j], gk[j]);
                    }
            }
}

static int tj_pool_serial(const T *x, T *out, %(G)s) {
    if (tj_tiled(h, w, oh, ow, wh, ww, sh, sw, ph, pw, mode)) {
        tj_max_pool_tiled(x, out, planes, h, w, oh, ow, wh, ww);
        return 0;
    }
    double *acc = mode ? (double *)malloc(sizeof(double) * (ow > 0 ? ow : 1)) : NULL;
    double *inv = mode ? (double *)malloc(sizeof(double) * (ow > 0 ? ow : 1)) : NULL;
    if (mode && (acc == NULL || inv == NULL)) {
        free(acc);
        free(inv);
        return -1;
    }
    for (int64_t c = 0; c < ow && mode; c++) {
        int64_t c0, c1, cc;
        tj_span(c, sw, ww, pw, w, mode, &c0, &c1, &cc);
        inv[c] = (double)cc;
    }
    for (int64_t p = 0; p < planes; p++) {
        const T *xp = x + p * h * w;
        T *op = out + p * oh * ow;
        for (int64_t r = 0; r < oh; r++) {
            int64_t r0, r1, cr;
            tj_span(r, sh, wh, ph, h, mode, &r0, &r1, &cr);
            T *restrict orow = op + r * ow;
            if (mode == 0) {
                for (int64_t c = 0; c < ow; c++) orow[c] = -INFINITY;
            } else {
                for (int64_t c = 0; c < ow; c++) acc[c] = 0;
            }
            for (int64_t i = r0; i < r1; i++) {
                const T *xrow = xp + i * w;
                for (int64_t j = 0; j < ww; j++) {
                    int64_t c0, c1;
                    tj_cols(j, sw, pw, w, ow, &c0, &c1);
                    if (c0 == c1) continue;
                    const T *restrict src = xrow + (c0 * sw + j - pw); /* column c0 */
                    if (mode == 0) {
                        T *restrict o = orow + c0;
                        #pragma omp simd
                        for (int64_t k = 0; k < c1 - c0; k++) {
                            o[k] = TJ_MAX_NAN(o[k], src[k * sw]);
                        }
                    } else {
                        double *restrict a = acc + c0;
                        #pragma omp simd
                        for (int64_t k = 0; k < c1 - c0; k++) a[k] += src[k * sw];
                    }
                }
            }
            if (mode == 1) {
                for (int64_t c = 0; c < ow; c++) orow[c] = (T)acc[c];
            } else if (mode) {
                for (int64_t c = 0; c < ow; c++) orow[c] = (T)(acc[c] / ((double)cr * inv[c]));
            }
        }
    }
    free(acc);
    free(inv);
    return 0;
}

static void tj_max_pool_grad_serial(const T *x, const T *z, const T *g, T *gx,
                                    %(G)s) {
    if (tj_tiled(h, w, oh, ow, wh, ww, sh, sw, ph, pw, mode)) {
        tj_max_pool_grad_tiled(x, z, g, gx, planes, h, w, oh, ow, wh, ww);
        return;
    }
    memset(gx, 0, sizeof(T) * planes * h * w);
    for (int64_t p = 0; p < planes; p++) {
        const T *xp = x + p * h * w, *zp = z + p * oh * ow, *gp = g + p * oh * ow;
        T *gxp = gx + p * h * w;
        for (int64_t r = 0; r < oh; r++) {
            int64_t r0, r1, cr;
            tj_span(r, sh, wh, ph, h, mode, &r0, &r1, &cr);
            const T *zrow = zp + r * ow, *grow = gp + r * ow;
            for (int64_t i = r0; i < r1; i++) {
                for (int64_t j = 0; j < ww; j++) {
                    int64_t c0, c1;
                    tj_cols(j, sw, pw, w, ow, &c0, &c1);
                    if (c0 == c1) continue;
                    int64_t first = i * w + c0 * sw + j - pw; /* column c0's element */
                    const T *restrict src = xp + first;
                    T *restrict dst = gxp + first;
                    const T *zc = zrow + c0, *gc = grow + c0;
                    /* a select, not a branch: which element holds the max is random */
                    #pragma omp simd
                    for (int64_t k = 0; k < c1 - c0; k++) {
                        T add = tj_pick(src[k * sw] == zc[k], gc[k]);
                        dst[k * sw] += add;
                    }
                }
            }
        }
    }
}

static int tj_avg_pool_grad_serial(const T *g, T *gx, %(G)s) {
    double *inv = (double *)malloc(sizeof(double) * (ow > 0 ? ow : 1));
    if (inv == NULL)
        return -1;
    for (int64_t c = 0; c < ow; c++) {
        int64_t c0, c1, cc;
        tj_span(c, sw, ww, pw, w, mode, &c0, &c1, &cc);
        inv[c] = mode == 1 ? 1.0 : (double)cc;
    }
    memset(gx, 0, sizeof(T) * planes * h * w);
    for (int64_t p = 0; p < planes; p++) {
        const T *gp = g + p * oh * ow;
        T *gxp = gx + p * h * w;
        for (int64_t r = 0; r < oh; r++) {
            int64_t r0, r1, cr;
            tj_span(r, sh, wh, ph, h, mode, &r0, &r1, &cr);
            double rows = mode == 1 ? 1.0 : (double)cr;
            const T *grow = gp + r * ow;
            for (int64_t i = r0; i < r1; i++) {
                for (int64_t j = 0; j < ww; j++) {
                    int64_t c0, c1;
                    tj_cols(j, sw, pw, w, ow, &c0, &c1);
                    if (c0 == c1) continue;
                    T *restrict dst = gxp + (i * w + c0 * sw + j - pw); /* column c0 */
                    const T *gc = grow + c0;
                    const double *ic = inv + c0;
                    #pragma omp simd
                    for (int64_t k = 0; k < c1 - c0; k++)
                        dst[k * sw] = (T)((double)dst[k * sw] + (double)gc[k] / (rows * ic[k]));
                }
            }
        }
    }
    free(inv);
    return 0;
}
"""
CDEF = """
int tj_pool(const {T} *x, {T} *out, {G});
void tj_max_pool_grad(const {T} *x, const {T} *z, const {T} *g, {T} *gx, {G});
int tj_avg_pool_grad(const {T} *g, {T} *gx, {G});
"""
SYMBOLS = ("tj_pool", "tj_max_pool_grad", "tj_avg_pool_grad")


def _parallel_entries() -> str:
    """The kernels over the pool: parts of the planes (each plane is one part's; the
    gradients zero their own planes)."""
    image, pooled = "h * w * (int64_t)sizeof(T)", "oh * ow * (int64_t)sizeof(T)"
    per_plane = "h * w + oh * ow * wh * ww"
    grain = parallel.CHEAP_GRAIN
    kernels = [
        ("tj_pool", [("const T *", "x"), ("T *", "out")], {"x": image, "out": pooled}, True),
        (
            "tj_max_pool_grad",
            [("const T *", "x"), ("const T *", "z"), ("const T *", "g"), ("T *", "gx")],
            {"x": image, "z": pooled, "g": pooled, "gx": image},
            False,
        ),
        ("tj_avg_pool_grad", [("const T *", "g"), ("T *", "gx")], {"g": pooled, "gx": image}, True),
    ]
    return "".join(
        parallel.split_outer(
            name, arrays + GEOMETRY_PARAMS, "planes", steps, per_plane, grain, status=st
        )
        for name, arrays, steps, st in kernels
    )


def source_of(dtype: str) -> tuple[str, str]:
    t = FLOATS[dtype]
    bits = {"float": "uint32_t", "double": "uint64_t"}[t]
    source = SOURCE % {"T": t, "U": bits, "G": GEOMETRY, "PARALLEL": parallel.DECLARATIONS}
    return source + _parallel_entries(), parallel.CDEF + CDEF.format(T=t, G=GEOMETRY)


@cache
def library(dtype: str) -> tuple[Any, Any]:
    source, cdef = source_of(dtype)
    return compiler.load(source, cdef, SYMBOLS, f"pooling kernels ({dtype})")


def supported(node: Apply) -> bool:
    """Float images whose dtype every input and the output share (integer max pooling
    and mixed dtypes run Op.perform)."""
    dtypes = {v.type.dtype for v in node.inputs} | {node.outputs[0].type.dtype}
    return len(dtypes) == 1 and dtypes <= set(FLOATS) and node.inputs[0].type.ndim >= 2


def _geometry(op: Any, x: np.ndarray, out_hw: tuple[int, int]) -> list[int]:
    h, w = x.shape[-2:]
    planes = int(np.prod(x.shape[:-2], dtype=np.int64))
    return [planes, h, w, *out_hw, *op.ws, *op.stride, *op.pad, MODES[op.mode]]


def factory(node: Apply) -> Run:
    op, dtype = node.op, np.dtype(node.outputs[0].type.dtype)
    ffi, lib = library(dtype.name)
    t = FLOATS[dtype.name] + " *"

    def ptr(a: np.ndarray) -> Any:
        return ffi.cast(t, ffi.from_buffer(a))

    if type(op) is Pool:

        def run(inputs: list, output_storage: list) -> None:
            x = np.ascontiguousarray(inputs[0])
            shape = op._out_shape(x.shape)
            out = output_buffer(output_storage[0][0], shape, dtype, inputs)
            if out.size:
                if lib.tj_pool(ptr(x), ptr(out), *_geometry(op, x, shape[-2:])):
                    raise MemoryError(f"{op}: out of memory for its column sums")
            output_storage[0][0] = out

    elif type(op) is MaxPoolGrad:

        def run(inputs: list, output_storage: list) -> None:
            x, z, g = (np.ascontiguousarray(v) for v in inputs)
            out_hw = op.checked_out_hw(x.shape, z.shape, g.shape)
            gx = output_buffer(output_storage[0][0], x.shape, dtype, inputs)
            if gx.size:
                lib.tj_max_pool_grad(ptr(x), ptr(z), ptr(g), ptr(gx), *_geometry(op, x, out_hw))
            output_storage[0][0] = gx

    else:

        def run(inputs: list, output_storage: list) -> None:
            x, g = inputs[0], np.ascontiguousarray(inputs[1])
            out_hw = op.checked_out_hw(x.shape, g.shape)
            gx = output_buffer(output_storage[0][0], x.shape, dtype, inputs)
            if gx.size:
                if lib.tj_avg_pool_grad(ptr(g), ptr(gx), *_geometry(op, x, out_hw)):
                    raise MemoryError(f"{op}: out of memory for its window counts")
            output_storage[0][0] = gx

    return run
