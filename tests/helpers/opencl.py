"""What the OpenCL backend's tests share: the skip where no OpenCL device is found (a
machine without an ICD), the modes they compile with, and compiles on the device that
check which kernel each node runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorjit
from tensorjit.core.compile.mode import Mode
from tensorjit.core.config import config
from tensorjit.core.hooks import get_plugin_system

REASON = get_plugin_system().registries.backends.unavailable_reason("opencl")
NEEDS_OPENCL = pytest.mark.skipif(
    REASON is not None, reason=f"no OpenCL device (hardware/driver absent): {REASON}"
)
# DebugMode runs every kernel and compares it with Op.perform on each call.
DEBUG_OPENCL = Mode("DebugMode", tensorjit.FAST_RUN.query, debug=True)
FAST_OPENCL = tensorjit.FAST_RUN


def on_opencl(inputs: list, outputs: Any, mode: Mode = DEBUG_OPENCL, **kwargs: Any) -> Any:
    """``function(inputs, outputs)`` compiled with config.device=opencl."""
    with config.change_flags(device="opencl"):
        return tensorjit.function(inputs, outputs, mode=mode, **kwargs)


def kernel_names(f: Any) -> dict[str, str]:
    """Op -> kernel name of every node of a compiled function."""
    return {str(node.op): f.kernels[node].name for node in f.kernels}


def runs_on_opencl(f: Any, ops: Any, kernel: str) -> None:
    """Every node of ``ops`` in ``f`` runs the OpenCL kernel ``kernel``."""
    nodes = [n for n in f.kernels if isinstance(n.op, ops)]
    assert nodes, f"the graph has no {ops} node"
    for node in nodes:
        name = f.kernels[node].name.removeprefix("debug:")
        assert name == f"opencl:{kernel}", (str(node.op), f.kernels[node].name)


def to_device(value: Any) -> Any:
    """A device copy of host ``value``."""
    kind = get_plugin_system().registries.backends.array_kind("opencl")
    return kind.from_host(np.asarray(value))


def to_host(value: Any) -> np.ndarray:
    """A host copy of device ``value``."""
    return get_plugin_system().registries.backends.array_kind("opencl").to_host(value)


def device_var(name: str, shape: tuple, dtype: str = "float64") -> Any:
    """A symbolic input living on the OpenCL device."""
    from tensorjit.tensor.type import TensorType

    return TensorType(dtype, shape, device="opencl")(name)


def strided_views(value: np.ndarray) -> dict[str, Any]:
    """Device arrays equal to ``value`` laid out in awkward ways: transposed twice,
    sliced with a step, negatively strided (each is a view of a larger device buffer)."""
    import pyopencl.array  # noqa: F401

    from tensorjit.plugins.opencl_backend.arrays import view

    value = np.asarray(value)
    out = {"contiguous": to_device(value)}
    if value.ndim == 0:
        return out
    big = np.zeros(tuple(2 * n + 1 for n in value.shape), value.dtype)
    big[tuple(slice(1, 1 + 2 * n, 2) for n in value.shape)] = value
    strides = tuple(2 * s for s in big.strides)
    out["stepped"] = view(to_device(big), value.shape, strides, sum(big.strides))
    if value.size:
        flipped = np.ascontiguousarray(value[::-1])
        step = flipped.strides[0]
        negative = (-step, *flipped.strides[1:])
        out["negative"] = view(to_device(flipped), value.shape, negative, (len(value) - 1) * step)
    return out
