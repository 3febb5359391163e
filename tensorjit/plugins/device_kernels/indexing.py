"""Indexed writes and integer-array indexing on a device.

- ``IncSubtensor`` (basic indices): the destination region is a view (views.py) of
  ``x`` itself (in place) or of a copy of it; ``set`` copies the value into the view,
  ``inc`` runs the elementwise add in place on it.
- ``SelectClass`` (``x[..., y]``) and its gradient ``SelectClassGrad``: one work-item
  chunk per leading element; ``SelectClassGrad`` writes whole rows (zeros and the one
  selected entry), so the output needs no separate zero fill.
- ``AdvancedSubtensor`` / ``AdvancedIncSubtensor`` with one or two integer vectors
  indexing the leading axes (``x[idx]``, ``x[rows, cols]`` as in ``p[arange(n), y]``),
  the other axes whole. The gather gives each output element to one work-item. The
  scatter is deterministic, without atomics: a work-item owns destination columns
  (elements of the whole trailing axes) and walks the index vectors in order, so
  repeated indices accumulate in NumPy's order (``numpy.add.at``), and ``set`` keeps
  the last value written, as NumPy does.

Index errors: kernels that only write a new output (gathers) raise a device flag when an
index is out of range, which the host reads after the launch (a sync) and then reports
like NumPy. The scatter may write in place, so its indices are fetched and checked on
the host before anything is written (also a sync).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cstyle import Unsupported
from tensorjit.plugins.cstyle import indexing as rules
from tensorjit.plugins.device_kernels.arrays import copy_to_new
from tensorjit.plugins.device_kernels.dialect import DeviceDialect
from tensorjit.plugins.device_kernels.elementwise import (
    ElemwisePlan,
    copy_into,
    device_can_run,
    kernel_source,
    launch_map,
)
from tensorjit.plugins.device_kernels.recording import defer, note_kept
from tensorjit.plugins.device_kernels.target import (
    DeviceRuntime,
    Factory,
    Planner,
    Target,
    node_label,
    table_specs,
    tensor_type,
)
from tensorjit.plugins.device_kernels.tuning import work_items
from tensorjit.plugins.device_kernels.views import (
    IndexInputs,
    check_broadcast,
    padded,
    subtensor_view,
)
from tensorjit.tensor.nnet.basic import class_index_error

if TYPE_CHECKING:
    from tensorjit.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor, IncSubtensor

I64 = np.int64
WHOLE = ("s", False, False, False)  # an index entry taking a whole axis (``:``)


# ---------------------------------------------------------------- shared helpers
def private_copy(t: Target, value: Any, dest: Any) -> Any:
    """``value``, or a copy of it when it overlaps ``dest`` (which is about to be
    written): NumPy reads such a value as it was before the write."""
    return copy_to_new(t, value) if t.arrays.may_share_memory(value, dest) else value


class ErrorFlag:
    """Two device longs: a kernel meeting a bad index sets the first to 1 and writes the
    index into the second (all writers write a bad index, so their race is harmless);
    the host reads them after the launch, or later in the call (see check_class_flag)."""

    def __init__(self, rt: DeviceRuntime) -> None:
        self.rt = rt
        self.array: Any = None
        self.bad: int | None = None  # the bad index the last raised() read

    def args(self) -> list[Any]:
        if self.array is None:
            self.array = self.rt.empty((2,), np.int64)
            self.array.set(np.zeros(2, np.int64))
        note_kept(self.array)  # (a launch plan hands the replayed launches this flag)
        return self.rt.buffer_args(self.array)

    def clear(self) -> None:
        if self.array is not None:
            self.array.set(np.zeros(2, np.int64))

    def raised(self) -> bool:
        """Whether the flag was set (a sync); it is cleared for the next launch."""
        if self.array is None:
            return False
        flag, bad = (int(v) for v in self.array.get())
        if not flag:
            return False
        self.bad = bad
        self.array.set(np.zeros(2, np.int64))
        return True


def unravel(index: str, sizes: Sequence[str], operands: Mapping[str, Sequence[str]]) -> list[str]:
    """C lines adding to each ``b_<name>`` the byte offset of flat (C-order) element
    ``index`` over axes of ``sizes``, the operand's byte strides being ``operands[name]``."""
    if not sizes:
        return []
    lines = [f"long r_ = {index}, q_;"]
    for a in reversed(range(len(sizes))):
        lines.append(f"q_ = r_ % {sizes[a]}; r_ /= {sizes[a]};")
        lines += [f"b_{name} += q_ * {strides[a]};" for name, strides in operands.items()]
    return lines


