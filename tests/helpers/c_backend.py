"""What the C backend's test modules share: the skip where no C compiler is found, the
modes they compile with, and a compile that checks which kernel each node runs."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest

import tensorjit
from tensorjit.core.compile.mode import Mode
from tensorjit.core.hooks import get_plugin_system

REASON = get_plugin_system().registries.backends.unavailable_reason("c")
NEEDS_C = pytest.mark.skipif(
    REASON is not None, reason=f"no C compiler for the C backend: {REASON}"
)
# DebugMode runs every kernel and compares it with Op.perform on each call.
DEBUG_C = Mode("DebugMode", tensorjit.FAST_RUN.query, backends=("c", "python"), debug=True)
C_ONLY = tensorjit.FAST_RUN.with_backends("c", "python")


def compiled_with(kernel: str, ops: Any, inputs: list, outputs: Any, mode: Mode = DEBUG_C):
    """``function(inputs, outputs, mode=mode)``, checking that the graph has a node of
    ``ops`` and that every such node runs the C kernel named ``kernel``."""
    f = tensorjit.function(inputs, outputs, mode=mode)
    nodes = [n for n in f.kernels if isinstance(n.op, ops)]
    assert nodes, f"the graph has no op with a {kernel} C kernel"
    want = ("debug:" if mode.debug else "") + f"c:{kernel}"
    for node in nodes:
        assert f.kernels[node].name == want, (str(node.op), f.kernels[node].name)
    return f


def cached_sources(needle: str) -> list[tuple[str, str]]:
    """(path without ".c", text) of each C source in the compile cache containing
    ``needle`` (its library is the path + ".so")."""
    from tensorjit.plugins.c_backend.build import compiler

    directory = compiler.cache_dir()
    found = []
    for entry in sorted(os.listdir(directory)):
        if entry.endswith(".c") and not entry.endswith(".failed.c"):
            with open(os.path.join(directory, entry)) as src:
                text = src.read()
            if needle in text:
                found.append((os.path.join(directory, entry[:-2]), text))
    return found


def compiler_macros(*flags: str) -> str:
    """The compiler's predefined macros for the kernels' flags (and ``flags``)."""
    from tensorjit.plugins.c_backend.build import compiler

    argv, _ = compiler.compiler_identity()
    cmd = [*argv, *compiler.compile_flags(), *flags, "-dM", "-E", "-x", "c", os.devnull]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""


def vectorised_lines(base: str) -> set[int]:
    """The lines of ``base + ".c"`` whose loops gcc reports vectorised, compiled with the
    kernels' flags (gcc only: ``-fopt-info-vec-optimized``)."""
    from tensorjit.plugins.c_backend.build import compiler

    argv, _ = compiler.compiler_identity()
    proc = subprocess.run(
        [*argv, *compiler.compile_flags(), "-fopt-info-vec-optimized", "-c"]
        + [base + ".c", "-o", os.devnull],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return {int(n) for n in re.findall(r":(\d+):\d+: optimized: loop vectorized", proc.stderr)}
