"""The CUDA device tensorjit runs on, through pycuda: choice, context, memory pools,
modules and launches.

The device is chosen once, on first use: ``config.device=cudaN`` names ordinal N,
``device=cuda`` (or a function placed on "cuda" while ``config.device`` is another)
takes ``config.cuda_device`` (0 by default). Its primary context is made current in each
thread that launches (pycuda contexts are per thread). Device memory comes from a pool
(``pycuda.tools.DeviceMemoryPool``: freed blocks are kept for the next allocation of
their size class), host transfers stage through page-locked buffers from a second pool
(DMA reads pinned memory directly; pageable memory is copied by the driver first).
Kernels run on the context's default stream, in launch order, as cuBLAS calls do.
Nothing here runs at import or registration.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

import numpy as np

from tensorjit.plugins.cuda_backend.compiler import compile_ptx, entry_names
from tensorjit.plugins.device_kernels.arrays import allocation_error, array_nbytes
from tensorjit.plugins.device_kernels.recording import note_allocation, note_launch

BLOCK = 256  # threads per block of a flat launch (a multiple of the warp size)
# Transfers up to this size stage through pinned memory (kept in a pool for the next);
# larger ones copy from pageable memory rather than pin that much for the process.
STAGE_MAX_BYTES = 64 << 20
# Kernel argument types (the kernel families pass pointers as np.uintp, lengths and
# offsets as np.int64) -> struct formats of a prepared launch.
ARG_FORMATS = {np.uintp: "P", np.int64: "q", np.int32: "i", np.float64: "d", np.float32: "f"}
_LOCK = threading.Lock()
_RUNTIME: Runtime | None = None


class CudaUnavailable(RuntimeError):
    """No usable CUDA device: pycuda missing, no driver, or no device."""


def _driver() -> Any:
    try:
        import pycuda.driver as driver
    except ImportError as exc:
        # pycuda's import loads libcuda: a missing driver shows up here too.
        text = str(exc)
        if "libcuda" in text:
            raise CudaUnavailable(f"no CUDA driver (libcuda could not be loaded: {text})") from None
        raise CudaUnavailable(
            f"pycuda is not installed ({text}); install the extra: pip install 'tensorjit[cuda]'"
        ) from None
    try:
        driver.init()
    except driver.Error as exc:
        raise CudaUnavailable(f"the CUDA driver did not initialise: {exc}") from None
    return driver


def chosen_ordinal() -> int:
    from tensorjit.core.config import config
    from tensorjit.core.devices import default_ordinal, split_ordinal

    if split_ordinal(config.device)[0] == "cuda" and default_ordinal() is not None:
        return int(default_ordinal())
    return int(config.cuda_device)


def describe_devices() -> list[str]:
    """One line per CUDA device, the chosen one marked."""
    driver = _driver()
    lines = []
    chosen = chosen_ordinal()
    for k in range(driver.Device.count()):
        d = driver.Device(k)
        major, minor = d.compute_capability()
        sms = d.get_attribute(driver.device_attribute.MULTIPROCESSOR_COUNT)
        mark = "  <- chosen" if k == chosen else ""
        lines.append(
            f"cuda{k} {d.name()} (sm_{major}{minor}, {sms} SMs, {d.total_memory() >> 20} MiB){mark}"
        )
    return lines


class _Pushed:
    """This thread's push of the device context: popped when the thread ends (CPython
    frees a thread's ``threading.local`` values on that thread) or when the runtime
    closes. pycuda aborts the process if a thread ends with its context stack not
    empty."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    def __del__(self) -> None:
        try:
            self.driver.Context.pop()
        except Exception:
            pass


class Block:
    """A pooled device allocation that makes the context current in the thread that
    frees it (pycuda's pool needs an active context to take a block back)."""

    __slots__ = ("allocation", "rt")

    def __init__(self, allocation: Any, rt: Runtime) -> None:
        self.allocation, self.rt = allocation, rt

    def __int__(self) -> int:
        return int(self.allocation)

    def __del__(self) -> None:
        if not self.rt.closed:
            try:
                self.rt.make_current()
            except Exception:
                pass
        self.allocation = None  # freed here, with the context current