def program(head: str, lines: Sequence[str]) -> str:
    """``head`` (the preamble) then ``lines`` indented by their brace depth."""
    out, depth = [head], 0
    for line in (line.strip() for line in lines):
        depth -= line.startswith("}")
        out.append("    " * depth + line)
        depth += line.count("{") - line.count("}") + line.startswith("}")
    return "\n".join(out) + "\n"


def load(D: DeviceDialect, ptr: str, offset: str, dtype: str) -> str:
    return f"*(const {D.global_qualifier} {D.type_name(dtype)} *)({ptr} + {offset})"


def flat_loop(D: DeviceDialect, var: str, total: str) -> list[str]:
    """The chunked loop of a flat kernel (its arguments ``total`` and ``chunk``)."""
    return [
        f"long start_ = {D.global_id} * chunk, end_ = min(start_ + chunk, {total});",
        f"for (long {var} = start_; {var} < end_; {var}++) {{",
    ]


def launch_flat(rt: DeviceRuntime, kernel: Any, total: int, *args: Any) -> None:
    """Run a flat kernel over ``total`` elements (none when empty)."""
    if total <= 0:
        return
    count, chunk = work_items(rt, total)
    rt.launch_chunks(kernel, count, I64(total), I64(chunk), *args)


def longs(values: Sequence[int]) -> list[Any]:
    return [I64(v) for v in values]


# ---------------------------------------------------------------- IncSubtensor (basic)
@dataclass(frozen=True)
class IncPlan:
    target: Target
    index: IndexInputs
    add: ElemwisePlan | None  # the in-place add (None: set)


def inc_subtensor_plan(t: Target, node: Apply) -> IncPlan | None:
    from tensorjit.tensor.scalar import SCALAR_OPS
    from tensorjit.tensor.subtensor import IncSubtensor

    op = node.op
    if type(op) is not IncSubtensor or not device_can_run(t, node):
        return None
    add = None
    if not op.set_instead_of_inc:
        x, y = (tensor_type(v) for v in node.inputs[:2])
        ndim = x.ndim - sum(1 for e in op.entries if e == "i")
        try:
            dtypes = [x.dtype, y.dtype]
            source = kernel_source(
                t, SCALAR_OPS["add"], dtypes, [x.dtype], ["full", "full"], {}, [0], ndim
            )
        except Unsupported:
            return None
        add = ElemwisePlan(t, source, (0, 1), (False, False), (0,), (x.dtype,), ndim)
    return IncPlan(t, IndexInputs.of(t, node.inputs[2:]), add)


def inc_subtensor_factory(node: Apply, plan: IncPlan) -> Callable[[list, list], None]:
    op, name, t = cast("IncSubtensor", node.op), node_label(node), plan.target

    def run(inputs: list, output_storage: list) -> None:
        x, y, *idx = inputs
        out = x if op.inplace else copy_to_new(t, x)
        region = subtensor_view(t, name, out, op.entries, plan.index.values(idx))
        check_broadcast(name, y.shape, region.shape)
        y = padded(t, private_copy(t, y, out), region.ndim)
        if plan.add is None:
            copy_into(t, region, y)
        else:
            launch_map(plan.add, [region, y], [region], name)
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- SelectClass
@cache
def select_source(t: Target, ndim: int, x_dtype: str, y_dtype: str) -> str:
    """``out[i] = x[i..., y[i...]]`` over the ``ndim`` leading axes (y's)."""
    D, G = t.dialect, t.dialect.global_qualifier
    sizes = [f"n{a}" for a in range(ndim)]
    strides = {"x": [f"sx{a}" for a in range(ndim)], "y": [f"sy{a}" for a in range(ndim)]}
    tx = D.type_name(x_dtype)
    extra = "".join(f", long {s}" for s in [*sizes, *strides["x"], *strides["y"]])
    head = t.preamble({x_dtype})
    lines = [
        f"{D.kernel_qualifier} void tj_select(long total, long chunk, long n_cls, long s_cls, "
        f"{G} char *x, long o_x, {G} char *y, long o_y, {G} char *out, long o_out, "
        f"{G} char *flag, long o_flag{extra}) {{",
        f"    {G} {tx} *po = ({G} {tx} *)(out + o_out);",
        *flat_loop(D, "i", "total"),
        "    long b_x = o_x, b_y = o_y;",
        *unravel("i", sizes, strides),
        f"    long c = (long)({load(D, 'y', 'b_y', y_dtype)});",
        "    if (c < 0 || c >= n_cls) {",
        f"        (({G} long *)(flag + o_flag))[1] = c; *({G} long *)(flag + o_flag) = 1;",
        "        po[i] = 0; continue;",
        "    }",
        f"    po[i] = {load(D, 'x', 'b_x + c * s_cls', x_dtype)};",
        "}",
        "}",
    ]
    return program(head, lines)


