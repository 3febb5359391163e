"""What the device backends' tests (tests/plugins/device_suite) share. They run on the
device ``TENSORJIT_TEST_DEVICE`` names: ``opencl`` by default (PoCL, so every machine
has one), ``cuda`` on a machine with an NVIDIA GPU
(``TENSORJIT_TEST_DEVICE=cuda python -m pytest tests/plugins/device_suite``; CI runs
that from tests/plugins/cuda_backend, skipped where no CUDA device is usable). Here: the
skip where the device is not usable, the modes the tests compile with, compiles on the
device that check which kernel each node runs, and device values in awkward layouts."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tensorjit
from tensorjit.core.compile.mode import Mode
from tensorjit.core.config import config
from tensorjit.core.hooks import get_plugin_system

DEVICE = os.environ.get("TENSORJIT_TEST_DEVICE", "opencl")
REASON = get_plugin_system().registries.backends.unavailable_reason(DEVICE)
NEEDS_DEVICE = pytest.mark.skipif(
    REASON is not None, reason=f"no {DEVICE} device (hardware/driver absent): {REASON}"
)
ONLY_OPENCL = pytest.mark.skipif(
    DEVICE != "opencl", reason=f"tests OpenCL internals; this run is on {DEVICE}"
)
# DebugMode runs every kernel and compares it with Op.perform on each call.
DEBUG_DEVICE = Mode("DebugMode", tensorjit.FAST_RUN.query, debug=True)
FAST_DEVICE = tensorjit.FAST_RUN


def target() -> Any:
    """The device backend as the kernel families see it (plugins/device_kernels)."""
    if DEVICE == "cuda":
        from tensorjit.plugins.cuda_backend.target import CUDA

        return CUDA
    from tensorjit.plugins.opencl_backend.target import OPENCL

    return OPENCL


def arrays() -> Any:
    return get_plugin_system().registries.backends.array_kind(DEVICE)


def on_device(inputs: list, outputs: Any, mode: Mode = DEBUG_DEVICE, **kwargs: Any) -> Any:
    """``function(inputs, outputs)`` compiled with config.device set to the device."""
    with config.change_flags(device=DEVICE):
        return tensorjit.function(inputs, outputs, mode=mode, **kwargs)


def runs_on_device(f: Any, ops: Any, kernel: str) -> None:
    """Every node of ``ops`` in ``f`` runs the device's kernel ``kernel``."""
    nodes = [n for n in f.kernels if isinstance(n.op, ops)]
    assert nodes, f"the graph has no {ops} node"
    for node in nodes:
        name = f.kernels[node].name.removeprefix("debug:")
        assert name == f"{DEVICE}:{kernel}", (str(node.op), f.kernels[node].name)


def runs_on_the_device(name: str) -> bool:
    """Whether kernel ``name`` (DebugMode's prefix removed) is one of the device's."""
    return name.removeprefix("debug:").startswith(f"{DEVICE}:")


def to_device(value: Any) -> Any:
    """A device copy of host ``value``."""
    return arrays().from_host(np.asarray(value))


def to_host(value: Any) -> np.ndarray:
    """A host copy of device ``value``."""
    return arrays().to_host(value)


def view(base: Any, shape: tuple, strides: tuple, offset: int) -> Any:
    """A device view of ``base``'s buffer (byte strides and offset)."""
    return arrays().view(base, shape, strides, offset)


def buffer_address(value: Any) -> int | None:
    """The address of the buffer a device array is a view of (None: no buffer)."""
    base = value.base_data
    if base is None:
        return None
    return int(base.int_ptr) if hasattr(base, "int_ptr") else int(base)


def device_var(name: str, shape: tuple, dtype: str = "float64") -> Any:
    """A symbolic input living on the device."""
    from tensorjit.tensor.type import TensorType

    return TensorType(dtype, shape, device=DEVICE)(name)


def strided_views(value: np.ndarray) -> dict[str, Any]:
    """Device arrays equal to ``value`` laid out in awkward ways: transposed twice,
    sliced with a step, negatively strided (each is a view of a larger device buffer)."""
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
