"""Reductions of elementwise expressions in one pass (ElemwiseReduce) and the C reduction
generator they share with Reduce: every kind over broadcasting operands on every layout,
against Op.perform (DebugMode) and NumPy; NaN in every lane position of max/min; the
whole-graph program's step against the per-node kernel; errors as the unfused graph
gives them; gradients; and the rewrite's reach (what fuses, what is recomputed, host
functions only)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import (
    C_ONLY,
    DEBUG_C,
    NEEDS_C,
    cached_sources,
    compiler_macros,
    vectorised_lines,
)
from helpers.layouts import matrix_layouts

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.gradient import NotDifferentiableError
from tensorjit.plugins.c_backend.generators import reduction
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.elemwise_reduce import ElemwiseReduce
from tensorjit.tensor.math import Reduce
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.tensor.scalar import SCALAR_OPS

pytestmark = NEEDS_C
RNG = np.random.default_rng(11)


def fused_nodes(f) -> list:
    return [n for n in f.fgraph.toposort() if isinstance(n.op, ElemwiseReduce)]


def layouts(shape: tuple[int, int], dtype: str) -> dict[str, np.ndarray]:
    base = (RNG.standard_normal((2 * shape[0], 2 * shape[1])) * 3).astype(dtype)
    return matrix_layouts(base, shape)


def sum_tolerance(dtype: str, terms: int) -> float:
    """A relative tolerance that follows the summation length."""
    eps = np.finfo(dtype).eps
    return float(4 * eps * max(terms, 8))


@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod"])
def test_every_kind_of_an_expression_with_a_row_and_a_column(kind, axis, dtype, layout):
    x = T.matrix("x", dtype=dtype)
    r, c = T.row("r", dtype=dtype), T.col("c", dtype=dtype)
    mapped = T.tanh(x * r - c) * 0.05 + 1  # in (0.95, 1.05): products stay normal
    out = getattr(mapped, kind)(axis=axis)
    f = tensorjit.function([x, r, c], out, mode=DEBUG_C)
    (node,) = fused_nodes(f)
    assert f.kernels[node].name == "debug:c:reduce"
    shape = (37, 29)  # lanes plus a tail, both ways
    xv = layouts(shape, dtype)[layout]
    rv = RNG.standard_normal((1, shape[1])).astype(dtype)
    cv = RNG.standard_normal((shape[0], 1)).astype(dtype)
    want = getattr(np.tanh(xv * rv - cv) * 0.05 + 1, kind)(axis=axis)
    terms = xv.size if axis is None else xv.shape[axis]
    rtol = sum_tolerance(dtype, terms) if kind in ("sum", "prod") else 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(f(xv, rv, cv), want, rtol=rtol)


@pytest.mark.parametrize("kind", ["sum", "max", "all", "any"])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_and_boolean_expressions(kind, dtype):
    x = T.matrix("x", dtype=dtype)
    mapped = (x % 7) * 3 - 2 if kind in ("sum", "max") else T.gt(x % 5, 0)
    out = getattr(mapped, kind)(axis=1)
    f = tensorjit.function([x], out, mode=DEBUG_C)
    assert fused_nodes(f)
    xv = RNG.integers(-50, 50, size=(9, 21)).astype(dtype)
    want = getattr((xv % 7) * 3 - 2 if kind in ("sum", "max") else (xv % 5) > 0, kind)(axis=1)
    np.testing.assert_array_equal(f(xv), want)


# A row of 75: two rounds of the 32 lanes, one of the remainder's 8, a tail of 3.
@pytest.mark.parametrize("position", [0, 3, 31, 32, 63, 64, 71, 72, 74])
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("fused", [False, True])
def test_a_nan_anywhere_in_a_row_wins_max_and_min(position, kind, fused):
    # A NaN in any lane, the remainder or the tail gives NaN, as in NumPy.
    x = T.matrix("x")
    out = getattr(x * 2 if fused else x, kind)(axis=1)
    f = tensorjit.function([x], out, mode=DEBUG_C)
    assert bool(fused_nodes(f)) == fused
    xv = RNG.standard_normal((3, 75))
    xv[1, position] = np.nan
    got = f(xv)
    assert np.isnan(got[1]) and not np.isnan(got[[0, 2]]).any()
    np.testing.assert_array_equal(got, getattr(xv * 2 if fused else xv, kind)(axis=1))


@pytest.mark.parametrize("length", [1, 5, 8, 13, 32, 40, 75])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_and_min_of_rows_of_every_length_and_sign(length, kind):
    # Rows shorter than the lanes, exactly one round, rounds and remainders; rows all
    # negative, all -inf or +inf, with ties, and a row of NaN only.
    x = T.matrix("x", dtype="float32")
    f = tensorjit.function([x], getattr(x, kind)(axis=1), mode=C_ONLY)
    xv = RNG.standard_normal((6, length)).astype("float32")
    xv[1] = -np.abs(xv[1]) - 1
    xv[2] = -np.inf
    xv[3] = np.inf
    xv[4] = 0.5
    xv[5] = np.nan
    np.testing.assert_array_equal(f(xv), getattr(xv, kind)(axis=1))


@pytest.mark.parametrize("where", ["first run", "last run", "nowhere"])
def test_a_nan_in_an_earlier_run_of_the_same_output_stays(where):
    # Reducing two axes: each output combines 4 runs of 40; a NaN in any run is its value.
    x = T.tensor3("x")
    f = tensorjit.function([x], T.max(x, axis=(1, 2)), mode=DEBUG_C)
    xv = RNG.standard_normal((2, 4, 40))
    if where == "first run":
        xv[0, 0, 35] = np.nan
    elif where == "last run":
        xv[0, 3, 2] = np.nan
    got = f(xv)
    np.testing.assert_array_equal(got, xv.max(axis=(1, 2)))
    assert np.isnan(got[0]) == (where != "nowhere") and not np.isnan(got[1])


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16"])
def test_max_and_min_of_integer_rows_with_the_lanes(dtype):
    x = T.matrix("x", dtype=dtype)
    f = tensorjit.function([x], [T.max(x, axis=1), T.min(x, axis=1)], mode=C_ONLY)
    info = np.iinfo(dtype)
    xv = RNG.integers(info.min, info.max, size=(4, 75), endpoint=True).astype(dtype)
    xv[2, 70] = info.max
    xv[3, 40] = info.min
    got_max, got_min = f(xv)
    np.testing.assert_array_equal(got_max, xv.max(axis=1))
    np.testing.assert_array_equal(got_min, xv.min(axis=1))


def test_logsumexp_written_out_reads_x_in_two_passes():
    x = T.matrix("x", dtype="float32")
    m = x.max(axis=1, keepdims=True)
    lse = m + T.log(T.exp(x - m).sum(axis=1, keepdims=True))
    f = tensorjit.function([x], (x - lse).sum(), mode=DEBUG_C)
    names = sorted(type(n.op).__name__ for n in f.fgraph.toposort())
    # the max and the sum of exp(x - m) in one MaxExpSum, the fused final sum; no array
    # of x's size stored
    kinds = ("Reduce", "ElemwiseReduce", "MaxExpSum")
    assert [n for n in names if n in kinds] == ["ElemwiseReduce", "MaxExpSum"]
    big = [
        n
        for n in f.fgraph.toposort()
        if isinstance(n.op, Elemwise) and n.outputs[0].type.broadcastable == (False, False)
    ]
    assert big == []
    xv = (RNG.standard_normal((300, 70)) * 4).astype("float32")
    xd = xv.astype("float64")
    md = xd.max(axis=1, keepdims=True)
    want = (xd - (md + np.log(np.exp(xd - md).sum(axis=1, keepdims=True)))).sum()
    np.testing.assert_allclose(f(xv), want, rtol=sum_tolerance("float32", xv.size))


def test_the_program_step_agrees_with_the_per_node_kernel_on_every_layout():
    x, r = T.matrix("x"), T.row("r")
    outputs = [
        ((x - r) ** 2).sum(axis=0),  # columns loop
        T.exp(x - r).sum(axis=1),  # runs
        (x * r).max(),  # everything, in parts
        abs(x - 1).min(axis=1),
    ]
    f = tensorjit.function([x, r], outputs, mode=C_ONLY)
    with tensorjit.config.change_flags(whole_graph=False):
        g = tensorjit.function([x, r], outputs, mode=C_ONLY)
    assert f.calls.program is not None and g.calls.program is None
    assert len(fused_nodes(f)) == 4
    rv = RNG.standard_normal((1, 30))
    for arg in layouts((40, 30), "float64").values():
        for got, want in zip(f(arg, rv), g(arg, rv)):
            np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("whole_graph", [True, False])
def test_operands_that_do_not_broadcast_give_the_unfused_error(whole_graph):
    x, y = T.matrices("x", "y")
    with tensorjit.config.change_flags(whole_graph=whole_graph):
        f = tensorjit.function([x, y], (x * y).sum(axis=1), mode=C_ONLY)
    assert fused_nodes(f)
    with pytest.raises(ValueError, match="shape"):
        f(np.ones((3, 4)), np.ones((3, 5)))
    with pytest.raises(ValueError):  # a run-time length 1 the type does not declare
        f(np.ones((3, 4)), np.ones((1, 4)))
    np.testing.assert_allclose(f(np.ones((3, 4)), np.full((3, 4), 2.0)), [8.0] * 3)


@pytest.mark.parametrize("whole_graph", [True, False])
def test_max_over_an_empty_axis_is_numpys_error(whole_graph):
    x = T.matrix("x")
    with tensorjit.config.change_flags(whole_graph=whole_graph):
        f = tensorjit.function([x], (x + 1).max(axis=1), mode=C_ONLY)
    assert fused_nodes(f)
    with pytest.raises(ValueError, match="zero-size array"):
        f(np.ones((3, 0)))
    assert f(np.ones((0, 4))).shape == (0,)  # empty kept axis: an empty result


def test_user_arrays_are_not_modified():
    x, r = T.matrix("x"), T.row("r")
    f = tensorjit.function([x, r], T.exp(x - r).sum(axis=1))
    xv, rv = RNG.standard_normal((5, 9)), RNG.standard_normal((1, 9))
    before = xv.copy(), rv.copy()
    f(xv, rv)
    np.testing.assert_array_equal(xv, before[0])
    np.testing.assert_array_equal(rv, before[1])


def test_gradients_go_through_the_fused_reduction():
    sub = SCALAR_OPS["sub"]
    op = ElemwiseReduce("sum", (1,), None, sub)
    xv, cv = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 1))
    tensorjit.verify_grad(lambda a, b: op(a, b), [xv, cv])
    for kind in ("sum", "max"):
        exp = ElemwiseReduce(kind, (0,), None, SCALAR_OPS["exp"])
        tensorjit.verify_grad(lambda a, exp=exp: exp(a), [xv])
    # A fused Composite exists only after rewriting, as for Elemwise: differentiate the
    # original graph.
    x, c = T.matrix("x"), T.col("c")
    exp_of_difference = Composite(
        ((sub, (("in", 0), ("in", 1))), (SCALAR_OPS["exp"], (("step", 0),))), 2, "float64"
    )
    fused = ElemwiseReduce("sum", (1,), None, exp_of_difference)(x, c)
    with pytest.raises(NotDifferentiableError, match="after rewriting"):
        tensorjit.grad(fused.sum(), x)


def test_a_gradients_sums_over_broadcast_axes_fuse_too():
    # The gradient of a bias added to a matrix sums the upstream gradient over rows:
    # with a fused map before the sum (here tanh's derivative), one pass.
    x, b = T.matrix("x"), T.row("b")
    cost = T.tanh(x + b).sum()
    gb = tensorjit.grad(cost, b)
    f = tensorjit.function([x, b], gb, mode=DEBUG_C)
    assert fused_nodes(f)
    xv, bv = RNG.standard_normal((6, 5)), RNG.standard_normal((1, 5))
    np.testing.assert_allclose(f(xv, bv), (1 - np.tanh(xv + bv) ** 2).sum(axis=0, keepdims=True))


def test_a_cheap_shared_difference_is_recomputed_not_stored():
    x = T.matrix("x")
    m = x.mean(axis=1, keepdims=True)
    d = x - m
    var = (d * d).mean(axis=1, keepdims=True)
    out = d / T.sqrt(var + 1e-5)  # a layer norm's three uses of x - mean
    f = tensorjit.function([x], out, mode=DEBUG_C)
    producers = [n for n in f.fgraph.toposort() if isinstance(n.op, Elemwise)]
    # x - m is not a node of its own: the variance's sum and the output recompute it
    assert not [n for n in producers if n.op.scalar_op.name == "sub"]
    xv = RNG.standard_normal((8, 33))
    dv = xv - xv.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(f(xv), dv / np.sqrt((dv * dv).mean(axis=1, keepdims=True) + 1e-5))


def test_a_costly_shared_value_is_stored_once():
    x = T.matrix("x")
    e = T.exp(x)
    f = tensorjit.function([x], [e.sum(axis=1), e * 2], mode=DEBUG_C)
    exps = [n for n in f.fgraph.toposort() if "exp" in str(n.op)]
    # read by both (its node may also write e * 2: a MultiOutputElemwise)
    assert len(exps) == 1 and isinstance(exps[0].op, (Elemwise, MultiOutputElemwise))
    xv = RNG.standard_normal((4, 6))
    got = f(xv)
    np.testing.assert_allclose(got[0], np.exp(xv).sum(axis=1))
    np.testing.assert_allclose(got[1], np.exp(xv) * 2)


def test_a_recomputed_difference_does_not_drag_a_costly_producer_along():
    x, m = T.matrix("x"), T.col("m")
    d = T.exp(x) - m  # cheap, recomputed by both readers; exp(x) is not
    f = tensorjit.function([x, m], [T.exp(d).sum(axis=1), d * 2], mode=DEBUG_C)
    exps = sum(str(n.op).count("exp") for n in f.fgraph.toposort() if n.op.__class__ is not Reduce)
    assert exps == 2  # exp(x) once, stored; the exp of d once
    xv, mv = RNG.standard_normal((4, 6)), RNG.standard_normal((4, 1))
    got = f(xv, mv)
    np.testing.assert_allclose(got[0], np.exp(np.exp(xv) - mv).sum(axis=1))
    np.testing.assert_allclose(got[1], (np.exp(xv) - mv) * 2)


def test_a_value_that_is_also_an_output_is_not_fused_away():
    x = T.matrix("x")
    e = T.exp(x)
    f = tensorjit.function([x], [e.sum(), e], mode=DEBUG_C)
    assert not fused_nodes(f)
    xv = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(f(xv)[0], np.exp(xv).sum())


def test_no_fused_reduction_for_a_device_function():
    from tensorjit.testing.device_under_test import DEVICE, REASON

    if REASON is not None:
        pytest.skip(f"no {DEVICE} device here (hardware/driver absent): {REASON}")
    x = T.matrix("x")
    with tensorjit.config.change_flags(device=DEVICE):
        f = tensorjit.function([x], T.exp(x).sum(axis=1))
    assert not fused_nodes(f)
    assert [n for n in f.fgraph.toposort() if type(n.op) is Reduce]
    xv = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(f(xv), np.exp(xv).sum(axis=1), rtol=1e-12)


def test_excluding_fusion_keeps_the_two_steps():
    x = T.matrix("x")
    f = tensorjit.function([x], T.exp(x).sum(), mode=tensorjit.FAST_RUN.without("elemwise_fusion"))
    assert not fused_nodes(f)


@pytest.mark.parametrize("kind, accumulator", [("max", "float"), ("sum", "double")])
def test_the_lanes_of_a_contiguous_run_are_vectorised(kind, accumulator):
    macros = compiler_macros()
    if "__GNUC__" not in macros or "__clang__" in macros:
        pytest.skip("only gcc reports vectorised loops (-fopt-info-vec); the compiler is not gcc")
    x = T.matrix("x", dtype="float32")
    f = tensorjit.function([x], getattr(x * 3, kind)(axis=1), mode=C_ONLY)
    np.testing.assert_allclose(f(np.ones((2, 16), "float32")), [3 if kind == "max" else 48] * 2)
    # every float32 run of this kind in the cache (the test's, and others like it)
    found = cached_sources(f"tj_run({accumulator} acc, int64_t n, const float *restrict p0)")
    assert found
    for base, text in found:
        lines = text.splitlines()
        widths = (reduction.LANES, reduction.SHORT_LANES)
        heads = [f"for (int k = 0; k < {width}; k++) {{" for width in widths]
        lane_loop = [i + 1 for i, line in enumerate(lines) if any(h in line for h in heads)]
        vectorised = vectorised_lines(base)
        # (gcc names the pragma's line or the loop's body)
        assert lane_loop and all({k, k + 1} & vectorised for k in lane_loop), base
