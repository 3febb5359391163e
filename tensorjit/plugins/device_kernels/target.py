"""What the shared kernel families need from one device backend.

A runtime (``Target.runtime()``, made on first use) must offer:

- ``kernel(source, name)``: the compiled kernel ``name`` of ``source`` (cached);
- ``launch(kernel, items, *args)``: run over ``items`` work-items (none when 0);
- ``launch_chunks(kernel, items, *args)``: the same for kernels whose items each loop
  over a chunk of elements (a CPU device spreads them over its cores);
- ``launch_groups(kernel, groups, group_size, *args)``;
- ``group_limit(kernel)``: the most work-items a work-group of ``kernel`` may have;
- ``empty(shape, dtype)``: a new C-contiguous device array;
- ``buffer_args(value)``: a device array as the two kernel arguments ``char *p, long
  offset`` (base pointer and byte offset);
- ``fp64``, ``is_cpu``, ``compute_units``, ``work_per_item`` (the config choice of
  elements per work-item, "auto" or a number), ``device`` (hashable identity).

Kernels are launched with at least ``items`` work-items: every kernel guards its index
(a CUDA grid is a whole number of blocks).

Device arrays must have ``shape``, ``strides`` (bytes), ``dtype``, ``size``, ``ndim``,
``offset`` (bytes into their buffer), ``flags.c_contiguous``, ``get()`` (a host copy)
and ``set(host)`` (a contiguous write); the array kind adds ``view(base, shape,
strides, offset)``: a new header over ``base``'s buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, cast

from tensorjit.core.devices import ArrayKind
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels.dialect import DeviceDialect

if TYPE_CHECKING:
    from tensorjit.tensor.type import TensorType


class DeviceRuntime(Protocol):
    """A device backend's runtime as the kernel families use it (the module docstring
    says what each member does). Kernels and device arrays are the backend's own
    objects, so they are ``Any`` here. The families never pass build options to
    ``kernel`` (the CUDA runtime takes none)."""

    @property
    def fp64(self) -> bool: ...

    @property
    def is_cpu(self) -> bool: ...

    @property
    def compute_units(self) -> int: ...

    @property
    def max_group_size(self) -> int: ...

    @property
    def work_per_item(self) -> str | int: ...

    @property
    def device(self) -> Hashable: ...

    def kernel(self, source: str, name: str, /) -> Any: ...

    def launch(self, kernel: Any, items: int, /, *args: Any) -> None: ...

    def launch_chunks(self, kernel: Any, items: int, /, *args: Any) -> None: ...

    def launch_groups(self, kernel: Any, groups: int, group_size: int, /, *args: Any) -> None: ...

    def group_limit(self, kernel: Any, /) -> int: ...

    def empty(self, shape: tuple[int, ...], dtype: Any, /) -> Any: ...

    def buffer_args(self, value: Any, /) -> list[Any]: ...


class ReplayingRuntime(DeviceRuntime, Protocol):
    """A runtime whose launches a launch plan can record and repeat
    (device_kernels/recording.py, launch_plan.py)."""

    def enqueue(self, kernel: Any, geometry: tuple, args: tuple | list, /) -> None: ...

    def buffer_arg_address(self, arg: Any, /) -> int | None: ...


class ArrayViews(Protocol):
    """An array kind that makes views (every device backend's kind does:
    arrays.StridedDeviceArrays); the host target's ``HostArrays`` does not."""

    def view(
        self, base: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, /
    ) -> Any: ...


#: A family's kernel factory: ``factory(node, plan)`` gives ``run(inputs,
#: output_storage)`` (KernelSpec's contract; each takes its own family's plan).
Factory = Callable[[Apply, Any], Callable[[list, list], None]]


@dataclass(frozen=True, eq=False)
class Target:
    """One device backend as the kernel families see it (compared by identity)."""

    backend: str  # the backend's name, prefix of its kernel names ("opencl:reduce")
    device: str  # the device its values live on
    plugin: str  # the plugin registering the kernels
    dialect: DeviceDialect
    runtime: Callable[[], DeviceRuntime]
    arrays: ArrayKind
    #: the source every program starts with, for the dtypes it uses
    preamble: Callable[[set[str]], str]
    #: ``matmul(out, a, b, accumulate=False)``: out = a @ b (or out += a @ b) for 2-d
    #: device arrays of one float dtype (out C-contiguous, apart from a and b, which may
    #: have any strides): the backend's GEMM, for families that lower to products
    #: (convolution's im2col); None where the backend has none
    matmul: Callable[..., None] | None = None
    #: whether ``matmul`` can run here (its library loads), asked when planning
    matmul_ready: Callable[[], bool] = lambda: True
    #: whether ``matmul`` only allocates and launches through the runtime (the OpenCL
    #: GEMM's kernels), so that launch plans may record it; a library's calls (cuBLAS)
    #: are not recorded
    matmul_launches_only: bool = False

    def kernel_name(self, family: str) -> str:
        return f"{self.backend}:{family}"

    def __repr__(self) -> str:
        return f"Target({self.backend})"


#: A family's plan function: ``plan(target, node)``, None where it does not cover the node.
Planner = Callable[[Target, Apply], object]


def table_specs(
    t: Target, table: Sequence[tuple[str, type, Factory, Planner]], launches_only: Container[str]
) -> list[KernelSpec]:
    """A family's kernel specs on ``t`` from rows (name, op class, factory, planner);
    ``launches_only``: the names whose kernels a launch plan may replay
    (``KernelSpec.launches_only``)."""
    return [
        KernelSpec(
            t.kernel_name(name),
            t.backend,
            (op,),
            factory,
            plan=partial(planner, t),
            plugin=t.plugin,
            launches_only=name in launches_only,
        )
        for name, op, factory, planner in table
    ]


def node_label(node: Apply) -> str:
    """How a kernel's errors name its node: the op and where the user created it."""
    return f"{node.op} (created at {node.outputs[-1].created_at or 'unknown'})"


def tensor_type(var: Variable) -> TensorType:
    """``var``'s type, a tensor's: the families plan only tensor ops, whose inputs and
    outputs are all tensors (``TensorType``)."""
    return cast("TensorType", var.type)
