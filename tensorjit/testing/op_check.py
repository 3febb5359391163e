"""``check_op``: test an Op the way tensorjit tests its own.

For example input values, across dtypes and memory layouts (contiguous, Fortran order,
strided, negative strides, zero strides from broadcasting, empty), it checks:

- ``__props__``: an op whose constructor takes arguments declares them (else two
  differently configured instances compare equal and the rewrites merge them);
- ``perform``: returns the dtypes and ranks ``make_node`` declared, and writes into no
  input it does not declare in ``destroy_map`` (a failure here is the op's fault);
- ``infer_shape`` against the shapes ``perform`` returns;
- every backend's kernel for the node (C, any plugin's, and device backends' such as
  OpenCL on device copies of the inputs) against ``perform``,
  called directly with the Op.perform contract so nothing hides its faults: its values,
  its dtypes, that it writes into no undeclared input and returns no view of an input
  that ``view_map`` does not declare;
- ``grad`` with ``verify_grad`` and R-op (``Rop``, the forward-mode product) against
  finite differences, for float inputs.

Each failure raises ``OpCheckError`` naming the op, the layout, the backend, the output
or input, and which side (op or kernel) is wrong.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorjit.core.compile.function import function
from tensorjit.core.devices import HOST
from tensorjit.core.gradient import NotDifferentiableError, Rop
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.kernel_selection import PERFORM
from tensorjit.tensor.gradient_check import GradientError, verify_grad
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import constant

LAYOUTS = ("contiguous", "fortran", "strided", "negative_strides", "broadcast", "empty")


class OpCheckError(AssertionError):
    """``check_op`` found a fault; the message says where and whose."""


@dataclass
class OpCheckReport:
    """What ``check_op`` ran: one line per check that passed (``checks``) and the
    backends whose kernels it compared (``backends``)."""

    op: Op
    checks: list[str] = field(default_factory=list)
    backends: set[str] = field(default_factory=set)


def _constructor_arguments(op: Op) -> list[str]:
    init = type(op).__init__
    if init is object.__init__ or init is Op.__init__:
        return []
    params = list(inspect.signature(init).parameters.values())[1:]
    return [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def check_props(op: Op) -> None:
    """An op whose constructor takes arguments must declare them in ``__props__``."""
    arguments = _constructor_arguments(op)
    props = tuple(getattr(op, "__props__", ()) or ())
    name = type(op).__name__
    if arguments and not props:
        raise OpCheckError(
            f"{name}.__init__ takes {', '.join(arguments)} but {name} declares no __props__: "
            f"two {name} built with different arguments compare equal, so the rewrites "
            f"merge them; declare __props__ = {tuple(arguments)!r}"
        )
    left_out = [a for a in arguments if a not in props and hasattr(op, a)]
    if props and left_out:
        raise OpCheckError(
            f"{name}.__init__ takes {', '.join(left_out)}, kept as attribute(s), but "
            f"{name}.__props__ {props!r} leaves them out: instances that differ only there "
            "compare equal"
        )
    for prop in props:
        if not hasattr(op, prop):
            raise OpCheckError(
                f"{name}.__props__ names {prop!r}, which the op has no attribute for"
            )


def layout_variants(values: Sequence[np.ndarray], layouts: Sequence[str]) -> list[tuple[str, list]]:  # noqa: E501
    """The inputs in each memory layout. ``broadcast`` repeats each input's first row
    with zero strides and ``empty`` keeps no rows, so their values differ: every variant
    is checked against ``perform`` on that same variant. A layout that changes nothing
    (Fortran order without a matrix) is left out."""
    values = [np.asarray(v) for v in values]
    variants = []
    for layout in layouts:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {LAYOUTS}")
        if layout == "fortran" and all(v.ndim < 2 for v in values):
            continue
        made = []
        for value in values:
            if layout == "contiguous" or value.ndim == 0:
                made.append(value.copy(order="C"))  # (ascontiguousarray makes 0-d 1-d)
            elif layout == "fortran":
                made.append(np.asfortranarray(value))
            elif layout == "strided":
                made.append(np.repeat(value, 2, axis=-1)[..., ::2])
            elif layout == "negative_strides":
                made.append(np.ascontiguousarray(value[..., ::-1])[..., ::-1])
            elif layout == "broadcast":
                first = value[:1] if value.shape[0] else value
                made.append(np.broadcast_to(first, value.shape))  # zero strides, read-only
            else:  # empty
                made.append(value[:0])
        variants.append((layout, made))
    return variants


def replica(value: np.ndarray) -> np.ndarray:
    """A writeable copy of ``value`` with the same strides (Fortran order, a step, negative
    steps), so a kernel sees the layout being tested; a read-only value (zero strides
    from broadcasting) is returned as it is, since nobody may write it."""
    if not value.flags.writeable or value.ndim == 0:
        return value.copy() if value.flags.writeable else value
    itemsize = value.itemsize
    low = sum(st * (n - 1) for st, n in zip(value.strides, value.shape) if st < 0)
    high = sum(st * (n - 1) for st, n in zip(value.strides, value.shape) if st > 0)
    if value.size == 0 or any(st % itemsize for st in value.strides):
        return value.copy()
    buffer = np.empty((high - low) // itemsize + 1, value.dtype)
    start = -low // itemsize
    copy = np.lib.stride_tricks.as_strided(buffer[start:], value.shape, value.strides)
    copy[...] = value
    return copy


def _writable(value: np.ndarray) -> np.ndarray:
    """For an input the op may overwrite: a replica, or a copy of a read-only value."""
    return replica(value) if value.flags.writeable else value.copy()


def _symbolic(values: Sequence[np.ndarray]) -> list[Variable]:
    return [
        TensorType(str(v.dtype), tuple(None for _ in v.shape))(f"in{i}")
        for i, v in enumerate(values)
    ]


def _run_perform(op: Op, node: Apply, values: list, where: str) -> list:
    kept = [v.copy() for v in values]
    destroyed = {i for ins in op.destroy_map.values() for i in ins}
    # An input the op may overwrite gets a copy: the kernels get the same values next.
    given = [_writable(v) if i in destroyed else v for i, v in enumerate(values)]
    storage: list[list] = [[None] for _ in node.outputs]
    try:
        op.perform(node, given, storage)
    except Exception as exc:
        raise OpCheckError(f"{op}.perform raised {exc!r} ({where})") from exc
    for i, (before, after) in enumerate(zip(kept, given)):
        if i not in destroyed and not _same(before, after):
            raise OpCheckError(
                f"{op}.perform wrote into input {i} ({where}), which the op does not declare "
                "in destroy_map: the op's perform is wrong"
            )
    results = [np.asarray(cell[0]) for cell in storage]
    for j, (out, value) in enumerate(zip(node.outputs, results)):
        if value.dtype != np.dtype(out.type.dtype) or value.ndim != out.ndim:
            raise OpCheckError(
                f"{op}.perform returned {value.dtype} of rank {value.ndim} for output {j} "
                f"({where}) but make_node declared {out.type}: the op's perform is wrong, "
                "not a kernel"
            )
    return results


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(a, b))


def _tolerances(arrays: Sequence[np.ndarray]) -> tuple[float, float]:
    """rtol, atol for results computed from and into these arrays' dtypes."""
    dtypes = {np.dtype(a.dtype) for a in arrays}
    if np.dtype(np.float16) in dtypes:
        return 1e-2, 1e-3
    if dtypes & {np.dtype(np.float32), np.dtype(np.complex64)}:
        return 1e-4, 1e-5
    return 1e-10, 1e-12


