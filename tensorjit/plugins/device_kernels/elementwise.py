"""Elementwise kernels (Elemwise, fused Composite, MultiOutputElemwise, casts) on a
device.

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

A MultiOutputElemwise's ``tj_f`` returns every output's element (a ``tj_fr``), stored by
the same work-item, so an output written into an input (in place) is read before it
is written. In place (``Elemwise.inplace``, MultiOutputElemwise's pairs), the destroyed
input is the output and is written through its own strides. Constant inputs of one
element are inlined as literals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant
from tensorjit.core.memory.transfer_op import before_transfers
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cstyle import Unsupported
from tensorjit.plugins.cstyle.elementwise import (
    element_function,
    multi_element_function,
    typed_operands,
)
from tensorjit.plugins.device_kernels.arrays import is_c_contiguous, reusable
from tensorjit.plugins.device_kernels.target import Target, node_label, tensor_type
from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE, uses_groups, work_items
from tensorjit.tensor.elemwise import check_runtime_broadcast

if TYPE_CHECKING:
    from tensorjit.tensor.elemwise import Elemwise
    from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

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
    into: tuple[int | None, ...]  # per output: the input it is written into, or None
    out_dtypes: tuple[str, ...]
    ndim: int
    #: what renders ``tj_f`` again (tiled_source): scalar op, input dtypes, kinds,
    #: inlined constants (by input index)
    renders: tuple = field(default=(), compare=False, hash=False)


def kernel_source(
    t: Target,
    scalar_op: Any,
    in_dtypes: list[str],
    out_dtypes: Sequence[str],
    kinds: list[str],
    consts: dict[int, np.ndarray],
    into: Sequence[int | None],
    ndim: int,
) -> str:
    """The program of one elementwise map (see the module docstring): one output per
    dtype of ``out_dtypes``, each written into the input ``into`` names, or its own
    array (None)."""
    D = t.dialect
    if len(out_dtypes) == 1:
        function, _ = element_function(D, scalar_op, in_dtypes, out_dtypes[0], kinds, consts)
    else:
        function, _ = multi_element_function(D, scalar_op, in_dtypes, out_dtypes, kinds, consts)
    variable = [i for i, k in enumerate(kinds) if k != "const"]
    ops = [(f"d{i}", in_dtypes[i], kinds[i], ()) for i in variable]
    outs = []
    for k, (dtype, i) in enumerate(zip(out_dtypes, into, strict=True)):
        if i is None:
            ops.append((f"dout{k}", dtype, "full", ()))
        outs.append(f"dout{k}" if i is None else f"d{i}")

    def store(load: dict[str, str], at: Callable[[str], str]) -> str:
        """Writing one element of every output (``at``: where an operand's element is)."""
        call = "tj_f(" + ", ".join(load[f"d{i}"] for i in variable) + ")"
        if len(outs) == 1:
            return f"{at(outs[0])} = {call};"
        fields = " ".join(f"{at(name)} = tj_r.r{k};" for k, name in enumerate(outs))
        return f"{{ const tj_fr tj_r = {call}; {fields} }}"

    g = D.global_qualifier
    params = ", ".join(f"{g} char *{name}, long o_{name}" for name, *_ in ops)
    scalars = {name for name, _, kind, _ in ops if kind == "scalar"}
    in_place = any(i is not None for i in into)
    setup, load = typed_operands(
        D, ops, outs, scalars, restrict=not in_place, base=lambda n: f"({n} + o_{n})"
    )
    lines = [t.preamble({*in_dtypes, *out_dtypes}), *function]
    lines += [
        f"{D.kernel_qualifier} void tj_contig(long n, long tj_chunk, {params}) {{",
        "#define TJ_CHUNK tj_chunk",
        *setup,
        f"    {D.flat_loop.format(i='i', n='n')} {store(load('i'), lambda o: f'p_{o}[i]')}",
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
    types = {name: D.type_name(dt) for name, dt, *_ in ops}
    loads = {name: f"*(const {g} {types[name]} *)({name} + b_{name})" for name in types}
    written = store(loads, lambda o: f"*({g} {types[o]} *)({o} + b_{o})")
    lines += [f"        {written}", "    }", "}"]
    return "\n".join(lines) + "\n"


def written_into(op: Elemwise | MultiOutputElemwise, nout: int) -> tuple[int | None, ...]:
    """Per output of a node of ``op``: the input it is written into (in place), or None."""
    from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

    if isinstance(op, MultiOutputElemwise):
        pairs = dict(op.inplace)
        return tuple(pairs.get(k) for k in range(nout))
    return (op.inplace,)


def elemwise_plan(t: Target, node: Apply) -> ElemwisePlan | None:
    if not device_can_run(t, node):
        return None
    op = cast("Elemwise | MultiOutputElemwise", node.op)
    into = written_into(op, len(node.outputs))
    kinds, consts = [], {}
    for i, var in enumerate(node.inputs):
        var_type = tensor_type(var)
        one = all(s == 1 for s in var_type.shape)
        value = None if i in into else inlined_constant(var)
        if value is not None and one:
            kinds.append("const")
            consts[i] = value.astype(var_type.dtype)
        elif i not in into and one:
            kinds.append("scalar")
        else:
            kinds.append("full")
    in_dtypes = [tensor_type(v).dtype for v in node.inputs]
    out_dtypes = tuple(tensor_type(v).dtype for v in node.outputs)
    ndim = tensor_type(node.outputs[0]).ndim
    try:
        source = kernel_source(t, op.scalar_op, in_dtypes, out_dtypes, kinds, consts, into, ndim)
    except Unsupported:
        return None
    variable = tuple(i for i, k in enumerate(kinds) if k != "const")
    single = tuple(kinds[i] == "scalar" for i in variable)
    renders = (op.scalar_op, in_dtypes, kinds, consts)
    return ElemwisePlan(t, source, variable, single, into, out_dtypes, ndim, renders)


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
    plan: ElemwisePlan,
    values: list[Any],
    outs: Sequence[Any],
    where: str,
    kernels: tuple | None = None,
) -> None:
    """Run the map on device ``values`` (the plan's variable inputs, in order) into
    ``outs``, one per output (a new array, or the destroyed input itself in place)."""
    rt = plan.target.runtime()
    shape = outs[0].shape
    n = math.prod(shape)
    if n == 0:
        return
    contig, strided = kernels or (
        rt.kernel(plan.source, "tj_contig"),
        rt.kernel(plan.source, "tj_strided"),
    )
    own = [out for out, i in zip(outs, plan.into, strict=True) if i is None]
    operands = [*values, *own]
    count, chunk = work_items(rt, n)
    buffers = [arg for v in operands for arg in rt.buffer_args(v)]
    single = (*plan.single, *(False for _ in own))
    if all(one or (v.shape == shape and is_c_contiguous(v)) for v, one in zip(operands, single)):
        rt.launch_chunks(contig, count, I64(n), I64(chunk), *buffers)
        return
    staged = staged_operands(plan, values, outs[0]) if plan.renders and len(outs) == 1 else None
    if staged is not None:
        launch_tiled(plan, values, outs[0], staged)
        return
    sizes = [I64(s) for s in shape]
    strides = [I64(step) for v in operands for step in broadcast_strides(v, shape)]
    rt.launch_chunks(strided, count, I64(n), I64(chunk), *sizes, *buffers, *strides)


# ---------------------------------------------------------------- tiles
@cache
def tiled_source(plan: ElemwisePlan, staged: tuple[bool, ...]) -> str:
    """``tj_tiled`` for the map of ``plan``: ``staged[k]`` for each variable input read
    through a local tile (fast axis: the row); the output C-contiguous (batch, R, C)."""
    t = plan.target
    D = t.dialect
    G, L = D.global_qualifier, D.local_qualifier
    scalar_op, in_dtypes, kinds, consts = plan.renders
    out_dtype = plan.out_dtypes[0]  # (one output: launch_map tiles no other map)
    function, _body = element_function(D, scalar_op, in_dtypes, out_dtype, kinds, consts)
    names = [f"d{i}" for i in plan.variable]
    dtypes = [in_dtypes[i] for i in plan.variable]
    params = "".join(
        f", {G} char *{n}, long o_{n}, long sb_{n}, long sr_{n}, long sc_{n}" for n in names
    )

    def load(n: str, dtype: str) -> str:
        at = f"{n} + o_{n} + b * sb_{n} + r * sr_{n} + c * sc_{n}"
        return f"*(const {G} {D.type_name(dtype)} *)({at})"

    t_out = D.type_name(out_dtype)
    lines = [t.preamble({*in_dtypes, out_dtype}), *function]
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
    out_dtypes = [np.dtype(dt) for dt in plan.out_dtypes]
    kernels = (rt.kernel(plan.source, "tj_contig"), rt.kernel(plan.source, "tj_strided"))

    def run(inputs: list, output_storage: list) -> None:
        values = [inputs[i] for i in plan.variable]
        shape = broadcast_shape([v.shape for v in inputs], where)
        for var, value in zip(node.inputs, inputs):
            if 1 in value.shape:
                check_runtime_broadcast(node, var, value.shape, shape)
        outs: list[Any] = []
        for cell, dtype, i in zip(output_storage, out_dtypes, plan.into):
            if i is not None:
                out = inputs[i]
                if out.shape != shape:
                    raise ValueError(f"{where}: in place into shape {out.shape}, result {shape}")
            else:
                out = reusable(plan.target, cell[0], shape, dtype)
                if out is None or any(out is o for o in outs):
                    out = rt.empty(shape, dtype)
            outs.append(out)
        launch_map(plan, values, outs, where, kernels)
        for cell, out in zip(output_storage, outs):
            cell[0] = out

    return run


# ---------------------------------------------------------------- copies
_COPY_PLANS: dict[tuple[Target, str, str, int], ElemwisePlan] = {}


def cast_plan(t: Target, in_dtype: str, out_dtype: str, ndim: int) -> ElemwisePlan:
    """The map ``out = (out_dtype) x`` for arrays of ``ndim`` dimensions."""
    from tensorjit.tensor.scalar import Cast

    key = (t, in_dtype, out_dtype, ndim)
    plan = _COPY_PLANS.get(key)
    if plan is None:
        cast_op = Cast(out_dtype)
        source = kernel_source(t, cast_op, [in_dtype], [out_dtype], ["full"], {}, [None], ndim)
        plan = ElemwisePlan(t, source, (0,), (False,), (None,), (out_dtype,), ndim)
        _COPY_PLANS[key] = plan
    return plan


def copy_into(t: Target, out: Any, value: Any) -> None:
    """Write ``value`` (any strides, broadcast to ``out``'s shape) into ``out``, casting
    (a transposing copy through tiles where the groups schedule applies)."""
    from tensorjit.plugins.device_kernels.transpose import transpose_into, transposing

    if transposing(t, out, value):
        transpose_into(t, out, value)
        return
    plan = cast_plan(t, value.dtype.name, out.dtype.name, out.ndim)
    launch_map(plan, [value], [out], "copy")


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.elemwise import Elemwise
    from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

    return [
        KernelSpec(
            t.kernel_name("elemwise"),
            t.backend,
            (Elemwise, MultiOutputElemwise),
            elemwise_factory,
            plan=partial(elemwise_plan, t),
            plugin=t.plugin,
            launches_only=True,
        )
    ]
