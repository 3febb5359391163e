"""What a device's products (Dot, MatMul of matrices, Gemm, Ger) need decided before
they run, decided once for every device backend (OpenCL's own GEMM, CUDA's cuBLAS):
whether the device takes the node (one float dtype for every operand and the output),
and where alpha and beta come from (a constant inlined into the plan, or a 0-d input
read when the kernel runs). The backends differ only in how they compute the product.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.plugins.device_kernels.dialect import DEVICE_TYPES
from tensorjit.plugins.device_kernels.elementwise import inlined_constant
from tensorjit.plugins.device_kernels.target import tensor_type

FLOATS = ("float32", "float64")

#: Where alpha or beta comes from: a constant's value, or the dtype name of the 0-d
#: input that holds it (read on the device when the kernel runs).
ScalarSource = Any


@dataclass(frozen=True)
class BlasPlan:
    dtype: str
    alpha: ScalarSource
    beta: ScalarSource
    inplace: bool = False

    @staticmethod
    def is_input(source: ScalarSource) -> bool:
        """Whether ``source`` is read from an input (else it is a constant's value)."""
        return isinstance(source, str)


@dataclass(frozen=True)
class BlasPlanner:
    """The plans of one device backend: ``takes(node)`` says whether the device can
    run the node at all (its device, its library being usable)."""

    takes: Callable[[Apply], bool]

    def float_dtype(self, node: Apply, operands: list[Variable]) -> str | None:
        """The one float dtype of ``operands`` and the output, if the device takes it."""
        if not self.takes(node):
            return None
        dtypes = {tensor_type(v).dtype for v in (*operands, *node.outputs)}
        return dtypes.pop() if len(dtypes) == 1 and dtypes <= set(FLOATS) else None

    def dot_plan(self, node: Apply) -> BlasPlan | None:
        dtype = self.float_dtype(node, list(node.inputs))
        return None if dtype is None else BlasPlan(dtype, np.asarray(1.0), np.asarray(0.0))

    def matmul_plan(self, node: Apply) -> BlasPlan | None:
        if any(tensor_type(v).ndim != 2 for v in node.inputs):
            return None  # stacks of matrices stay on the host
        return self.dot_plan(node)

    def gemm_plan(self, node: Apply) -> BlasPlan | None:
        """Gemm's (z, alpha, x, y, beta) and Ger's (z, alpha, x, y; beta 1)."""
        z, alpha, x, y, *rest = node.inputs
        dtype = self.float_dtype(node, [z, x, y])
        if dtype is None:
            return None
        scalars = [scalar_source(v) for v in (alpha, *rest)]
        if any(s is None for s in scalars):
            return None
        beta = scalars[1] if rest else np.asarray(1.0)
        return BlasPlan(dtype, scalars[0], beta, node.op.inplace)


def scalar_source(var: Variable) -> ScalarSource | None:
    """An alpha/beta input: its constant value, else its dtype (read on the device);
    None for a dtype no device kernel reads (float16, complex, object)."""
    value = inlined_constant(var)
    if value is not None:
        return value
    dtype = tensor_type(var).dtype
    return dtype if dtype in DEVICE_TYPES and np.dtype(dtype).kind in "biuf" else None