def check_infer_shape(op: Op, node: Apply, values: list, results: list, where: str) -> bool:
    """``infer_shape`` (if the op has one) against the shapes ``perform`` returned."""
    infer = getattr(op, "infer_shape", None)
    if infer is None:
        return False
    shapes = infer(None, node, [tuple(constant(np.int64(s)) for s in v.shape) for v in values])
    if shapes is None:
        return False  # "known only at run time"
    for j, (shape, value) in enumerate(zip(shapes, results)):
        if shape is None or any(e is None for e in shape):
            continue  # this output's shape is known only at run time
        # Entries may read input values (an alloc's lengths): evaluate them on the inputs.
        entries = function(list(node.inputs), list(shape), on_unused_input="ignore")
        got = tuple(int(e) for e in entries(*values)) if shape else ()
        if got != value.shape:
            raise OpCheckError(
                f"{op}.infer_shape gives {got} for output {j} ({where}) but perform returns "
                f"an array of shape {value.shape}: the op's infer_shape is wrong"
            )
    return True


def _host_kernels(node: Apply) -> list:
    """(backend, kernel) for every host backend with a kernel of its own for ``node``."""
    registry = get_plugin_system().registries.backends
    found = []
    for backend in registry.for_device(HOST):
        kernel = get_plugin_system().kernel_source.find_kernel(node, [backend])
        if kernel is None or kernel.factory is None or kernel.backend != backend.name:
            continue
        if kernel is PERFORM:
            continue  # perform is the reference
        found.append((backend, kernel))
    return found


