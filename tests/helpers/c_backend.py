"""What the C backend's test modules share: the skip where no C compiler is found, the
modes they compile with, and a compile that checks which kernel each node runs."""

from __future__ import annotations

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
