"""The conformance suite (``tensorjit.testing.conformance``) on every backend this
machine has, each in its own process (the backend is chosen when the suite is imported):
the host C backend, the test device (``tests/fixtures/tensorjit_wrapdev_plugin``, a
third party's plugin that computes a few ops itself and leaves the rest to the host).
The ordinary test run collects the suite itself too, on OpenCL (pyproject.toml's
testpaths); tests/plugins/cuda_backend runs it on CUDA where a GPU is present."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tensorjit.core.hooks import get_plugin_system
from tensorjit.testing.conformance import run

# What each backend claims (tensorjit.testing.device_under_test): the C backend runs
# every node of these kernels' ops itself; the test device claims none outright. The C
# backend leaves to Op.perform what the devices compile: argmax/argmin over other than
# the last axis, softmax over several axes, a reshape of a non-contiguous value.
C_COVERS = [
    "elemwise",
    "reduce",
    "dimshuffle",
    "subtensor",
    "inc_subtensor",
    "advanced_subtensor",
    "advanced_inc_subtensor",
    "alloc",
    "second",
    "join",
    "eye",
    "tri",
    "arange",
    "one_hot",
    "cumulative",
    "sort",
    "dot",
    "gemm",
    "ger",
    "matmul",
    "mrg31k3p",  # the shared device family, on the host target
    "convolution",
    "pooling",
]
BACKENDS = {"c": C_COVERS, "wrapdev": []}


def _environment() -> dict[str, str]:
    """This process's environment, with the test device's install on the path."""
    import tensorjit_wrapdev

    site = str(Path(tensorjit_wrapdev.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=site if not path else f"{site}{os.pathsep}{path}")


def assert_passed(result: Any) -> None:
    """The suite's subprocess passed: exit 0, tests passed and none failed."""
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and " failed" not in summary, summary


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_conformance_suite_passes_on_the_backend(backend):
    backends = get_plugin_system().registries.backends
    reason = backends.unavailable_reason(backend)
    if reason is not None:
        device = backends.backends[backend].device
        pytest.skip(f"no {device} device here (hardware/driver absent): {reason}")
    assert_passed(run(backend, BACKENDS[backend], ("-q", "-ra"), env=_environment()))


# The modules whose kernels have a groups schedule (config.device_schedule): a GPU's
# shape, run here on PoCL's CPU device, DebugMode against Op.perform as everywhere
# (convolutions and pooling run on a CPU device only with it).
GROUP_SCHEDULED = ["test_rowwise", "test_reductions", "test_convolution", "test_elementwise"]


def test_the_gpu_schedules_pass_the_suite_on_opencl():
    reason = get_plugin_system().registries.backends.unavailable_reason("opencl")
    if reason is not None:
        pytest.skip(f"no opencl device here (hardware/driver absent): {reason}")
    flags = ",".join(f for f in (os.environ.get("TENSORJIT_FLAGS"), "device_schedule=groups") if f)
    env = dict(os.environ, TENSORJIT_FLAGS=flags)
    assert_passed(run("opencl", None, ("-q", "-ra"), env=env, modules=GROUP_SCHEDULED))