def _judge_run(label: str, op: Op, node: Apply, run: Any, inputs: list, storage: list,
               expected: list, values: list, to_host: Any, shares_memory: Any) -> None:  # fmt: skip
    """Call a kernel's ``run`` on ``inputs`` (host arrays, or a device's values that
    ``to_host`` brings back) and judge it against ``perform``'s ``expected`` outputs: it
    raises nothing perform did not, writes no undeclared input, returns the declared
    dtypes and perform's values, and no undeclared view (``shares_memory``)."""
    kept = [np.array(to_host(v)) for v in inputs]
    try:
        run(inputs, storage)
    except Exception as exc:
        raise OpCheckError(f"{label} raised {exc!r} where perform did not") from exc
    destroyed = {i for ins in op.destroy_map.values() for i in ins}
    aliasing = {(j, i) for m in (op.view_map, op.destroy_map) for j, ins in m.items() for i in ins}
    for i, (before, value) in enumerate(zip(kept, inputs)):
        if i not in destroyed and not _same(before, np.asarray(to_host(value))):
            raise OpCheckError(
                f"{label} wrote into input {i}, which {type(op).__name__} does not declare in "
                "destroy_map: the kernel is wrong (or the op must declare it)"
            )
    rtol, atol = _tolerances([*values, *expected])
    for j, (out, cell, want) in enumerate(zip(node.outputs, storage, expected)):
        if cell[0] is None:
            raise OpCheckError(f"{label} left output {j} empty")
        got = np.asarray(to_host(cell[0]))
        if got.dtype != np.dtype(out.type.dtype):
            raise OpCheckError(
                f"{label} returned {got.dtype} for output {j} but the node declares "
                f"{out.type.dtype} (perform agrees with the node): the kernel is wrong"
            )
        if not _close(got, want, rtol, atol):
            raise OpCheckError(
                f"{label} computes output {j} differently from perform (max difference "
                f"{_max_difference(got, want)}; shapes {got.shape} and "
                f"{want.shape}): the kernel is wrong, perform is the reference"
            )
        for i, value in enumerate(inputs):
            if (j, i) not in aliasing and shares_memory(cell[0], value):
                raise OpCheckError(
                    f"{label} returns output {j} as a view of input {i}, which "
                    f"{type(op).__name__} does not declare in view_map: the kernel is "
                    "wrong (or the op must declare the view)"
                )


def _host_shares_memory(a: Any, b: Any) -> bool:
    return isinstance(a, np.ndarray) and a.size > 0 and np.shares_memory(a, b)


