"""Entry point of the CUDA backend: its backend object and kernel specs.

Registration imports neither pycuda nor the driver: whether a device is usable is
checked when the backend is first asked for (``python -m tensorjit info`` shows the
devices, or exactly why CUDA is unavailable: no pycuda, no driver, no device).
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
from tensorjit.plugins.cuda_backend import BACKEND, DEVICE

PLUGIN = "cuda_backend"
PRIORITY = 10


def check_available() -> str | None:
    from tensorjit.plugins.cuda_backend.runtime import unavailable_reason

    return unavailable_reason()


def _hardware() -> list[str]:
    from tensorjit.plugins.cuda_backend.compiler import NoCudaCompiler, compiler
    from tensorjit.plugins.cuda_backend.runtime import CudaUnavailable, describe_devices

    try:
        lines = [f"compiler: {compiler().describe()}"]
    except NoCudaCompiler as exc:
        lines = [f"compiler: none ({exc})"]
    try:
        return lines + describe_devices()
    except CudaUnavailable as exc:
        return [*lines, f"devices: none ({exc})"]


def _launch_plan(plan: GraphPlan) -> Program | None:
    """A function's launch plan (device_kernels/launch_plan.py), when it has kernels here."""
    from tensorjit.plugins.cuda_backend.target import CUDA
    from tensorjit.plugins.device_kernels.launch_plan import launch_plan_program

    return launch_plan_program(CUDA, plan)


@hookimpl
def tensorjit_register_backends(registry: BackendRegistry) -> None:
    from tensorjit.plugins.cuda_backend.arrays import CUDA_ARRAYS
    from tensorjit.plugins.cuda_backend.dialect import CUDA_DIALECT

    registry.add(
        Backend(
            BACKEND,
            device=DEVICE,
            priority=PRIORITY,
            check_available=check_available,
            description="CUDA kernels from the shared renderer and cuBLAS, run through pycuda",
            plugin=PLUGIN,
            array_kind=CUDA_ARRAYS,
            renderer=CUDA_DIALECT,
            hardware=_hardware,
            whole_graph=_launch_plan,
        )
    )


@hookimpl
def tensorjit_register_kernels(registry: KernelRegistry) -> None:
    from tensorjit.plugins.cuda_backend.kernel_table import specs

    for spec in specs():
        registry.add_spec(spec)


@hookimpl
def tensorjit_register_transfers(registry: TransferRegistry) -> None:
    from tensorjit.plugins.cuda_backend.target import CUDA
    from tensorjit.plugins.device_kernels.transfers import register_transfers

    register_transfers(registry, CUDA)
