"""Testing tools for op and plugin authors: ``check_op`` (tests an Op the way tensorjit
tests its own) and, through the ``pytest11`` entry point, pytest fixtures that isolate
the compile cache and the plugin set (``tensorjit.testing.pytest_plugin``); the
conformance suite every backend passes (``tensorjit.testing.conformance``)."""

from tensorjit.testing.op_check import (
    LAYOUTS,
    OpCheckError,
    OpCheckReport,
    check_op,
    check_props,
    layout_variants,
)

__all__ = ["LAYOUTS", "OpCheckError", "OpCheckReport", "check_op", "check_props", "layout_variants"]
