"""The backend a run of the conformance suite (``tensorjit.testing.conformance``) tests,
and what its tests share: the skip where the backend is not usable, the modes they
compile with, compiles on its device that check which kernel each node runs, and values
in awkward layouts.

The backend comes from the environment, read once when this module is imported:

- ``TENSORJIT_TEST_BACKEND``: a registered backend's name (``c``, ``opencl``, ``cuda``,
  a third party's); ``TENSORJIT_TEST_DEVICE`` names a device instead (its preferred
  backend is taken). Default: ``opencl`` (PoCL, so every machine has one).
- ``TENSORJIT_TEST_COVERS``: the kernels (``elemwise``, ``gemm``, ``softmax``, ...) the
  backend claims for every node the suite gives them, comma-separated; ``all`` (the
  default) or empty (none). For a claimed kernel the suite checks that each such node
  runs on this backend (the kernel of that name where the backend registers one); for
  the others it checks only values, whichever backend computed them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorjit
from tensorjit.core.compile.mode import Mode
from tensorjit.core.config import config
from tensorjit.core.hooks import get_plugin_system


def _backend_under_test() -> tuple[str, str]:
    backends = get_plugin_system().registries.backends
    name = os.environ.get("TENSORJIT_TEST_BACKEND")
    if name:
        backend = backends.backends.get(name)
        if backend is None:
            raise pytest.UsageError(
                f"TENSORJIT_TEST_BACKEND={name!r} is not a registered backend "
                f"(registered: {', '.join(sorted(backends.backends))})"
            )
        return name, backend.device
    device = os.environ.get("TENSORJIT_TEST_DEVICE", "opencl")
    preferred = backends.for_device(device)
    return (preferred[0].name if preferred else device), device


BACKEND, DEVICE = _backend_under_test()
_COVERS = os.environ.get("TENSORJIT_TEST_COVERS", "all").strip()
HOST_MEMORY = DEVICE == "cpu"
REASON = get_plugin_system().registries.backends.unavailable_reason(BACKEND)
NEEDS_DEVICE = pytest.mark.skipif(
    REASON is not None,
    reason=f"no {DEVICE} device for {BACKEND} (hardware/driver absent): {REASON}",
)
ONLY_OPENCL = pytest.mark.skipif(
    BACKEND != "opencl", reason=f"tests OpenCL internals; this run is on {BACKEND}"
)
SHARED_FAMILIES = pytest.mark.skipif(
    BACKEND not in ("opencl", "cuda"),
    reason=f"tests a helper of the shared device kernel families; {BACKEND} does not use it",
)
SEPARATE_MEMORY = pytest.mark.skipif(
    HOST_MEMORY,
    reason=f"tests a device with its own memory; {BACKEND} computes in host memory, whose "
    "contract tests/core/memory checks",
)
# DebugMode runs every kernel and compares it with Op.perform on each call.
DEBUG_DEVICE = Mode("DebugMode", tensorjit.FAST_RUN.query, debug=True)
FAST_DEVICE = tensorjit.FAST_RUN


def covers(kernel: str) -> bool:
    """Whether the backend claims ``kernel`` for every node the suite gives it."""
    if _COVERS == "all":
        return True
    return kernel in {k.strip() for k in _COVERS.split(",") if k.strip()}


def needs_kernel(kernel: str) -> pytest.MarkDecorator:
    """Skip a test that runs ``kernel`` itself (views it returns, memory it writes)
    where the backend does not claim it: a node it leaves to the host is checked by
    value in the other tests."""
    return pytest.mark.skipif(
        not covers(kernel),
        reason=f"{BACKEND} does not claim the {kernel} kernel (TENSORJIT_TEST_COVERS)",
    )


def target() -> Any:
    """The device backend as the shared device kernel families see it."""
    if BACKEND == "cuda":
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


def _kernel_names() -> set[str]:
    kernels = get_plugin_system().registries.kernels
    return {spec.name for spec in kernels.specs_of(BACKEND)}


def runs_on_device(f: Any, ops: Any, kernel: str) -> None:
    """Every node of ``ops`` in ``f`` runs this backend's kernel ``kernel`` (or, where the
    backend names its kernels otherwise, one of its own), if the backend claims it."""
    nodes = [n for n in f.kernels if isinstance(n.op, ops)]
    assert nodes, f"the graph has no {ops} node"
    if not covers(kernel):
        return
    exact = f"{BACKEND}:{kernel}"
    want: Callable[[str], bool] = (
        (lambda name: name == exact) if exact in _kernel_names() else runs_on_the_device
    )
    for node in nodes:
        name = f.kernels[node].name.removeprefix("debug:")
        assert want(name), (str(node.op), f.kernels[node].name, f"expected {exact}")


def runs_on_the_device(name: str) -> bool:
    """Whether kernel ``name`` (DebugMode's prefix removed) is one of the backend's."""
    return name.removeprefix("debug:").startswith(f"{BACKEND}:")


def all_nodes_on_device(kernels: tuple[str, ...]) -> bool:
    """Whether the check "no node of a function runs on the host" applies: the backend
    claims every kernel the graph needs (``kernels``) and has a memory of its own."""
    return not HOST_MEMORY and all(covers(k) for k in kernels)


def names_all(error: BaseException, *parts: str) -> bool:
    """Whether ``error``'s message names every one of ``parts`` (an op, shapes, a
    variable), in any order: backends word their checks differently (NumPy's broadcast
    message on the host, the device kernels' own), so the suite asks for the facts a
    user needs, not one wording. Shapes match with or without spaces: ``(2, 4)``."""
    message = str(error).replace(" ", "")
    return all(part.replace(" ", "") in message for part in parts)


def to_device(value: Any) -> Any:
    """A device copy of host ``value``."""
    return arrays().from_host(np.asarray(value))


def to_host(value: Any) -> np.ndarray:
    """A host copy of device ``value``."""
    return arrays().to_host(value)


def view(base: Any, shape: tuple, strides: tuple, offset: int) -> Any:
    """A device view of ``base``'s buffer (byte strides and offset)."""
    kind = arrays()
    if HOST_MEMORY:
        flat = base.reshape(-1).view(np.uint8)
        return np.lib.stride_tricks.as_strided(
            flat[offset:].view(base.dtype), shape=shape, strides=strides
        )
    return kind.view(base, shape, strides, offset)


def buffer_address(value: Any) -> int | None:
    """The address of the buffer a device array is a view of (None: no buffer)."""
    if isinstance(value, np.ndarray):
        while isinstance(value.base, np.ndarray):
            value = value.base
        return int(value.__array_interface__["data"][0])
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
