"""Convolution and pooling on a device: ``Conv2d``, its two gradients, ``Pool`` (every
mode) and the two pooling gradients.

Each kernel computes one output element per loop step (the flat, chunked loop of the
other families): a convolution output sums its window over channels and filter
positions, the input gradient gathers the output gradients whose windows cover its
pixel (no scattering, so no atomics and a fixed order), the weights' gradient sums over
images and output pixels. Pooling windows are clipped to the image (padding never wins
a maximum and adds nothing to a sum); the averages divide by the op's window counts;
the max-pool gradient gives each window's gradient to its elements equal to the
maximum, in Op.perform's order of window offsets. Operands are read through their byte
strides (any layout); outputs are new C-contiguous arrays. The geometry and the errors
are the ops' own (``checked_geometry``, ``checked_out_hw``): every backend agrees on them.

This is the direct schedule: on a GPU, im2col + the device GEMM (or cuDNN) would use the
machine better for large channel counts; that is the GPU issue's to measure.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels.elementwise import device_can_run
from tensorjit.plugins.device_kernels.indexing import flat_loop, launch_flat, load, longs, program
from tensorjit.plugins.device_kernels.target import Target, tensor_type
from tensorjit.plugins.device_kernels.views import IndexInputs

FLOATS = ("float32", "float64")


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


def _unravel(index: str, names: tuple[str, ...], sizes: tuple[str, ...]) -> list[str]:
    """C lines setting ``names`` (outermost first) from the C-order ``index``."""
    lines = [f"long q_ = {index};"]
    for name, size in zip(reversed(names[1:]), reversed(sizes[1:])):
        lines.append(f"long {name} = q_ % {size}; q_ /= {size};")
    lines.append(f"long {names[0]} = q_;")
    return lines


def _at(array: str, *index: str) -> str:
    """The byte offset of ``array[index...]`` (its strides ``s<array>0..``)."""
    return " + ".join([f"o_{array}", *(f"{i} * s{array}{a}" for a, i in enumerate(index))])


def _strides(array: str) -> tuple[str, ...]:
    return tuple(f"s{array}{a}" for a in range(4))


# ---------------------------------------------------------------- convolution
_GEOMETRY = ("N", "C", "H", "W", "F", "KH", "KW", "OH", "OW", "SH", "SW", "PT", "PL", "flip")


@cache
def conv_source(t: Target, kind: str, dtype: str) -> str:
    """``kind``: "forward" (out = x * w), "inputs" (gx from w, g) or "weights" (gw from
    x, g); each over 4-d operands of ``dtype``."""
    D = t.dialect
    T = D.type_name(dtype)
    G = D.global_qualifier
    arrays = {"forward": ("x", "w"), "inputs": ("w", "g"), "weights": ("x", "g")}[kind]
    a, b = arrays
    head = _head(t, f"tj_conv_{kind}", (a, b, "out"), _GEOMETRY + _strides(a) + _strides(b))
    lines = [head, f"{G} {T} *po = ({G} {T} *)(out + o_out);", *flat_loop(D, "i", "total")]
    if kind == "forward":  # out[n, f, oy, ox]
        lines += _unravel("i", ("n", "f", "oy", "ox"), ("N", "F", "OH", "OW"))
        lines += [
            f"{T} acc = 0;",
            "for (long c = 0; c < C; c++) {",
            "for (long ky = 0; ky < KH; ky++) {",
            "long iy = oy * SH + ky - PT; if (iy < 0 || iy >= H) continue;",
            "long wy = flip ? KH - 1 - ky : ky;",
            "for (long kx = 0; kx < KW; kx++) {",
            "long ix = ox * SW + kx - PL; if (ix < 0 || ix >= W) continue;",
            "long wx = flip ? KW - 1 - kx : kx;",
            f"acc += {load(D, 'x', _at('x', 'n', 'c', 'iy', 'ix'), dtype)}"
            f" * {load(D, 'w', _at('w', 'f', 'c', 'wy', 'wx'), dtype)};",
            "}",
            "}",
            "}",
        ]
    elif kind == "inputs":  # gx[n, c, iy, ix]: the output gradients whose windows cover it
        lines += _unravel("i", ("n", "c", "iy", "ix"), ("N", "C", "H", "W"))
        lines += [
            f"{T} acc = 0;",
            "for (long f = 0; f < F; f++) {",
            "for (long ky = 0; ky < KH; ky++) {",
            "long ty = iy + PT - ky; if (ty < 0 || ty % SH != 0 || ty / SH >= OH) continue;",
            "long oy = ty / SH, wy = flip ? KH - 1 - ky : ky;",
            "for (long kx = 0; kx < KW; kx++) {",
            "long tx = ix + PL - kx; if (tx < 0 || tx % SW != 0 || tx / SW >= OW) continue;",
            "long ox = tx / SW, wx = flip ? KW - 1 - kx : kx;",
            f"acc += {load(D, 'g', _at('g', 'n', 'f', 'oy', 'ox'), dtype)}"
            f" * {load(D, 'w', _at('w', 'f', 'c', 'wy', 'wx'), dtype)};",
            "}",
            "}",
            "}",
        ]
    else:  # gw[f, c, ky, kx] (flipped back when the filters were flipped)
        lines += _unravel("i", ("f", "c", "ky", "kx"), ("F", "C", "KH", "KW"))
        lines += [
            "long ay = flip ? KH - 1 - ky : ky, ax = flip ? KW - 1 - kx : kx;",
            f"{T} acc = 0;",
            "for (long n = 0; n < N; n++) {",
            "for (long oy = 0; oy < OH; oy++) {",
            "long iy = oy * SH + ay - PT; if (iy < 0 || iy >= H) continue;",
            "for (long ox = 0; ox < OW; ox++) {",
            "long ix = ox * SW + ax - PL; if (ix < 0 || ix >= W) continue;",
            f"acc += {load(D, 'g', _at('g', 'n', 'f', 'oy', 'ox'), dtype)}"
            f" * {load(D, 'x', _at('x', 'n', 'c', 'iy', 'ix'), dtype)};",
            "}",
            "}",
            "}",
        ]
    lines += ["po[i] = acc;", "}", "}"]
    return program(t.preamble({dtype}), lines)


def conv_plan(t: Target, node: Apply) -> tuple[Target, str] | None:
    from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights

    kinds = {Conv2d: "forward", Conv2dGradInputs: "inputs", Conv2dGradWeights: "weights"}
    kind = kinds.get(type(node.op))
    if kind is None or not device_can_run(t, node):
        return None
    dtype = _same_float_dtype(node, 2)
    return None if dtype is None else (t, kind)


def conv_factory(node: Apply, plan: tuple[Target, str]) -> Callable[[list, list], None]:
    t, kind = plan
    op = node.op
    dtype = tensor_type(node.outputs[0]).dtype
    rt = t.runtime()
    kernel = rt.kernel(conv_source(t, kind, dtype), f"tj_conv_{kind}")
    sizes = IndexInputs.of(t, node.inputs[2:])  # the gradients' image or filter size
    buffer_args = rt.buffer_args
    flip = int(op.filter_flip)

    def launch(a: Any, b: Any, out_shape: tuple, geometry: list[int]) -> Any:
        out = rt.empty(out_shape, dtype)
        if out.size:
            args = [*buffer_args(a), *buffer_args(b), *buffer_args(out)]
            args += longs([*geometry, *a.strides, *b.strides])
            launch_flat(rt, kernel, out.size, *args)
        return out

    def geometry(n: int, c: int, hw: tuple, f: int, k_hw: tuple, pads: Any, out_hw: Any) -> list:
        return [n, c, *hw, f, *k_hw, *out_hw, *op.subsample, pads[0][0], pads[1][0], flip]

    def run(inputs: list, output_storage: list) -> None:
        a, b = inputs[:2]
        if kind == "forward":  # x, w
            pads, _, out_hw = op.checked_geometry(a.shape, b.shape)
            n, c, f = a.shape[0], a.shape[1], b.shape[0]
            geo = geometry(n, c, a.shape[2:], f, b.shape[2:], pads, out_hw)
            out = launch(a, b, (n, f, *out_hw), geo)
        elif kind == "inputs":  # w, g, rows, cols
            hw = tuple(int(v) for v in sizes.values(inputs[2:]))
            pads, _, out_hw = op.checked_geometry(a.shape, b.shape, *hw)
            n, c, f = b.shape[0], a.shape[1], a.shape[0]
            out = launch(a, b, (n, c, *hw), geometry(n, c, hw, f, a.shape[2:], pads, out_hw))
        else:  # x, g, filter rows, filter cols
            k_hw = tuple(int(v) for v in sizes.values(inputs[2:]))
            pads, _, out_hw = op.checked_geometry(a.shape, b.shape, *k_hw)
            n, c, f = a.shape[0], a.shape[1], b.shape[1]
            out = launch(a, b, (f, c, *k_hw), geometry(n, c, a.shape[2:], f, k_hw, pads, out_hw))
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
    lines = [head, f"{G} {T} *po = ({G} {T} *)(out + o_out);", *flat_loop(D, "i", "total")]

    def at(array: str, plane_size: str, y: str, x: str, width: str) -> str:
        return load(
            D, array, f"o_{array} + sizeof({T}) * (p * {plane_size} + {y} * {width} + {x})", dtype
        )

    if kind == "pool":
        lines += _unravel("i", ("p", "oy", "ox"), ("P", "OH", "OW"))
        lines += _window_lines(T)
        lines += [
            f"{T} acc = mode == 0 ? -INFINITY : ({T})0;",
            "for (long r = ys; r < ye; r++) {",
            "for (long s = xs; s < xe; s++) {",
            f"{T} v = {at('x', 'H * W', 'r', 's', 'W')};",
            "if (mode != 0) acc += v; else if (v != v || v > acc) acc = v;",
            "}",
            "}",
            "po[i] = mode >= 2 ? acc / count : acc;",
        ]
    else:
        # gx[p, iy, ix]: the windows covering the pixel, by window offset (a, b) as
        # Op.perform adds them.
        lines += _unravel("i", ("p", "iy", "ix"), ("P", "H", "W"))
        if kind == "max_grad":
            lines.append(f"{T} xv = {at('x', 'H * W', 'iy', 'ix', 'W')};")
        lines += [
            f"{T} acc = 0;",
            "for (long a = 0; a < WH; a++) {",
            "long ty = iy + PH - a; if (ty < 0 || ty % SH != 0 || ty / SH >= OH) continue;",
            "long oy = ty / SH;",
            "for (long b = 0; b < WW; b++) {",
            "long tx = ix + PW - b; if (tx < 0 || tx % SW != 0 || tx / SW >= OW) continue;",
            "long ox = tx / SW;",
            f"{T} gv = {at('g', 'OH * OW', 'oy', 'ox', 'OW')};",
        ]
        if kind == "max_grad":
            lines.append(f"if (xv == {at('z', 'OH * OW', 'oy', 'ox', 'OW')}) acc += gv;")
        else:
            lines += [*_window_lines(T), "acc += mode >= 2 ? gv / count : gv;"]
        lines += ["}", "}", "po[i] = acc;"]
    lines += ["}", "}"]
    return program(t.preamble({dtype}), lines)


def pool_plan(t: Target, node: Apply) -> tuple[Target, str] | None:
    from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool

    kinds = {Pool: "pool", MaxPoolGrad: "max_grad", AveragePoolGrad: "avg_grad"}
    kind = kinds.get(type(node.op))
    if kind is None or not device_can_run(t, node):
        return None
    dtype = _same_float_dtype(node, len(node.inputs))
    return None if dtype is None else (t, kind)


def pool_factory(node: Apply, plan: tuple[Target, str]) -> Callable[[list, list], None]:
    from tensorjit.plugins.device_kernels.arrays import contiguous

    t, kind = plan
    op = node.op
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

    def planned(planner: Callable[[Target, Apply], Any]) -> Callable[[Apply], Any]:
        return lambda node: planner(t, node)

    return [
        KernelSpec(
            t.kernel_name("convolution"),
            t.backend,
            (Conv2d, Conv2dGradInputs, Conv2dGradWeights),
            conv_factory,
            plan=planned(conv_plan),
            plugin=t.plugin,
        ),
        KernelSpec(
            t.kernel_name("pooling"),
            t.backend,
            (Pool, MaxPoolGrad, AveragePoolGrad),
            pool_factory,
            plan=planned(pool_plan),
            plugin=t.plugin,
        ),
    ]
