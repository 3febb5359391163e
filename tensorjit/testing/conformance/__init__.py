"""The conformance suite: what every backend must do, as tests a backend's author runs.

The same test modules run on the host C backend, on OpenCL (PoCL in CI), on CUDA where
a GPU is present and on tensorjit's test device (a third party's plugin): fused
elementwise graphs with NumPy's semantics, reductions, softmax rows, views and indexing
in awkward layouts (strided, negatively strided, empty, 0-d), BLAS products, random
streams, shared variables' memory contract on a device, scan and training loops, and
threads sharing kernels. DebugMode compares every kernel with ``Op.perform`` on every
call. Which backend, and which kernels it claims, come from the environment
(``tensorjit.testing.device_under_test``); ``run`` sets both::

    from tensorjit.testing.conformance import run
    result = run("mybackend", covers=["elemwise", "reduce"])  # a pytest subprocess
    assert result.returncode == 0, result.stdout

or from a shell: ``python -m tensorjit.testing.conformance mybackend --covers
elemwise,reduce -q``. A node the backend does not claim may run anywhere (transfers
included): the suite then checks only its values.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

SUITE_DIR = Path(__file__).resolve().parent


def environment(backend: str, covers: Iterable[str] | None = None) -> dict[str, str]:
    """The environment variables that point the suite at ``backend`` (``covers``: the
    kernels it claims; None: all of them)."""
    return {
        "TENSORJIT_TEST_BACKEND": backend,
        "TENSORJIT_TEST_COVERS": "all" if covers is None else ",".join(covers),
    }


def pytest_command(modules: Sequence[str] = ()) -> list[str]:
    """The command running the suite (or its ``modules``) with this Python's pytest."""
    paths = [str(SUITE_DIR / f"{m}.py") for m in modules] or [str(SUITE_DIR)]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *paths]


def run(
    backend: str,
    covers: Iterable[str] | None = None,
    pytest_args: Sequence[str] = ("-q",),
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    modules: Sequence[str] = (),
) -> subprocess.CompletedProcess:
    """Run the suite (or its ``modules``, e.g. ``["test_rowwise"]``) on ``backend`` in a
    new Python process (the backend is chosen when the suite's modules are imported);
    returns pytest's result, output captured."""
    full_env = dict(os.environ if env is None else env, **environment(backend, covers))
    return subprocess.run(
        [*pytest_command(modules), *pytest_args],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
