"""The host as one more ``Target`` of the shared kernel families (plugins/device_kernels).

A family written once for OpenCL and CUDA runs here unchanged: its kernels are compiled
as C by gcc (the C backend's compiler and cache) and launched over the C backend's
worker pool. What the families need from a device (target.py's runtime protocol) maps
onto the host as follows:

- a kernel ``TJ_KERNEL void name(params)`` becomes ``name_item(long tj_gid, params)``,
  the body of one work-item (``global_id`` is ``tj_gid``), and an exported ``name``
  that runs work-items ``0 .. items-1`` in parts on the pool (``tj_parallel``); pointer
  parameters travel as integer addresses (``intptr_t``), so no cffi pointer objects
  are made per call;
- device arrays are NumPy arrays: ``buffer_args`` gives the data address and a zero
  offset (an ``ndarray`` is its own buffer);
- the dialect is C with the device dialects' names (``long``, ``uchar``), overloaded
  math from ``<tgmath.h>``, and OpenCL's ``min``/``max``.

Used for a family the C backend has no kernel of its own for (MRG31k3p), so the host
runs what the devices run rather than ``Op.perform``.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorjit.core.devices import HOST, HostArrays
from tensorjit.plugins.c_backend.build import compiler, parallel
from tensorjit.plugins.device_kernels.dialect import (
    DEVICE_TYPES,
    HELPERS,
    UNARY,
    UNSIGNED_NAMES,
    UNSIGNED_TYPEDEFS,
    DeviceDialect,
    device_helpers,
    powi,
)
from tensorjit.plugins.device_kernels.target import Target

BACKEND = "c"
PLUGIN = "c_backend"

# The device dialects' names and builtins, in C.
HOST_NAMES = f"""#define _GNU_SOURCE
#include <math.h>
#include <tgmath.h>
#include <stdint.h>
{UNSIGNED_TYPEDEFS}
#define tj_float_rn(x) ((float)(x))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define TJ_KERNEL
"""
PREAMBLE = HOST_NAMES + device_helpers("static inline", ("float", "double"))

# A flat kernel's loop over its work-item's chunk of TJ_CHUNK elements.
FLAT_LOOP = (
    "for (long {i} = tj_gid * TJ_CHUNK, tj_end = min({i} + TJ_CHUNK, (long){n}); "
    "{i} < tj_end; {i}++)"
)

HOST_DIALECT = DeviceDialect(
    "C (host work-items)",
    DEVICE_TYPES,
    math_suffix_f32=False,
    unary=UNARY,
    helpers=HELPERS,
    kernel_qualifier="TJ_KERNEL",
    global_qualifier="",
    function_qualifier="static inline",
    restrict="restrict",
    signed_wraps=True,  # compiled as the C backend's kernels are (-fwrapv)
    powi=powi,
    flat_loop=FLAT_LOOP,
    preamble=PREAMBLE,
    global_id="tj_gid",
)

_KERNEL = re.compile(r"TJ_KERNEL\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{")
# Work-items a part of a launch takes at least (each item is a loop of its own).
ITEMS_PER_PART = 4


@dataclass(frozen=True)
class Param:
    ctype: str  # as declared, qualifiers kept
    name: str

    @property
    def is_pointer(self) -> bool:
        return "*" in self.ctype


def _params(text: str) -> list[Param]:
    params = []
    for part in text.split(","):
        part = " ".join(part.replace("restrict", " ").split())
        match = re.fullmatch(r"(.*?[\s*])(\w+)", part)
        if match is None:
            raise ValueError(f"host target: can not read the kernel parameter {part!r}")
        params.append(Param(match.group(1).strip(), match.group(2)))
    return params


def _wire_type(param: Param) -> str:
    if param.is_pointer:
        return "intptr_t"
    # cffi parses its declarations without the program's typedefs
    return " ".join(UNSIGNED_NAMES.get(word, word) for word in param.ctype.split())


def _launcher(name: str, params: list[Param]) -> tuple[str, str]:
    """(C source, cffi declaration) of the exported ``name``: work-items in parts."""
    clash = {"tj_items", "tj_args"} & {p.name for p in params}
    if clash:
        raise ValueError(f"host target: kernel {name} has a parameter named {clash.pop()}")
    wire = [(_wire_type(p), p.name) for p in params]
    fields = "".join(f"    {t} {n};\n" for t, n in wire)
    call = ", ".join(f"({p.ctype})a->{p.name}" if p.is_pointer else f"a->{p.name}" for p in params)
    signature = ", ".join(f"{t} {n}" for t, n in wire)
    source = f"""
