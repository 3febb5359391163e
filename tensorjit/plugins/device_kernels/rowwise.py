"""Row kernels on a device: ``Softmax`` and ``LogSoftmax`` along any axes.

As for reductions, the input and the (new, C-contiguous) output are seen as
(rows: kept elements) x (row elements: the softmax axes) through their byte strides,
length-1 axes dropped and neighbouring axes merged (``reductions.split_dims``). A
work-item handles a chunk of rows (a few chunks per compute unit on a CPU device), each
in three passes as ``Op.perform`` computes it: the row maximum (NaN wins),
the sum of ``exp(x - max)`` (accumulated in double where the device has fp64), then the
output: ``exp(x - max)`` times the reciprocal of the sum (the exponentials stored by the
second pass) or ``(x - max) - log(sum)`` (the choices every backend's rows share:
cstyle/rows.py). A row along one (merged) axis is a strided loop; rows
over several axes that do not merge find each element's offsets by division.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from math import prod
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cstyle import rows as row_semantics
from tensorjit.plugins.device_kernels.arrays import c_strides
from tensorjit.plugins.device_kernels.elementwise import device_can_run
from tensorjit.plugins.device_kernels.groups import group_fold
from tensorjit.plugins.device_kernels.reductions import Dim, split_dims, units_per_item
from tensorjit.plugins.device_kernels.target import Target, tensor_type
from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE, uses_groups

if TYPE_CHECKING:
    from tensorjit.tensor.nnet.basic import Softmax

I64 = np.int64


@dataclass(frozen=True)
class RowPlan:
    target: Target
    log: bool  # LogSoftmax (else Softmax)
    axis: tuple[int, ...]
    in_dtype: str
    out_dtype: str
    acc_dtype: str  # of the sum of exponentials


def _row_offsets(dr: int) -> list[str]:
    """C lines: ``xo``/``oo``, the byte offsets of row element ``j`` in the input and
    the output (one strided axis, or division over ``dr`` axes)."""
    if dr == 1:
        return ["long xo = j * s_r0, oo = j * t_r0;"]
    lines = ["long q = j, i, xo = 0, oo = 0;"]
    for a in reversed(range(dr)):
        lines.append(f"i = q % n_r{a}; q /= n_r{a}; xo += i * s_r{a}; oo += i * t_r{a};")
    return lines


def _loop(dr: int, body: str, start: str = "0", step: str = "1") -> str:
    """A pass over a row's elements ``start, start + step, ...`` (a work-item's share of
    the row under the groups schedule: neighbours read neighbouring elements)."""
    head = f"for (long j = {start}; j < K; j += {step}) {{ "
    return head + " ".join([*_row_offsets(dr), body]) + " }"


@cache
def row_source(plan: RowPlan, dk: int, dr: int) -> str:
    """The program of ``plan`` over ``dk`` row axes and ``dr`` (>= 1) axes in a row."""
    D, g = plan.target.dialect, plan.target.dialect.global_qualifier
    t, acc = D.type_name(plan.out_dtype), D.type_name(plan.acc_dtype)
    load = f"v = (T)*(const {g} TIN *)(xr + xo);"
    out = f"*({g} T *)(orow + oo)"

    # The second and third passes, with ``{start}``/``{step}`` left for the schedule.
    def scheduled(body: str) -> str:
        text = _loop(dr, body, "@START@", "@STEP@").replace("{", "{{").replace("}", "}}")
        return text.replace("@START@", "{start}").replace("@STEP@", "{step}")

    # (the values each row takes: cstyle/rows.py, shared with the host's row kernels)
    if plan.log:
        second = scheduled(load + " sum += (ACC)exp(v - mx);")
        value = row_semantics.log_softmax_value("v", "mx", "lse")
        third = [
            f"        T lse = {row_semantics.log_total('sum', 'T')};",
            f"        {scheduled(load + f' {out} = {value};')}",
        ]
    else:
        second = scheduled(load + f" T e = exp(v - mx); {out} = e; sum += (ACC)e;")
        third = [
            f"        T r = {row_semantics.softmax_scale('sum', 'T')};",
            f"        {scheduled(f'{out} = {out} * r;')}",
        ]
    lengths = "".join(f", long n_k{a}" for a in range(dk)) + "".join(
        f", long n_r{a}" for a in range(dr)
    )
    xs = "".join(f", long s_k{a}" for a in range(dk)) + "".join(f", long s_r{a}" for a in range(dr))
    os = "".join(f", long t_k{a}" for a in range(dk)) + "".join(f", long t_r{a}" for a in range(dr))
    decompose = []
    if dk:
        decompose.append("        long q = m;")
        for a in reversed(range(dk)):
            decompose.append(
                f"        xb += (q % n_k{a}) * s_k{a}; ob += (q % n_k{a}) * t_k{a}; q /= n_k{a};"
            )
    params = (
        f"long rows, long chunk, long K{lengths},\n"
        f"        const {g} char *x, long ox{xs}, {g} char *o, long oo0{os}"
    )
    row_start = [
        "        long xb = ox, ob = oo0;",
        *decompose,
        f"        const {g} char *xr = x + xb;",
        f"        {g} char *orow = o + ob;",
        "        T v, mx = -INFINITY;",
    ]
    max_body = load + " mx = (v > mx || v != v) ? v : mx;"
    lines = [
        plan.target.preamble({plan.in_dtype, plan.out_dtype, plan.acc_dtype}),
        f"#define TIN {D.type_name(plan.in_dtype)}",
        f"#define T {t}",
        f"#define ACC {acc}",
        f"#define TJ_GROUP {GROUP_SIZE}",
        # the items schedule: a chunk of rows per work-item, each row in three passes
        f"{D.kernel_qualifier} void tj_rows({params}) {{",
        f"    long m = {D.global_id} * chunk, m_end = min(m + chunk, rows);",
        "    for (; m < m_end; m++) {",
        *row_start,
        f"        {_loop(dr, max_body)}",
        "        ACC sum = 0;",
        f"        {second.format(start='0', step='1')}",
        *(line.format(start="0", step="1") for line in third),
        "    }",
        "}",
    ]
    if D.local_qualifier:  # the groups schedule: a work-group per row, TJ_GROUP items
        lines += [
            f"{D.kernel_qualifier} void tj_rows_grouped({params}) {{",
            f"    {D.local_qualifier} T tj_max[TJ_GROUP];",
            f"    {D.local_qualifier} ACC tj_sum[TJ_GROUP];",
            # one group per row, launched exactly: no guard (a barrier under a branch is
            # what some compilers handle worst)
            f"    long m = {D.group_id}, lid = {D.local_id};",
            "    {",
            *row_start,
            f"        {_loop(dr, max_body, 'lid', 'TJ_GROUP')}",
            *group_fold(D, "tj_max", "T", "mx", "(b > a || b != b) ? b : a"),
            "        ACC sum = 0;",
            f"        {second.format(start='lid', step='TJ_GROUP')}",
            *group_fold(D, "tj_sum", "ACC", "sum", "a + b"),
            *(line.format(start="lid", step="TJ_GROUP") for line in third),
            "    }",
            "}",
        ]
    return "\n".join(lines) + "\n"


def row_plan(t: Target, node: Apply) -> RowPlan | None:
    if not device_can_run(t, node):
        return None
    in_dtype, out_dtype = tensor_type(node.inputs[0]).dtype, tensor_type(node.outputs[0]).dtype
    if in_dtype not in t.dialect.type_names or out_dtype not in ("float32", "float64"):
        return None  # float16 (from small integers) and complex stay on the host
    from tensorjit.tensor.nnet.basic import LogSoftmax

    acc = row_semantics.accumulator_dtype(out_dtype, t.runtime().fp64)
    op = cast("Softmax | LogSoftmax", node.op)
    log = isinstance(op, LogSoftmax)
    return RowPlan(t, log, tuple(op.axis), in_dtype, out_dtype, acc)


def _args(dims: list[Dim], operand: int) -> list:
    return [I64(st[operand]) for _, st in dims]


def rows_value(plan: RowPlan, x: Any) -> Any:
    """Softmax or log-softmax of device array ``x`` as a new device array."""
    rt = plan.target.runtime()
    out = rt.empty(x.shape, plan.out_dtype)
    if x.size == 0:
        return out
    ostrides = c_strides(x.shape, np.dtype(plan.out_dtype).itemsize)
    kept, red, shift = split_dims(x.shape, [x.strides, ostrides], plan.axis, reorder=True)
    if not red:
        red = [(1, (0, 0))]  # rows of one element
    rows, length = prod(n for n, _ in kept), prod(n for n, _ in red)
    source = row_source(plan, len(kept), len(red))
    grouped = uses_groups(plan.target, length, lambda: [rt.kernel(source, "tj_rows_grouped")])
    chunk = 1 if grouped else units_per_item(rt, rows)
    lengths = [I64(n) for n, _ in (*kept, *red)]
    args = [I64(rows), I64(chunk), I64(length), *lengths]
    (xp, xo), (op, oo) = rt.buffer_args(x), rt.buffer_args(out)
    args += [xp, I64(xo + shift[0]), *_args(kept, 0), *_args(red, 0)]
    args += [op, I64(oo + shift[1]), *_args(kept, 1), *_args(red, 1)]
    if grouped:
        kernel = rt.kernel(source, "tj_rows_grouped")
        rt.launch_groups(kernel, rows, GROUP_SIZE, *args)
        return out
    kernel = rt.kernel(source, "tj_rows")
    items = -(-rows // chunk)
    if rt.is_cpu:
        rt.launch_groups(kernel, items, 1, *args)  # groups spread over the cores
    else:
        rt.launch(kernel, items, *args)
    return out


def rows_factory(node: Apply, plan: RowPlan) -> Any:
    def run(inputs: list, output_storage: list) -> None:
        output_storage[0][0] = rows_value(plan, inputs[0])

    return run


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.nnet.basic import LogSoftmax, Softmax

    return [
        KernelSpec(
            t.kernel_name("softmax"),
            t.backend,
            (Softmax, LogSoftmax),
            rows_factory,
            plan=partial(row_plan, t),
            launches_only=True,
            plugin=t.plugin,
        )
    ]
