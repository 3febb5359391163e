"""Arrays built whole on a device: Join (concatenate), Eye, Tri, ARange, OneHot, the
running sums and products of CumOp, and Sort.

What each computes, and when a call is NumPy's error, is decided in
``cstyle/construct.py`` for the host's kernels too; here is the devices' schedule:

- Join writes each input into a view of the new output (its slice along the axis) with
  the elementwise family's casting copy;
- Eye, Tri, ARange and OneHot give each output element to one work-item (flat kernels);
- CumOp gives each line along the axis to one work-item, which walks it in order: the
  same additions in the same order as NumPy's, hence the same values (a parallel scan
  would round differently), at the price of one work-item for a single long line;
- Sort too gives each line to one work-item: a heapsort in place in the output (no
  scratch memory), O(n log n) on one work-item: right everywhere, fast on a CPU device
  with many lines; a GPU wants a parallel sort of long lines.

Sizes, offsets and bounds are scalars read on the host (``Op.host_inputs``). An error
(a bad size, a class index out of range) is raised by ``Op.perform`` on host copies of
the inputs, so its text is the host's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, cast

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cstyle import Unsupported
from tensorjit.plugins.cstyle import construct as rules
from tensorjit.plugins.cstyle.reductions import wrapping_dtype
from tensorjit.plugins.device_kernels.elementwise import copy_into, device_can_run
from tensorjit.plugins.device_kernels.indexing import (
    ErrorFlag,
    flat_loop,
    launch_flat,
    load,
    longs,
    program,
    unravel,
)
from tensorjit.plugins.device_kernels.target import (
    Factory,
    Planner,
    Target,
    table_specs,
    tensor_type,
)
from tensorjit.plugins.device_kernels.views import IndexInputs, array_views

if TYPE_CHECKING:
    from tensorjit.tensor.extra_ops import CumOp, Sort
    from tensorjit.tensor.shape_ops import Join

I64 = np.int64
Run = Callable[[list, list], None]


def host_values(t: Target, inputs: list) -> list:
    """``inputs`` on the host, as the views family reads its sizes (views.IndexInputs):
    scalars read there arrive as host values; one computed on the device is fetched (a
    wait for the device)."""
    return IndexInputs(t, (None,) * len(inputs)).values(inputs)


def _perform_on_host(t: Target, node: Apply, inputs: list, output_storage: list) -> None:
    """``Op.perform`` on host copies of ``inputs``: NumPy's error (or, for a case no
    kernel here takes, its result, moved to the device)."""
    host = host_values(t, inputs)
    storage: list = [[None]]
    node.op.perform(node, host, storage)
    output_storage[0][0] = t.arrays.from_host(storage[0][0])


def renders(t: Target, node: Apply) -> bool:
    """Whether ``node`` lives on ``t``'s device and its dialect spells every dtype the node
    uses (a float16 or complex node stays on the host)."""
    if not device_can_run(t, node):
        return False
    try:
        for var in (*node.inputs, *node.outputs):
            t.dialect.type_name(tensor_type(var).dtype)
    except Unsupported:
        return False
    return True


def _store(t: Target, dtype: str, pointer: str, index: str, value: str) -> str:
    G, T = t.dialect.global_qualifier, t.dialect.type_name(dtype)
    return f"(({G} {T} *)({pointer}))[{index}] = ({T})({value});"


def flat_kernel(
    t: Target, name: str, params: str, body: list[str], dtypes: set[str], helpers: str = ""
) -> str:
    """A program of one flat kernel ``name(total, chunk, params)`` running ``body`` for
    each element ``e`` of its work-item's chunk (``helpers``: functions it calls)."""
    D = t.dialect
    lines = [
        f"{D.kernel_qualifier} void {name}(long total, long chunk, {params}) {{",
        *flat_loop(D, "e", "total"),
        *body,
        "}",
        "}",
    ]
    return program(t.preamble(dtypes) + helpers, lines)


def line_kernel(
    t: Target, name: str, ndim: int, axis: int, body: list[str], dtypes: set[str], helpers: str = ""
) -> str:
    """A kernel giving each line along ``axis`` (element ``e`` of the other axes) to one
    work-item: ``body`` finds its ``len`` elements at byte ``b_x`` of ``x`` (step
    ``sxa``) and writes them at byte ``b_o`` of the C-contiguous ``out`` (step ``soa``).
    ``line_factory`` launches it."""
    G = t.dialect.global_qualifier
    others = [a for a in range(ndim) if a != axis]
    sizes = [f"n{a}" for a in others]
    strides = {"x": [f"sx{a}" for a in others], "o": [f"so{a}" for a in others]}
    extra = "".join(f", long {s}" for s in [*sizes, *strides["x"], *strides["o"]])
    params = f"long len, long sxa, long soa, {G} char *x, long o_x, {G} char *out, long o_out"
    head = ["    long b_x = o_x, b_o = o_out;", *unravel("e", sizes, strides)]
    return flat_kernel(t, name, params + extra, [*head, *body], dtypes, helpers)


