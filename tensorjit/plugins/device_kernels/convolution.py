"""Convolution and pooling on a device: ``Conv2d``, its two gradients, ``Pool`` (every
mode) and the two pooling gradients.

Convolutions lower to products over all images at once: im2col writes the windows as
columns (row (c, a, b), column (n, oy, ox); with ``filter_flip`` a row holds the
mirrored window position, so the filters multiply it as they are and the weights'
gradient comes out in their order), the target's ``matmul`` (its GEMM) multiplies, and
a copy permutes (f, n) to (n, f). The images' gradient is the filters' transpose times
the output gradient, folded back by col2im as a gather (each pixel sums the column
entries that read it: no atomics, a fixed order); the weights' gradient is the output
gradient times the columns' transpose. Pooling and its gradients are direct kernels:
windows clipped to the image (padding never wins a maximum and adds nothing to a sum),
averages divided by the op's window counts, the max-pool gradient given to each
window's elements equal to its maximum in Op.perform's order of window offsets. The
flat loops count coordinates (no division per element). Inputs of any layout; outputs
new and C-contiguous. The geometry and the errors are the ops' own
(``checked_geometry``, ``checked_out_hw``), shared with Op.perform and the C kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels.arrays import contiguous, copy_to_new
from tensorjit.plugins.device_kernels.elementwise import copy_into, device_can_run
from tensorjit.plugins.device_kernels.indexing import flat_loop, launch_flat, load, longs, program
from tensorjit.plugins.device_kernels.target import Target, tensor_type
from tensorjit.plugins.device_kernels.views import IndexInputs, array_views

FLOATS = ("float32", "float64")
# The most bytes of windows (im2col's columns) a convolution unrolls at once: larger
# batches go by blocks of images (a GEMM each; the weights' gradient accumulates).
COLUMNS_BYTES = 64 << 20


def _same_float_dtype(node: Apply, arrays: int) -> str | None:
    """The dtype of the node's first ``arrays`` inputs and its output when they share a
    float dtype (mixed dtypes stay on the host)."""
    dtypes = {tensor_type(v).dtype for v in node.inputs[:arrays]}
    dtypes.add(tensor_type(node.outputs[0]).dtype)
    return dtypes.pop() if len(dtypes) == 1 and dtypes <= set(FLOATS) else None


def _head(t: Target, name: str, arrays: tuple[str, ...], extra: tuple[str, ...]) -> str:
    G = t.dialect.global_qualifier
    buffers = ", ".join(f"{G} char *{a}, long o_{a}" for a in arrays)
    longs_ = "".join(f", long {e}" for e in extra)
    return f"{t.dialect.kernel_qualifier} void {name}(long total, long chunk, {buffers}{longs_}) {{"


def _walk(D: Any, names: tuple[str, ...], sizes: tuple[str, ...], body: list[str]) -> list[str]:
    """The chunked flat loop over a C-order index space with coordinates ``names``
    (outermost first) of lengths ``sizes``: the coordinates of the chunk's first element
    come from divisions, the next ones by counting (an odometer), so an element costs no
    integer division. ``body`` reads the coordinates and ``i``; it must not ``continue``
    the element loop itself."""
    start, _ = flat_loop(D, "i", "total")
    lines = [start, "long q_ = start_;"]
    for name, size in zip(reversed(names[1:]), reversed(sizes[1:])):
        lines.append(f"long {name} = q_ % {size}; q_ /= {size};")
    lines += [f"long {names[0]} = q_;", "for (long i = start_; i < end_; i++) {", *body]
    carry = ""
    for name, size in zip(reversed(names[1:]), reversed(sizes[1:])):
        carry += f"if (++{name} == {size}) {{ {name} = 0; "
    lines.append(carry + f"++{names[0]};" + " }" * (len(names) - 1))
    return [*lines, "}"]


def _step_of(offset: str, stride: str, length: str) -> list[str]:
    """C lines: ``o`` = the output row/column ``offset`` (a window's padded start) falls
    on, or ``continue`` (the enclosing loop) when none does; stride 1 needs no division."""
    return [
        f"long t = {offset};",
        "if (t < 0) continue;",
        f"long o = {stride} == 1 ? t : t / {stride};",
        f"if (o >= {length} || ({stride} != 1 && o * {stride} != t)) continue;",
    ]


def _at(array: str, *index: str) -> str:
    """The byte offset of ``array[index...]`` (its strides ``s<array>0..``)."""
    return " + ".join([f"o_{array}", *(f"{i} * s{array}{a}" for a, i in enumerate(index))])


def _strides(array: str) -> tuple[str, ...]:
    return tuple(f"s{array}{a}" for a in range(4))


# ---------------------------------------------------------------- convolution
_GEOMETRY = ("N", "C", "H", "W", "KH", "KW", "OH", "OW", "SH", "SW", "PT", "PL", "flip")


@cache
def conv_source(t: Target, kind: str, dtype: str) -> str:
    """``kind``: "im2col" (the windows of x as columns: cols[(c, a, b), (n, oy, ox)]) or
    "col2im" (each image pixel the sum of the columns' entries that read it). A column
    row (c, a, b) holds window position (a, b), or (KH-1-a, KW-1-b) with ``flip``, so the
    filters multiply it unflipped and the weights' gradient comes out in their order."""
    D = t.dialect
    T = D.type_name(dtype)
    G = D.global_qualifier
    source = "x" if kind == "im2col" else "cols"
    head = _head(
        t, f"tj_{kind}", (source, "out"), _GEOMETRY + (_strides("x") if kind == "im2col" else ())
    )
    lines = [head, f"{G} {T} *po = ({G} {T} *)(out + o_out);"]
    if kind == "im2col":
        body = [
            "long iy = oy * SH + (flip ? KH - 1 - a : a) - PT;",
            "long ix = ox * SW + (flip ? KW - 1 - b : b) - PL;",
            "int inside = iy >= 0 && iy < H && ix >= 0 && ix < W;",
            f"po[i] = inside ? {load(D, 'x', _at('x', 'n', 'c', 'iy', 'ix'), dtype)} : ({T})0;",
        ]
        names = ("c", "a", "b", "n", "oy", "ox")
        lines += _walk(D, names, ("C", "KH", "KW", "N", "OH", "OW"), body)
    else:
        body = [
            f"{T} acc = 0;",
            "for (long a = 0; a < KH; a++) {",
            *_step_of("iy + PT - (flip ? KH - 1 - a : a)", "SH", "OH"),
            "long oy = o;",
            "for (long b = 0; b < KW; b++) {",
            *_step_of("ix + PL - (flip ? KW - 1 - b : b)", "SW", "OW"),
            "long row = (c * KH + a) * KW + b, column = (n * OH + oy) * OW + o;",
            f"long at = o_cols + sizeof({T}) * (row * N * OH * OW + column);",
            f"acc += {load(D, 'cols', 'at', dtype)};",
            "}",
            "}",
            "po[i] = acc;",
        ]
        lines += _walk(D, ("n", "c", "iy", "ix"), ("N", "C", "H", "W"), body)
    lines.append("}")
    return program(t.preamble({dtype}), lines)


def conv_plan(t: Target, node: Apply) -> Target | None:
    from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights

    ops = (Conv2d, Conv2dGradInputs, Conv2dGradWeights)
    if type(node.op) not in ops or t.matmul is None or not t.matmul_ready():
        return None
    if not device_can_run(t, node):  # (transfers.py's lifters decide the device takes it)
        return None
    return t if _same_float_dtype(node, 2) is not None else None


def conv_factory(node: Apply, plan: Target) -> Callable[[list, list], None]:
    """im2col, the target's GEMM, and a permuting copy (or col2im for the images'
    gradient), over blocks of images (all at once unless the columns exceed
    ``COLUMNS_BYTES``)."""
    from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs

    t, op = plan, cast(Any, node.op)  # a convolution op (conv_plan took only those)
    dtype = tensor_type(node.outputs[0]).dtype
    rt = t.runtime()
    im2col = rt.kernel(conv_source(t, "im2col", dtype), "tj_im2col")
    col2im = rt.kernel(conv_source(t, "col2im", dtype), "tj_col2im")
    sizes = IndexInputs.of(t, node.inputs[2:])  # the gradients' image or filter size
    views, item = array_views(t), np.dtype(dtype).itemsize
    matmul = t.matmul
    assert matmul is not None  # (conv_plan took the node only with one)

    def matrix(a: Any, rows: int, cols: int) -> Any:
        """A C-contiguous array seen as a rows x cols matrix."""
        return views.view(a, (rows, cols), (cols * item, item), a.offset)

    def columns(x: Any, geometry: list[int]) -> Any:
        """The windows of images ``x`` as a (c kh kw) x (n oh ow) matrix."""
        n, c, _, _, kh, kw, oh, ow = geometry[:8]
        cols = rt.empty((c * kh * kw, n * oh * ow), dtype)
        if cols.size:
            args = [*rt.buffer_args(x), *rt.buffer_args(cols), *longs([*geometry, *x.strides])]
            launch_flat(rt, im2col, cols.size, *args)
        return cols

    def by_filter(g: Any) -> Any:
        """g (n, f, oh, ow) as the f x (n oh ow) matrix the products take."""
        n, f, oh, ow = g.shape
        s = g.strides
        permuted = copy_to_new(t, views.view(g, (f, n, oh, ow), (s[1], s[0], s[2], s[3]), g.offset))
        return matrix(permuted, f, n * oh * ow)

    def images(v: Any, start: int, stop: int) -> Any:
        """Images [start, stop) of a 4-d array (a view)."""
        offset = v.offset + start * v.strides[0]
        return views.view(v, (stop - start, *v.shape[1:]), v.strides, offset)

    def run(inputs: list, output_storage: list) -> None:
        a, b = inputs[:2]
        if type(op) is Conv2d:  # x, w
            x, w = a, b
            pads, _, out_hw = op.checked_geometry(x.shape, w.shape)
            (n, c), f, k_hw = x.shape[:2], w.shape[0], w.shape[2:]
            hw = x.shape[2:]
        elif type(op) is Conv2dGradInputs:  # w, g, rows, cols
            w, g = a, b
            hw = tuple(int(v) for v in sizes.values(inputs[2:]))
            pads, _, out_hw = op.checked_geometry(w.shape, g.shape, *hw)
            n, (f, c), k_hw = g.shape[0], w.shape[:2], w.shape[2:]
        else:  # x, g, filter rows, filter cols
            x, g = a, b
            k_hw = tuple(int(v) for v in sizes.values(inputs[2:]))
            pads, _, out_hw = op.checked_geometry(x.shape, g.shape, *k_hw)
            (n, c), f, hw = x.shape[:2], g.shape[1], x.shape[2:]
        k, p = c * k_hw[0] * k_hw[1], out_hw[0] * out_hw[1]
        rest = [*k_hw, *out_hw, *op.subsample, pads[0][0], pads[1][0], int(op.filter_flip)]
        # Images per block: the columns of a block stay within the budget.
        block = max(1, min(n, COLUMNS_BYTES // max(k * p * item, 1)))
        if type(op) is Conv2d:
            out = rt.empty((n, f, *out_hw), dtype)
            filters = matrix(contiguous(t, w), f, k)
            for start in range(0, n, block):
                m = min(block, n - start)
                product = rt.empty((f, m * p), dtype)
                matmul(product, filters, columns(images(x, start, start + m), [m, c, *hw, *rest]))
                # (f, m, oh, ow) -> (m, f, oh, ow)
                strides = (p * item, m * p * item, out_hw[1] * item, item)
                permuted = views.view(product, (m, f, *out_hw), strides, product.offset)
                copy_into(t, images(out, start, start + m), permuted)
        elif type(op) is Conv2dGradInputs:
            w2 = matrix(contiguous(t, w), f, k)
            filters_t = views.view(w2, (k, f), (item, k * item), w2.offset)
            out = rt.empty((n, c, *hw), dtype)
            for start in range(0, n, block):
                m = min(block, n - start)
                dcols = rt.empty((k, m * p), dtype)
                matmul(dcols, filters_t, by_filter(images(g, start, start + m)))
                part = images(out, start, start + m)
                if part.size:
                    args = [*rt.buffer_args(dcols), *rt.buffer_args(part)]
                    args += longs([m, c, *hw, *rest])
                    launch_flat(rt, col2im, part.size, *args)
        else:
            out = rt.empty((f, c, *k_hw), dtype)
            for start in range(0, max(n, 1), block):  # (no images: zeros, from k == 0)
                m = min(block, n - start)
                cols = columns(images(x, start, start + m), [m, c, *hw, *rest])
                cols_t = views.view(cols, (m * p, k), (item, m * p * item), cols.offset)
                g2 = by_filter(images(g, start, start + m))
                matmul(matrix(out, f, k), g2, cols_t, accumulate=start > 0)
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- pooling
_POOL = ("P", "H", "W", "OH", "OW", "WH", "WW", "SH", "SW", "PH", "PW", "mode", "border")
MODES = {"max": 0, "sum": 1, "average_inc_pad": 2, "average_exc_pad": 3}


def _window_lines(T: str) -> list[str]:
    """C lines: the window of output (oy, ox) clipped to the image, [ys, ye) x [xs, xe),
    and ``count``, what an average divides by (the op's counts)."""
    return [
        "long y0 = oy * SH - PH, x0 = ox * SW - PW;",
        "long ys = y0 < 0 ? 0 : y0, ye = y0 + WH < H ? y0 + WH : H;",
        "long xs = x0 < 0 ? 0 : x0, xe = x0 + WW < W ? x0 + WW : W;",
        "long cy, cx;",
        "if (mode == 2) {",
        "long py = oy * SH + WH < H + 2 * PH ? oy * SH + WH : H + 2 * PH;",
        "long px = ox * SW + WW < W + 2 * PW ? ox * SW + WW : W + 2 * PW;",
        "cy = py - oy * SH; cx = px - ox * SW;",
        "} else {",
        "cy = ye - ys; cx = xe - xs;",
        "}",
        f"{T} count = ({T})((cy > 1 ? cy : 1) * (cx > 1 ? cx : 1));",
    ]


@cache
def pool_source(t: Target, kind: str, dtype: str) -> str:
    """``kind``: "pool" (out from x), "max_grad" (gx from x, z, g) or "avg_grad" (gx
    from g), over planes of C-contiguous ``H x W`` images."""
    D = t.dialect
    T = D.type_name(dtype)
    G = D.global_qualifier
    arrays = {"pool": ("x",), "max_grad": ("x", "z", "g"), "avg_grad": ("g",)}[kind]
    head = _head(t, f"tj_{kind}", (*arrays, "out"), _POOL)
    lines = [head, f"{G} {T} *po = ({G} {T} *)(out + o_out);"]

    def at(array: str, plane_size: str, y: str, x: str, width: str) -> str:
        return load(
            D, array, f"o_{array} + sizeof({T}) * (p * {plane_size} + {y} * {width} + {x})", dtype
        )

    if kind == "pool":
        body = _window_lines(T) + [
            f"{T} acc = mode == 0 ? -INFINITY : ({T})0;",
            "for (long r = ys; r < ye; r++) {",
            "for (long s = xs; s < xe; s++) {",
            f"{T} v = {at('x', 'H * W', 'r', 's', 'W')};",
            "if (mode != 0) acc += v; else if (v != v || v > acc) acc = v;",
            "}",
            "}",
            "po[i] = mode >= 2 ? acc / count : acc;",
        ]
        lines += _walk(D, ("p", "oy", "ox"), ("P", "OH", "OW"), body)
    else:
        # gx[p, iy, ix]: the windows covering the pixel, by window offset (a, b) as
        # Op.perform adds them.
        body = []
        if kind == "max_grad":
            body.append(f"{T} xv = {at('x', 'H * W', 'iy', 'ix', 'W')};")
        body += [
            f"{T} acc = 0;",
            "for (long a = 0; a < WH; a++) {",
            *_step_of("iy + PH - a", "SH", "OH"),
            "long oy = o;",
            "for (long b = 0; b < WW; b++) {",
            *_step_of("ix + PW - b", "SW", "OW"),
            "long ox = o;",
            f"{T} gv = {at('g', 'OH * OW', 'oy', 'ox', 'OW')};",
        ]
        if kind == "max_grad":
            body.append(f"if (xv == {at('z', 'OH * OW', 'oy', 'ox', 'OW')}) acc += gv;")
        else:
            body += [*_window_lines(T), "acc += mode >= 2 ? gv / count : gv;"]
        body += ["}", "}", "po[i] = acc;"]
        lines += _walk(D, ("p", "iy", "ix"), ("P", "H", "W"), body)
    lines.append("}")
    return program(t.preamble({dtype}), lines)


def pool_plan(t: Target, node: Apply) -> tuple[Target, str] | None:
    from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool

    kinds: dict[type, str] = {Pool: "pool", MaxPoolGrad: "max_grad", AveragePoolGrad: "avg_grad"}
    kind = kinds.get(type(node.op))
    if kind is None or not device_can_run(t, node):
        return None
    dtype = _same_float_dtype(node, len(node.inputs))
    return None if dtype is None else (t, kind)


def pool_factory(node: Apply, plan: tuple[Target, str]) -> Callable[[list, list], None]:
    t, kind = plan
    op = cast(Any, node.op)  # a pooling op (pool_plan took only those)
    dtype = tensor_type(node.outputs[0]).dtype
    rt = t.runtime()
    kernel = rt.kernel(pool_source(t, kind, dtype), f"tj_{kind}")
    buffer_args = rt.buffer_args
    mode = MODES[op.mode]

    def run(inputs: list, output_storage: list) -> None:
        x = inputs[0]
        if kind == "pool":
            shape = tuple(op._out_shape(x.shape))
            out_hw, operands = shape[-2:], [contiguous(t, x)]
        elif kind == "max_grad":
            out_hw = op.checked_out_hw(x.shape, inputs[1].shape, inputs[2].shape)
            shape, operands = x.shape, [contiguous(t, v) for v in inputs]
        else:
            out_hw = op.checked_out_hw(x.shape, inputs[1].shape)
            shape, operands = x.shape, [contiguous(t, inputs[1])]
        out = rt.empty(shape, dtype)
        if out.size:
            planes = int(np.prod(x.shape[:-2], dtype=np.int64))
            args = [arg for v in operands for arg in buffer_args(v)] + buffer_args(out)
            geometry = [planes, *x.shape[-2:], *out_hw, *op.ws, *op.stride, *op.pad, mode]
            args += longs([*geometry, int(op.ignore_border)])
            launch_flat(rt, kernel, out.size, *args)
        output_storage[0][0] = out

    return run


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights
    from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool

    def spec(
        family: str, ops: tuple[type, ...], factory: Any, planner: Any, launches_only: bool
    ) -> KernelSpec:
        plan = lambda node: planner(t, node)  # noqa: E731
        return KernelSpec(
            t.kernel_name(family),
            t.backend,
            ops,
            factory,
            plan=plan,
            plugin=t.plugin,
            launches_only=launches_only,
        )

    return [
        # (the convolutions' products are the backend's matmul: a library call on CUDA)
        spec(
            "convolution",
            (Conv2d, Conv2dGradInputs, Conv2dGradWeights),
            conv_factory,
            conv_plan,
            t.matmul_launches_only,
        ),
        spec("pooling", (Pool, MaxPoolGrad, AveragePoolGrad), pool_factory, pool_plan, True),
    ]
