"""The public helpers for plugin authors who write C kernels (docs/writing_ops.md).

``compile_c`` compiles C source once per machine (the compile cache is keyed by the
source, compiler, flags and CPU, shared by processes, verified before loading) and
returns cffi's ``(ffi, lib)``; ``output_buffer`` reuses a node's previous output when it
may (the kernel contract lets a kernel find its last output in ``output_storage``);
``pointer`` passes a NumPy array to C; ``unavailable_reason`` says why no C compiler can
be used here (a kernel factory may then fall back to NumPy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.plugins.c_backend.build import compiler
from tensorjit.plugins.c_backend.generators.buffers import output_buffer, reusable
from tensorjit.plugins.c_backend.generators.codegen import C_TYPES  # the backend's own type names

__all__ = ["compile_c", "output_buffer", "pointer", "reusable", "unavailable_reason"]


def compile_c(
    source: str, cdef: str, symbols: tuple[str, ...] | list[str], what: str
) -> tuple[Any, Any]:  # noqa: E501
    """``(ffi, lib)`` for C ``source`` whose functions ``cdef`` declares (cffi syntax);
    ``symbols`` are checked to exist; ``what`` names the code in compiler errors.
    Compiled with the backend's flags (``config.cc``, ``config.cflags``), loaded from the
    cache when it was compiled before."""
    return compiler.load(source, cdef, tuple(symbols), what)


def pointer(ffi: Any, array: np.ndarray, ctype: str | None = None) -> Any:
    """A C pointer to ``array``'s data (which must stay alive while C uses it); the
    C type defaults from the dtype (``double *`` for float64)."""
    ctype = ctype or f"{C_TYPES[np.dtype(array.dtype).name]} *"
    return ffi.cast(ctype, ffi.from_buffer(array))


def unavailable_reason() -> str | None:
    """None when C kernels can be compiled and loaded here, else why not."""
    return compiler.unavailable_reason()
