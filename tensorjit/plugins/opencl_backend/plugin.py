"""Entry point of the OpenCL backend: its backend object and kernel specs.

Registration imports neither pyopencl nor any driver: whether a device is usable is
checked when the backend is first asked for (the reason is shown by
``python -m tensorjit info`` and in the warning when it is not).
"""

from __future__ import annotations

from tensorjit.plugins.device_kernels.backend_hooks import DeviceBackendHooks
from tensorjit.plugins.opencl_backend import BACKEND, DEVICE

PLUGIN = "opencl_backend"
PRIORITY = 10


def check_available() -> str | None:
    from tensorjit.plugins.opencl_backend.runtime import unavailable_reason

    return unavailable_reason()


def _hardware() -> list[str]:
    from tensorjit.plugins.opencl_backend.runtime import describe_devices

    return describe_devices()


HOOKS = DeviceBackendHooks(
    BACKEND,
    device=DEVICE,
    plugin=PLUGIN,
    priority=PRIORITY,
    description="OpenCL kernels from the shared renderer, run through pyopencl",
    check_available=check_available,
    hardware=_hardware,
    arrays="tensorjit.plugins.opencl_backend.arrays:OPENCL_ARRAYS",
    dialect="tensorjit.plugins.opencl_backend.dialect:OPENCL_DIALECT",
    target="tensorjit.plugins.opencl_backend.target:OPENCL",
    specs="tensorjit.plugins.opencl_backend.kernel_table:specs",
)


# the hook implementations (pluggy finds them under these names)
tensorjit_register_backends = HOOKS.tensorjit_register_backends
tensorjit_register_kernels = HOOKS.tensorjit_register_kernels
tensorjit_register_transfers = HOOKS.tensorjit_register_transfers
