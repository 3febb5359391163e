"""The OpenCL device tensorjit runs on: choice, context, queue, memory pool, program
cache and kernel launches.

The device is chosen once, on first use, by ``config.opencl_device``: empty for the
first device (in platform order) whose compiler builds a probe kernel; ``"P:D"``
(indices, as ``PYOPENCL_CTX``) or text matched against ``"platform name: device name"``
(case-insensitive, as ``PYOPENCL_TEST``). A driver can list a device it cannot compile
for: PoCL 3.0 (the PyPI wheel's) names AMD Zen 5 CPUs "generic", which its own LLVM
refuses, so a listed device is not yet a usable one. Nothing here runs at import or
registration.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from tensorjit.plugins.device_kernels.arrays import (
    allocation_error,
    array_nbytes,
    bytes_text,
    c_strides,
)
from tensorjit.plugins.device_kernels.recording import note_allocation, note_launch
from tensorjit.plugins.opencl_backend.arrays import new_array

_LOCK = threading.Lock()
_RUNTIME: Runtime | None = None


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL device: pyopencl missing, no platform (no ICD), or none matches."""


def _pyopencl() -> Any:
    try:
        import pyopencl
    except ImportError as exc:
        raise OpenCLUnavailable(
            f"pyopencl is not installed ({exc}); install the extra: pip install 'tensorjit[opencl]'"
        ) from None
    return pyopencl


def list_devices() -> list[tuple[str, str, Any]]:
    """``(index "P:D", "platform: device", device)`` for every OpenCL device here."""
    cl = _pyopencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise OpenCLUnavailable(
            f"no OpenCL platform found (no ICD loader or driver): {exc}"
        ) from None
    found = []
    for p, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d, device in enumerate(devices):
            found.append((f"{p}:{d}", f"{platform.name.strip()}: {device.name.strip()}", device))
    return found


def describe_devices() -> list[str]:
    """One line per OpenCL device ("P:D platform: device ..."), the chosen one marked."""
    chosen = _RUNTIME.device if _RUNTIME is not None else None
    lines = []
    for index, label, device in list_devices():
        mark = "  <- config.opencl_device" if device == chosen else ""
        fp64 = "fp64" if device.double_fp_config else "no fp64"
        lines.append(
            f"{index} {label} ({device.max_compute_units} compute units, "
            f"{device.global_mem_size >> 20} MiB, {fp64}, driver {device.driver_version}){mark}"
        )
    return lines


# Small enough to build in milliseconds, but it goes through the whole compiler.
_PROBE_SOURCE = "__kernel void tj_probe(__global int *a) { a[get_global_id(0)] = 1; }"
# Where the driver's compiler fails for a CPU it does not know (module docstring).
_COMPILER_HINT = (
    "a PoCL that knows this CPU helps: on Debian/Ubuntu `apt install pocl-opencl-icd` "
    "(pyopencl finds system drivers too), or config.opencl_device names another device"
)


def compile_failure(device: Any) -> str | None:
    """None when ``device``'s compiler builds a probe kernel, else its error, shortened."""
    cl = _pyopencl()
    try:
        cl.Program(cl.Context([device]), _PROBE_SOURCE).build()
    except cl.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()] or lines[-1:]
        return "; ".join(dict.fromkeys(errors))[:300]
    return None


def choose_device(
    devices: list[tuple[str, str, Any]],
    selector: str,
    failure: Callable[[Any], str | None] = compile_failure,
) -> Any:
    """The device ``selector`` names among ``devices`` (``list_devices()``'s rows), one
    whose compiler works (``failure(device)`` is None); OpenCLUnavailable saying what
    each candidate's compiler said when none does."""
    if not devices:
        raise OpenCLUnavailable("no OpenCL device found (the platforms list none)")
    if selector:
        by_index = re.fullmatch(r"\d+(:\d+)?", selector) is not None  # never a name's digits
        candidates = [
            row
            for row in devices
            # "P" alone: that platform's devices
            if selector in (row[0], row[0].split(":")[0])
            or (not by_index and selector.lower() in row[1].lower())
        ]
        if not candidates:
            known = ", ".join(f"{index} {label!r}" for index, label, _ in devices)
            raise OpenCLUnavailable(
                f"config.opencl_device={selector!r} matches no device; found {known}"
            )
    else:
        candidates = devices
    refused = []
    for index, label, device in candidates:
        reason = failure(device)
        if reason is None:
            return device
        refused.append(f"{index} {label!r}: {reason}")
    which = f"the device config.opencl_device={selector!r} selects" if selector else "no"
    raise OpenCLUnavailable(
        f"{which} OpenCL device here compiles kernels ("
        + "; ".join(refused)
        + f"); {_COMPILER_HINT}"
    )