class Runtime:
    """The chosen device: its context, pools, modules and launches (target.py's
    runtime contract)."""

    is_cpu = False
    fp64 = True
    work_per_item = "auto"

    def __init__(self, ordinal: int) -> None:
        driver = _driver()
        import pycuda.tools as tools

        count = driver.Device.count()
        if count == 0:
            raise CudaUnavailable("no CUDA device (the driver reports none)")
        if not 0 <= ordinal < count:
            raise CudaUnavailable(f"cuda{ordinal} does not exist: this machine has {count}")
        self.driver = driver
        self.device = driver.Device(ordinal)
        self.ordinal = ordinal
        self.context = self.device.retain_primary_context()
        self._current = threading.local()
        self.closed = False
        atexit.register(self.close)
        self.make_current()
        major, minor = self.device.compute_capability()
        from tensorjit.plugins.cuda_backend.compiler import supported_arch

        self.arch = supported_arch(f"compute_{major}{minor}")
        attribute = driver.device_attribute
        self.compute_units = self.device.get_attribute(attribute.MULTIPROCESSOR_COUNT)
        # the most threads a block may have (the groups schedule's work-groups)
        self.max_group_size = self.device.get_attribute(attribute.MAX_THREADS_PER_BLOCK)
        self.pool = tools.DeviceMemoryPool()
        self.pinned = tools.PageLockedMemoryPool()
        self.modules: dict[str, Any] = {}
        self.kernels: dict[tuple[str, str], Any] = {}
        self.formats: dict[int, str] = {}  # id(kernel) -> its prepared argument format
        self.group_limits: dict[int, int] = {}  # id(kernel) -> its threads per block limit
        self.lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.device.name()

    def make_current(self) -> None:
        """Push the device's context on this thread once (pycuda contexts are per
        thread); the push is popped when the thread ends."""
        if not self.closed and getattr(self._current, "guard", None) is None:
            self.context.push()
            self._current.guard = _Pushed(self.driver)

    def close(self) -> None:
        """At exit: the pools stop keeping blocks (later frees go straight back to the
        driver), and this thread's context push is popped."""
        if self.closed:
            return
        self.closed = True
        try:
            self.pool.stop_holding()
            self.pinned.free_held()
        finally:
            self._current.guard = None

    # ------------------------------------------------------------ memory
    def allocate(self, nbytes: int) -> Block:
        self.make_current()
        return Block(self.pool.allocate(max(int(nbytes), 1)), self)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        from tensorjit.plugins.cuda_backend.arrays import CudaArray

        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        nbytes = array_nbytes(shape, dtype)
        try:
            base = self.allocate(nbytes) if nbytes else None
        except (MemoryError, self.driver.MemoryError) as exc:  # (not a sticky launch error)
            where = f"the CUDA device cuda{self.ordinal} {self.name!r}"
            raise allocation_error(where, shape, dtype, nbytes, str(exc)) from exc
        value = CudaArray(shape, dtype, base)
        note_allocation(value)
        return value

    def to_device(self, dest_pointer: int, host: np.ndarray) -> None:
        """Copy contiguous ``host`` to device memory, staged through pinned memory
        (flat: pycuda's pinned pool does not take 0-d shapes)."""
        self.make_current()
        flat = np.asarray(host, order="C").reshape(-1)
        if flat.nbytes > STAGE_MAX_BYTES:
            self.driver.memcpy_htod(dest_pointer, flat)
            return
        staging = self.pinned.allocate((flat.size,), flat.dtype)
        staging[...] = flat
        self.driver.memcpy_htod(dest_pointer, staging)

    def to_host(self, source_pointer: int, shape: tuple, dtype: Any) -> np.ndarray:
        """A host copy of ``shape``/``dtype`` contiguous device memory (a sync)."""
        self.make_current()
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        if size * dtype.itemsize > STAGE_MAX_BYTES:
            out = np.empty(size, dtype)
            self.driver.memcpy_dtoh(out, source_pointer)
            return out.reshape(shape)
        staging = self.pinned.allocate((size,), dtype)
        self.driver.memcpy_dtoh(staging, source_pointer)
        return staging.reshape(shape).copy()

    @staticmethod
    def buffer_args(value: Any) -> list[Any]:
        """A device array as the kernel arguments ``char *p, long offset``."""
        return [np.uintp(value.pointer_base), np.int64(value.offset)]

    # ------------------------------------------------------------ kernels
    def kernel(self, source: str, name: str) -> Any:
        """Kernel ``name`` of ``source``'s module (PTX built once per source and
        architecture, loaded once per process)."""
        key = (source, name)
        kernel = self.kernels.get(key)
        if kernel is None:
            with self.lock:
                module = self.modules.get(source)
                if module is None:
                    ptx = compile_ptx(source, self.arch)
                    if name not in entry_names(ptx):
                        raise RuntimeError(f"kernel {name} is not in its program")
                    self.make_current()
                    module = self.modules[source] = self._load(ptx)
                kernel = self.kernels[key] = module.get_function(name)
        return kernel

    def _load(self, ptx: str) -> Any:
        try:
            return self.driver.module_from_buffer(ptx.encode())
        except self.driver.Error as exc:
            from tensorjit.plugins.cuda_backend.compiler import compiler

            version = self.driver.get_driver_version()
            raise RuntimeError(
                f"the CUDA driver (version {version}) could not load PTX for {self.arch} "
                f"from {compiler().describe()}: {exc} (a compiler newer than the driver "
                "writes PTX the driver can not read: use the toolkit's nvcc, "
                "config.cuda_compiler=nvcc, or a matching nvidia-cuda-nvrtc)"
            ) from None

    @staticmethod
    def buffer_arg_address(arg: Any) -> int | None:
        """The address of a buffer argument (``buffer_args`` passes pointers as
        ``np.uintp``), or None for any other argument (see the OpenCL runtime's)."""
        return int(arg) if type(arg) is np.uintp else None

    def enqueue(self, kernel: Any, geometry: tuple, args: tuple | list) -> None:
        """Launch ``kernel`` on ``geometry`` = (blocks, threads per block)."""
        self._call(kernel, geometry[0], geometry[1], tuple(args))

    def _launch(self, kernel: Any, blocks: int, threads: int, args: tuple) -> None:
        note_launch(kernel, (blocks, threads), args)
        self._call(kernel, blocks, threads, args)

    def _call(self, kernel: Any, blocks: int, threads: int, args: tuple) -> None:
        """A prepared launch: the argument layout is packed from a format fixed at the
        kernel's first launch (pycuda's unprepared call inspects every argument each
        time)."""
        fmt = self.formats.get(id(kernel))
        if fmt is None:
            fmt = "".join(ARG_FORMATS[type(a)] for a in args)
            kernel.prepare(fmt)
            self.formats[id(kernel)] = fmt
        self.make_current()
        kernel.prepared_call((int(blocks), 1), (int(threads), 1, 1), *args)

    def launch(self, kernel: Any, work_items: int, *args: Any) -> None:
        """Run ``kernel`` over at least ``work_items`` threads (none when zero); every
        kernel guards its index."""
        if work_items > 0:
            self._launch(kernel, -(-int(work_items) // BLOCK), BLOCK, args)

    launch_chunks = launch

    def launch_groups(self, kernel: Any, groups: int, group_size: int, *args: Any) -> None:
        if groups > 0:
            self._launch(kernel, groups, group_size, args)

    def group_limit(self, kernel: Any) -> int:
        """The most threads a block of ``kernel`` may have (its registers can make it
        less than the device's)."""
        limit = self.group_limits.get(id(kernel))  # (kernels are cached: ids stay)
        if limit is None:
            attribute = self.driver.function_attribute.MAX_THREADS_PER_BLOCK
            limit = self.group_limits[id(kernel)] = int(kernel.get_attribute(attribute))
        return limit

    def synchronize(self) -> None:
        self.make_current()
        self.context.synchronize()


def runtime() -> Runtime:
    """The runtime of the chosen device, made on first use."""
    global _RUNTIME
    if _RUNTIME is None:
        with _LOCK:
            if _RUNTIME is None:
                _RUNTIME = Runtime(chosen_ordinal())
    return _RUNTIME


def unavailable_reason() -> str | None:
    """None when a CUDA device can be used here, else exactly why not (no pycuda, no
    driver, no device)."""
    try:
        runtime()
    except CudaUnavailable as exc:
        return str(exc)
    except Exception as exc:  # a broken driver: report it, never crash compilation
        return f"CUDA initialisation failed: {exc!r}"
    return None
