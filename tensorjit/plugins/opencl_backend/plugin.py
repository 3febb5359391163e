"""Entry point of the OpenCL backend: its backend object and kernel specs.

Registration imports neither pyopencl nor any driver: whether a device is usable is
checked when the backend is first asked for (the reason is shown by
``python -m tensorjit info`` and in the warning when it is not).
"""

from __future__ import annotations

from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import (
    Backend,
    BackendRegistry,
    GraphPlan,
    KernelRegistry,
    Program,
    TransferRegistry,
)
from tensorjit.plugins.opencl_backend import BACKEND, DEVICE

PLUGIN = "opencl_backend"
PRIORITY = 10


def check_available() -> str | None:
    from tensorjit.plugins.opencl_backend.runtime import unavailable_reason

    return unavailable_reason()


def _hardware() -> list[str]:
    from tensorjit.plugins.opencl_backend.runtime import describe_devices

    return describe_devices()


def _launch_plan(plan: GraphPlan) -> Program | None:
    """A function's launch plan (device_kernels/launch_plan.py), when it has kernels here."""
    from tensorjit.plugins.device_kernels.launch_plan import launch_plan_program
    from tensorjit.plugins.opencl_backend.target import OPENCL

    return launch_plan_program(OPENCL, plan)


@hookimpl
def tensorjit_register_backends(registry: BackendRegistry) -> None:
    from tensorjit.plugins.opencl_backend.arrays import OPENCL_ARRAYS
    from tensorjit.plugins.opencl_backend.dialect import OPENCL_DIALECT

    registry.add(
        Backend(
            BACKEND,
            device=DEVICE,
            priority=PRIORITY,
            check_available=check_available,
            description="OpenCL kernels from the shared renderer, run through pyopencl",
            plugin=PLUGIN,
            array_kind=OPENCL_ARRAYS,
            renderer=OPENCL_DIALECT,
            hardware=_hardware,
            whole_graph=_launch_plan,
        )
    )


@hookimpl
def tensorjit_register_kernels(registry: KernelRegistry) -> None:
    from tensorjit.plugins.opencl_backend.kernel_table import specs

    for spec in specs():
        registry.add_spec(spec)


@hookimpl
def tensorjit_register_transfers(registry: TransferRegistry) -> None:
    from tensorjit.plugins.device_kernels.transfers import register_transfers
    from tensorjit.plugins.opencl_backend.target import OPENCL

    register_transfers(registry, OPENCL)