def check_kernel(backend: Any, kernel: Any, op: Op, node: Apply, values: list,
                 expected: list, where: str, previous: list | None = None) -> list:  # fmt: skip
    """One host backend's kernel against ``perform``'s results, called directly; its
    output storage holds ``previous`` (what it returned for other inputs, as in a
    function's later calls). Returns the outputs, for the next check's ``previous``."""
    if backend.prepare is not None:
        backend.prepare([(node, kernel)])
    destroyed = {i for ins in op.destroy_map.values() for i in ins}
    # Writeable copies: a kernel that writes where it must not is caught, not fatal.
    inputs = [_writable(v) if i in destroyed else replica(v) for i, v in enumerate(values)]
    storage: list[list] = [[p] for p in previous] if previous else [[None] for _ in node.outputs]
    label = f"the {backend.name} kernel {kernel.name!r} of {op} ({where})"
    _judge_run(label, op, node, kernel.factory(node), inputs, storage, expected, values,
               np.asarray, _host_shares_memory)  # fmt: skip
    # Outputs that alias an input are not the kernel's to reuse next time.
    aliased = {j for m in (op.view_map, op.destroy_map) for j in m}
    return [None if j in aliased else cell[0] for j, cell in enumerate(storage)]


def check_device_kernels(op: Op, values: list, expected: list, where: str) -> list[str]:
    """Each available device backend's kernel for the op on device copies of ``values``
    (contiguous there), against ``perform``; returns the backends checked."""
    registry = get_plugin_system().registries.backends
    checked = []
    for backend in registry.backends.values():
        if backend.device == HOST or registry.unavailable_reason(backend.name) is not None:
            continue
        kind = registry.array_kind(backend.device)
        typed = [
            TensorType(str(v.dtype), tuple(None for _ in v.shape), device=backend.device)(f"in{i}")
            for i, v in enumerate(values)
        ]
        # As the placement pass does: the host node's op, inputs and outputs re-typed.
        host_node = op.make_node(*_symbolic(values))
        outputs = [o.type.on_device(backend.device).make_variable() for o in host_node.outputs]
        node = Apply(op, typed, outputs)
        kernel = get_plugin_system().kernel_source.find_kernel(node, [backend])
        if kernel is None:
            continue
        if backend.prepare is not None:
            backend.prepare([(node, kernel)])
        inputs = [kind.from_host(v.copy(order="C")) for v in values]
        storage: list[list] = [[None] for _ in node.outputs]
        label = f"the {backend.name} kernel {kernel.name!r} of {op} ({where}, on {backend.device})"
        _judge_run(label, op, node, kernel.factory(node), inputs, storage, expected, values,
                   kind.to_host, kind.may_share_memory)  # fmt: skip
        checked.append(backend.name)
    return checked


