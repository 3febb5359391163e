"""The C kernel of ``ScaleWithSquareSum`` (an L2-penalised weight's decay and penalty in
one pass, see tensor/math.py): ``out = beta * x`` and ``sum(x ** 2)``, the squares taken
in x's dtype and summed in eight double partial sums, in the order of the reduction
kernels' ``tj_sum_run`` (the same sum as the MappedReduce it replaces on one thread).

Whole-graph programs call the same functions (program.c's decay step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend import compiler
from tensorjit.plugins.c_backend.buffers import output_buffer
from tensorjit.plugins.c_backend.codegen import PREAMBLE
from tensorjit.tensor.math import ScaleWithSquareSum

OPS = (ScaleWithSquareSum,)

_TEMPLATE = """
/* out[i] = b * x[i] for n contiguous elements; returns the sum of the x[i] * x[i]. */
double tj_decay_{p}(const {T} *x, {T} *out, int64_t n, double beta)
{
    const {T} b = ({T})beta;
    double a[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            const {T} v = x[i + j];
            a[j] = a[j] + (double)(v * v);
            out[i + j] = v * b;
        }
    double acc = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (; i < n; i++) {
        const {T} v = x[i];
        acc = acc + (double)(v * v);
        out[i] = v * b;
    }
    return acc;
}
"""
_CDEF = "double tj_decay_{p}(const {T} *, {T} *, int64_t, double);\n"
_TYPES = {"float32": ("s", "float"), "float64": ("d", "double")}


def source() -> tuple[str, str]:
    """(C source, cdef) of the kernels for both float dtypes."""
    parts, cdefs = [PREAMBLE], []
    for p, t in _TYPES.values():
        parts.append(_TEMPLATE.replace("{p}", p).replace("{T}", t))
        cdefs.append(_CDEF.replace("{p}", p).replace("{T}", t))
    return "".join(parts), "".join(cdefs)


def library() -> tuple[Any, Any]:
    """(ffi, lib) of the kernels."""
    text, cdef = source()
    return compiler.load(text, cdef, ("tj_decay_s", "tj_decay_d"), what="weight decay")


def function_name(dtype: str) -> str:
    """The kernel for an ``x`` of ``dtype``."""
    return f"tj_decay_{_TYPES[dtype][0]}"


def supported(node: Apply) -> bool:
    """Float weights with a float sum (the kernel's double total is cast to it)."""
    return node.inputs[0].type.dtype in _TYPES and node.outputs[1].type.dtype in _TYPES


def factory(node: Apply) -> Callable[[list, list], None]:
    ffi, lib = library()
    dtype = node.inputs[0].type.numpy_dtype
    t = _TYPES[dtype.name][1]
    fn, cast = getattr(lib, function_name(dtype.name)), ffi.cast
    sum_dtype = node.outputs[1].type.numpy_dtype
    perform = node.op.perform

    def run(inputs: list, output_storage: list) -> None:
        x, beta = inputs
        if x.dtype != dtype or not x.flags.c_contiguous or not x.flags.aligned:
            perform(node, inputs, output_storage)  # another layout: NumPy's passes
            return
        out = output_buffer(output_storage[0][0], x.shape, dtype, inputs)
        total = fn(cast(f"{t} *", x.ctypes.data), cast(f"{t} *", out.ctypes.data), x.size,
                   float(beta))  # fmt: skip
        output_storage[0][0] = out
        output_storage[1][0] = np.asarray(total, dtype=sum_dtype)

    return run


factory.kernel_name = "decay"
