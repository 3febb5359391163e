"""``x[rows, cols]`` on a matrix and its inc/set (the classification cost's indexing and
its gradient), and ``arange``: the C kernels against Op.perform under DebugMode, and
the whole-graph program's steps against NumPy (the program runs without DebugMode)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.program import ProgramVM
from tensorjit.plugins.c_backend.generators import indexing

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(7)
compiled = functools.partial(compiled_with, "indexing", indexing.OPS)


def _layouts(value: np.ndarray) -> list[np.ndarray]:
    """C order, Fortran order, both axes reversed, a strided view."""
    wide = np.repeat(np.repeat(value, 2, axis=0), 3, axis=1)
    return [value, np.asfortranarray(value), value[::-1, ::-1].copy()[::-1, ::-1], wide[::2, ::3]]


def _program(inputs, outputs, **kwargs):
    with tensorjit.config.change_flags(whole_graph=True):
        f = tensorjit.function(inputs, outputs, mode=C_ONLY, **kwargs)
    assert isinstance(f.vm, ProgramVM), "the graph must run as one program"
    return f


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("idx_dtype", ["int64", "int32"])
def test_take_pairs_on_every_layout(dtype, idx_dtype):
    x = T.matrix("x", dtype=dtype)
    r, c = T.vector("r", dtype=idx_dtype), T.vector("c", dtype=idx_dtype)
    f = compiled([x, r, c], x[r, c])
    g = _program([x, r, c], x[r, c] * 1)
    value = (RNG.standard_normal((4, 5)) * 10).astype(dtype)
    cases = [
        ([0, 3, -1, 2, 2], [4, 0, -5, 1, 1]),  # negatives, repeats
        ([1], [0, 2, 4]),  # a row index of length 1 broadcasts
        ([0, 1, 2], [3]),
        ([], []),
    ]
    for xv in _layouts(value):
        for rows, cols in cases:
            rv, cv = np.array(rows, idx_dtype), np.array(cols, idx_dtype)
            np.testing.assert_array_equal(f(xv, rv, cv), xv[rv, cv])
            np.testing.assert_array_equal(g(xv, rv, cv), xv[rv, cv])


@pytest.mark.parametrize("set_", [False, True], ids=["inc", "set"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
def test_inc_and_set_pairs_accumulate_repeats(set_, dtype):
    x, v = T.matrix("x", dtype=dtype), T.vector("v", dtype=dtype)
    r, c = T.lvector("r"), T.lvector("c")
    build = T.set_subtensor if set_ else T.inc_subtensor
    f = compiled([x, v, r, c], build(x[r, c], v))
    g = _program([x, v, r, c], build(x[r, c], v) * 1)
    value = (RNG.standard_normal((3, 4)) * 10).astype(dtype)
    rv, cv = np.array([0, 0, 2, -1]), np.array([1, 1, 3, 0])
    vv = np.array([1, 2, 3, 4], dtype=dtype)
    want = value.copy()
    if set_:
        want[rv, cv] = vv
    else:
        np.add.at(want, (rv, cv), vv)
    for xv in _layouts(value):
        before = xv.copy()
        np.testing.assert_array_equal(f(xv, vv, rv, cv), want)
        np.testing.assert_array_equal(g(xv, vv, rv, cv), want)
        np.testing.assert_array_equal(xv, before)  # not an input it may destroy


def test_out_of_range_and_mismatched_pairs_are_numpys_errors_on_both_paths():
    x, r, c = T.matrix("x"), T.lvector("r"), T.lvector("c")
    f = compiled([x, r, c], x[r, c])
    g = _program([x, r, c], x[r, c] * 1)
    xv = np.zeros((3, 4))
    for run in (f, g):
        with pytest.raises(IndexError, match="out of bounds"):
            run(xv, np.array([0, 3]), np.array([0, 0]))
        with pytest.raises(IndexError, match="out of bounds"):
            run(xv, np.array([0]), np.array([-5]))
        with pytest.raises(IndexError):
            run(xv, np.array([0, 1]), np.array([0, 1, 2]))


def test_arange_in_a_program():
    a, b, s = T.lscalars("a", "b", "s")
    g = _program([a, b, s], T.arange(a, b, s) * 2)
    for start, stop, step in ((0, 7, 1), (2, 11, 3), (5, -4, -2), (3, 3, 1), (4, 0, 1)):
        np.testing.assert_array_equal(g(start, stop, step), np.arange(start, stop, step) * 2)
    with pytest.raises(ValueError, match="step"):
        g(0, 5, 0)


def test_the_tutorials_classification_cost_and_gradient_run_as_one_program():
    rng = np.random.default_rng(0)
    data_x = tensorjit.shared(rng.standard_normal((40, 6)), name="data_x")
    data_y = tensorjit.shared(rng.integers(0, 3, 40), name="data_y")
    w = tensorjit.shared(rng.standard_normal((6, 3)) * 0.1, name="w")
    i, x, y = T.lscalar("i"), T.matrix("x"), T.lvector("y")
    p = T.nnet.softmax(T.dot(x, w))
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    (gw,) = tensorjit.grad(cost, [w])
    batch = 10
    givens = {x: data_x[i * batch : (i + 1) * batch], y: data_y[i * batch : (i + 1) * batch]}
    step = _program([i], cost, updates=[(w, w - 0.5 * gw)], givens=givens)
    kinds = {type(n.op).__name__ for n in step.maker.fgraph.toposort()}
    assert {"AdvancedSubtensor", "AdvancedIncSubtensor"} <= kinds

    wv = w.get_value()
    for k in range(4):  # NumPy's SGD on the same minibatches
        xb = data_x.get_value()[k * batch : (k + 1) * batch]
        yb = data_y.get_value()[k * batch : (k + 1) * batch]
        z = xb @ wv
        pv = np.exp(z - z.max(1, keepdims=True))
        pv /= pv.sum(1, keepdims=True)
        want = -np.mean(np.log(pv)[np.arange(batch), yb])
        onehot = np.eye(3)[yb]
        wv = wv - 0.5 * xb.T @ (pv - onehot) / batch
        np.testing.assert_allclose(step(k), want, rtol=1e-10)
    np.testing.assert_allclose(w.get_value(), wv, rtol=1e-10)
