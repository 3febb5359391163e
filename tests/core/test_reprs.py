"""Readable reprs: types say dtype and shape; functions say their signature and how
they run."""

from __future__ import annotations

import numpy as np
from helpers.c_backend import NEEDS_C

import tensorjit
import tensorjit.tensor as T


def test_type_and_function_reprs():
    x = T.matrix("x")
    assert repr(x.type) == "TensorType(float64, shape=(?, ?))"
    w = tensorjit.shared(np.ones(3), name="w")
    f = tensorjit.function([x], [T.exp(x), x + 1], updates=[(w, w * 2)], name="step")
    text = repr(f)
    assert text.startswith("<tensorjit Function step(x: TensorType(float64, shape=(?, ?)))")
    assert "-> 2 outputs, 1 update;" in text and "nodes" in text


@NEEDS_C
def test_warnings_are_tensorjit_warnings_and_compiles_are_logged(tmp_path, caplog):
    import logging

    import pytest

    from tensorjit.core.diagnostics import TensorjitRuntimeWarning
    from tensorjit.core.rewrites.runner import EquilibriumBoundWarning
    from tensorjit.pictures import pydotprint

    assert issubclass(TensorjitRuntimeWarning, tensorjit.TensorjitWarning)
    assert issubclass(TensorjitRuntimeWarning, RuntimeWarning)  # as they were before
    assert issubclass(EquilibriumBoundWarning, tensorjit.TensorjitWarning)
    with pytest.warns(tensorjit.TensorjitWarning, match="high_contrast"):
        pydotprint(T.vector("v") * 2, tmp_path / "g.dot", print_output_file=False, high_contrast=1)
    from tensorjit.plugins.c_backend.build import compiler

    x = T.vector("x")
    with caplog.at_level(logging.DEBUG, logger="tensorjit"):
        with tensorjit.config.change_flags(compiledir=str(tmp_path / "cache")):
            compiler.clear_memory_cache()
            tensorjit.function([x], T.cosh(x) * 3)(np.ones(2))
    assert any(r.name.startswith("tensorjit") and "compiling" in r.message for r in caplog.records)