@cache
def select_grad_source(t: Target, ndim: int, g_dtype: str, y_dtype: str, out_dtype: str) -> str:
    """Row ``i`` of ``out`` (C-contiguous, ``n_cls`` per row): ``g[i]`` at ``y[i]``,
    zeros elsewhere."""
    D, G = t.dialect, t.dialect.global_qualifier
    sizes = [f"n{a}" for a in range(ndim)]
    strides = {"g": [f"sg{a}" for a in range(ndim)], "y": [f"sy{a}" for a in range(ndim)]}
    to = D.type_name(out_dtype)
    extra = "".join(f", long {s}" for s in [*sizes, *strides["g"], *strides["y"]])
    head = t.preamble({g_dtype, out_dtype})
    lines = [
        f"{D.kernel_qualifier} void tj_select_grad(long total, long chunk, long n_cls, "
        f"{G} char *g, long o_g, {G} char *y, long o_y, {G} char *out, long o_out, "
        f"{G} char *flag, long o_flag{extra}) {{",
        *flat_loop(D, "i", "total"),
        "    long b_g = o_g, b_y = o_y;",
        *unravel("i", sizes, strides),
        f"    long c = (long)({load(D, 'y', 'b_y', y_dtype)});",
        f"    {to} v = ({to})({load(D, 'g', 'b_g', g_dtype)});",
        f"    if (c < 0 || c >= n_cls) {{ (({G} long *)(flag + o_flag))[1] = c; "
        f"*({G} long *)(flag + o_flag) = 1; c = -1; }}",
        f"    {G} {to} *row = ({G} {to} *)(out + o_out) + i * n_cls;",
        f"    for (long j = 0; j < n_cls; j++) row[j] = j == c ? v : ({to})0;",
        "}",
        "}",
    ]
    return program(head, lines)


def check_class_flag(flag: ErrorFlag, name: str, n: int) -> None:
    """Defer reading the kernel's error flag (a wait for the device) to later in the
    call: before any function input is overwritten, or at its end. The flag holds the
    bad index itself (the labels' buffer may have been reused by then)."""

    def check() -> None:
        if flag.raised():
            raise class_index_error(name, flag.bad, n)

    defer(check, flag.clear)  # (noted by a launch plan's recording: replays defer it again)


def check_leading(name: str, x: Any, y: Any) -> None:
    if x.shape[:-1] != y.shape:
        raise ValueError(
            f"{name}: leading shape {x.shape[:-1]} of the scores {x.shape} does not match "
            f"the class indices' shape {y.shape}"
        )


def select_plan(t: Target, node: Apply) -> Target | None:
    from tensorjit.tensor.nnet.basic import SelectClass, SelectClassGrad

    ok = type(node.op) in (SelectClass, SelectClassGrad) and device_can_run(t, node)
    return t if ok else None


def select_factory(node: Apply, plan: Target) -> Callable[[list, list], None]:
    x_type, y_type = (tensor_type(v) for v in node.inputs)
    rt = plan.runtime()
    name, flag = node_label(node), ErrorFlag(rt)
    source = select_source(plan, y_type.ndim, x_type.dtype, y_type.dtype)
    kernel = rt.kernel(source, "tj_select")
    buffer_args = rt.buffer_args

    def run(inputs: list, output_storage: list) -> None:
        x, y = inputs
        check_leading(name, x, y)
        out = rt.empty(y.shape, x.dtype)
        n = x.shape[-1]
        if out.size:
            args = [I64(n), I64(x.strides[-1]), *buffer_args(x), *buffer_args(y), *buffer_args(out)]
            args += flag.args() + longs([*y.shape, *x.strides[:-1], *y.strides])
            launch_flat(rt, kernel, out.size, *args)
            check_class_flag(flag, name, n)
        output_storage[0][0] = out

    return run


