"""Entry point of the CUDA backend: its backend object and kernel specs.

Registration imports neither pycuda nor the driver: whether a device is usable is
checked when the backend is first asked for (``python -m tensorjit info`` shows the
devices, or exactly why CUDA is unavailable: no pycuda, no driver, no device).
"""

from __future__ import annotations

from tensorjit.plugins.cuda_backend import BACKEND, DEVICE
from tensorjit.plugins.device_kernels.backend_hooks import DeviceBackendHooks

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


HOOKS = DeviceBackendHooks(
    BACKEND,
    device=DEVICE,
    plugin=PLUGIN,
    priority=PRIORITY,
    description="CUDA kernels from the shared renderer and cuBLAS, run through pycuda",
    check_available=check_available,
    hardware=_hardware,
    arrays="tensorjit.plugins.cuda_backend.arrays:CUDA_ARRAYS",
    dialect="tensorjit.plugins.cuda_backend.dialect:CUDA_DIALECT",
    target="tensorjit.plugins.cuda_backend.target:CUDA",
    specs="tensorjit.plugins.cuda_backend.kernel_table:specs",
)


# the hook implementations (pluggy finds them under these names)
tensorjit_register_backends = HOOKS.tensorjit_register_backends
tensorjit_register_kernels = HOOKS.tensorjit_register_kernels
tensorjit_register_transfers = HOOKS.tensorjit_register_transfers
