"""Readable reprs: types say dtype and shape; functions say their signature and how
they run."""

from __future__ import annotations

import numpy as np

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