def select_grad_factory(node: Apply, plan: Target) -> Callable[[list, list], None]:
    _, g_type, y_type = (tensor_type(v) for v in node.inputs)
    out_dtype = tensor_type(node.outputs[0]).dtype
    rt = plan.runtime()
    name, flag = node_label(node), ErrorFlag(rt)
    dtypes = (g_type.dtype, y_type.dtype, out_dtype)
    source = select_grad_source(plan, y_type.ndim, *dtypes)
    kernel = rt.kernel(source, "tj_select_grad")
    buffer_args = rt.buffer_args

    def run(inputs: list, output_storage: list) -> None:
        x, g, y = inputs
        check_leading(name, x, y)
        if any(m not in (1, n) for m, n in zip(g.shape, y.shape)):
            raise ValueError(
                f"{name}: gradient of shape {g.shape} does not match the class indices' "
                f"shape {y.shape}"
            )
        g_strides = [0 if m == 1 else s for m, s in zip(g.shape, g.strides)]
        out = rt.empty(x.shape, out_dtype)
        n = x.shape[-1]
        if y.size:
            args = [I64(n), *buffer_args(g), *buffer_args(y), *buffer_args(out), *flag.args()]
            args += longs([*y.shape, *g_strides, *y.strides])
            launch_flat(rt, kernel, y.size, *args)
            check_class_flag(flag, name, n)
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- advanced indexing
def leading_vectors(entries: tuple, idx: Sequence[Variable], x_ndim: int) -> int | None:
    """The number of leading axes indexed by integer vectors (1 or 2) when ``entries``
    is ``x[v]``, ``x[v, w]`` or those followed by whole axes (``:``); else None."""
    p = 2 if entries[:2] == ("a", "a") else 1 if entries[:1] == ("a",) else 0
    covered = 0 < p <= x_ndim and all(e == WHOLE for e in entries[p:])
    vectors = len(idx) == p and all(
        tensor_type(v).ndim == 1 and np.dtype(tensor_type(v).dtype).kind in "iu" for v in idx
    )
    return p if covered and vectors else None


def index_operands(D: DeviceDialect, p: int) -> list[str]:
    """Kernel parameters of ``p`` index vectors: buffer, offset, stride, the length of
    the axis it indexes, and that axis's stride in the indexed array."""
    G = D.global_qualifier
    return [f"{G} char *i{j}, long o_i{j}, long s_i{j}, long len{j}, long sa{j}" for j in range(p)]


def read_index(D: DeviceDialect, j: int, k: str, dtype: str, bad: str | None = None) -> list[str]:
    """C lines setting ``v<j>``: entry ``k`` of index vector ``j``, negatives wrapped;
    with ``bad``, a statement run for an index out of range (else they were checked)."""
    lines = [f"long v{j} = (long)({load(D, f'i{j}', f'o_i{j} + {k} * s_i{j}', dtype)});"]
    if bad is not None:
        lines.append(f"if ({rules.index_out_of_range(f'v{j}', f'len{j}')}) {bad}")
    return [*lines, rules.wrap_index(f"v{j}", f"len{j}")]


@cache
def gather_source(t: Target, idx_dtypes: tuple[str, ...], rest: int, x_dtype: str) -> str:
    """``out[k, r...] = x[i0[k], (i1[k],) r...]``, ``out`` C-contiguous."""
    D, G = t.dialect, t.dialect.global_qualifier
    sizes = [f"n{a}" for a in range(rest)]
    strides = {"x": [f"sx{a}" for a in range(rest)]}
    tx = D.type_name(x_dtype)
    params = ", ".join(index_operands(D, len(idx_dtypes)))
    extra = "".join(f", long {s}" for s in [*sizes, *strides["x"]])
    body = ["    long k = e / width, b_x = o_x;", "    int bad = 0;"]
    body += unravel("e - k * width", sizes, strides)
    for j, dtype in enumerate(idx_dtypes):
        body += read_index(D, j, "k", dtype, bad="bad = 1;")
        body.append(f"b_x += v{j} * sa{j};")
    head = t.preamble({x_dtype})
    lines = [
        f"{D.kernel_qualifier} void tj_gather(long total, long chunk, long width, "
        f"{G} char *x, long o_x, "
        f"{G} char *out, long o_out, {G} char *flag, long o_flag, {params}{extra}) {{",
        f"    {G} {tx} *po = ({G} {tx} *)(out + o_out);",
        *flat_loop(D, "e", "total"),
        *body,
        f"    if (bad) {{ *({G} long *)(flag + o_flag) = 1; po[e] = 0; }}",
        f"    else po[e] = {load(D, 'x', 'b_x', x_dtype)};",
        "}",
        "}",
    ]
    return program(head, lines)