def _max_difference(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape:
        return "n/a"
    if a.size == 0:
        return "0"
    return f"{np.max(np.abs(a.astype(np.complex128) - b.astype(np.complex128))):.3g}"


def check_gradients(op: Op, values: list, report: OpCheckReport) -> None:
    """``verify_grad`` and the R-op against finite differences (float inputs)."""
    if not all(np.asarray(v).dtype.kind == "f" for v in values) or not values:
        return
    if any(np.asarray(v).size == 0 for v in values):
        return

    def first_output(*xs: Variable) -> Variable:
        out = op(*xs)
        return out[0] if isinstance(out, (list, tuple)) else out

    points = [np.array(v, dtype=v.dtype) for v in values]
    try:
        verify_grad(first_output, points, rng=np.random.default_rng(0))
    except NotDifferentiableError:
        return
    except GradientError as exc:
        raise OpCheckError(f"{op}.grad disagrees with finite differences: {exc}") from None
    report.checks.append("grad (verify_grad)")
    xs = _symbolic(points)
    out = first_output(*xs)
    directions = [x.type() for x in xs]
    rop = Rop(out, xs, directions)
    rng = np.random.default_rng(1)
    v = [rng.standard_normal(p.shape).astype(p.dtype) for p in points]
    jv = function(xs + directions, rop, on_unused_input="ignore")(*points, *v)
    eps = 1e-6 if all(p.dtype == np.float64 for p in points) else 1e-2
    f = function(xs, out)
    plus = f(*[p + eps * d for p, d in zip(points, v)])
    minus = f(*[p - eps * d for p, d in zip(points, v)])
    numeric = (np.asarray(plus) - np.asarray(minus)) / (2 * eps)
    tol = 1e-4 if eps == 1e-6 else 5e-2
    if not np.allclose(jv, numeric, rtol=tol, atol=tol):
        raise OpCheckError(
            f"the R-op (forward-mode product) of {op} disagrees with finite differences "
            f"(max difference {np.max(np.abs(jv - numeric)):.3g}): its grad is wrong"
        )
    report.checks.append("R-op (finite differences)")


def _empty_case(op: Op, values: list) -> tuple | None:
    """Inputs with no rows that ``perform`` accepts: all of them empty, else only the
    first (a matrix product's other operand keeps its rows); None if neither."""
    candidates = [[v[:0] if v.ndim else v for v in values]]
    if values and values[0].ndim:
        candidates.append([values[0][:0], *values[1:]])
    for variant in candidates:
        node = op.make_node(*_symbolic(variant))
        try:
            return variant, node, _run_perform(op, node, variant, "empty inputs")
        except OpCheckError as exc:
            if not isinstance(exc.__cause__, Exception) or "perform raised" not in str(exc):
                raise
    return None


def check_op(
    op: Op,
    *inputs: Any,
    dtypes: Sequence[str] | None = None,
    layouts: Sequence[str] = LAYOUTS,
    gradients: bool = True,
    devices: bool = True,
) -> OpCheckReport:
    """Check ``op`` on example ``inputs`` (array-likes, one per input of the op): see
    the module docstring. ``dtypes``: also run with float inputs cast to each of these
    (e.g. ``("float64", "float32")``). ``devices``: also run the kernels of available
    device backends (OpenCL...) on device copies of the inputs. Returns what was
    checked; raises ``OpCheckError``.
    """
    report = OpCheckReport(op)
    check_props(op)
    report.checks.append("__props__")
    base = [np.asarray(v) for v in inputs]
    dtype_sets: list[tuple[str, list]] = [("given dtypes", base)]
    for dtype in dtypes or ():
        cast = [v.astype(dtype) if v.dtype.kind == "f" else v for v in base]
        dtype_sets.append((dtype, cast))
    previous: dict[str, list] = {}  # per backend, the kernel's last outputs (reused)
    for dtype_label, values in dtype_sets:
        for layout, variant in layout_variants(values, layouts):
            where = f"{layout} inputs, {dtype_label}"
            node = op.make_node(*_symbolic(variant))
            if layout == "empty":
                found = _empty_case(op, values)
                if found is None:
                    report.checks.append(f"empty: not applicable ({dtype_label})")
                    continue
                variant, node, expected = found
            else:
                expected = _run_perform(op, node, variant, where)
            if check_infer_shape(op, node, variant, expected, where):
                report.checks.append(f"infer_shape: {where}")
            for backend, kernel in _host_kernels(node):
                previous[backend.name] = check_kernel(
                    backend, kernel, op, node, variant, expected, where,
                    previous.get(backend.name),
                )  # fmt: skip
                report.backends.add(backend.name)
                report.checks.append(f"{backend.name} kernel: {where}")
            if devices:
                for name in check_device_kernels(op, variant, expected, where):
                    report.backends.add(name)
                    report.checks.append(f"{name} kernel: {where}")
        if gradients:
            check_gradients(op, values, report)
    return report
