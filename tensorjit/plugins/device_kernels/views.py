"""Views and allocations on a device: DimShuffle, Reshape and basic Subtensor make new
array headers over the input's buffer (shape, byte strides
and byte offset; nothing is copied), Alloc and Second fill a new array.

Index and shape inputs are integer scalars (vectors for Reshape), read on the host
(``Op.host_inputs``): computed on the host, they stay there and arrive as host values;
a Constant (or a copy of one) is read from the graph when the kernel is planned; a value
computed on the device is fetched with ``.get()``, which waits for the queue (a sync
point), as the size of a view must be known on the host.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels.arrays import c_strides, contiguous
from tensorjit.plugins.device_kernels.elementwise import constant_value, copy_into, device_can_run
from tensorjit.plugins.device_kernels.target import (
    ArrayViews,
    Factory,
    Planner,
    Target,
    node_label,
    table_specs,
    tensor_type,
)

if TYPE_CHECKING:
    from tensorjit.tensor.elemwise import DimShuffle
    from tensorjit.tensor.subtensor import Subtensor


# ---------------------------------------------------------------- shared helpers
def array_views(t: Target) -> ArrayViews:
    """``t``'s array kind, which makes views: the families making views (this one, and
    indexing through it) are registered only by device backends, whose kinds do."""
    return cast(ArrayViews, t.arrays)


@dataclass(frozen=True)
class IndexInputs:
    """Integer inputs read on the host: the constants known when planned (None: the
    value is read on each call, as it is when on the host, else fetched from the
    device)."""

    target: Target
    constants: tuple[np.ndarray | None, ...]

    @staticmethod
    def of(t: Target, variables: Sequence[Variable]) -> IndexInputs:
        return IndexInputs(t, tuple(constant_value(v) for v in variables))

    def values(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """The host values of the integer inputs (their device values in ``inputs``)."""
        out = []
        for known, value in zip(self.constants, inputs):
            if known is None and isinstance(value, np.ndarray | np.generic):
                known = np.asarray(value)  # computed on the host (Op.host_inputs)
            elif known is None:
                # A sync: the host needs this value to shape the result.
                known = (
                    contiguous(self.target, value).get()
                    if value.size
                    else np.zeros(value.shape, int)
                )
            out.append(known)
        return out


def padded(t: Target, value: Any, ndim: int) -> Any:
    """``value`` with leading length-1 axes up to ``ndim`` dimensions (a view)."""
    extra = ndim - value.ndim
    if extra <= 0:
        return value
    return array_views(t).view(
        value, (1,) * extra + value.shape, (0,) * extra + value.strides, value.offset
    )


def check_broadcast(what: str, shape: tuple, target: tuple) -> None:
    """Raise a ValueError unless ``shape`` broadcasts to ``target`` (NumPy's rules for
    writing a value into an array)."""
    ok = len(shape) <= len(target) and all(n in (1, m) for n, m in zip(shape[::-1], target[::-1]))
    if not ok:
        raise ValueError(
            f"{what}: could not broadcast a value of shape {shape} into shape {target}"
        )


# ---------------------------------------------------------------- DimShuffle
def dimshuffle_view(t: Target, op: DimShuffle, x: Any, name: str) -> Any:
    """``x`` with axes permuted, length-1 axes dropped and new ones (stride 0) added."""
    if any(x.shape[d] != 1 for d in op.dropped):
        raise ValueError(f"{name}: dropped dimensions must have length 1, got shape {x.shape}")
    shape: list[int] = []
    strides: list[int] = []
    for d in op.new_order:
        if d == "x":
            shape.append(1)
            strides.append(0)
        else:
            shape.append(x.shape[d])
            strides.append(x.strides[d])
    return array_views(t).view(x, tuple(shape), tuple(strides), x.offset)


def dimshuffle_plan(t: Target, node: Apply) -> Target | None:
    from tensorjit.tensor.elemwise import DimShuffle

    return t if type(node.op) is DimShuffle and device_can_run(t, node) else None


def dimshuffle_factory(node: Apply, plan: Target) -> Callable[[list, list], None]:
    op, name = cast("DimShuffle", node.op), node_label(node)

    def run(inputs: list, output_storage: list) -> None:
        output_storage[0][0] = dimshuffle_view(plan, op, inputs[0], name)

    return run


# ---------------------------------------------------------------- Reshape
def resolve_shape(
    name: str, old: tuple[int, ...], requested: Sequence[int] | np.ndarray
) -> tuple[int, ...]:
    """``requested`` with its -1 entry (if any) worked out, checked against ``old``."""
    size = int(np.prod(old, dtype=np.int64))
    wanted = tuple(int(s) for s in requested)
    unknown = [a for a, s in enumerate(wanted) if s == -1]
    known = int(np.prod([s for s in wanted if s != -1], dtype=np.int64))
    bad = len(unknown) > 1 or any(s < -1 for s in wanted)
    if not bad and unknown:
        bad = known == 0 or size % known != 0
        if not bad:
            wanted = tuple(size // known if s == -1 else s for s in wanted)
    if bad or int(np.prod(wanted, dtype=np.int64)) != size:
        raise ValueError(  # Reshape.perform's words, so both devices say the same
            f"reshape: can not reshape array of shape {old} into {wanted}, in {name}"
        )
    return wanted


def reshape_value(t: Target, x: Any, shape: tuple[int, ...]) -> Any:
    """A view of ``x`` with ``shape`` when ``x`` is C-contiguous, else a view of a
    contiguous copy (its view_map allows, never requires, the output to alias ``x``)."""
    base = contiguous(t, x)
    offset = base.offset if base.size else 0
    return array_views(t).view(base, shape, c_strides(shape, x.dtype.itemsize), offset)


def reshape_plan(t: Target, node: Apply) -> IndexInputs | None:
    from tensorjit.tensor.shape_ops import Reshape

    if type(node.op) is not Reshape or not device_can_run(t, node):
        return None
    return IndexInputs.of(t, node.inputs[1:])


def reshape_factory(node: Apply, plan: IndexInputs) -> Callable[[list, list], None]:
    name = node_label(node)

    def run(inputs: list, output_storage: list) -> None:
        x, shp = inputs
        (requested,) = plan.values([shp])
        shape = resolve_shape(name, x.shape, requested)
        output_storage[0][0] = reshape_value(plan.target, x, shape)

    return run


# ---------------------------------------------------------------- basic Subtensor
def _slice_part(value: Any) -> int | None:
    return None if value is None else int(value)


def subtensor_view(
    t: Target, name: str, x: Any, entries: Sequence[Any], values: Sequence[Any]
) -> Any:
    """The view ``x[index]`` of a basic index: ``entries`` as Subtensor's ("i" an
    integer, ``("s", has_start, has_stop, has_step)`` a slice), ``values`` the host
    values of the index inputs in order. Integers out of range raise an IndexError."""
    given = iter(values)
    shape: list[int] = []
    strides: list[int] = []
    offset = x.offset
    for axis, entry in enumerate(entries):
        n, stride = x.shape[axis], x.strides[axis]
        if entry == "i":
            i = int(next(given))
            if not -n <= i < n:
                raise IndexError(
                    f"{name}: index {i} is out of bounds for axis {axis} with size {n}"
                )
            offset += (i + n if i < 0 else i) * stride
            continue
        start, stop, step = (_slice_part(next(given)) if flag else None for flag in entry[1:])
        if step == 0:
            raise ValueError(f"{name}: slice step can not be zero")
        first, last, step = slice(start, stop, step).indices(n)
        length = len(range(first, last, step))
        if length:
            offset += first * stride
        shape.append(length)
        strides.append(stride * step)
    shape += x.shape[len(entries) :]
    strides += x.strides[len(entries) :]
    return array_views(t).view(x, tuple(shape), tuple(strides), offset)


def subtensor_plan(t: Target, node: Apply) -> IndexInputs | None:
    from tensorjit.tensor.subtensor import Subtensor

    if type(node.op) is not Subtensor or not device_can_run(t, node):
        return None
    return IndexInputs.of(t, node.inputs[1:])


def subtensor_factory(node: Apply, plan: IndexInputs) -> Callable[[list, list], None]:
    entries, name = cast("Subtensor", node.op).entries, node_label(node)

    def run(inputs: list, output_storage: list) -> None:
        x, *idx = inputs
        output_storage[0][0] = subtensor_view(plan.target, name, x, entries, plan.values(idx))

    return run


# ---------------------------------------------------------------- Alloc and Second
def alloc_plan(t: Target, node: Apply) -> IndexInputs | None:
    from tensorjit.tensor.math import Alloc

    if type(node.op) is not Alloc or not device_can_run(t, node):
        return None
    return IndexInputs.of(t, node.inputs[1:])


def filled(t: Target, name: str, value: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """A new array of ``shape`` and ``dtype`` holding ``value`` broadcast to it."""
    if any(n < 0 for n in shape):
        raise ValueError(f"{name}: negative dimensions are not allowed, got shape {shape}")
    check_broadcast(name, value.shape, shape)
    out = t.runtime().empty(shape, dtype)
    if out.size:
        copy_into(t, out, padded(t, value, len(shape)))
    return out


def alloc_factory(node: Apply, plan: IndexInputs) -> Callable[[list, list], None]:
    name, dtype = node_label(node), tensor_type(node.outputs[0]).dtype

    def run(inputs: list, output_storage: list) -> None:
        value, *dims = inputs
        shape = tuple(int(d) for d in plan.values(dims))
        output_storage[0][0] = filled(plan.target, name, value, shape, dtype)

    return run


def second_plan(t: Target, node: Apply) -> Target | None:
    from tensorjit.tensor.allocation import Second

    return t if type(node.op) is Second and device_can_run(t, node) else None


def second_factory(node: Apply, plan: Target) -> Callable[[list, list], None]:
    from tensorjit.tensor.allocation import second_shape

    name, dtype = node_label(node), tensor_type(node.outputs[0]).dtype

    def run(inputs: list, output_storage: list) -> None:
        a, b = inputs
        shape = second_shape(node, a.shape, b.shape)
        output_storage[0][0] = filled(plan, name, b, shape, dtype)

    return run


def specs(t: Target) -> list[KernelSpec]:
    from tensorjit.tensor.allocation import Second
    from tensorjit.tensor.elemwise import DimShuffle
    from tensorjit.tensor.math import Alloc
    from tensorjit.tensor.shape_ops import Reshape
    from tensorjit.tensor.subtensor import Subtensor

    table: list[tuple[str, type, Factory, Planner]] = [
        ("dimshuffle", DimShuffle, dimshuffle_factory, dimshuffle_plan),
        ("reshape", Reshape, reshape_factory, reshape_plan),
        ("subtensor", Subtensor, subtensor_factory, subtensor_plan),
        ("alloc", Alloc, alloc_factory, alloc_plan),
        ("second", Second, second_factory, second_plan),
    ]
    # (a value read on the host makes the node a launch plan's Python step)
    return table_specs(t, table, launches_only={name for name, *_ in table})