def line_factory(name: str) -> Callable[[Apply, SourcePlan], Run]:
    """The factory running ``line_kernel`` ``name`` over every line along the op's
    ``axis`` into a new output of ``x``'s shape."""

    def factory(node: Apply, plan: SourcePlan) -> Run:
        rt = plan.target.runtime()
        kernel = rt.kernel(plan.source, name)
        axis, dtype = cast("CumOp | Sort", node.op).axis, tensor_type(node.outputs[0]).dtype

        def run(inputs: list, output_storage: list) -> None:
            (x,) = inputs
            out = rt.empty(x.shape, dtype)
            if out.size:
                others = [a for a in range(x.ndim) if a != axis]
                args = [I64(x.shape[axis]), I64(x.strides[axis]), I64(out.strides[axis])]
                args += [*rt.buffer_args(x), *rt.buffer_args(out)]
                args += longs([*(x.shape[a] for a in others), *(x.strides[a] for a in others)])
                args += longs([out.strides[a] for a in others])
                launch_flat(rt, kernel, out.size // x.shape[axis], *args)
            output_storage[0][0] = out

        return run

    return factory


@dataclass(frozen=True)
class SourcePlan:
    target: Target
    source: str


# ---------------------------------------------------------------- Join
def join_plan(t: Target, node: Apply) -> Target | None:
    from tensorjit.tensor.shape_ops import Join

    return t if type(node.op) is Join and renders(t, node) else None


def join_factory(node: Apply, plan: Target) -> Run:
    axis, dtype = cast("Join", node.op).axis, tensor_type(node.outputs[0]).dtype
    views, rt = array_views(plan), plan.runtime()

    def run(inputs: list, output_storage: list) -> None:
        shape = rules.join_shape([x.shape for x in inputs], axis)
        if shape is None:
            _perform_on_host(plan, node, inputs, output_storage)  # NumPy's error
            return
        out = rt.empty(shape, dtype)
        offset = out.offset
        for x in inputs:
            if x.size:
                part = views.view(out, x.shape, out.strides, offset)
                copy_into(plan, part, x)
            offset += x.shape[axis] * out.strides[axis]
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- Eye, Tri
@cache
def matrix_source(t: Target, kind: str, dtype: str) -> str:
    """``out[i, j]`` of an (n, m) eye or tri, C-contiguous (``k`` clamped)."""
    params = f"long m, long k, {t.dialect.global_qualifier} char *out, long o_out"
    body = [
        "    const long i = e / m, j = e - i * m;",
        f"    {_store(t, dtype, 'out + o_out', 'e', rules.matrix_cell(kind, 'i', 'j', 'k'))}",
    ]
    return flat_kernel(t, "tj_matrix", params, body, {dtype})


def matrix_plan(t: Target, node: Apply) -> SourcePlan | None:
    from tensorjit.tensor.allocation import Eye, Tri

    if type(node.op) not in (Eye, Tri) or not renders(t, node):
        return None
    kind = type(node.op).__name__.lower()
    return SourcePlan(t, matrix_source(t, kind, tensor_type(node.outputs[0]).dtype))


def matrix_factory(node: Apply, plan: SourcePlan) -> Run:
    t, rt = plan.target, plan.target.runtime()
    kind, dtype = type(node.op).__name__.lower(), tensor_type(node.outputs[0]).dtype
    kernel = rt.kernel(plan.source, "tj_matrix")

    def run(inputs: list, output_storage: list) -> None:
        n, m, k = (int(v) for v in host_values(t, inputs))
        clamped = rules.matrix_offset(kind, n, m, k)
        if clamped is None:
            _perform_on_host(t, node, inputs, output_storage)  # NumPy's error
            return
        out = rt.empty((n, m), dtype)
        launch_flat(rt, kernel, out.size, I64(m), I64(clamped), *rt.buffer_args(out))
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- ARange
@cache
def arange_source(t: Target, dtype: str) -> str:
    """NumPy's fill of an arange (``rules.arange_element``)."""
    D, G = t.dialect, t.dialect.global_qualifier
    floating = np.dtype(dtype).kind == "f"
    bound = D.type_name(dtype) if floating else "long"
    element = rules.arange_element("e", "first", "second", D.type_name(dtype), floating)
    params = f"{bound} first, {bound} second, {G} char *out, long o_out"
    body = [
        f"    if (e < 2) {{ {_store(t, dtype, 'out + o_out', 'e', 'e ? second : first')} "
        "continue; }",
        *element,
        f"    {_store(t, dtype, 'out + o_out', 'e', 'v_')}",
    ]
    return flat_kernel(t, "tj_arange", params, body, {dtype})


def arange_plan(t: Target, node: Apply) -> SourcePlan | None:
    from tensorjit.tensor.allocation import ARange

    if type(node.op) is not ARange or not renders(t, node):
        return None
    dtype = tensor_type(node.outputs[0]).dtype
    kind = np.dtype(dtype).kind
    if kind not in "iuf":
        return None
    if kind != "f" and any(np.dtype(tensor_type(v).dtype).kind == "f" for v in node.inputs):
        return None  # float bounds into integers: NumPy's casts (rare), the host's
    return SourcePlan(t, arange_source(t, dtype))


def arange_factory(node: Apply, plan: SourcePlan) -> Run:
    t, rt = plan.target, plan.target.runtime()
    dtype = tensor_type(node.outputs[0]).dtype
    kernel = rt.kernel(plan.source, "tj_arange")
    bound = np.dtype(dtype).type if np.dtype(dtype).kind == "f" else I64

    def run(inputs: list, output_storage: list) -> None:
        start, stop, step = (v.item() for v in host_values(t, inputs))
        fill = rules.arange_fill(start, stop, step, dtype)
        if fill is None:
            _perform_on_host(t, node, inputs, output_storage)  # NumPy's error
            return
        n, first, second = fill
        if bound is I64:
            first, second = rules.arange_bound(first), rules.arange_bound(second)
        out = rt.empty((n,), dtype)
        launch_flat(rt, kernel, n, bound(first), bound(second), *rt.buffer_args(out))
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- OneHot
@cache
def one_hot_source(t: Target, ndim: int, index_dtype: str, dtype: str) -> str:
    """Cell ``e`` of the C-contiguous output: ``y[e / n] == e % n``; a class index out
    of range raises the flag (with that index)."""
    D, G = t.dialect, t.dialect.global_qualifier
    sizes = [f"n{a}" for a in range(ndim)]
    strides = {"y": [f"sy{a}" for a in range(ndim)]}
    extra = "".join(f", long {s}" for s in [*sizes, *strides["y"]])
    params = f"long n, {G} char *y, long o_y, {G} char *out, long o_out, {G} char *flag, "
    params += f"long o_flag{extra}"
    body = [
        "    const long row = e / n, c = e - row * n;",
        "    long b_y = o_y;",
        *unravel("row", sizes, strides),
        f"    const {D.type_name(index_dtype)} v = {load(D, 'y', 'b_y', index_dtype)};",
        f"    if ({rules.class_out_of_range('v', 'n', index_dtype)}) {{",
        f"        (({G} long *)(flag + o_flag))[1] = (long)v; *({G} long *)(flag + o_flag) = 1;",
        "    }",
        f"    {_store(t, dtype, 'out + o_out', 'e', 'v == c')}",
    ]
    return flat_kernel(t, "tj_one_hot", params, body, {dtype})


def one_hot_plan(t: Target, node: Apply) -> SourcePlan | None:
    from tensorjit.tensor.nnet.basic import OneHot

    if type(node.op) is not OneHot or not renders(t, node):
        return None
    y = tensor_type(node.inputs[0])
    return SourcePlan(t, one_hot_source(t, y.ndim, y.dtype, tensor_type(node.outputs[0]).dtype))


def one_hot_factory(node: Apply, plan: SourcePlan) -> Run:
    t, rt = plan.target, plan.target.runtime()
    kernel = rt.kernel(plan.source, "tj_one_hot")
    flag, dtype = ErrorFlag(rt), tensor_type(node.outputs[0]).dtype

    def run(inputs: list, output_storage: list) -> None:
        y, n = inputs[0], int(host_values(t, inputs[1:])[0])
        if n <= 0:
            _perform_on_host(t, node, inputs, output_storage)  # no cells: NumPy's answer
            return
        out = rt.empty((*y.shape, n), dtype)
        if out.size:
            args = [I64(n), *rt.buffer_args(y), *rt.buffer_args(out), *flag.args()]
            launch_flat(rt, kernel, out.size, *args, *longs([*y.shape, *y.strides]))
            if flag.raised():  # (a wait for the device)
                _perform_on_host(t, node, inputs, output_storage)  # its IndexError
                return
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- CumOp
@cache
def cumulative_source(t: Target, ndim: int, axis: int, mode: str, src: str, dst: str) -> str:
    """A running sum or product along ``axis``, each line walked in order."""
    D, G = t.dialect, t.dialect.global_qualifier
    td = D.type_name(dst)
    wraps = wrapping_dtype(dst, D.signed_wraps)  # (signed overflow is undefined here)
    ta = D.type_name(wraps)
    op = rules.CUMULATIVE[mode]

    def element(offset: str) -> str:
        return D.convert(D.convert(load(D, "x", offset, src), src, dst), dst, wraps)

    body = [
        f"    {ta} acc = {element('b_x')};",
        f"    *({G} {td} *)(out + b_o) = ({td})acc;",
        "    for (long j = 1; j < len; j++) {",
        f"        acc = ({ta})(acc {op} {element('b_x + j * sxa')});",
        f"        *({G} {td} *)(out + b_o + j * soa) = ({td})acc;",
        "    }",
    ]
    return line_kernel(t, "tj_cumulative", ndim, axis, body, {src, dst})


def cumulative_plan(t: Target, node: Apply) -> SourcePlan | None:
    from tensorjit.tensor.extra_ops import CumOp

    if type(node.op) is not CumOp or not renders(t, node):
        return None
    x, out = tensor_type(node.inputs[0]), tensor_type(node.outputs[0])
    op = cast("CumOp", node.op)
    return SourcePlan(t, cumulative_source(t, x.ndim, op.axis, op.mode, x.dtype, out.dtype))


# ---------------------------------------------------------------- Sort
@cache
def sort_source(t: Target, ndim: int, axis: int, dtype: str, stable: bool) -> str:
    """Line ``e`` (an element of the other axes) sorted along ``axis`` into the
    C-contiguous output: its values (NaNs moved last, in input order) heapsorted in place
    there; for a stable kind, the run of zeros rewritten in input order (rules)."""
    D, G, fq = t.dialect, t.dialect.global_qualifier, t.dialect.function_qualifier
    T = D.type_name(dtype)
    floating = np.dtype(dtype).kind == "f"
    x = f"*(const {G} {T} *)(x + b_x + j * sxa)"
    sift = f"""{fq} void tj_sift({G} {T} *o, long st, long root, long n) {{
    const {T} v = o[root * st];
    for (;;) {{
        long c = 2 * root + 1;
        if (c >= n) break;
        if (c + 1 < n && o[c * st] < o[(c + 1) * st]) c++;
        if (!(v < o[c * st])) break;
        o[root * st] = o[c * st];
        root = c;
    }}
    o[root * st] = v;
}}
"""
    if floating:
        gather = [
            "    long m = 0;",
            "    for (long j = 0; j < len; j++) {",
            f"        const {T} v = {x};",
            "        if (v == v) o[m++ * st] = v;",
            "    }",
            "    for (long j = 0, k = m; k < len; j++) {",
            f"        const {T} v = {x};",
            "        if (v != v) o[k++ * st] = v;",
            "    }",
        ]
    else:
        gather = ["    const long m = len;", f"    for (long j = 0; j < len; j++) o[j * st] = {x};"]
    body = [
        f"    {G} {T} *o = ({G} {T} *)(out + b_o);",
        f"    const long st = soa / (long)sizeof({T});",
        *gather,
        "    for (long r = m / 2 - 1; r >= 0; r--) tj_sift(o, st, r, m);",
        "    for (long end = m - 1; end > 0; end--) {",
        f"        const {T} top = o[0]; o[0] = o[end * st]; o[end * st] = top;",
        "        tj_sift(o, st, 0, end);",
        "    }",
    ]
    if floating and stable:
        body += [
            "    long z = 0;",
            "    while (z < m && o[z * st] != 0) z++;",
            f"    for (long j = 0; j < len && z < m; j++) {{ const {T} v = {x}; "
            "if (v == 0) o[z++ * st] = v; }",
        ]
    return line_kernel(t, "tj_sort", ndim, axis, body, {dtype}, helpers=sift)


def sort_plan(t: Target, node: Apply) -> SourcePlan | None:
    from tensorjit.tensor.extra_ops import Sort

    if type(node.op) is not Sort or not renders(t, node):
        return None
    op, x = cast("Sort", node.op), tensor_type(node.inputs[0])
    stable = op.kind in rules.STABLE_SORTS
    return SourcePlan(t, sort_source(t, x.ndim, op.axis, x.dtype, stable))


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.allocation import ARange, Eye, Tri
    from tensorjit.tensor.extra_ops import CumOp, Sort
    from tensorjit.tensor.nnet.basic import OneHot
    from tensorjit.tensor.shape_ops import Join

    table: list[tuple[str, type, Factory, Planner]] = [
        ("join", Join, join_factory, join_plan),
        ("eye", Eye, matrix_factory, matrix_plan),
        ("tri", Tri, matrix_factory, matrix_plan),
        ("arange", ARange, arange_factory, arange_plan),
        ("one_hot", OneHot, one_hot_factory, one_hot_plan),
        ("cumulative", CumOp, line_factory("tj_cumulative"), cumulative_plan),
        ("sort", Sort, line_factory("tj_sort"), sort_plan),
    ]
    # OneHot reads its error flag at once; the others only launch (a scalar read on the
    # host makes the node a launch plan's Python step).
    return table_specs(t, table, launches_only={name for name, *_ in table} - {"one_hot"})
