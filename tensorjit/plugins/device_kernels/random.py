"""MRG31k3p random numbers (``MRGSample``) on a device.

The host reference is ``tensorjit.tensor.random``: element ``j`` of a draw of ``n``
uniforms comes from substream ``j % n_streams`` (its ``j // n_streams``-th step), so one
work-item per substream walks ``j = s, s + n_streams, ...`` and writes its advanced
state once at the end; a substream that produced nothing keeps its state. The step is
the host's shift/mask arithmetic on 64-bit integers (``long``), so the integers, and
the uniforms made from them, are bit-identical to the host's:

- float64: ``z * 2**-31`` (exact);
- float32: ``z`` rounded to nearest float, times ``2**-31`` (the same rounding as the
  host's float64 value cast to float32), kept below 1 as the host does.

``normal`` is Box-Muller on an even count of float64 uniforms, as the host: the
uniforms go to a scratch buffer, then a second kernel pairs ``u[i]`` with
``u[i + n_even / 2]``. It is computed in double, so it needs fp64 (the device's
``log``/``cos``/``sin`` may differ from the host's libm in the last ulp).

The op is functional (no destroy_map): the new state is a new array, the input state
stays as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels.dialect import DeviceDialect
from tensorjit.plugins.device_kernels.elementwise import device_can_run, inlined_constant
from tensorjit.plugins.device_kernels.target import DeviceRuntime, Target, node_label
from tensorjit.plugins.device_kernels.tuning import work_items
from tensorjit.tensor.random import MRG_STATE_WIDTH, check_mrg_state

if TYPE_CHECKING:
    from tensorjit.tensor.random import MRGSample

I64 = np.int64
STATE_WIDTH = MRG_STATE_WIDTH
OUT_DTYPES = ("float32", "float64")

# One MRG31k3p step on the six state registers (the host's ``_mrg_step``, branch for
# branch); leaves the integer z in [1, m1] in ``z``.
STEP = """
#define TJ_M1 2147483647L
#define TJ_M2 2147462579L
{fn} long tj_mrg_step(long *x) {{
    long y1, t1, t2;
    y1 = ((x[1] & 511L) << 22) + (x[1] >> 9) + ((x[2] & 16777215L) << 7) + (x[2] >> 24);
    if (y1 >= TJ_M1) y1 -= TJ_M1;
    y1 += x[2];
    if (y1 >= TJ_M1) y1 -= TJ_M1;
    t1 = ((x[3] & 65535L) << 15) + 21069L * (x[3] >> 16);
    if (t1 >= TJ_M2) t1 -= TJ_M2;
    t2 = ((x[5] & 65535L) << 15) + 21069L * (x[5] >> 16);
    if (t2 >= TJ_M2) t2 -= TJ_M2;
    t2 += x[5];
    if (t2 >= TJ_M2) t2 -= TJ_M2;
    t2 += t1;
    if (t2 >= TJ_M2) t2 -= TJ_M2;
    x[2] = x[1]; x[1] = x[0]; x[0] = y1;
    x[5] = x[4]; x[4] = x[3]; x[3] = t2;
    return y1 <= t2 ? y1 - t2 + TJ_M1 : y1 - t2;
}}
"""

# z -> uniform in (0, 1) as the host rounds it, per output type (``tj_float_rn``: the
# dialect's round-to-nearest conversion of a long to float, from its preamble).
TO_UNIFORM = {
    "double": "(double)z * 0x1.0p-31",
    "float": "fmin(tj_float_rn(z) * 0x1.0p-31f, 0x1.fffffep-1f)",
}


def draw_kernel(D: DeviceDialect, t: str) -> str:
    """``tj_mrg_draw``: work-item ``s`` draws elements ``s, s + ns, ...`` of ``n`` from
    substream ``s`` (state rows read through byte strides) into the contiguous ``out``
    and writes its advanced state to row ``s`` of the contiguous ``new_state``."""
    g = D.global_qualifier
    return f"""
{D.kernel_qualifier} void tj_mrg_draw(long n, long ns,
        {g} const char *state, long o_state, long s_row, long s_col,
        {g} char *new_state, long o_new, {g} char *out, long o_out) {{
    long s = {D.global_id};
    if (s >= ns) return;
    const {g} char *row = state + o_state + s * s_row;
    {g} long *dest = ({g} long *)(new_state + o_new) + s * {STATE_WIDTH};
    {g} {t} *p_out = ({g} {t} *)(out + o_out);
    long x[{STATE_WIDTH}];
    for (int k = 0; k < {STATE_WIDTH}; k++) x[k] = *(const {g} long *)(row + k * s_col);
    for (long j = s; j < n; j += ns) {{
        long z = tj_mrg_step(x);
        p_out[j] = {TO_UNIFORM[t]};
    }}
    for (int k = 0; k < {STATE_WIDTH}; k++) dest[k] = x[k];
}}
"""


def box_muller_kernel(D: DeviceDialect, t: str) -> str:
    """``tj_box_muller``: ``n`` normals from ``2 * pairs`` contiguous double uniforms,
    the host's pairing (cosines first, then sines; the last sine dropped when ``n`` is
    odd), a chunk of pairs per work-item."""
    g = D.global_qualifier
    return f"""
{D.kernel_qualifier} void tj_box_muller(long n, long pairs, long chunk,
        {g} const char *u, long o_u, {g} char *out, long o_out) {{
    const {g} double *p_u = (const {g} double *)(u + o_u);
    {g} {t} *p_out = ({g} {t} *)(out + o_out);
    long start = {D.global_id} * chunk, end = min(start + chunk, pairs);
    for (long i = start; i < end; i++) {{
        double radius = sqrt(-2.0 * log(p_u[i]));
        double angle = (2.0 * M_PI) * p_u[pairs + i];
        p_out[i] = ({t})(radius * cos(angle));
        if (pairs + i < n) p_out[pairs + i] = ({t})(radius * sin(angle));
    }}
}}
"""


def program_source(target: Target, dist: str, dtype: str) -> str:
    """The program of one (distribution, dtype): the draw kernel writes the sample
    itself (uniform) or the double uniforms Box-Muller reads (normal)."""
    D = target.dialect
    t, step = D.type_name(dtype), STEP.format(fn=D.function_qualifier)
    if dist == "uniform":
        return target.preamble({dtype}) + step + draw_kernel(D, t)
    head = target.preamble({"float64"}) + step
    return head + draw_kernel(D, "double") + box_muller_kernel(D, t)


@dataclass(frozen=True)
class MRGPlan:
    target: Target
    dist: str
    dtype: str
    source: str
    sizes: tuple[int | None, ...]  # constant size entries, None where symbolic


def mrg_plan(t: Target, node: Apply) -> MRGPlan | None:
    op = cast("MRGSample", node.op)
    if not device_can_run(t, node) or op.dtype not in OUT_DTYPES:
        return None
    if op.dist == "normal" and not t.runtime().fp64:
        return None  # Box-Muller runs in double, as the host
    sizes = []
    for var in node.inputs[1:]:
        value = inlined_constant(var)
        sizes.append(None if value is None else int(value))
    source = program_source(t, op.dist, op.dtype)
    return MRGPlan(t, op.dist, op.dtype, source, tuple(sizes))


def read_shape(plan: MRGPlan, values: list[Any], where: str) -> tuple[int, ...]:
    """The sample's shape: the plan's constants, else the entries' values (on the host,
    Op.host_inputs; read from the device when computed there)."""

    def entry(v: Any) -> int:
        if isinstance(v, np.ndarray | np.generic):
            return int(v)
        return int(plan.target.arrays.to_host(v))

    shape = tuple(entry(v) if known is None else known for known, v in zip(plan.sizes, values))
    if any(n < 0 for n in shape):
        raise ValueError(f"{where}: sample size entries must be >= 0, got shape {shape}")
    return shape


def mrg_factory(node: Apply, plan: MRGPlan) -> Any:
    where = node_label(node)
    rt = plan.target.runtime()
    draw = rt.kernel(plan.source, "tj_mrg_draw")
    box_muller = rt.kernel(plan.source, "tj_box_muller") if plan.dist == "normal" else None

    def run(inputs: list, output_storage: list) -> None:
        rstate, *size_values = inputs
        shape = read_shape(plan, size_values, where)
        n = math.prod(shape)
        check_mrg_state(rstate, n, where)
        new_state = rt.empty(rstate.shape, np.int64)
        sample = rt.empty(shape, plan.dtype)
        if box_muller is None:
            launch_draw(rt, draw, rstate, new_state, sample, n)
        else:
            n_even = n + n % 2
            uniforms = rt.empty((n_even,), np.float64)
            launch_draw(rt, draw, rstate, new_state, uniforms, n_even)
            if n:
                count, chunk = work_items(rt, n_even // 2)
                rt.launch(
                    box_muller,
                    count,
                    *(I64(n), I64(n_even // 2), I64(chunk)),
                    *rt.buffer_args(uniforms),
                    *rt.buffer_args(sample),
                )
        output_storage[0][0] = new_state
        output_storage[1][0] = sample

    return run


def launch_draw(
    rt: DeviceRuntime, kernel: Any, rstate: Any, new_state: Any, out: Any, n: int
) -> None:
    """One work-item per substream (each writes its state, drawn from or not)."""
    ns = rstate.shape[0]
    if ns == 0:
        return
    # (an empty sample has no buffer: any buffer, never written)
    out_args = rt.buffer_args(out if n else new_state)
    rt.launch(
        kernel,
        ns,
        *(I64(n), I64(ns)),
        *rt.buffer_args(rstate),
        *(I64(rstate.strides[0]), I64(rstate.strides[1])),
        *rt.buffer_args(new_state),
        *out_args,
    )


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.random import MRGSample

    return [
        KernelSpec(
            t.kernel_name("mrg31k3p"),
            t.backend,
            (MRGSample,),
            mrg_factory,
            plan=partial(mrg_plan, t),
            plugin=t.plugin,
        )
    ]
