"""``theano.config``: Theano's flags on top of ``tensorjit.core.config``.

Flags tensorjit has (``floatX``, ``device``, ``mode``, ``allow_gc``, ``compiledir``,
``on_unused_input``) read and write tensorjit's config. Theano-only flags (``optimizer``,
``exception_verbosity``, ``gcc.cxxflags``, ...) are kept here with Theano's defaults, so
programs that read or set them run; they have no effect. ``THEANO_FLAGS`` is parsed by
``install()``: names tensorjit knows are applied (``TENSORJIT_FLAGS`` wins where both
name a flag), the others are stored and listed in one warning.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import Iterator
from typing import Any

from tensorjit.core.config import config as tj_config

#: Theano flag name -> tensorjit flag name.
SHARED_FLAGS = {
    "floatX": "floatX",
    "device": "device",
    "mode": "mode",
    "allow_gc": "allow_gc",
    "compiledir": "compiledir",
    "base_compiledir": "compiledir",
    "on_unused_input": "on_unused_input",
}

#: Theano mode names -> tensorjit mode names.
MODE_NAMES = {
    "FAST_RUN": "FAST_RUN",
    "FAST_COMPILE": "FAST_COMPILE",
    "DebugMode": "DebugMode",
    "DEBUG_MODE": "DebugMode",
    "Mode": "FAST_RUN",
}

#: Theano-only flags (with Theano 1.0's defaults) that programs commonly read or set.
THEANO_ONLY_DEFAULTS: dict[str, Any] = {
    "optimizer": "fast_run",
    "optimizer_including": "",
    "optimizer_excluding": "",
    "optimizer_requiring": "",
    "linker": "cvm",
    "exception_verbosity": "low",
    "compute_test_value": "off",
    "cycle_detection": "regular",
    "on_opt_error": "warn",  # tensorjit always detects cycles exactly
    "compute_test_value_opt": "off",
    "print_test_value": False,
    "cast_policy": "custom",
    "int_division": "floatX",
    "warn_float64": "ignore",
    "openmp": False,
    "openmp_elemwise_minsize": 200000,
    "cxx": shutil.which("g++") or shutil.which("gcc") or "",  # the C backend compiles
    "profile": False,
    "profile_memory": False,
    "profile_optimizer": False,
    "traceback.limit": 8,
    "traceback.compile_limit": 0,
    "gcc.cxxflags": "",
    "blas.ldflags": "",
    "lib.cnmem": 0.0,
    "gpuarray.preallocate": 0.0,
    "dnn.enabled": "auto",
    "dnn.conv.algo_fwd": "small",
    "scan.allow_gc": False,
    "scan.allow_output_prealloc": True,
    "nvcc.fastmath": False,
    "cmodule.warn_no_version": False,
    "cmodule.remove_gxx_opt": False,
    "cmodule.compilation_warning": False,
    "deterministic": "default",
    "unpickle_function": True,
    "reoptimize_unpickled_function": False,
    "warn.ignore_bug_before": "0.9",
    "nocleanup": False,
    "assert_no_cpu_op": "ignore",
    "check_input": True,
    "compile.timeout": 120,
    "experimental.unpickle_gpu_on_cpu": False,
}


def _to_tensorjit(name: str, value: Any) -> Any:
    if name == "mode":
        if isinstance(value, str) and value not in MODE_NAMES:
            raise ValueError(
                f"theano.config.mode={value!r} is not supported by tensorjit yet "
                f"(supported: {sorted(MODE_NAMES)})"
            )
        return MODE_NAMES.get(value, value)
    return value


class _Section:
    """A dotted group of flags, e.g. ``theano.config.gcc`` (``config.gcc.cxxflags``)."""

    def __init__(self, cfg: TheanoConfig, prefix: str):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._cfg._get(f"{self._prefix}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        self._cfg._set(f"{self._prefix}.{name}", value)


class TheanoConfig:
    """The object behind ``theano.config``."""

    def __init__(self) -> None:
        object.__setattr__(self, "_extra", dict(THEANO_ONLY_DEFAULTS))

    def _get(self, name: str) -> Any:
        if name in SHARED_FLAGS:
            return getattr(tj_config, SHARED_FLAGS[name])
        if name in self._extra:
            return self._extra[name]
        if any(k.startswith(name + ".") for k in self._extra):
            return _Section(self, name)
        raise AttributeError(f"theano.config.{name} is not supported by tensorjit yet")

    def _set(self, name: str, value: Any) -> None:
        if name in SHARED_FLAGS:
            setattr(tj_config, SHARED_FLAGS[name], _to_tensorjit(name, value))
        elif name in self._extra:
            self._extra[name] = value
        else:
            raise AttributeError(f"theano.config.{name} is not supported by tensorjit yet")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._set(name, value)

    @contextlib.contextmanager
    def change_flags(self, *args: dict, **flags: Any) -> Iterator[None]:
        """Theano's ``change_flags``: set flags for a block (also usable as a decorator
        through ``contextlib``)."""
        for mapping in args:
            flags.update(mapping)
        old = {name: self._get(name) for name in flags}
        try:
            for name, value in flags.items():
                self._set(name, value)
            yield
        finally:
            for name, value in old.items():
                self._set(name, value)

    def __str__(self) -> str:
        lines = [f"{n} = {self._get(n)}" for n in SHARED_FLAGS]
        lines += [f"{n} = {v} (no effect in tensorjit)" for n, v in sorted(self._extra.items())]
        return "\n".join(lines)


config = TheanoConfig()
change_flags = config.change_flags


def parse_flags(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(f"THEANO_FLAGS entry {item!r} is not of the form name=value")
        name, value = item.split("=", 1)
        pairs.append((name.strip(), value.strip()))
    return pairs


def apply_theano_flags(environ: dict[str, str] | None = None) -> list[str]:
    """Apply ``THEANO_FLAGS``; returns the names that have no effect in tensorjit (after
    warning once about them)."""
    environ = os.environ if environ is None else environ
    own = {name for name, _ in parse_flags(environ.get("TENSORJIT_FLAGS", ""))}
    ignored = []
    for name, value in parse_flags(environ.get("THEANO_FLAGS", "")):
        if name in SHARED_FLAGS:
            if SHARED_FLAGS[name] in own:
                continue
            try:
                config._set(name, value)
            except (ValueError, AttributeError) as exc:
                raise ValueError(f"THEANO_FLAGS: {name}={value}: {exc}") from None
        else:
            if name in config._extra:
                config._extra[name] = value
            ignored.append(name)
    if ignored:
        warnings.warn(
            "THEANO_FLAGS: these Theano flags have no effect in tensorjit and are ignored: "
            + ", ".join(ignored),
            stacklevel=3,
        )
    return ignored