@cache
def scatter_source(
    t: Target,
    idx_dtypes: tuple[str, ...],
    rest: int,
    x_dtype: str,
    y_dtype: str,
    set_value: bool,
) -> str:
    """For each column (element of the whole trailing axes) a work-item owns, in index
    order: ``dest[i0[k], (i1[k],) col] (+)= y[k, col]``. Indices are valid (checked)."""
    D, G = t.dialect, t.dialect.global_qualifier
    sizes = [f"n{a}" for a in range(rest)]
    strides = {"d": [f"sd{a}" for a in range(rest)], "y": [f"sy{a}" for a in range(rest)]}
    tx = D.type_name(x_dtype)
    params = ", ".join(index_operands(D, len(idx_dtypes)))
    extra = "".join(f", long {s}" for s in [*sizes, *strides["d"], *strides["y"]])
    inner = []
    for j, dtype in enumerate(idx_dtypes):
        inner += read_index(D, j, "k", dtype) + [f"at += v{j} * sa{j};"]
    value = load(D, "y", "b_y + k * s_yk", y_dtype)
    head = t.preamble({x_dtype, y_dtype})
    lines = [
        f"{D.kernel_qualifier} void tj_scatter(long total, long chunk, long m, "
        f"{G} char *d, long o_d, "
        f"{G} char *y, long o_y, long s_yk, {params}{extra}) {{",
        *flat_loop(D, "col", "total"),
        "    long b_d = o_d, b_y = o_y;",
        *unravel("col", sizes, strides),
        "    for (long k = 0; k < m; k++) {",
        "        long at = b_d;",
        *(f"        {line}" for line in inner),
        f"        {G} {tx} *p = ({G} {tx} *)(d + at);",
        f"        {rules.update('*p', value, tx, x_dtype, set_value)}",
        "    }",
        "}",
        "}",
    ]
    return program(head, lines)


def host_index_rules(t: Target, node: Apply, x_shape: tuple, vectors: Sequence[Any]) -> tuple:
    """Op.perform's own index checks and messages (out of bounds, index arrays that do
    not broadcast), on the index vectors fetched to the host (a sync); the region shape."""
    from tensorjit.tensor.subtensor import check_runtime_index

    op = cast("AdvancedSubtensor | AdvancedIncSubtensor", node.op)
    first = len(node.inputs) - len(vectors)
    values = [t.arrays.to_host(v) for v in vectors]  # a sync
    return check_runtime_index(op, node.inputs[0], node.inputs[first:], x_shape, op.entries, values)


def index_length(t: Target, node: Apply, x_shape: tuple, vectors: Sequence[Any]) -> int:
    """The broadcast length of the index vectors (a length 1 broadcasts)."""
    length = rules.broadcast_length([v.shape[0] for v in vectors])
    if length is None:
        host_index_rules(t, node, x_shape, vectors)  # raises the host's IndexError
        raise IndexError(f"{node_label(node)}: index arrays of shapes do not broadcast together")
    return length


def index_args(rt: DeviceRuntime, vectors: Sequence[Any], m: int, x: Any) -> list[Any]:
    """The kernel arguments of the index vectors (a broadcast one has stride 0)."""
    args = []
    for j, v in enumerate(vectors):
        stride = 0 if v.shape[0] == 1 and m != 1 else v.strides[0]
        args += [*rt.buffer_args(v), I64(stride), I64(x.shape[j]), I64(x.strides[j])]
    return args


@dataclass(frozen=True)
class AdvancedPlan:
    target: Target
    p: int  # leading axes indexed by vectors
    source: str


def advanced_subtensor_plan(t: Target, node: Apply) -> AdvancedPlan | None:
    from tensorjit.tensor.subtensor import AdvancedSubtensor

    if type(node.op) is not AdvancedSubtensor or not device_can_run(t, node):
        return None
    x_var, *idx = node.inputs
    x = tensor_type(x_var)
    p = leading_vectors(node.op.entries, idx, x.ndim)
    if p is None:
        return None
    dtypes = tuple(tensor_type(v).dtype for v in idx)
    return AdvancedPlan(t, p, gather_source(t, dtypes, x.ndim - p, x.dtype))


