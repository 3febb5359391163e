"""Elementwise kernels (Elemwise, fused Composite, casts) on a device.

Each node gets one program with two kernels, both from the shared renderer's
per-element function ``tj_f``:

- ``tj_contig``: every operand C-contiguous with the output's shape (or one element,
  read once): the dialect's flat loop, a chunk of contiguous elements per work-item;
- ``tj_strided``: anything else (transposed, sliced, negatively strided, broadcast,
  0-d): each element's byte offset in every operand from its index and the operand's
  byte strides, a broadcast axis having stride 0.

Under the groups schedule (a GPU; PoCL when forced), a C-contiguous 2-d or 3-d output
with operands whose fast axis is the second-to-last (``x + y.T``) runs ``tj_tiled``
instead (``tiled_source``, built per set of such operands): a work-group stages a 32 x 32
tile of each of them in local memory, read along its own fast axis, then computes the
tile's elements along the output's fast axis, so neither side strides through memory.

In place (``Elemwise.inplace``), the destroyed input is the output and is written
through its own strides. Constant inputs of one element are inlined as literals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant
from tensorjit.core.memory.transfer_op import before_transfers
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cstyle import Unsupported
from tensorjit.plugins.cstyle.elementwise import element_function, typed_operands
from tensorjit.plugins.device_kernels.arrays import is_c_contiguous, reusable
from tensorjit.plugins.device_kernels.target import Target, node_label, tensor_type
from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE, uses_groups, work_items
from tensorjit.tensor.elemwise import check_runtime_broadcast

if TYPE_CHECKING:
    from tensorjit.tensor.elemwise import Elemwise

I64 = np.int64
TILE = 32  # a work-group's tile of tj_tiled: TILE x TILE elements
TILE_ROWS = GROUP_SIZE // TILE  # rows of a tile each pass of the group covers


def on_device(t: Target, node: Apply) -> bool:
    """The node's values live on the device (those it reads on the host, Op.host_inputs,
    on the host or the device)."""
    host = node.op.host_inputs(node)
    inputs = [v for i, v in enumerate(node.inputs) if i not in host]
    return all(v.type.device == t.device for v in (*inputs, *node.outputs))


def uses_fp64(node: Apply) -> bool:
    return any(tensor_type(v).dtype == "float64" for v in (*node.inputs, *node.outputs))


def device_can_run(t: Target, node: Apply) -> bool:
    """The node lives on the device, and the device has the float precision it needs."""
    return on_device(t, node) and (t.runtime().fp64 or not uses_fp64(node))


def constant_value(var: Any) -> np.ndarray | None:
    """The value of a Constant (a device one too), or of a device copy of one; None for
    any other input."""
    source = before_transfers(var)
    return np.asarray(source.data) if isinstance(source, Constant) else None


def inlined_constant(var: Any) -> np.ndarray | None:
    """The value of a one-element constant (or of its copy to the device), else None."""
    value = constant_value(var)
    return value.reshape(()) if value is not None and value.size == 1 else None


@dataclass(frozen=True)
class ElemwisePlan:
    target: Target
    source: str
    variable: tuple[int, ...]  # the inputs passed to the kernels (not inlined)
    single: tuple[bool, ...]  # per variable input: one element, read once
    inplace: int | None
    out_dtype: str
    ndim: int
    #: what renders ``tj_f`` again (tiled_source): scalar op, input dtypes, kinds,
    #: inlined constants (by input index)
    renders: tuple = field(default=(), compare=False, hash=False)


def kernel_source(
    t: Target,
    scalar_op: Any,
    in_dtypes: list[str],
    out_dtype: str,
    kinds: list[str],
    consts: dict[int, np.ndarray],
    inplace: int | None,
    ndim: int,
) -> str:
    """The program of one elementwise map (see the module docstring)."""
    D = t.dialect
    function, _body = element_function(D, scalar_op, in_dtypes, out_dtype, kinds, consts)
    variable = [i for i, k in enumerate(kinds) if k != "const"]
    ops = [(f"d{i}", in_dtypes[i], kinds[i], ()) for i in variable]
    if inplace is None:
        ops.append(("dout", out_dtype, "full", ()))
    out = "dout" if inplace is None else f"d{inplace}"

    def call(load: dict[str, str]) -> str:
        return "tj_f(" + ", ".join(load[f"d{i}"] for i in variable) + ")"

    g = D.global_qualifier
    params = ", ".join(f"{g} char *{name}, long o_{name}" for name, *_ in ops)
    scalars = {name for name, _, kind, _ in ops if kind == "scalar"}
    setup, load = typed_operands(
        D, ops, out, scalars, restrict=inplace is None, base=lambda n: f"({n} + o_{n})"
    )
    dtypes = {*in_dtypes, out_dtype}
    lines = [t.preamble(dtypes), *function]
    lines += [
        f"{D.kernel_qualifier} void tj_contig(long n, long tj_chunk, {params}) {{",
        "#define TJ_CHUNK tj_chunk",
        *setup,
        f"    {D.flat_loop.format(i='i', n='n')} p_{out}[i] = {call(load('i'))};",
        "#undef TJ_CHUNK",
        "}",
    ]
    shape = "".join(f", long n{a}" for a in range(ndim))
    strides = "".join(f", long s_{name}_{a}" for name, *_ in ops for a in range(ndim))
    lines += [
        f"{D.kernel_qualifier} void tj_strided(long n, long tj_chunk{shape}, {params}{strides}) {{",
        f"    long start = {D.global_id} * tj_chunk, end = min(start + tj_chunk, n);",
        "    for (long i = start; i < end; i++) {",
        "        long r = i, k;",
        *(f"        long b_{name} = o_{name};" for name, *_ in ops),
    ]
    for a in reversed(range(ndim)):
        lines.append(f"        k = r % n{a}; r /= n{a};")
        lines += [f"        b_{name} += k * s_{name}_{a};" for name, *_ in ops]
    loads = {name: f"*(const {g} {D.type_name(dt)} *)({name} + b_{name})" for name, dt, *_ in ops}
    t_out = D.type_name(out_dtype)
    lines += [f"        *({g} {t_out} *)({out} + b_{out}) = {call(loads)};", "    }", "}"]
    return "\n".join(lines) + "\n"


def elemwise_plan(t: Target, node: Apply) -> ElemwisePlan | None:
    if not device_can_run(t, node):
        return None
    op = cast("Elemwise", node.op)
    kinds, consts = [], {}
    for i, var in enumerate(node.inputs):
        var_type = tensor_type(var)
        value = None if i == op.inplace else inlined_constant(var)
        if value is not None and all(s == 1 for s in var_type.shape):
            kinds.append("const")
            consts[i] = value.astype(var_type.dtype)
        elif i != op.inplace and all(s == 1 for s in var_type.shape):
            kinds.append("scalar")
        else:
            kinds.append("full")
    out_type = tensor_type(node.outputs[0])
    out_dtype = out_type.dtype
    try:
        source = kernel_source(
            t,
            op.scalar_op,
            [tensor_type(v).dtype for v in node.inputs],
            out_dtype,
            kinds,
            consts,
            op.inplace,
            out_type.ndim,
        )
    except Unsupported:
        return None
    variable = tuple(i for i, k in enumerate(kinds) if k != "const")
    single = tuple(kinds[i] == "scalar" for i in variable)
    ndim = out_type.ndim
    renders = (op.scalar_op, [tensor_type(v).dtype for v in node.inputs], kinds, consts)
    return ElemwisePlan(t, source, variable, single, op.inplace, out_dtype, ndim, renders)


def broadcast_shape(shapes: list[tuple[int, ...]], where: str) -> tuple[int, ...]:
    out = []
    for sizes in zip(*shapes):
        big = {n for n in sizes if n != 1}
        if len(big) > 1:
            raise ValueError(  # NumPy's words, as the host kernels raise them
                f"{where}: operands could not be broadcast together with shapes "
                f"{' '.join(map(str, shapes))}"
            )
        out.append(big.pop() if big else 1)
    return tuple(out)


def broadcast_strides(value: Any, shape: tuple[int, ...]) -> list[int]:
    """``value``'s byte strides read as an operand of an output of ``shape`` (the same
    number of axes): 0 along an axis it is broadcast over."""
    return [
        0 if n == 1 and size != 1 else s for n, size, s in zip(value.shape, shape, value.strides)
    ]


def launch_map(
    plan: ElemwisePlan, values: list[Any], out: Any, where: str, kernels: tuple | None = None
) -> None:
    """Run the map on device ``values`` (the plan's variable inputs, in order) into
    ``out`` (a new array, or the destroyed input itself in place)."""
    rt = plan.target.runtime()
    n = math.prod(out.shape)
    if n == 0:
        return
    contig, strided = kernels or (
        rt.kernel(plan.source, "tj_contig"),
        rt.kernel(plan.source, "tj_strided"),
    )
    operands = list(values) if plan.inplace is not None else [*values, out]
    count, chunk = work_items(rt, n)
    buffers = [arg for v in operands for arg in rt.buffer_args(v)]
    single = (*plan.single, False)
    if all(
        one or (v.shape == out.shape and is_c_contiguous(v)) for v, one in zip(operands, single)
    ):
        rt.launch_chunks(contig, count, I64(n), I64(chunk), *buffers)
        return
    staged = staged_operands(plan, values, out) if plan.renders else None
    if staged is not None:
        launch_tiled(plan, values, out, staged)
        return
    strides = [I64(step) for v in operands for step in broadcast_strides(v, out.shape)]
    shape = [I64(s) for s in out.shape]
    rt.launch_chunks(strided, count, I64(n), I64(chunk), *shape, *buffers, *strides)


# ---------------------------------------------------------------- tiles
@cache
def tiled_source(plan: ElemwisePlan, staged: tuple[bool, ...]) -> str:
    """``tj_tiled`` for the map of ``plan``: ``staged[k]`` for each variable input read
    through a local tile (fast axis: the row); the output C-contiguous (batch, R, C)."""
    t = plan.target
    D = t.dialect
    G, L = D.global_qualifier, D.local_qualifier
    scalar_op, in_dtypes, kinds, consts = plan.renders
    function, _body = element_function(D, scalar_op, in_dtypes, plan.out_dtype, kinds, consts)
    names = [f"d{i}" for i in plan.variable]
    dtypes = [in_dtypes[i] for i in plan.variable]
    params = "".join(
        f", {G} char *{n}, long o_{n}, long sb_{n}, long sr_{n}, long sc_{n}" for n in names
    )

    def load(n: str, dtype: str) -> str:
        at = f"{n} + o_{n} + b * sb_{n} + r * sr_{n} + c * sc_{n}"
        return f"*(const {G} {D.type_name(dtype)} *)({at})"

    t_out = D.type_name(plan.out_dtype)
    lines = [t.preamble({*in_dtypes, plan.out_dtype}), *function]
    lines += [
        f"{D.kernel_qualifier} void tj_tiled(long R, long C, long tiles_r, long tiles_c"
        f"{params}, {G} char *dout, long o_dout) {{",
        *(
            f"    {L} {D.type_name(dt)} tile_{n}[{TILE}][{TILE + 1}];"
            for n, dt, st in zip(names, dtypes, staged)
            if st
        ),
        f"    long g = {D.group_id}, lid = {D.local_id};",
        "    long per = tiles_r * tiles_c, b = g / per, rest = g - b * per;",
        "    long tr = rest / tiles_c, tc = rest - tr * tiles_c;",
        f"    long lx = lid % {TILE}, ly = lid / {TILE};",
        f"    for (long k = ly; k < {TILE}; k += {TILE_ROWS}) {{",
        f"        long r = tr * {TILE} + lx, c = tc * {TILE} + k;",
        "        if (r < R && c < C) {",
        *(
            f"            tile_{n}[k][lx] = {load(n, dt)};"
            for n, dt, st in zip(names, dtypes, staged)
            if st
        ),
        "        }",
        "    }",
        f"    {D.local_barrier};",
        f"    {G} {t_out} *po = ({G} {t_out} *)(dout + o_dout) + b * R * C;",
        f"    for (long k = ly; k < {TILE}; k += {TILE_ROWS}) {{",
        f"        long r = tr * {TILE} + k, c = tc * {TILE} + lx;",
        "        if (r < R && c < C)",
        "            po[r * C + c] = tj_f("
        + ", ".join(
            f"tile_{n}[lx][k]" if st else load(n, dt) for n, dt, st in zip(names, dtypes, staged)
        )
        + ");",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def staged_operands(plan: ElemwisePlan, values: list[Any], out: Any) -> tuple[bool, ...] | None:
    """Which inputs ``tj_tiled`` stages (their fast axis is the row), or None where the
    map does not take tiles: not the groups schedule, the output not a C-contiguous 2-d
    or 3-d array, or no input read across its fast axis."""
    t = plan.target
    if out.ndim not in (2, 3) or out.shape[-1] < 2 or out.shape[-2] < 2:
        return None
    # (in place, the output is the destroyed input: C-contiguous, so never staged, and
    # each element read and written by one work-item)
    if not t.dialect.local_qualifier or not is_c_contiguous(out):
        return None
    staged = []
    for value, one in zip(values, plan.single):
        item = value.dtype.itemsize
        across = (
            not one
            and value.shape[-2:] == out.shape[-2:]
            and value.strides[-2] == item
            and value.strides[-1] != item
        )
        staged.append(across)
    if not any(staged):
        return None

    def kernels() -> list[Any]:  # (rendered only where the groups shape is wanted)
        return [t.runtime().kernel(tiled_source(plan, tuple(staged)), "tj_tiled")]

    return tuple(staged) if uses_groups(t, out.shape[-2], kernels) else None


def launch_tiled(plan: ElemwisePlan, values: list[Any], out: Any, staged: tuple[bool, ...]) -> None:
    rt = plan.target.runtime()
    kernel = rt.kernel(tiled_source(plan, staged), "tj_tiled")
    batch = out.shape[0] if out.ndim == 3 else 1
    rows, cols = out.shape[-2:]
    tiles_r, tiles_c = -(-rows // TILE), -(-cols // TILE)
    args = [I64(rows), I64(cols), I64(tiles_r), I64(tiles_c)]
    for value in values:
        steps = broadcast_strides(value, out.shape)
        if out.ndim == 2:
            steps.insert(0, 0)  # (no batch axis)
        args += [*rt.buffer_args(value), *(I64(v) for v in steps)]
    args += rt.buffer_args(out)
    rt.launch_groups(kernel, batch * tiles_r * tiles_c, GROUP_SIZE, *args)


def elemwise_factory(node: Apply, plan: ElemwisePlan) -> Any:
    where = node_label(node)
    rt = plan.target.runtime()
    out_dtype = np.dtype(plan.out_dtype)
    kernels = (rt.kernel(plan.source, "tj_contig"), rt.kernel(plan.source, "tj_strided"))

    def run(inputs: list, output_storage: list) -> None:
        values = [inputs[i] for i in plan.variable]
        shape = broadcast_shape([v.shape for v in inputs], where)
        for var, value in zip(node.inputs, inputs):
            if 1 in value.shape:
                check_runtime_broadcast(node, var, value.shape, shape)
        if plan.inplace is not None:
            out = inputs[plan.inplace]
            if out.shape != shape:
                raise ValueError(f"{where}: in place into shape {out.shape}, result {shape}")
        else:
            out = reusable(plan.target, output_storage[0][0], shape, out_dtype)
            if out is None:
                out = rt.empty(shape, out_dtype)
        launch_map(plan, values, out, where, kernels)
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- copies
_COPY_PLANS: dict[tuple[Target, str, str, int], ElemwisePlan] = {}


def cast_plan(t: Target, in_dtype: str, out_dtype: str, ndim: int) -> ElemwisePlan:
    """The map ``out = (out_dtype) x`` for arrays of ``ndim`` dimensions."""
    from tensorjit.tensor.scalar import Cast

    key = (t, in_dtype, out_dtype, ndim)
    plan = _COPY_PLANS.get(key)
    if plan is None:
        source = kernel_source(t, Cast(out_dtype), [in_dtype], out_dtype, ["full"], {}, None, ndim)
        plan = _COPY_PLANS[key] = ElemwisePlan(t, source, (0,), (False,), None, out_dtype, ndim)
    return plan


def copy_into(t: Target, out: Any, value: Any) -> None:
    """Write ``value`` (any strides, broadcast to ``out``'s shape) into ``out``, casting
    (a transposing copy through tiles where the groups schedule applies)."""
    from tensorjit.plugins.device_kernels.transpose import transpose_into, transposing

    if transposing(t, out, value):
        transpose_into(t, out, value)
        return
    plan = cast_plan(t, value.dtype.name, out.dtype.name, out.ndim)
    launch_map(plan, [value], out, "copy")


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.elemwise import Elemwise

    return [
        KernelSpec(
            t.kernel_name("elemwise"),
            t.backend,
            (Elemwise,),
            elemwise_factory,
            plan=partial(elemwise_plan, t),
            plugin=t.plugin,
            launches_only=True,
        )
    ]
