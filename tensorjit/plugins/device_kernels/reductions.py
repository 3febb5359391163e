"""Reductions on a device: ``Reduce`` (sum, prod, max, min, all, any) over any
set of axes, and ``Argmax`` (argmax, argmin) over one axis, several or all.

The input is seen as (kept elements) x (reduced elements) through its byte strides, so
any layout (transposed, sliced, negatively strided, broadcast with stride 0) is read in
place. Axes of length 1 are dropped and neighbours that step like one axis are merged
(``collapse``), so a contiguous reduction is one long run. A unit of work reduces one
segment of the reduced elements of one output:

- many outputs: one segment per output, a chunk of outputs per work-item (on a CPU a
  few work-items per compute unit; on a GPU one output per work-item);
- few outputs and many reduced elements: the reduced range is split into segments
  reduced in parallel into partial results (``tj_reduce_part``), then ``tj_combine``
  folds each output's partials in segment order: deterministic, no atomics;
- the groups schedule (``config.device_schedule``, the default on GPUs), for reductions
  along rows: a work-group per output segment, its items striding through the segment
  and folding by a fixed tree in local memory (groups.py).

Within a segment the reduced index runs like an odometer: the innermost reduced axis as
a strided run (four independent accumulators, a typed pointer when contiguous), carries
into the outer reduced axes. Sums of float32 accumulate in double where the device has
fp64; signed integer sums and products accumulate unsigned (wrapping like NumPy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from math import prod
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cstyle import reductions
from tensorjit.plugins.device_kernels.arrays import byte_offset
from tensorjit.plugins.device_kernels.dialect import DeviceDialect
from tensorjit.plugins.device_kernels.elementwise import device_can_run
from tensorjit.plugins.device_kernels.groups import group_fold, group_fold_pair
from tensorjit.plugins.device_kernels.target import DeviceRuntime, Target, node_label, tensor_type
from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE, uses_groups

if TYPE_CHECKING:
    from tensorjit.tensor.math import Argmax

I64 = np.int64
UNROLL = 8  # independent accumulators of a run (latency hiding, vectorisable)

# A dimension of the (kept x reduced) view: its length and its byte stride per operand.
Dim = tuple[int, tuple[int, ...]]


# ---------------------------------------------------------------- layouts
def collapse(dims: list[Dim]) -> list[Dim]:
    """``dims`` (outer first) without length-1 axes, neighbours merged where every
    operand steps over them like over one axis."""
    out: list[Dim] = []
    for n, strides in dims:
        if n == 1:
            continue
        if out:
            pn, ps = out[-1]
            if all(p == s * n for p, s in zip(ps, strides)):
                out[-1] = (pn * n, strides)
                continue
        out.append((n, strides))
    return out


def split_dims(
    shape: tuple[int, ...],
    strides: list[tuple[int, ...]],
    reduced: tuple[int, ...],
    reorder: bool,
) -> tuple[list[Dim], list[Dim], list[int]]:
    """(kept dims, reduced dims, byte offset corrections) of operands of ``shape``
    with per-operand ``strides``. With ``reorder`` (the reduction's order does not
    matter) the reduced axes are sorted by decreasing stride of operand 0 and negative
    strides flipped (the offset moves to the other end), so runs go forward in memory."""
    ops = len(strides)
    shift = [0] * ops
    kept = [(shape[a], tuple(s[a] for s in strides)) for a in range(len(shape)) if a not in reduced]
    red = [(shape[a], tuple(s[a] for s in strides)) for a in reduced]
    if reorder:
        flipped = []
        for n, st in red:
            if st[0] < 0:
                for k in range(ops):
                    shift[k] += (n - 1) * st[k]
                st = tuple(-s for s in st)
            flipped.append((n, st))
        # broadcast (stride 0) axes outermost, then the longest steps: the innermost
        # run is the densest one
        red = sorted(flipped, key=lambda d: (d[1][0] != 0, -abs(d[1][0])))
    return collapse(kept), collapse(red), shift


# ---------------------------------------------------------------- work split
CPU_ITEMS_PER_UNIT = 4
GPU_ITEMS_PER_UNIT = 256
CPU_MIN_SEGMENT = 1 << 19  # a second launch (~75 us on PoCL) must pay for itself
GPU_MIN_SEGMENT = 1024
MAX_SEGMENTS = 1024


def _wanted_items(rt: DeviceRuntime) -> int:
    per_unit = CPU_ITEMS_PER_UNIT if rt.is_cpu else GPU_ITEMS_PER_UNIT
    return rt.compute_units * per_unit


def segments(rt: DeviceRuntime, outputs: int, reduced: int) -> int:
    """How many segments each output's reduced range is split into."""
    wanted = _wanted_items(rt)
    if outputs >= wanted or reduced == 0:
        return 1
    least = CPU_MIN_SEGMENT if rt.is_cpu else GPU_MIN_SEGMENT
    return int(max(1, min(-(-wanted // outputs), reduced // least, MAX_SEGMENTS)))


def units_per_item(rt: DeviceRuntime, units: int) -> int:
    """Units of work (an output's segment) per work-item."""
    chosen = rt.work_per_item
    if chosen != "auto":
        return max(int(chosen), 1)
    if rt.is_cpu:
        return max(1, -(-units // _wanted_items(rt)))
    return 1


# ---------------------------------------------------------------- kernel pieces
def _decompose(var: str, dims: int, prefix: str, base: str, indent: str) -> list[str]:
    """C lines adding to ``base`` the byte offset of flat index ``var`` over ``dims``
    axes named ``{prefix}`` (lengths ``n_{prefix}a``, strides ``s_{prefix}a``)."""
    if dims == 0:
        return []
    lines = [f"{indent}long r_{prefix} = {var};"]
    for a in reversed(range(dims)):
        lines.append(f"{indent}{base} += (r_{prefix} % n_{prefix}{a}) * s_{prefix}{a};")
        if a:
            lines.append(f"{indent}r_{prefix} /= n_{prefix}{a};")
    return lines


def _odometer(dr: int, run: str, indent: str) -> list[str]:
    """C lines walking the reduced flat range [k, k_end) from byte offset ``off``: a
    strided run along the innermost reduced axis, then carries into the outer axes.
    ``run`` is the C statement consuming ``len`` elements at ``x + off + il * s_r{last}``
    (``k`` is the flat index of the first)."""
    last = dr - 1
    lines = [f"{indent}long q = k;"]
    lines.append(f"{indent}long il = q % n_r{last}; q /= n_r{last};")
    for a in reversed(range(last)):
        lines.append(f"{indent}long i{a} = q % n_r{a}; q /= n_r{a}; off += i{a} * s_r{a};")
    lines += [
        f"{indent}for (;;) {{",
        f"{indent}    long len = min(n_r{last} - il, k_end - k);",
        f"{indent}    {run}",
        f"{indent}    k += len;",
        f"{indent}    if (k >= k_end) break;",
        f"{indent}    il = 0;",
    ]
    inner = indent + "    "
    for a in reversed(range(last)):
        lines.append(f"{inner}i{a}++; off += s_r{a};")
        if a:
            lines.append(f"{inner}if (i{a} == n_r{a}) {{ off -= i{a} * s_r{a}; i{a} = 0;")
            inner += "    "
    lines += [f"{indent}    " + "}" * max(last - 1, 0), f"{indent}}}"]
    return lines


def _params(dk: int, dr: int) -> tuple[str, str]:
    """(lengths, strides) parameter lists of a single-operand (kept x reduced) view."""
    lengths = "".join(f", long n_k{a}" for a in range(dk))
    lengths += "".join(f", long n_r{a}" for a in range(dr))
    strides = "".join(f", long s_k{a}" for a in range(dk))
    strides += "".join(f", long s_r{a}" for a in range(dr))
    return lengths, strides


def _unit_loop(
    D: DeviceDialect,
    dk: int,
    dr: int,
    name: str,
    dst_params: str,
    body: list[str],
    blocks: bool = False,
) -> list[str]:
    """A kernel running ``body`` for each unit of its chunk: output ``m`` (with
    ``blocks``: the block of ``nb`` <= TJ_B outputs from ``m`` along the innermost kept
    axis, ``BPR`` blocks per row) and segment ``seg``, with ``off`` the byte offset of
    the output's first reduced element and ``[k, k_end)`` the segment's flat reduced
    range."""
    lengths, strides = _params(dk, dr)
    if blocks:
        last = f"n_k{dk - 1}"
        head = [
            "        long blk = u / S, seg = u - blk * S, row = blk / BPR;",
            f"        long c0 = (blk - row * BPR) * TJ_B, nb = min((long)TJ_B, {last} - c0);",
            f"        long m = row * {last} + c0;",
        ]
    else:
        head = ["        long m = u / S, seg = u - m * S;"]
    extra = ", long BPR" if blocks else ""
    return [
        f"{D.kernel_qualifier} void {name}(long units, long chunk, long S, long K{extra}{lengths},",
        f"        const {D.global_qualifier} char *x, long ox{strides}, {dst_params}) {{",
        f"    long u = {D.global_id} * chunk, u_end = min(u + chunk, units);",
        "    for (; u < u_end; u++) {",
        *head,
        "        long off = ox;",
        *_decompose("m", dk, "k", "off", "        "),
        "        long k = seg * K / S, k_end = (seg + 1) * K / S;",
        *body,
        "    }",
        "}",
    ]


# ---------------------------------------------------------------- Reduce
@dataclass(frozen=True)
class ReducePlan:
    target: Target
    kind: str
    axis: tuple[int, ...]
    in_dtype: str
    out_dtype: str
    acc_dtype: str


def _identity(D: DeviceDialect, kind: str, dtype: str) -> str:
    """Where a work-item's partial result starts: the kind's neutral element, and for max
    and min (which have none) the type's extreme, which any element replaces."""
    t = D.type_name(dtype)
    neutral = reductions.neutral(kind)
    if neutral is not None:
        return f"({t}){neutral}"
    if dtype in ("float32", "float64"):
        return ("-" if kind == "max" else "") + "INFINITY"
    if dtype == "bool":
        return "(uchar)0" if kind == "max" else "(uchar)1"
    info = np.iinfo(dtype)  # a literal, not a limits.h macro: each C names them its way
    return D.literal(np.asarray(info.min if kind == "max" else info.max, dtype=dtype))


def _load_expr(plan: ReducePlan) -> str:
    """C expression turning an input element ``v`` into an accumulator."""
    D = plan.target.dialect
    return reductions.term(plan.kind, "v", plan.in_dtype, plan.out_dtype, plan.acc_dtype, D.convert)


def _run_function(D: DeviceDialect, ident: str) -> list[str]:
    """``tj_run``: fold ``len`` elements from ``p`` (byte stride ``s``) into ``a0``."""
    g, fn = D.global_qualifier, D.function_qualifier
    accs = [f"a{i}" for i in range(UNROLL)]
    others = ", ".join(f"{a} = {ident}" for a in accs[1:])

    def step(load: str) -> str:
        return " ".join(
            f"{a} = tj_op({a}, tj_load({load.format(j=f'j + {i}')}));" for i, a in enumerate(accs)
        )

    strided = f"*(const {g} TIN *)(p + ({{j}}) * s)"
    total = accs[0]
    for a in accs[1:]:
        total = f"tj_op({total}, {a})"
    return [
        f"{fn} ACC tj_run(const {g} char *p, long len, long s, ACC a0) {{",
        f"    ACC {others};",
        "    long j = 0;",
        "    if (s == (long)sizeof(TIN)) {",
        f"        const {g} TIN *q = (const {g} TIN *)p;",
        f"        for (; j + {UNROLL} <= len; j += {UNROLL}) {{ {step('q[{j}]')} }}",
        "        for (; j < len; j++) a0 = tj_op(a0, tj_load(q[j]));",
        "    } else {",
        f"        for (; j + {UNROLL} <= len; j += {UNROLL}) {{ {step(strided)} }}",
        f"        for (; j < len; j++) a0 = tj_op(a0, tj_load({strided.format(j='j')}));",
        "    }",
        f"    return {total};",
        "}",
    ]


BLOCK = 16  # outputs per unit of the block kernels (TJ_B)


def _dst(D: DeviceDialect) -> str:
    return f"{D.global_qualifier} char *d, long od"


def _block_kernels(D: DeviceDialect, dk: int, dr: int, ident: str) -> list[str]:
    """``tj_block_out``/``tj_block_part``: a unit reduces a block of up to TJ_B outputs
    that neighbour along the innermost kept axis, stepping through the reduced elements
    once for all of them (a reduction over outer axes then reads whole cache lines, as
    NumPy's does, instead of one column after another)."""
    g, fn = D.global_qualifier, D.function_qualifier
    step = f"acc[b] = tj_op(acc[b], tj_load(*(const {g} TIN *)(p + b * s)))"
    lines = [
        f"{fn} void tj_block(const {g} char *p, long s, long nb, ACC *acc) {{",
        "    if (nb == TJ_B) {",
        "        #pragma unroll",
        f"        for (int b = 0; b < TJ_B; b++) {step};",
        "    } else {",
        f"        for (int b = 0; b < nb; b++) {step};",
        "    }",
        "}",
    ]
    last = dr - 1
    run = (
        f"for (long j = 0; j < len; j++) "
        f"tj_block(x + off + (il + j) * s_r{last}, s_k{dk - 1}, nb, acc);"
    )
    body = [
        "        ACC acc[TJ_B];",
        f"        for (int b = 0; b < TJ_B; b++) acc[b] = {ident};",
        "        if (k < k_end) {",
        *_odometer(dr, run, "            "),
        "        }",
        "        for (long b = 0; b < nb; b++) dst[(m + b) * S + seg] = ({T})acc[b];",
    ]
    for name, t in (("tj_block_out", "TOUT"), ("tj_block_part", "ACC")):
        head = [f"        {g} {t} *dst = ({g} {t} *)(d + od);"]
        code = [*head, *(b.replace("{T}", t) for b in body)]
        lines += _unit_loop(D, dk, dr, name, _dst(D), code, blocks=True)
    return lines


def _group_kernels(D: DeviceDialect, dk: int, dr: int, ident: str) -> list[str]:
    """``tj_reduce_group_out``/``_part``: the groups schedule, a work-group per unit
    (an output's segment ``[k, k_end)``); its items stride through the segment's flat
    reduced indices (each element's offset by division), then fold by a tree."""
    g = D.global_qualifier
    lengths, strides = _params(dk, dr)
    lines = []
    for name, t in (("tj_reduce_group_out", "TOUT"), ("tj_reduce_group_part", "ACC")):
        lines += [
            f"{D.kernel_qualifier} void {name}(long units, long chunk, long S, long K{lengths},",
            f"        const {g} char *x, long ox{strides}, {_dst(D)}) {{",
            f"    {D.local_qualifier} ACC tj_acc[TJ_GROUP];",
            f"    long u = {D.group_id}, lid = {D.local_id};",
            "    long m = u / S, seg = u - m * S;",
            "    long off = ox;",
            *_decompose("m", dk, "k", "off", "    "),
            f"    ACC acc = {ident};",
            "    for (long k = seg * K / S + lid, k_end = (seg + 1) * K / S; k < k_end;"
            " k += TJ_GROUP) {",
            "        long eo = off;",
            *_decompose("k", dr, "r", "eo", "        "),
            f"        acc = tj_op(acc, tj_load(*(const {g} TIN *)(x + eo)));",
            "    }",
            *group_fold(D, "tj_acc", "ACC", "acc", "tj_op(a, b)"),
            f"    if (lid == 0) (({g} {t} *)(d + od))[u] = ({t})acc;",
            "}",
        ]
    return lines


@cache
def reduce_source(plan: ReducePlan, dk: int, dr: int) -> str:
    """The program of ``plan`` over ``dk`` kept and ``dr`` (>= 1) reduced axes."""
    t = plan.target
    D, g, fn = t.dialect, t.dialect.global_qualifier, t.dialect.function_qualifier
    tin, acc, tout = (D.type_name(d) for d in (plan.in_dtype, plan.acc_dtype, plan.out_dtype))
    ident = _identity(D, plan.kind, plan.acc_dtype)
    combine = reductions.combine(plan.kind, plan.acc_dtype)
    lines = [
        t.preamble({plan.in_dtype, plan.acc_dtype, plan.out_dtype}),
        f"#define TIN {tin}",
        f"#define ACC {acc}",
        f"#define TOUT {tout}",
        f"#define TJ_B {BLOCK}",
        f"{fn} ACC tj_op(ACC a, ACC b) {{ return {combine}; }}",
        f"{fn} ACC tj_load(TIN v) {{ return {_load_expr(plan)}; }}",
        *_run_function(D, ident),
    ]
    body = [
        f"        ACC acc = {ident};",
        "        if (k < k_end) {",
        *_odometer(
            dr, f"acc = tj_run(x + off + il * s_r{dr - 1}, len, s_r{dr - 1}, acc);", "            "
        ),
        "        }",
        "        dst[u] = ({T})acc;",
    ]
    for name, tt in (("tj_reduce_out", "TOUT"), ("tj_reduce_part", "ACC")):
        head = [f"        {g} {tt} *dst = ({g} {tt} *)(d + od);"]
        code = [*head, *(b.replace("{T}", tt) for b in body)]
        lines += _unit_loop(D, dk, dr, name, _dst(D), code)
    if dk:
        lines += _block_kernels(D, dk, dr, ident)
    if D.local_qualifier:
        lines.append(f"#define TJ_GROUP {GROUP_SIZE}")
        lines += _group_kernels(D, dk, dr, ident)
    lines += [
        f"{D.kernel_qualifier} void tj_combine(long M, long S, const {g} char *pp, long op,",
        f"                         {g} char *d, long od) {{",
        f"    long m = {D.global_id};",
        "    if (m >= M) return;",
        f"    const {g} ACC *p = (const {g} ACC *)(pp + op) + m * S;",
        "    ACC acc = p[0];",
        "    for (long s = 1; s < S; s++) acc = tj_op(acc, p[s]);",
        f"    (({g} TOUT *)(d + od))[m] = (TOUT)acc;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _dtypes_supported(t: Target, *dtypes: str) -> bool:
    return all(d in t.dialect.type_names for d in dtypes)


def reduce_plan(t: Target, node: Apply) -> ReducePlan | None:
    from tensorjit.tensor.math import Reduce

    if type(node.op) is not Reduce or not device_can_run(t, node):
        return None  # a subclass (MappedReduce's map) is not what these kernels compute
    op = node.op
    in_dtype, out_dtype = tensor_type(node.inputs[0]).dtype, tensor_type(node.outputs[0]).dtype
    if not _dtypes_supported(t, in_dtype, out_dtype):
        return None  # complex, float16: the host runs them
    D, fp64 = t.dialect, t.runtime().fp64
    acc = reductions.accumulator_dtype(op.kind, in_dtype, out_dtype, fp64, D.signed_wraps)
    return ReducePlan(t, op.kind, tuple(op.axis), in_dtype, out_dtype, acc)


def _view_args(kept: list[Dim], red: list[Dim]) -> tuple[list, list]:
    lengths = [I64(n) for n, _ in (*kept, *red)]
    strides = [I64(st[0]) for _, st in (*kept, *red)]
    return lengths, strides


def _layout(x: Any, reduced: tuple[int, ...], reorder: bool) -> tuple[list, list, int, int]:
    """(kept dims, reduced dims (at least one), input byte offset, reduced count)."""
    kept, red, shift = split_dims(x.shape, [x.strides], reduced, reorder)
    count = prod(x.shape[a] for a in reduced)
    if count == 0 or not red:
        red = [(1, (0,))]  # one step (a 0-d or length-1 range) or none (count 0)
    return kept, red, byte_offset(x) + shift[0], count


def _launch_units(
    rt: DeviceRuntime,
    kernel: Any,
    units: int,
    S: int,
    K: int,
    x: Any,
    layout: tuple,
    dst: list,
    extra: tuple = (),
    grouped: bool = False,
) -> None:
    """Run a unit kernel over ``units`` units (outputs or blocks, by ``S`` segments):
    chunks of units per work-item, or (``grouped``) a work-group per unit."""
    kept, red, offset, _ = layout
    lengths, strides = _view_args(kept, red)
    chunk = 1 if grouped else units_per_item(rt, units)
    data = rt.buffer_args(x)[0] if x.size else dst[0]  # never read when empty
    args = [I64(units), I64(chunk), I64(S), I64(K), *extra, *lengths, data, I64(offset)]
    args += [*strides, *dst]
    if grouped:
        rt.launch_groups(kernel, units, GROUP_SIZE, *args)
        return
    items = -(-units // chunk)
    if rt.is_cpu:
        # One work-item per group: PoCL spreads groups (not the items of one group)
        # over its cores, and a unit is a long loop already.
        rt.launch_groups(kernel, items, 1, *args)
    else:
        rt.launch(kernel, items, *args)


def _use_blocks(rt: DeviceRuntime, kept: list[Dim], red: list[Dim]) -> bool:
    """Whether neighbouring outputs are denser in memory than the reduced run (a sum
    over rows of a C matrix): then a CPU reduces blocks of outputs at once. A GPU
    gets the same access pattern from neighbouring work-items."""
    if not rt.is_cpu or not kept or kept[-1][0] < 2:
        return False
    return abs(kept[-1][1][0]) < abs(red[-1][1][0])


def _use_groups(
    t: Target, kept: list[Dim], red: list[Dim], count: int, kernels: Callable[[], list[Any]]
) -> bool:
    """The groups schedule for reductions along rows (the reduced run at least as
    dense as neighbouring outputs, or a single output): a GPU's items then read
    neighbouring elements of a row together. Reductions over outer axes keep one item
    per output, whose neighbours read neighbouring outputs: coalesced already."""
    if not uses_groups(t, count, kernels):
        return False
    return not kept or abs(red[-1][1][0]) <= abs(kept[-1][1][0])


def reduce_value(plan: ReducePlan, x: Any, where: str) -> Any:
    """The reduction of device array ``x`` as a new device array."""
    rt = plan.target.runtime()
    out_shape = tuple(n for a, n in enumerate(x.shape) if a not in plan.axis)
    out = rt.empty(out_shape, plan.out_dtype)
    outputs = prod(out_shape)
    if plan.kind in reductions.EXTREMES and prod(x.shape[a] for a in plan.axis) == 0:
        ufunc = "maximum" if plan.kind == "max" else "minimum"
        raise ValueError(
            f"{where}: zero-size array to reduction operation {ufunc} which has no identity "
            f"(input shape {x.shape}, axis {plan.axis})"
        )
    if outputs == 0:
        return out
    layout = _layout(x, plan.axis, reorder=True)
    kept, red, _, count = layout
    source = reduce_source(plan, len(kept), len(red))

    def grouped() -> list[Any]:
        return [rt.kernel(source, f"tj_reduce_group_{k}") for k in ("out", "part")]

    if _use_groups(plan.target, kept, red, count, grouped):
        S = segments(rt, outputs, count)
        # (the partials held in a name: a runtime's buffer_args may be a bare pointer,
        # and a freed pool block could be handed out before the kernels run)
        partials = out if S == 1 else rt.empty((outputs * S,), plan.acc_dtype)
        dst = rt.buffer_args(partials)
        kernel = rt.kernel(source, "tj_reduce_group_out" if S == 1 else "tj_reduce_group_part")
        _launch_units(rt, kernel, outputs * S, S, count, x, layout, dst, grouped=True)
        if S > 1:
            combine = rt.kernel(source, "tj_combine")
            rt.launch(combine, outputs, I64(outputs), I64(S), *dst, *rt.buffer_args(out))
        return out
    extra: tuple[np.int64, ...]
    if _use_blocks(rt, kept, red):
        per_row = -(-kept[-1][0] // BLOCK)
        units, name, extra = outputs // kept[-1][0] * per_row, "tj_block", (I64(per_row),)
    else:
        units, name, extra = outputs, "tj_reduce", ()
    S = segments(rt, units, count)
    if S == 1:
        kernel = rt.kernel(source, f"{name}_out")
        dst = rt.buffer_args(out)
        _launch_units(rt, kernel, units, 1, count, x, layout, dst, extra)
        return out
    part = rt.empty((outputs * S,), plan.acc_dtype)
    kernel = rt.kernel(source, f"{name}_part")
    dst = rt.buffer_args(part)
    _launch_units(rt, kernel, units * S, S, count, x, layout, dst, extra)
    combine = rt.kernel(source, "tj_combine")
    rt.launch(combine, outputs, I64(outputs), I64(S), *dst, *rt.buffer_args(out))
    return out


def reduce_factory(node: Apply, plan: ReducePlan) -> Any:
    where = node_label(node)

    def run(inputs: list, output_storage: list) -> None:
        output_storage[0][0] = reduce_value(plan, inputs[0], where)

    return run


# ---------------------------------------------------------------- Argmax
@dataclass(frozen=True)
class ArgPlan:
    target: Target
    kind: str  # "argmax" or "argmin"
    reduced: tuple[int, ...]
    in_dtype: str


def _arg_functions(D: DeviceDialect, kind: str, dtype: str) -> list[str]:
    cmp = ">" if kind == "argmax" else "<"
    # Strictly better, or the first NaN (NumPy's argmax/argmin stop at the first NaN).
    better = f"v {cmp} b"
    if dtype in ("float32", "float64"):
        better += " || (v != v && b == b)"
    g, fn = D.global_qualifier, D.function_qualifier
    load = f"*(const {g} TIN *)(p + j * s)"
    step = "if (*bi < 0 || tj_better(v, *bv)) {{ *bv = v; *bi = k + j; }}"
    return [
        f"{fn} int tj_better(TIN v, TIN b) {{ return {better}; }}",
        f"{fn} void tj_arg_run(const {g} char *p, long len, long s, long k,",
        "                       TIN *bv, long *bi) {",
        "    if (s == (long)sizeof(TIN)) {",
        f"        const {g} TIN *q = (const {g} TIN *)p;",
        "        for (long j = 0; j < len; j++) { TIN v = q[j]; " + step.format() + " }",
        "    } else {",
        f"        for (long j = 0; j < len; j++) {{ TIN v = {load}; " + step.format() + " }",
        "    }",
        "}",
    ]


def _arg_group_kernels(D: DeviceDialect, dk: int, dr: int) -> list[str]:
    """``tj_arg_group_out``/``_part``: the groups schedule of argmax/argmin (see
    ``_group_kernels``). Each item keeps the first extreme of its strided share; the
    tree takes the better of two, the lower index where neither is better (ties and
    NaNs), so the result is NumPy's first extreme."""
    g = D.global_qualifier
    lengths, strides = _params(dk, dr)
    take_b = "bi >= 0 && (ai < 0 || tj_better(bv, av) || (!tj_better(av, bv) && bi < ai))"
    outs = {
        "tj_arg_group_out": (f"{g} char *d, long od", [f"(({g} long *)(d + od))[u] = bi;"]),
        "tj_arg_group_part": (
            f"{g} char *dv, long ov, {g} char *d, long od",
            [f"(({g} TIN *)(dv + ov))[u] = bv;", f"(({g} long *)(d + od))[u] = bi;"],
        ),
    }
    lines = [f"#define TJ_GROUP {GROUP_SIZE}"]
    for name, (params, stores) in outs.items():
        lines += [
            f"{D.kernel_qualifier} void {name}(long units, long chunk, long S, long K{lengths},",
            f"        const {g} char *x, long ox{strides}, {params}) {{",
            f"    {D.local_qualifier} TIN tj_v[TJ_GROUP];",
            f"    {D.local_qualifier} long tj_i[TJ_GROUP];",
            f"    long u = {D.group_id}, lid = {D.local_id};",
            "    long m = u / S, seg = u - m * S;",
            "    long off = ox;",
            *_decompose("m", dk, "k", "off", "    "),
            "    TIN bv = 0; long bi = -1;",
            "    for (long k = seg * K / S + lid, k_end = (seg + 1) * K / S; k < k_end;"
            " k += TJ_GROUP) {",
            "        long eo = off;",
            *_decompose("k", dr, "r", "eo", "        "),
            f"        TIN v = *(const {g} TIN *)(x + eo);",
            "        if (bi < 0 || tj_better(v, bv)) { bv = v; bi = k; }",
            "    }",
            *group_fold_pair(D, ("tj_v", "tj_i"), ("TIN", "long"), ("bv", "bi"), take_b),
            "    if (lid == 0) { " + " ".join(stores) + " }",
            "}",
        ]
    return lines


@cache
def arg_source(plan: ArgPlan, dk: int, dr: int) -> str:
    """The program of ``plan`` over ``dk`` kept and ``dr`` (>= 1) reduced axes: the
    flat index (C order over the reduced axes, as NumPy's) of the first extreme."""
    last = dr - 1
    run = f"tj_arg_run(x + off + il * s_r{last}, len, s_r{last}, k, &bv, &bi);"
    body = ["        TIN bv = 0; long bi = -1;", "        if (k < k_end) {"]
    body += [*_odometer(dr, run, "            "), "        }"]
    t = plan.target
    D, g = t.dialect, t.dialect.global_qualifier
    lines = [
        t.preamble({plan.in_dtype}),
        f"#define TIN {D.type_name(plan.in_dtype)}",
        *_arg_functions(D, plan.kind, plan.in_dtype),
    ]
    out = [f"        (({g} long *)(d + od))[u] = bi;"]
    lines += _unit_loop(D, dk, dr, "tj_arg_out", _dst(D), [*body, *out])
    part = [
        f"        (({g} TIN *)(dv + ov))[u] = bv;",
        f"        (({g} long *)(d + od))[u] = bi;",
    ]
    params = f"{g} char *dv, long ov, {g} char *d, long od"
    lines += _unit_loop(D, dk, dr, "tj_arg_part", params, [*body, *part])
    if D.local_qualifier:
        lines += _arg_group_kernels(D, dk, dr)
    lines += [
        f"{D.kernel_qualifier} void tj_arg_combine(long M, long S, const {g} char *pv, long ov,",
        f"        const {g} char *pi, long oi, {g} char *d, long od) {{",
        f"    long m = {D.global_id};",
        "    if (m >= M) return;",
        f"    const {g} TIN *v = (const {g} TIN *)(pv + ov) + m * S;",
        f"    const {g} long *i = (const {g} long *)(pi + oi) + m * S;",
        "    TIN bv = v[0]; long bi = i[0];",
        "    for (long s = 1; s < S; s++) if (tj_better(v[s], bv)) { bv = v[s]; bi = i[s]; }",
        f"    (({g} long *)(d + od))[m] = bi;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def arg_plan(t: Target, node: Apply) -> ArgPlan | None:
    if not device_can_run(t, node):
        return None
    op, x_type = cast("Argmax", node.op), tensor_type(node.inputs[0])
    in_dtype = x_type.dtype
    if not _dtypes_supported(t, in_dtype) or op.kind not in ("argmax", "argmin"):
        return None
    return ArgPlan(t, op.kind, op._reduced(x_type.ndim), in_dtype)


def arg_value(plan: ArgPlan, x: Any, where: str) -> Any:
    """The argmax/argmin of device array ``x`` as a new int64 device array."""
    rt = plan.target.runtime()
    out_shape = tuple(n for a, n in enumerate(x.shape) if a not in plan.reduced)
    out = rt.empty(out_shape, "int64")
    outputs = prod(out_shape)
    layout = _layout(x, plan.reduced, reorder=False)
    kept, red, _, count = layout
    if count == 0:
        raise ValueError(
            f"{where}: attempt to get {plan.kind} of an empty sequence "
            f"(input shape {x.shape}, axes {plan.reduced})"
        )
    if outputs == 0:
        return out
    source = arg_source(plan, len(kept), len(red))
    S = segments(rt, outputs, count)
    dst = rt.buffer_args(out)

    def grouped() -> list[Any]:
        return [rt.kernel(source, f"tj_arg_group_{k}") for k in ("out", "part")]

    if _use_groups(plan.target, kept, red, count, grouped):
        if S == 1:
            kernel = rt.kernel(source, "tj_arg_group_out")
            _launch_units(rt, kernel, outputs, 1, count, x, layout, dst, grouped=True)
            return out
        values = rt.empty((outputs * S,), plan.in_dtype)  # held: see reduce_value
        index = rt.empty((outputs * S,), "int64")
        part = [*rt.buffer_args(values), *rt.buffer_args(index)]
        kernel = rt.kernel(source, "tj_arg_group_part")
        _launch_units(rt, kernel, outputs * S, S, count, x, layout, part, grouped=True)
        combine = rt.kernel(source, "tj_arg_combine")
        rt.launch(combine, outputs, I64(outputs), I64(S), *part, *dst)
        return out
    if S == 1:
        _launch_units(rt, rt.kernel(source, "tj_arg_out"), outputs, 1, count, x, layout, dst)
        return out
    values = rt.empty((outputs * S,), plan.in_dtype)
    index = rt.empty((outputs * S,), "int64")
    part = [*rt.buffer_args(values), *rt.buffer_args(index)]
    _launch_units(rt, rt.kernel(source, "tj_arg_part"), outputs * S, S, count, x, layout, part)
    combine = rt.kernel(source, "tj_arg_combine")
    rt.launch(combine, outputs, I64(outputs), I64(S), *part, *dst)
    return out


def arg_factory(node: Apply, plan: ArgPlan) -> Any:
    where = node_label(node)

    def run(inputs: list, output_storage: list) -> None:
        output_storage[0][0] = arg_value(plan, inputs[0], where)

    return run


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.math import Argmax, Reduce

    return [
        KernelSpec(
            t.kernel_name("reduce"),
            t.backend,
            (Reduce,),
            reduce_factory,
            plan=partial(reduce_plan, t),
            launches_only=True,
            plugin=t.plugin,
        ),
        KernelSpec(
            t.kernel_name("argmax"),
            t.backend,
            (Argmax,),
            arg_factory,
            plan=partial(arg_plan, t),
            launches_only=True,
            plugin=t.plugin,
        ),
    ]