typedef struct {{
{fields}}} {name}_args;
static void {name}_part(void *c, int64_t lo, int64_t hi, int part) {{
    {name}_args *a = ({name}_args *)c;
    (void)part;
    for (long g = lo; g < hi; g++) {name}_item(g, {call});
}}
void {name}(int64_t tj_items, {signature}) {{
    {name}_args tj_args = {{{", ".join(p.name for p in params)}}};
    if (tj_parallel && tj_items >= 2 * {ITEMS_PER_PART}) {{
        tj_parallel({name}_part, &tj_args, tj_items, {ITEMS_PER_PART}, 1);
        return;
    }}
    {name}_part(&tj_args, 0, tj_items, 0);
}}
"""
    return source, f"void {name}(int64_t tj_items, {signature});"


def host_program(source: str, options: tuple[str, ...] = ()) -> tuple[str, str, list[str]]:
    """(C source, cffi declarations, exported names) of a family's program: each
    kernel's body as a work-item function, and its launcher. ``options`` are the
    device compilers' ``-DNAME=VALUE`` build options, as ``#define`` lines."""
    defines = "".join(
        f"#define {opt[2:].replace('=', ' ', 1)}\n" for opt in options if opt.startswith("-D")
    )
    kernels = [(m.group(1), _params(m.group(2))) for m in _KERNEL.finditer(source)]
    body = _KERNEL.sub(
        lambda m: f"static inline void {m.group(1)}_item(long tj_gid, {m.group(2)}) {{", source
    )
    launchers = [_launcher(name, params) for name, params in kernels]
    full = defines + body + parallel.DECLARATIONS + "".join(s for s, _ in launchers)
    cdef = parallel.CDEF + "\n".join(d for _, d in launchers)
    return full, cdef, [name for name, _ in kernels]


@dataclass
class HostRuntime:
    """The runtime protocol of device_kernels/target.py over host memory and the pool."""

    device: str = HOST
    fp64: bool = True
    is_cpu: bool = True
    max_group_size: int = 1  # work-groups of one work-item (no local memory, no barrier)
    work_per_item: str = "auto"
    kernels: dict[tuple, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def compute_units(self) -> int:
        from tensorjit.plugins.c_backend.build import threads

        return max(threads.thread_count(), 1)

    def kernel(self, source: str, name: str, options: tuple[str, ...] = ()) -> Any:
        key = (source, options, name)
        kernel = self.kernels.get(key)
        if kernel is None:
            with self.lock:
                kernel = self.kernels.get(key)  # another thread may have built it
                if kernel is not None:
                    return kernel
                full, cdef, names = host_program(source, options)
                _, lib = compiler.load(full, cdef, tuple(names), "host work-item kernels")
                for each in names:
                    self.kernels[(source, options, each)] = getattr(lib, each)
                kernel = self.kernels[key]
        return kernel

    @staticmethod
    def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype)

    @staticmethod
    def buffer_args(value: np.ndarray) -> list[Any]:
        """An array as ``char *p, long offset``: its data address, offset zero."""
        return [int(value.ctypes.data), np.int64(0)]

    @staticmethod
    def launch(kernel: Any, work_items: int, *args: Any) -> None:
        if work_items > 0:
            kernel(int(work_items), *(int(a) if isinstance(a, np.integer) else a for a in args))

    launch_chunks = launch

    @staticmethod
    def group_limit(kernel: Any) -> int:
        return 1  # (as max_group_size)

    def launch_groups(self, kernel: Any, groups: int, group_size: int, *args: Any) -> None:
        if group_size != 1:
            raise ValueError("the host target runs work-groups of one work-item only")
        self.launch(kernel, groups, *args)


_RUNTIME = HostRuntime()


def runtime() -> HostRuntime:
    return _RUNTIME


HOST_TARGET = Target(
    backend=BACKEND,
    device=HOST,
    plugin=PLUGIN,
    dialect=HOST_DIALECT,
    runtime=runtime,
    arrays=HostArrays(),
    preamble=lambda dtypes: PREAMBLE,
)


def specs() -> list:
    """The shared families' specs the C backend registers: MRG31k3p, which it has no
    kernel of its own for (faster than ``Op.perform``'s NumPy, the same stream bit for
    bit). Not argmax: the family's per-element loop (one work-item per output, NaN
    checks) is slower than NumPy's vectorised argmax on the host; a host schedule of it
    (vector lanes) would have to come first. benchmarks/host_target.py measures both."""
    from tensorjit.plugins.device_kernels import random

    return list(random.specs(HOST_TARGET))