def select_device(selector: str) -> Any:
    """The device ``selector`` names (see the module docstring)."""
    return choose_device(list_devices(), selector)


def _pyopencl_tools() -> Any:
    _pyopencl()  # (its error where pyopencl is missing)
    import pyopencl.tools

    return pyopencl.tools


def _out_of_memory(exc: BaseException) -> bool:
    """Whether an allocation's error is the device's memory (not a bug of the call)."""
    cl = _pyopencl()
    if isinstance(exc, (MemoryError, cl.MemoryError)):
        return True
    return getattr(exc, "code", None) == cl.status_code.INVALID_BUFFER_SIZE


@dataclass
class Runtime:
    """The chosen device with its context, in-order queue, memory pool and programs."""

    device: Any
    context: Any
    queue: Any
    allocator: Any
    programs: dict[tuple, Any] = field(default_factory=dict)
    kernels: dict[tuple, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A Kernel object is shared by every function using its program, and calling it sets
    # its arguments then enqueues: two threads must not interleave the two.
    launch_lock: threading.Lock = field(default_factory=threading.Lock)
    group_limits: dict[int, int] = field(default_factory=dict)  # id(kernel) -> limit

    @property
    def name(self) -> str:
        return self.device.name.strip()

    @property
    def label(self) -> str:
        """The device as errors name it."""
        return f"the OpenCL device {self.name!r}"

    @property
    def fp64(self) -> bool:
        return bool(self.device.double_fp_config)

    @cached_property
    def is_cpu(self) -> bool:
        return bool(self.device.type & _pyopencl().device_type.CPU)

    @property
    def compute_units(self) -> int:
        return int(self.device.max_compute_units)

    @property
    def max_group_size(self) -> int:
        """The most work-items a work-group may have on this device."""
        return int(self.device.max_work_group_size)

    @property
    def work_per_item(self) -> str:
        from tensorjit.core.config import config

        return config.opencl_work_per_item

    @staticmethod
    def buffer_args(value: Any) -> list[Any]:
        """A device array as the kernel arguments ``__global char *p, long offset``."""
        return [value.base_data, np.int64(value.offset)]

    def cache_key(self, source: str, options: tuple[str, ...]) -> tuple:
        """Programs are cached per source, options, device and driver version (pyopencl
        also keeps built binaries on disk under the same kind of key)."""
        d = self.device
        return (source, options, d.name, d.driver_version, d.platform.name)

    def program(self, source: str, options: tuple[str, ...] = ()) -> Any:
        """The built program of ``source`` (built once per device and driver)."""
        key = self.cache_key(source, options)
        program = self.programs.get(key)
        if program is None:
            cl = _pyopencl()
            with self.lock:
                program = self.programs.get(key)
                if program is None:
                    try:
                        program = cl.Program(self.context, source).build(options=list(options))
                    except cl.RuntimeError as exc:
                        numbered = "\n".join(
                            f"{k + 1:4d} {line}" for k, line in enumerate(source.splitlines())
                        )
                        raise RuntimeError(
                            f"OpenCL build failed on {self.name}: {exc}\n{numbered}"
                        ) from None
                    self.programs[key] = program
        return program

    def kernel(self, source: str, name: str, options: tuple[str, ...] = ()) -> Any:
        """Kernel ``name`` of ``source``'s program (one kernel object per name)."""
        key = (source, options, name)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = _pyopencl().Kernel(self.program(source, options), name)
        return kernel

    def group_limit(self, kernel: Any) -> int:
        """The most work-items a work-group of ``kernel`` may have on this device (its
        registers and local memory may make it less than ``max_group_size``)."""
        limit = self.group_limits.get(id(kernel))  # (kernels are cached: ids stay)
        if limit is None:
            info = _pyopencl().kernel_work_group_info.WORK_GROUP_SIZE
            limit = int(kernel.get_work_group_info(info, self.device))
            self.group_limits[id(kernel)] = limit
        return limit

    @cached_property
    def max_buffer_bytes(self) -> int:
        """The largest buffer the device allocates (CL_DEVICE_MAX_MEM_ALLOC_SIZE)."""
        return int(self.device.max_mem_alloc_size)

    @cached_property
    def unpooled(self) -> Any:
        """Exact allocations, straight from the device: for buffers the pool would round
        up (its bins grow in steps of up to an eighth) past the largest one."""
        return _pyopencl_tools().ImmediateAllocator(self.queue)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        nbytes = array_nbytes(shape, dtype)
        limit = self.max_buffer_bytes
        if nbytes > limit:  # pyopencl would say only INVALID_BUFFER_SIZE
            why = f"its buffers hold at most {bytes_text(limit)} (CL_DEVICE_MAX_MEM_ALLOC_SIZE)"
            raise allocation_error(self.label, shape, dtype, nbytes, why)
        allocator = self.allocator
        # (a bin is under twice its request: only large buffers need the pool asked)
        if 2 * nbytes > limit and allocator.alloc_size(allocator.bin_number(nbytes)) > limit:
            allocator = self.unpooled
        strides = c_strides(shape, dtype.itemsize)
        try:
            value = new_array(self.queue, shape, dtype, strides, allocator)
        except (MemoryError, _pyopencl().Error) as exc:
            if not _out_of_memory(exc):
                raise
            raise allocation_error(self.label, shape, dtype, nbytes, str(exc)) from exc
        note_allocation(value)
        return value

    def enqueue(self, kernel: Any, geometry: tuple, args: tuple | list) -> None:
        """Enqueue ``kernel`` on ``geometry`` = (global size, local size or None)."""
        with self.launch_lock:
            kernel(self.queue, geometry[0], geometry[1], *args)

    @staticmethod
    def buffer_arg_address(arg: Any) -> int | None:
        """The address of a buffer argument (as ``arrays.buffer_address`` gives it), or
        None for any other argument: how a launch plan finds an array's buffer among a
        recorded launch's arguments (the next argument is its offset)."""
        holder = _pyopencl().MemoryObjectHolder
        return arg.int_ptr if isinstance(arg, holder) else None

    def _launch(self, kernel: Any, geometry: tuple, args: tuple) -> None:
        note_launch(kernel, geometry, args)
        self.enqueue(kernel, geometry, args)

    def launch(self, kernel: Any, work_items: int, *args: Any) -> None:
        """Run ``kernel`` over ``work_items`` work-items (none when zero)."""
        if work_items > 0:
            self._launch(kernel, ((int(work_items),), None), args)

    def launch_chunks(self, kernel: Any, work_items: int, *args: Any) -> None:
        """Run a kernel whose work-items each compute a chunk of elements. On a CPU
        device each work-item is its own work-group: PoCL spreads work-groups, not the
        items of one group, over its cores (a few large chunks in one group ran on one
        core: ``a+1`` at 10^7 took 7 ms instead of 5)."""
        if self.is_cpu:
            self.launch_groups(kernel, work_items, 1, *args)
        else:
            self.launch(kernel, work_items, *args)

    def launch_groups(self, kernel: Any, groups: int, group_size: int, *args: Any) -> None:
        """Run ``kernel`` over ``groups`` work-groups of ``group_size`` work-items."""
        if groups > 0:
            self._launch(kernel, ((int(groups * group_size),), (int(group_size),)), args)


def _make_runtime() -> Runtime:
    from tensorjit.core.config import config

    cl = _pyopencl()
    import pyopencl.tools as cl_tools

    device = select_device(config.opencl_device)
    context = cl.Context([device])
    queue = cl.CommandQueue(context)
    allocator = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    return Runtime(device, context, queue, allocator)


def runtime() -> Runtime:
    """The runtime of the configured device, made on first use."""
    global _RUNTIME
    if _RUNTIME is None:
        with _LOCK:
            if _RUNTIME is None:
                _RUNTIME = _make_runtime()
    return _RUNTIME


def unavailable_reason() -> str | None:
    """None when an OpenCL device can be used here, else why not (checked once)."""
    try:
        runtime()
    except OpenCLUnavailable as exc:
        return str(exc)
    except Exception as exc:  # a broken driver: report it, never crash compilation
        return f"OpenCL initialisation failed: {exc!r}"
    return None
