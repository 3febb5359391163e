"""The C kernel, compiled once per machine through tensorjit's public C helpers."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.plugins.c_backend.api import compile_c, output_buffer, pointer

_SOURCE = """
#include <math.h>
#include <stddef.h>
void softsign_f64(const double *x, double *out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] / (1.0 + fabs(x[i]));
}
void softsign_f32(const float *x, float *out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] / (1.0f + fabsf(x[i]));
}
"""
_CDEF = """
void softsign_f64(const double *x, double *out, ptrdiff_t n);
void softsign_f32(const float *x, float *out, ptrdiff_t n);
"""
_library: list = []


def _lib() -> tuple[Any, Any]:
    if not _library:  # compiled (or loaded from the cache) at the first kernel built
        _library.append(compile_c(_SOURCE, _CDEF, ("softsign_f64", "softsign_f32"), "softsign"))
    return _library[0]


def softsign_kernel(node: Any) -> Any:
    """``factory(node)`` for the C backend: returns ``run(inputs, output_storage)``."""
    ffi, lib = _lib()
    dtype = np.dtype(node.outputs[0].type.dtype)
    c_function = lib.softsign_f64 if dtype == np.float64 else lib.softsign_f32
    inplace = node.op.inplace

    def run(inputs: list, output_storage: list) -> None:
        (x,) = inputs
        if inplace and x.flags.c_contiguous and x.flags.writeable:
            out = x  # declared in destroy_map: overwriting the input is the point
        else:
            # The previous call's output is ours to reuse unless it is one of the inputs.
            out = output_buffer(output_storage[0][0], x.shape, dtype, [x])
        source = np.ascontiguousarray(x)  # strided or broadcast inputs: a packed copy
        c_function(pointer(ffi, source), pointer(ffi, out), source.size)
        if inplace and out is not x:
            x[...] = out  # a non-contiguous input is still overwritten, as declared
            out = x
        output_storage[0][0] = out

    return run