def advanced_subtensor_factory(node: Apply, plan: AdvancedPlan) -> Callable[[list, list], None]:
    t, rt = plan.target, plan.target.runtime()
    name, flag = node_label(node), ErrorFlag(rt)
    kernel = rt.kernel(plan.source, "tj_gather")

    def run(inputs: list, output_storage: list) -> None:
        x, *vectors = inputs
        m = index_length(t, node, x.shape, vectors)
        rest = x.shape[plan.p :]
        out = rt.empty((m, *rest), x.dtype)
        if out.size:
            width = I64(int(np.prod(rest, dtype=np.int64)))
            args = [width, *rt.buffer_args(x), *rt.buffer_args(out)]
            args += flag.args() + index_args(rt, vectors, m, x)
            args += longs([*rest, *x.strides[plan.p :]])
            launch_flat(rt, kernel, out.size, *args)
            if flag.raised():
                host_index_rules(t, node, x.shape, vectors)  # raises the host's IndexError
                raise IndexError(f"{name}: an index is out of bounds for shape {x.shape}")
        elif any(v.size for v in vectors):
            host_index_rules(t, node, x.shape, vectors)  # NumPy checks them even for no output
        output_storage[0][0] = out

    return run


def check_value(node: Apply, y: Any, region: tuple) -> None:
    """The value must broadcast to the region, a length 1 only where its type says
    so (as AdvancedIncSubtensor.perform)."""
    problem = rules.value_mismatch(y.shape, region, tensor_type(node.inputs[1]).shape)
    if problem is not None:
        raise ValueError(f"{node_label(node)}: {problem}")


def advanced_inc_plan(t: Target, node: Apply) -> AdvancedPlan | None:
    from tensorjit.tensor.subtensor import AdvancedIncSubtensor

    if type(node.op) is not AdvancedIncSubtensor or not device_can_run(t, node):
        return None
    x_var, y_var, *idx = node.inputs
    x, y = tensor_type(x_var), tensor_type(y_var)
    p = leading_vectors(node.op.entries, idx, x.ndim)
    if p is None:
        return None
    dtypes = tuple(tensor_type(v).dtype for v in idx)
    source = scatter_source(t, dtypes, x.ndim - p, x.dtype, y.dtype, node.op.set_instead_of_inc)
    return AdvancedPlan(t, p, source)


def advanced_inc_factory(node: Apply, plan: AdvancedPlan) -> Callable[[list, list], None]:
    op, t, rt = node.op, plan.target, plan.target.runtime()
    kernel = rt.kernel(plan.source, "tj_scatter")

    def run(inputs: list, output_storage: list) -> None:
        x, y, *vectors = inputs
        # Everything is checked before anything is written (x may be destroyed).
        m = index_length(t, node, x.shape, vectors)
        host_index_rules(t, node, x.shape, vectors)
        rest = x.shape[plan.p :]
        check_value(node, y, (m, *rest))
        out = x if op.inplace else copy_to_new(t, x)
        y = padded(t, private_copy(t, y, out), 1 + len(rest))
        vectors = [private_copy(t, v, out) for v in vectors]
        y_strides = [
            0 if n == 1 and r != 1 else s for n, r, s in zip(y.shape, (m, *rest), y.strides)
        ]
        width = int(np.prod(rest, dtype=np.int64))
        if m and width:
            args = [I64(m), *rt.buffer_args(out), *rt.buffer_args(y), I64(y_strides[0])]
            args += index_args(rt, vectors, m, out)
            args += longs([*rest, *out.strides[plan.p :], *y_strides[1:]])
            launch_flat(rt, kernel, width, *args)
        output_storage[0][0] = out

    return run


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.nnet.basic import SelectClass, SelectClassGrad
    from tensorjit.tensor.subtensor import (
        AdvancedIncSubtensor,
        AdvancedSubtensor,
        IncSubtensor,
    )

    table: list[tuple[str, type, Factory, Planner]] = [
        ("inc_subtensor", IncSubtensor, inc_subtensor_factory, inc_subtensor_plan),
        ("select_class", SelectClass, select_factory, select_plan),
        ("select_class_grad", SelectClassGrad, select_grad_factory, select_plan),
        (
            "advanced_subtensor",
            AdvancedSubtensor,
            advanced_subtensor_factory,
            advanced_subtensor_plan,
        ),
        (
            "advanced_inc_subtensor",
            AdvancedIncSubtensor,
            advanced_inc_factory,
            advanced_inc_plan,
        ),
    ]
    # The class selections check their indices in a deferred check (a launch plan
    # replays them with it); the others read their flag at once or read indices on the
    # host.
    return table_specs(t, table, launches_only={"select_class", "select_class_grad"})
