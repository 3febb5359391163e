"""Typed configuration, set from ``TENSORJIT_FLAGS`` ("name=value,name=value") and in code.

``config.floatX = "float32"`` sets a flag; ``with config.change_flags(floatX="float32"):``
sets it for a block. Unknown names and invalid values are errors, never ignored.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConfigOption:
    name: str
    default: Any
    doc: str
    parse: Callable[[Any], Any]


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"expected one of {allowed}, got {value!r}")
        return value

    return parse


def _auto_or_bytes(value: Any) -> str | int:
    if value == "auto":
        return value
    return _non_negative_int(value, "'auto' or a number of bytes >= 0")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean, got {value!r}")


def _name_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.replace(";", ",").split(",") if v.strip())
    return tuple(value)


def _positive_seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"expected a number of seconds > 0, got {value!r}")
    return seconds


def _non_negative_int(value: Any, expected: str = "a whole number >= 0") -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise ValueError(f"expected {expected}, got {value!r}")
    return number


def _auto_or_threads(value: Any) -> str | int:
    if value == "auto":
        return value
    count = _non_negative_int(value, "'auto' or a number of threads >= 1")
    if count < 1 or str(value).strip() != str(count):  # 2.5 or "2.0" is not a count
        raise ValueError(f"expected 'auto' or a number of threads >= 1, got {value!r}")
    return count


def _default_compiledir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tensorjit")


_OPTIONS = [
    ConfigOption(
        "floatX",
        "float64",
        "default float dtype of tensor constructors",
        _choice("float64", "float32", "float16"),
    ),
    ConfigOption(
        "device",
        "cpu",
        "default device: where computation is placed when a backend of it covers a node, "
        "and where shared() puts tensors without target=",
        str,
    ),
    ConfigOption(
        "opencl_device",
        "",
        "the OpenCL device of device=opencl: empty for the first one, 'P:D' (platform and "
        "device indices, as PYOPENCL_CTX) or text matched in 'platform: device' names; "
        "read once, when OpenCL is first used (`python -m tensorjit info` lists devices)",
        str,
    ),
    ConfigOption(
        "cuda_device",
        0,
        "the CUDA device (ordinal) of device=cuda; device=cudaN names one directly; read "
        "once, when CUDA is first used (`python -m tensorjit info` lists devices)",
        int,
    ),
    ConfigOption(
        "cuda_compiler",
        "auto",
        "what compiles CUDA kernels to PTX: 'nvcc', 'nvrtc' (the nvidia-cuda-nvrtc wheel or "
        "a libnvrtc), or 'auto' (nvcc where installed, else NVRTC)",
        _choice("auto", "nvcc", "nvrtc"),
    ),
    ConfigOption(
        "opencl_work_per_item",
        "auto",
        "elements each work-item of a flat OpenCL kernel computes: 'auto' (chunks on CPU "
        "devices, one element on GPUs) or a number",
        _auto_or_bytes,
    ),
    ConfigOption(
        "device_schedule",
        "auto",
        "how device kernels that fold rows (softmax, row reductions, argmax) share them "
        "out: 'groups' (a work-group per row, a tree in local memory: what a GPU wants), "
        "'items' (a chunk of rows per work-item: what a CPU device wants) or 'auto' (groups "
        "on a GPU for rows of 32 elements or more); also whether convolutions and pooling "
        "run on the device ('groups', or 'auto' on a GPU) or on the host's kernels (a CPU "
        "device: the same cores, a real BLAS); forcing 'groups' runs the GPU shapes on a "
        "CPU device such as PoCL",
        _choice("auto", "groups", "items"),
    ),
    ConfigOption(
        "device_launch_plans",
        True,
        "whether a function on a device records its kernels' launches on the first call "
        "with new input shapes and replays them on later calls (no Python per node; "
        "plugins/device_kernels/launch_plan.py)",
        _bool,
    ),
    ConfigOption(
        "assert_no_cpu_op",
        "ignore",
        "for functions using a device: 'raise' makes compiling fail, naming the nodes, when "
        "a node would run on the host (transfers and host scalars excepted); 'warn' warns",
        _choice("ignore", "warn", "raise"),
    ),
    ConfigOption(
        "mode",
        "FAST_RUN",
        "default compilation mode",
        _choice("FAST_RUN", "FAST_COMPILE", "DebugMode"),
    ),
    ConfigOption("compiledir", _default_compiledir(), "cache directory for compiled code", str),
    ConfigOption(
        "cc",
        "",
        "C compiler command for compiled backends (empty: $CC, else cc, else gcc)",
        str,
    ),
    ConfigOption(
        "compile_lock_timeout",
        120,
        "seconds a compile waits for another process's lock on the same cache entry; "
        "then it warns (naming the holder's pid) and compiles in a private temporary "
        "directory instead",
        lambda v: _positive_seconds(v),
    ),
    ConfigOption(
        "cache_max_bytes",
        4 * 2**30,
        "size the compile cache is kept under by evicting least recently used entries "
        "(0: no limit); python -m tensorjit cache prune applies it now",
        lambda v: _non_negative_int(v),
    ),
    ConfigOption("cflags", "", "extra flags for the C compiler (e.g. -march=native)", str),
    ConfigOption(
        "blas",
        "auto",
        "BLAS of the C backend's products: 'numpy' (the OpenBLAS NumPy's wheel bundles), "
        "'scipy' (scipy.linalg.cython_blas), 'auto' (NumPy's if it has one, else SciPy's)",
        _choice("auto", "numpy", "scipy"),
    ),
    ConfigOption(
        "stream_min_bytes",
        "auto",
        "a compiled program's elementwise outputs are written with non-temporal stores "
        "when their step touches at least this many bytes: 'auto' (half the last-level "
        "cache), a number, or 0 (never)",
        _auto_or_bytes,
    ),
    ConfigOption(
        "row_block_bytes",
        "auto",
        "a compiled program runs consecutive elementwise and reduction steps over the "
        "same rows block of rows by block of rows, each block filling at most this many "
        "bytes of cache, the blocks shared out over the C backend's threads: 'auto' "
        "(half a core's L2 cache; on more than one thread only for rows that do not fit "
        "the last-level cache), a number, or 0 (never: each step over all rows)",
        _auto_or_bytes,
    ),
    ConfigOption(
        "threads",
        "auto",
        "threads of the C backend's elementwise, reduction and row kernels above a size "
        "threshold: 'auto' (the cores this process may run on) or a number, which also "
        "sets the threads of the BLAS the products call (NumPy's OpenBLAS)",
        _auto_or_threads,
    ),
    ConfigOption(
        "scan_record_residuals",
        True,
        "whether a scan's gradient has the forward loop record the per-step values its "
        "backward loop reads and would otherwise compute again (gates, products with the "
        "recurrent weights): a row per step and value of memory instead of the forward's "
        "work done twice (tensorjit/scan/residuals.py); read when the gradient is built",
        _bool,
    ),
    ConfigOption("allow_gc", True, "free temporaries after their last use", _bool),
    ConfigOption(
        "whole_graph",
        True,
        "run a graph as one compiled program when a backend covers all its nodes",
        _bool,
    ),
    ConfigOption("plugins_blocklist", (), "entry-point names of plugins not to load", _name_list),
    ConfigOption(
        "excluded_rewrites",
        (),
        "names of rewrites no mode runs (e.g. local_gemm;elemwise_fusion)",
        _name_list,
    ),
    ConfigOption("profile_rewrites", False, "print each compiled function's rewrite report", _bool),
    ConfigOption(
        "profile", False, "record run time per node of every function (f.profile.report())", _bool
    ),
    ConfigOption(
        "on_unused_input",
        "raise",
        "default for function(on_unused_input=...)",
        _choice("raise", "warn", "ignore"),
    ),
]


def split_flags(text: str) -> list[str]:
    """``TENSORJIT_FLAGS`` entries: separated by commas, except inside a value that is
    quoted whole (its first character after ``=`` a quote), so a value with commas is
    quoted: ``excluded_rewrites="local_gemm,elemwise_fusion",floatX=float32``. A quote
    elsewhere is an ordinary character (``compiledir=/tmp/o'brien``)."""
    entries, current, quote = [], "", None
    for char in text:
        if quote is not None:
            current += char
            if char == quote:
                quote = None
        elif char in "\"'" and current.rstrip().endswith("="):
            quote = char
            current += char
        elif char == ",":
            entries.append(current)
            current = ""
        else:
            current += char
    if quote is not None:
        raise ValueError(f"TENSORJIT_FLAGS has an unclosed {quote} quote: {text!r}")
    entries.append(current)
    return entries


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


# Other names accepted for an option (the issue tracker and older docs use them).
_ALIASES = {"cache_dir": "compiledir"}


class Config:
    """Holds the current value of every option; attribute access reads and writes them."""

    def __init__(self, options: list[ConfigOption], flags: str = ""):
        object.__setattr__(self, "_options", {o.name: o for o in options})
        object.__setattr__(self, "_values", {o.name: o.parse(o.default) for o in options})
        object.__setattr__(self, "_watchers", {})
        for item in split_flags(flags):
            if not item.strip():
                continue
            if "=" not in item:
                raise ValueError(f"TENSORJIT_FLAGS entry {item!r} is not of the form name=value")
            name, value = item.split("=", 1)
            self._set(name.strip(), _unquote(value.strip()), origin="TENSORJIT_FLAGS")

    def _set(self, name: str, value: Any, origin: str = "code") -> None:
        name = _ALIASES.get(name, name)
        option = self._options.get(name)
        if option is None:
            raise AttributeError(
                f"unknown config option {name!r} (from {origin}); known: {sorted(self._options)}"
            )
        try:
            parsed = option.parse(value)
        except ValueError as exc:
            raise ValueError(f"config option {name!r} (from {origin}): {exc}") from None
        self._store(name, parsed)

    def _store(self, name: str, value: Any) -> None:
        changed = self._values[name] != value
        self._values[name] = value
        if changed:
            for callback in self._watchers.get(name, ()):
                callback(value)

    def watch(self, name: str, callback: Callable[[Any], None]) -> None:
        """Call ``callback(new value)`` whenever option ``name`` changes (a setting that
        must reach something outside Python, such as a thread pool's size)."""
        if name not in self._options:
            raise AttributeError(f"unknown config option {name!r}")
        self._watchers.setdefault(name, []).append(callback)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[_ALIASES.get(name, name)]
        except KeyError:
            raise AttributeError(f"unknown config option {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._set(name, value)

    @contextlib.contextmanager
    def change_flags(self, **flags: Any) -> Iterator[None]:
        old = {_ALIASES.get(name, name): getattr(self, name) for name in flags}
        try:
            for name, value in flags.items():
                self._set(name, value)
            yield
        finally:
            for name, value in old.items():
                self._store(name, value)

    def items(self) -> list[tuple[str, Any, str]]:
        return [(name, self._values[name], o.doc) for name, o in self._options.items()]


config = Config(_OPTIONS, os.environ.get("TENSORJIT_FLAGS", ""))
