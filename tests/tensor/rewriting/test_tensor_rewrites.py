"""Each tensor rewrite of ``tensorjit.tensor.rewriting.REWRITES``: the graph before and
after (op types and scalar op names in ``f.fgraph``) and the values, checked against
NumPy and against the same graph compiled without rewrites."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import FAST_RUN, Mode
from tensorjit.core.graph import Constant, toposort
from tensorjit.core.rewrites import RewriteQuery
from tensorjit.tensor.blas import Gemm, PenalisedGemm
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.math import Alloc, Dot, MappedReduce, Reduce
from tensorjit.tensor.max_exp_sum import MaxExpSum
from tensorjit.tensor.moments import Moments
from tensorjit.tensor.rewriting import REWRITES
from tensorjit.tensor.shape_ops import MakeVector, Reshape, Shape
from tensorjit.tensor.subtensor import Subtensor

# One rewrite at a time: no fusion (it would hide the op names) and no inplace variants.
ISOLATED = FAST_RUN.excluding("fusion", "inplace")
# The reference: the graph exactly as built, evaluated with Op.perform.
UNREWRITTEN = Mode("unrewritten", RewriteQuery(), backends=("python",))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def nodes(f):
    return f.fgraph.toposort()


def elemwise_names(f) -> list[str]:
    """Scalar op names of the Elemwise nodes (inplace ones included)."""
    return [n.op.scalar_op.name for n in nodes(f) if isinstance(n.op, Elemwise)]


def of_type(f, op_class) -> list:
    return [n for n in nodes(f) if isinstance(n.op, op_class)]


def reads(f, var) -> bool:
    """Whether any node of the compiled graph uses the graph input ``var``."""
    (fg_var,) = [v for v in f.fgraph.inputs if v.name == var.name]
    return any(fg_var in n.inputs for n in nodes(f))


def compile_pair(inputs, output, mode=ISOLATED):
    """(rewritten, unrewritten) compiled functions of the same graph."""
    return (
        tensorjit.function(inputs, output, mode=mode),
        tensorjit.function(inputs, output, mode=UNREWRITTEN),
    )


def assert_same_values(f, g, *args, rtol=1e-10):
    got, want = f(*args), g(*args)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=rtol)
    return got


def test_every_registered_tensor_rewrite_has_a_test_here():
    tested = {
        "canonical_sum",
        "canonical_product",
        "negation_out",
        "local_exp_log",
        "local_log_exp",
        "local_dimshuffle_lift",
        "local_reshape_chain",
        "local_sum_of_sum",
        "local_sum_of_scaled",
        "local_reduce_of_new_axes",
        "local_subtensor_of_makevector",
        "local_useless_alloc",
        "local_elemwise_alloc",
        "fused_elemwise_alloc",
        "local_shape_i",
        "local_shape",
        "local_log_stable",
        "local_expm1",
        "local_sigmoid",
        "local_exp_over_1_plus_exp",
        "local_log_softmax",
        "late_canonical_sum",
        "late_canonical_product",
        "local_pow_specialize",
        "local_reduce_of_map",
        "local_gemm",
        "local_ger",
        "local_decay_with_penalty",
        "local_sum_and_squared_deviations",
        "local_max_and_shifted_exp_sum",
        "elemwise_fusion",
        "local_moments_map",  # tests/plugins/c_backend/test_c_moments_map.py
        "multi_output_fusion",  # test_multi_output_fusion.py
    }
    assert {name for name, *_ in REWRITES} == tested


# ---------------------------------------------------------------- canonical_product


def test_paper_fraction_cancels_to_c_times_d_over_b():
    a, b, c, d = T.vectors("a", "b", "c", "d")
    expr = a / (((a * b) / c) / d)
    f, g = compile_pair([a, b, c, d], expr)

    before = [n.op.scalar_op.name for n in toposort([expr])]
    assert before.count("true_div") == 3 and before.count("mul") == 1
    assert elemwise_names(f) == ["mul", "true_div"]
    assert not reads(f, a)
    (div,) = [n for n in nodes(f) if n.op.scalar_op.name == "true_div"]
    numerator, denominator = div.inputs
    assert numerator.owner.op.scalar_op.name == "mul"
    assert {v.name for v in numerator.owner.inputs} == {"c", "d"}
    assert denominator.name == "b"
    assert f.profile.applied["canonical_product"] >= 1

    av, bv, cv, dv = rng().uniform(0.5, 2.0, (4, 5))
    got = assert_same_values(f, g, av, bv, cv, dv)
    np.testing.assert_allclose(got, (cv * dv) / bv)


def test_paper_fraction_is_left_alone_without_canonical_product():
    a, b, c, d = T.vectors("a", "b", "c", "d")
    f = tensorjit.function(
        [a, b, c, d],
        a / (((a * b) / c) / d),
        mode=ISOLATED.without("canonical_product", "late_canonical_product"),
    )
    assert elemwise_names(f).count("true_div") == 3
    assert reads(f, a)
    assert "canonical_product" not in f.profile.applied


def test_multiplying_by_one_vanishes():
    x = T.matrix("x")
    f, g = compile_pair([x], x * 1)
    assert nodes(f) == []
    assert f.fgraph.outputs[0] is f.fgraph.inputs[0]
    xv = rng().standard_normal((3, 4))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv)


def test_constant_factors_fold_into_one_coefficient():
    x = T.matrix("x")
    f, g = compile_pair([x], (2.0 * x * 3.0) / 4.0)
    (mul,) = of_type(f, Elemwise)
    assert mul.op.scalar_op.name == "mul"
    (const,) = [v for v in mul.inputs if isinstance(v, Constant)]
    np.testing.assert_allclose(const.data, 1.5)
    xv = rng(1).standard_normal((3, 4))
    np.testing.assert_allclose(assert_same_values(f, g, xv), 1.5 * xv)


def test_x_over_x_becomes_ones_of_x_shape():
    x = T.matrix("x")
    f, g = compile_pair([x], x / x)
    assert "true_div" not in elemwise_names(f)
    xv = rng(2).uniform(1, 2, (3, 4))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), np.ones((3, 4)))


def test_shared_subexpression_is_not_cancelled_into():
    """``t = a*b`` is used twice: the product below may not absorb it."""
    a, b = T.vectors("a", "b")
    t = a * b
    f, g = compile_pair([a, b], [t / a, t + 1.0])
    assert sorted(elemwise_names(f)) == ["add", "mul", "true_div"]
    (mul,) = [n for n in nodes(f) if n.op.scalar_op.name == "mul"]
    assert all(mul.outputs[0] in n.inputs for n in nodes(f) if n is not mul)
    av, bv = rng(3).uniform(0.5, 2.0, (2, 6))
    got = [f(av, bv), g(av, bv)]
    np.testing.assert_allclose(got[0][0], bv)
    np.testing.assert_allclose(got[0][0], got[1][0])
    np.testing.assert_allclose(got[0][1], av * bv + 1.0)


# ---------------------------------------------------------------- canonical_sum


def test_x_minus_x_gives_zeros_of_x_shape():
    x = T.matrix("x")
    f, g = compile_pair([x], x - x)
    assert "sub" not in elemwise_names(f)
    (alloc,) = of_type(f, Alloc)
    assert isinstance(alloc.inputs[0], Constant) and alloc.inputs[0].data == 0
    # x's values are not read any more, only its shape.
    assert all(isinstance(n.op, (Alloc, Shape, Subtensor)) for n in nodes(f))
    xv = rng().standard_normal((3, 5))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), np.zeros((3, 5)))
    assert f.profile.applied["canonical_sum"] == 1


def test_double_negation_gives_x():
    x = T.matrix("x")
    f, g = compile_pair([x], T.neg(T.neg(x)))
    assert nodes(f) == []
    assert f.fgraph.outputs[0] is f.fgraph.inputs[0]
    xv = rng(1).standard_normal((2, 3))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv)


def test_adding_zero_vanishes():
    x = T.matrix("x")
    f, g = compile_pair([x], x + 0)
    assert nodes(f) == []
    xv = rng(2).standard_normal((2, 3))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv)


def test_terms_cancel_across_a_sum_tree_and_constants_fold():
    x, y = T.matrices("x", "y")
    f, g = compile_pair([x, y], (1.0 + x) - (y - 2.0) + (y + x))
    assert elemwise_names(f) == ["add", "add"]
    assert not reads(f, y)
    constants = [v for n in nodes(f) for v in n.inputs if isinstance(v, Constant)]
    assert len(constants) == 1 and np.all(constants[0].data == 3.0)
    xv, yv = rng(3).standard_normal((2, 3, 4))
    np.testing.assert_allclose(assert_same_values(f, g, xv, yv), 2 * xv + 3.0)


def test_sum_rewrite_is_off_without_canonical_sum():
    x = T.matrix("x")
    f = tensorjit.function([x], x - x, mode=ISOLATED.without("canonical_sum", "late_canonical_sum"))
    assert elemwise_names(f) == ["sub"]


def test_integer_sum_cancels_too():
    i, j = T.lvectors("i", "j")
    f, g = compile_pair([i, j], i + j - i)
    assert nodes(f) == []
    iv, jv = rng(4).integers(-9, 9, (2, 7))
    got = assert_same_values(f, g, iv, jv)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, jv)


# canonical_sum and canonical_product: when the terms or factors that carried the
# output's shape cancel, what is left (a broadcastable operand, or a constant of shape
# (1, 1)) must be broadcast back; its type is a subtype of the output's, so a plain type
# check accepts it and the result would have the wrong shape.
@pytest.mark.parametrize(
    "build",
    [
        lambda x, r: (x + 1.0) - x,
        lambda x, r: x - x + r,
        lambda x, r: x / x * 2.0,
        lambda x, r: r * x / x,
    ],
    ids=["(x+1)-x", "x-x+r", "x/x*2", "r*x/x"],
)
def test_cancellation_keeps_the_broadcast_shape(build):
    x, r = T.matrix("x"), T.row("r")
    expr = build(x, r)
    f = tensorjit.function([x, r], expr, on_unused_input="ignore")
    g = tensorjit.function([x, r], expr, mode=UNREWRITTEN, on_unused_input="ignore")
    xv = rng(5).uniform(1, 2, (4, 3))
    rv = rng(6).uniform(1, 2, (1, 3))
    want = g(xv, rv)
    assert want.shape == (4, 3)
    got = f(xv, rv)
    assert got.shape == (4, 3)  # was (1, 3) or (1, 1) before canonical_* broadcast back
    np.testing.assert_allclose(got, want)


# ---------------------------------------------------------------- exp/log inverses


# ---------------------------------------------------------------- negation_out


def test_an_odd_function_of_x_and_of_minus_x_is_evaluated_once():
    # The normal CDF's symmetry as option pricing writes it: N(d) and N(-d)
    d = T.vector("d")
    cdf = [0.5 * (1 + T.erf(v * 0.7071067811865476)) for v in (d, -d)]
    f, g = compile_pair([d], cdf[0] * 3 + cdf[1])
    assert elemwise_names(f).count("erf") == 1
    assert f.profile.applied["negation_out"] >= 2  # the product's sign, then erf's
    dv = np.concatenate([rng(2).standard_normal(50) * 3, [0.0, -0.0, np.inf, -np.inf]])
    got = assert_same_values(f, g, dv, rtol=1e-15)
    np.testing.assert_array_equal(np.isnan(got), np.zeros(dv.size, bool))


@pytest.mark.parametrize("name", ["tanh", "sin", "arctan", "sinh", "sign", "trunc"])
def test_odd_functions_take_the_sign_out(name):
    x = T.vector("x")
    fn = getattr(T, name)
    f, g = compile_pair([x], fn(-x) + fn(x) * 2)
    assert elemwise_names(f).count(name) == 1
    xv = rng(3).uniform(-3, 3, 40)
    assert_same_values(f, g, xv, rtol=1e-15)


@pytest.mark.parametrize("name", ["cos", "cosh", "abs", "sqr"])
def test_even_functions_drop_the_sign(name):
    x = T.vector("x")
    fn = getattr(T, name)
    f, g = compile_pair([x], fn(-x) * fn(x))
    assert elemwise_names(f).count(name) == 1 and "neg" not in elemwise_names(f)
    assert_same_values(f, g, rng(4).uniform(-3, 3, 40), rtol=1e-15)


def test_negated_factors_of_a_product_or_quotient_leave_it():
    x, y = T.vector("x"), T.vector("y")
    f, g = compile_pair([x, y], [(-x) * (-y), (-x) / y, x / (-y)])
    xv, yv = rng(5).uniform(0.5, 2, 9), rng(6).uniform(0.5, 2, 9)
    for got, want in zip(f(xv, yv), g(xv, yv)):
        np.testing.assert_array_equal(got, want)
    assert f.profile.applied["negation_out"] >= 3


def test_an_integer_negation_stays_where_it_is():
    # -(-128) wraps to -128 in int8: erf(-x) is not -erf(x) there
    x = T.vector("x", dtype="int8")
    f, g = compile_pair([x], T.erf(-x))
    assert f.profile.applied.get("negation_out", 0) == 0
    xv = np.array([-128, -1, 0, 5, 127], dtype="int8")
    np.testing.assert_allclose(f(xv), g(xv), rtol=1e-15)  # (libm's erf and SciPy's)


def test_exp_of_log_is_x():
    x = T.vector("x")
    f, g = compile_pair([x], T.exp(T.log(x)) * 2.0)
    assert "exp" not in elemwise_names(f) and "log" not in elemwise_names(f)
    assert f.profile.applied["local_exp_log"] == 1
    xv = rng().uniform(0.1, 5.0, 8)
    np.testing.assert_allclose(assert_same_values(f, g, xv), 2.0 * xv)


def test_log_of_exp_is_x_even_where_exp_overflows():
    x = T.vector("x")
    f = tensorjit.function([x], T.log(T.exp(x)), mode=ISOLATED)
    assert nodes(f) == []
    assert f.profile.applied["local_log_exp"] == 1
    xv = np.array([-3.0, 0.0, 1000.0])
    np.testing.assert_array_equal(f(xv), xv)
    plain = tensorjit.function([x], T.log(T.exp(x)), mode=ISOLATED.without("local_log_exp"))
    assert elemwise_names(plain) == ["exp", "log"]
    with np.errstate(over="ignore"):  # NumPy kernels warn, C kernels do not
        assert plain(xv)[2] == np.inf


# ---------------------------------------------------------------- dimshuffles


def test_identity_dimshuffle_disappears():
    x = T.matrix("x")
    f, g = compile_pair([x], T.exp(x.dimshuffle(0, 1)))
    (exp,) = nodes(f)
    assert exp.op.scalar_op.name == "exp"
    assert exp.inputs == [f.fgraph.inputs[0]]
    assert f.profile.applied["local_dimshuffle_lift"] == 1
    xv = rng().standard_normal((2, 3))
    np.testing.assert_allclose(assert_same_values(f, g, xv), np.exp(xv))


def test_transpose_of_transpose_disappears():
    x = T.matrix("x")
    f, g = compile_pair([x], x.T.T)
    assert nodes(f) == []
    assert f.profile.applied["local_dimshuffle_lift"] >= 1
    xv = rng(1).standard_normal((2, 3))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv)


def test_nested_dimshuffles_compose_into_one():
    x = T.matrix("x")
    f, g = compile_pair([x], x.dimshuffle(1, 0).dimshuffle("x", 1, 0))
    (ds,) = of_type(f, DimShuffle)
    assert ds.op.new_order == ("x", 0, 1)
    assert ds.inputs[0] is f.fgraph.inputs[0]
    xv = rng(2).standard_normal((2, 3))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv[None])


def test_dimshuffles_through_a_dropped_broadcast_axis():
    c = T.col("c")
    f, g = compile_pair([c], c.dimshuffle(0).dimshuffle("x", 0).T)
    (ds,) = of_type(f, DimShuffle)
    assert ds.inputs[0] is f.fgraph.inputs[0]
    cv = rng(3).standard_normal((4, 1))
    np.testing.assert_array_equal(assert_same_values(f, g, cv), cv)


# ---------------------------------------------------------------- reshapes


def test_reshape_of_reshape_becomes_one_reshape():
    x = T.matrix("x")
    f, g = compile_pair([x], x.reshape((12,)).reshape((6, 2)).reshape((3, 4)))
    (reshape,) = of_type(f, Reshape)
    assert reshape.inputs[0] is f.fgraph.inputs[0]
    np.testing.assert_array_equal(reshape.inputs[1].data, [3, 4])
    xv = rng().standard_normal((2, 6))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv.reshape(3, 4))


def test_reshape_to_the_static_shape_disappears():
    x = T.tensor("float64", shape=(2, 3), name="x")
    f, g = compile_pair([x], x.reshape((2, 3)))
    assert of_type(f, Reshape) == []
    xv = rng(1).standard_normal((2, 3))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), xv)


# ---------------------------------------------------------------- reductions


def test_sum_of_sum_is_one_reduce():
    x = T.tensor3("x")
    expr = x.sum(axis=1).sum(axis=1)
    f, g = compile_pair([x], expr)
    assert len([n for n in toposort([expr]) if isinstance(n.op, Reduce)]) == 2
    (reduce,) = of_type(f, Reduce)
    assert reduce.op.kind == "sum" and reduce.op.axis == (1, 2)
    assert reduce.inputs[0] is f.fgraph.inputs[0]
    xv = rng().standard_normal((2, 3, 4))
    np.testing.assert_allclose(assert_same_values(f, g, xv), xv.sum(axis=(1, 2)))


def test_full_sum_of_sum():
    x = T.matrix("x")
    f, g = compile_pair([x], x.sum(0).sum(0))
    (reduce,) = of_type(f, Reduce)
    assert reduce.op.axis == (0, 1)
    xv = rng(1).standard_normal((3, 4))
    np.testing.assert_allclose(assert_same_values(f, g, xv), xv.sum())


def test_sum_of_sum_keeps_an_inner_sum_used_elsewhere():
    x = T.matrix("x")
    inner = x.sum(0)
    f, g = compile_pair([x], [inner.sum(), inner * 2.0])
    assert len(of_type(f, Reduce)) == 2
    xv = rng(2).standard_normal((3, 4))
    got, want = f(xv), g(xv)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b)


def test_a_mean_of_a_mean_is_one_sum_over_both_axes():
    """The count's division between the sums moves out (local_sum_of_scaled), so the
    sums become one reduction over the image (local_sum_of_sum): the CNN's features."""
    h = T.tensor4("h")
    expr = T.mean(T.mean(h, -1), -1)
    f = tensorjit.function([h], expr, mode=FAST_RUN)
    (reduce,) = of_type(f, Reduce)
    assert reduce.op.axis == (2, 3) and reduce.inputs[0] is f.fgraph.inputs[0]
    hv = rng(3).standard_normal((2, 3, 5, 7))
    np.testing.assert_allclose(f(hv), hv.mean(axis=(2, 3)), rtol=1e-13)
    grad = tensorjit.function([h], T.grad(expr.sum(), h), mode=FAST_RUN)
    np.testing.assert_allclose(grad(hv), np.full(hv.shape, 1 / 35), rtol=1e-13)


@pytest.mark.parametrize("scale", ["mul", "rmul", "true_div"])
def test_a_factor_constant_along_the_summed_axes_leaves_the_sum(scale):
    x, c = T.matrix("x"), T.row("c")  # c: one value per column, the same down axis 0
    scaled = {"mul": x * c, "rmul": c * x, "true_div": x / c}[scale]
    f, g = compile_pair([x, c], scaled.sum(axis=0))
    (reduce,) = of_type(f, Reduce)
    assert reduce.inputs[0] is f.fgraph.inputs[0]  # the sum reads x itself
    xv, cv = rng(4).standard_normal((6, 4)), rng(5).uniform(1, 2, (1, 4))
    assert_same_values(f, g, xv, cv)


def test_a_factor_that_varies_along_the_summed_axis_stays_inside():
    x, c = T.matrix("x"), T.col("c")  # one value per row: varies down axis 0
    f, g = compile_pair([x, c], (x * c).sum(axis=0))
    (reduce,) = of_type(f, Reduce)
    assert reduce.inputs[0] is not f.fgraph.inputs[0]
    xv, cv = rng(6).standard_normal((6, 4)), rng(7).standard_normal((6, 1))
    assert_same_values(f, g, xv, cv)


def test_reduce_over_an_added_axis_disappears():
    v = T.vector("v")
    f, g = compile_pair([v], v.dimshuffle("x", 0).sum(0) + v.dimshuffle(0, "x").max(1))
    assert of_type(f, Reduce) == []
    assert of_type(f, DimShuffle) == []
    vv = rng().standard_normal(5)
    np.testing.assert_allclose(assert_same_values(f, g, vv), 2 * vv)
    assert f.profile.applied["local_reduce_of_new_axes"] == 2


def test_reduce_over_a_real_axis_too_stays():
    x = T.matrix("x")
    f, g = compile_pair([x], x.dimshuffle("x", 0, 1).sum(axis=(0, 1)))
    (reduce,) = of_type(f, Reduce)
    assert reduce.op.axis == (0, 1)
    assert "local_reduce_of_new_axes" not in f.profile.applied
    xv = rng(1).standard_normal((3, 4))
    np.testing.assert_allclose(assert_same_values(f, g, xv), xv.sum(0))


# ---------------------------------------------------------------- shapes


def test_shape_i_of_an_elementwise_result_reads_the_input_shape():
    x = T.matrix("x")
    expr = T.exp(x).shape[1]
    f, g = compile_pair([x], expr, mode=ISOLATED.without("local_shape"))
    assert "exp" not in elemwise_names(f)
    (shape,) = of_type(f, Shape)
    assert shape.inputs[0] is f.fgraph.inputs[0]
    assert f.profile.applied["local_shape_i"] == 1
    xv = rng().standard_normal((3, 7))
    assert assert_same_values(f, g, xv) == 7


def test_shape_i_of_a_dot_reads_the_operand_shapes():
    x, y = T.matrices("x", "y")
    f, g = compile_pair([x, y], T.dot(x, y).shape[0] + T.dot(x, y).shape[1])
    assert of_type(f, Dot) == []
    xv, yv = rng(1).standard_normal((3, 4)), rng(2).standard_normal((4, 5))
    assert assert_same_values(f, g, xv, yv) == 8


def test_shape_of_an_elementwise_result_reads_the_input_shape():
    x = T.tensor("float64", shape=(None, 3), name="x")
    f, g = compile_pair([x], T.exp(x).shape)
    assert "exp" not in elemwise_names(f)
    (vector,) = of_type(f, MakeVector)
    assert isinstance(vector.inputs[1], Constant) and vector.inputs[1].data == 3
    (shape,) = of_type(f, Shape)
    assert shape.inputs[0] is f.fgraph.inputs[0]
    assert f.profile.applied["local_shape"] == 1
    xv = rng().standard_normal((5, 3))
    np.testing.assert_array_equal(assert_same_values(f, g, xv), [5, 3])


def test_shape_of_elementwise_result_then_indexed_no_longer_reads_it():
    x = T.matrix("x")
    f, g = compile_pair([x], T.exp(x).shape[0])
    assert "exp" not in elemwise_names(f)
    assert of_type(f, MakeVector) == []
    (shape,) = of_type(f, Shape)
    assert shape.inputs[0] is f.fgraph.inputs[0]
    xv = rng(1).standard_normal((6, 2))
    assert assert_same_values(f, g, xv) == 6


def test_indexing_a_makevector_gives_the_entry():
    a, b, c = T.lscalars("a", "b", "c")
    f = tensorjit.function(
        [a, b, c], MakeVector("int64")(a, b, c)[1], mode=ISOLATED, on_unused_input="ignore"
    )
    assert nodes(f) == []
    assert f.fgraph.outputs[0] is f.fgraph.inputs[1]
    assert f.profile.applied["local_subtensor_of_makevector"] == 1
    assert f(4, 5, 6) == 5


def test_zero_dim_alloc_disappears_but_a_real_one_stays():
    s, v = T.scalar("s"), T.vector("v")
    f, g = compile_pair([s, v], [T.alloc(s) * 2.0, T.alloc(v, 3, 4)])
    assert len(of_type(f, Alloc)) == 1
    (kept,) = of_type(f, Alloc)
    assert kept.inputs[0] is f.fgraph.inputs[1]
    assert f.profile.applied["local_useless_alloc"] == 1
    vv = rng().standard_normal(4)
    got, want = f(1.5, vv), g(1.5, vv)
    np.testing.assert_allclose(got[0], 3.0)
    np.testing.assert_allclose(got[1], np.broadcast_to(vv, (3, 4)))
    np.testing.assert_allclose(want[1], got[1])


# ---------------------------------------------------------------- stabilize


def test_log_one_plus_exp_is_softplus_and_finite():
    x = T.vector("x")
    expr = T.log(1 + T.exp(x))
    f = tensorjit.function([x], expr, mode=FAST_RUN)
    assert elemwise_names(f) == ["softplus"]
    assert f.profile.applied["local_log_stable"] == 1
    xv = np.array([-1000.0, -5.0, 0.0, 5.0, 1000.0])
    got = f(xv)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, np.logaddexp(0, xv), rtol=1e-12)
    assert got[-1] == pytest.approx(1000.0)


def test_log_one_plus_exp_overflows_without_the_stabilize_phase():
    x = T.vector("x")
    f = tensorjit.function([x], T.log(1 + T.exp(x)), mode=FAST_RUN.excluding("stabilize"))
    assert "local_log_stable" not in f.profile.applied
    with np.errstate(over="ignore"):  # NumPy kernels warn, C kernels do not
        got = f(np.array([0.0, 1000.0]))
    assert got[1] == np.inf
    assert got[0] == pytest.approx(np.log(2.0))


def test_log_one_plus_x_is_log1p():
    x = T.vector("x")
    f = tensorjit.function([x], T.log(1 + x), mode=ISOLATED)
    assert elemwise_names(f) == ["log1p"]
    xv = np.array([1e-17, 1e-10, 0.5])
    np.testing.assert_allclose(f(xv), np.log1p(xv), rtol=1e-15)
    assert f(xv)[0] == pytest.approx(1e-17, rel=1e-12)  # log(1 + 1e-17) would be 0


def test_exp_minus_one_is_expm1_and_accurate():
    x = T.vector("x")
    f = tensorjit.function([x], T.exp(x) - 1, mode=ISOLATED)
    assert elemwise_names(f) == ["expm1"]
    assert f.profile.applied["local_expm1"] == 1
    xv = np.array([1e-10, -1e-12, 2.0])
    got = f(xv)
    np.testing.assert_allclose(got, np.expm1(xv), rtol=1e-14)
    assert abs(got[0] - 1e-10) / 1e-10 < 1e-9  # exp(1e-10) - 1 is off by about 1e-7
    plain = tensorjit.function([x], T.exp(x) - 1, mode=FAST_RUN.excluding("stabilize"))
    assert abs(plain(xv)[0] - 1e-10) / 1e-10 > 1e-9


def test_logistic_form_is_sigmoid():
    x = T.vector("x")
    f, g = compile_pair([x], 1 / (1 + T.exp(-x)))
    assert elemwise_names(f) == ["sigmoid"]
    assert f.profile.applied["local_sigmoid"] == 1
    xv = rng().standard_normal(9) * 10
    np.testing.assert_allclose(assert_same_values(f, g, xv), 1 / (1 + np.exp(-xv)))


def test_one_minus_sigmoid_is_sigmoid_of_minus_x():
    x = T.vector("x")
    f, g = compile_pair([x], 1 - T.sigmoid(x))
    names = elemwise_names(f)
    assert "sub" not in names and names.count("sigmoid") == 1
    xv = rng(1).standard_normal(9) * 10
    np.testing.assert_allclose(assert_same_values(f, g, xv), 1 / (1 + np.exp(xv)))


def test_log_sigmoid_and_log_one_minus_sigmoid_are_finite_for_large_x():
    x = T.vector("x")
    f = tensorjit.function([x], [T.log(T.sigmoid(x)), T.log(1 - T.sigmoid(x))])
    xv = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])
    log_p, log_q = f(xv)
    assert np.all(np.isfinite(log_p)) and np.all(np.isfinite(log_q))
    np.testing.assert_allclose(log_p, -np.logaddexp(0, -xv), rtol=1e-12)
    np.testing.assert_allclose(log_q, -np.logaddexp(0, xv), rtol=1e-12)
    assert log_p[0] == pytest.approx(-1000.0) and log_q[-1] == pytest.approx(-1000.0)


def test_log_sigmoid_is_minus_softplus_structurally():
    x = T.vector("x")
    f = tensorjit.function([x], T.log(T.sigmoid(x)), mode=ISOLATED)
    names = elemwise_names(f)
    assert "log" not in names and "sigmoid" not in names and "softplus" in names


# Library bug: the gradients of the exp forms are not stabilized: d/dx log(1 + exp(x)) is
# computed as exp(x) / (1 + exp(x)) = inf / inf = nan at x = 1000 (the value is 1).
def test_gradient_of_log_one_plus_exp_is_finite_for_large_x():
    x = T.vector("x")
    gx = tensorjit.grad(T.log(1 + T.exp(x)).sum(), x)
    f = tensorjit.function([x], gx)
    xv = np.array([-1000.0, 0.0, 1000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = f(xv)
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0])  # fails: nan at 1000


# ---------------------------------------------------------------- specialize: powers


@pytest.mark.parametrize(
    "p, present, absent",
    [
        (2, ["sqr"], ["pow", "mul"]),
        (0.5, ["sqrt"], ["pow"]),
        (-1, ["true_div"], ["pow"]),
        (3, ["sqr", "mul"], ["pow"]),
        (4, ["sqr", "sqr"], ["pow", "mul"]),
        (-0.5, ["sqrt", "true_div"], ["pow"]),
    ],
)
def test_constant_powers_are_specialized(p, present, absent):
    x = T.vector("x")
    f, g = compile_pair([x], x**p)
    names = elemwise_names(f)
    for name in present:
        assert names.count(name) == present.count(name), names
    for name in absent:
        assert name not in names, names
    assert f.profile.applied["local_pow_specialize"] == 1
    xv = rng().uniform(0.5, 3.0, 7)
    np.testing.assert_allclose(assert_same_values(f, g, xv, rtol=1e-13), xv**p, rtol=1e-13)


def test_power_one_is_x_and_large_power_stays_pow():
    x = T.vector("x")
    f = tensorjit.function([x], [x**1, x**7], mode=ISOLATED)
    assert elemwise_names(f) == ["pow"]
    assert f.fgraph.outputs[0] is f.fgraph.inputs[0]
    xv = rng(1).uniform(0.5, 2.0, 4)
    got = f(xv)
    np.testing.assert_allclose(got[1], xv**7)


def test_powers_are_left_alone_without_local_pow_specialize():
    x = T.vector("x")
    f = tensorjit.function([x], x**2, mode=ISOLATED.without("local_pow_specialize"))
    assert elemwise_names(f) == ["pow"]


# Library bug: x**0 becomes ones_like(x**0), which still computes the pow for its shape.
def test_power_zero_no_longer_computes_the_power():
    x = T.vector("x")
    f, g = compile_pair([x], x**0)
    xv = rng(2).uniform(0.5, 2.0, 5)
    np.testing.assert_array_equal(assert_same_values(f, g, xv), np.ones(5))
    assert "pow" not in elemwise_names(f)  # fails: pow is kept, read by Shape


# ---------------------------------------------------------------- specialize: GEMM


def test_alpha_dot_plus_beta_z_is_gemm():
    X, Y, Z = T.matrices("X", "Y", "Z")
    alpha, beta = T.scalars("alpha", "beta")
    f, g = compile_pair([X, Y, Z, alpha, beta], alpha * T.dot(X, Y) + beta * Z)
    (gemm,) = of_type(f, Gemm)
    assert of_type(f, Dot) == []
    assert not gemm.op.inplace
    assert gemm.inputs[1] is f.fgraph.inputs[3]  # alpha
    assert f.profile.applied["local_gemm"] == 1
    r = rng()
    Xv, Yv, Zv = r.standard_normal((3, 4)), r.standard_normal((4, 5)), r.standard_normal((3, 5))
    got = assert_same_values(f, g, Xv, Yv, Zv, 0.7, -1.3)
    np.testing.assert_allclose(got, 0.7 * Xv @ Yv - 1.3 * Zv)


def test_constant_scaled_dot_is_gemm():
    X, Y, Z = T.matrices("X", "Y", "Z")
    f, g = compile_pair([X, Y, Z], Z - 0.25 * T.dot(X, Y))
    (gemm,) = of_type(f, Gemm)
    assert of_type(f, Dot) == []
    r = rng(1)
    Xv, Yv, Zv = r.standard_normal((2, 3)), r.standard_normal((3, 4)), r.standard_normal((2, 4))
    np.testing.assert_allclose(assert_same_values(f, g, Xv, Yv, Zv), Zv - 0.25 * Xv @ Yv)


def test_dot_minus_z_is_gemm_with_negative_beta():
    X, Y, Z = T.matrices("X", "Y", "Z")
    f, g = compile_pair([X, Y, Z], T.dot(X, Y) - Z)
    (gemm,) = of_type(f, Gemm)
    assert gemm.inputs[4].data == -1
    r = rng(2)
    Xv, Yv, Zv = r.standard_normal((2, 3)), r.standard_normal((3, 4)), r.standard_normal((2, 4))
    np.testing.assert_allclose(assert_same_values(f, g, Xv, Yv, Zv), Xv @ Yv - Zv)


def test_matrix_vector_is_gemv():
    X = T.matrix("X")
    v, z = T.vectors("v", "z")
    f, g = compile_pair([X, v, z], 2.0 * T.dot(X, v) + z)
    (gemm,) = of_type(f, Gemm)
    assert gemm.outputs[0].type.ndim == 1
    assert gemm.inputs[3] is f.fgraph.inputs[1]
    r = rng(3)
    Xv, vv, zv = r.standard_normal((5, 3)), r.standard_normal(3), r.standard_normal(5)
    np.testing.assert_allclose(assert_same_values(f, g, Xv, vv, zv), 2.0 * Xv @ vv + zv)


@pytest.mark.parametrize("which", ["X.T", "Y.T", "both"])
def test_gemm_of_transposed_operands(which):
    X, Y, Z = T.matrices("X", "Y", "Z")
    a = X.T if which in ("X.T", "both") else X
    b = Y.T if which in ("Y.T", "both") else Y
    f, g = compile_pair([X, Y, Z], T.dot(a, b) * 1.5 + Z)
    (gemm,) = of_type(f, Gemm)
    assert of_type(f, Dot) == []
    r = rng(4)
    Xv = r.standard_normal((4, 3) if which in ("X.T", "both") else (3, 4))
    Yv = r.standard_normal((5, 4) if which in ("Y.T", "both") else (4, 5))
    Zv = r.standard_normal((3, 5))
    xa = Xv.T if which in ("X.T", "both") else Xv
    yb = Yv.T if which in ("Y.T", "both") else Yv
    np.testing.assert_allclose(assert_same_values(f, g, Xv, Yv, Zv), 1.5 * xa @ yb + Zv)


def test_transposed_gemv():
    X = T.matrix("X")
    v, z = T.vectors("v", "z")
    f, g = compile_pair([X, v, z], z - T.dot(X.T, v))
    (gemm,) = of_type(f, Gemm)
    r = rng(5)
    Xv, vv, zv = r.standard_normal((3, 4)), r.standard_normal(3), r.standard_normal(4)
    np.testing.assert_allclose(assert_same_values(f, g, Xv, vv, zv), zv - Xv.T @ vv)


def test_no_gemm_without_blas_tag():
    X, Y, Z = T.matrices("X", "Y", "Z")
    f = tensorjit.function([X, Y, Z], T.dot(X, Y) + Z, mode=ISOLATED.excluding("blas"))
    assert of_type(f, Gemm) == [] and len(of_type(f, Dot)) == 1


def test_dot_used_twice_is_not_absorbed():
    X, Y, Z = T.matrices("X", "Y", "Z")
    d = T.dot(X, Y)
    f, g = compile_pair([X, Y, Z], [d + Z, d * 2.0])
    assert of_type(f, Gemm) == [] and len(of_type(f, Dot)) == 1
    r = rng(6)
    Xv, Yv, Zv = r.standard_normal((2, 3)), r.standard_normal((3, 2)), r.standard_normal((2, 2))
    for a, b in zip(f(Xv, Yv, Zv), g(Xv, Yv, Zv)):
        np.testing.assert_allclose(a, b)


def test_sgd_update_runs_gemm_inplace_on_the_shared_weights():
    r = rng(7)
    W0 = r.standard_normal((4, 3))
    W = tensorjit.shared(W0.copy(), name="W")
    X, G = T.matrices("X", "G")
    step = tensorjit.function([X, G], [], updates={W: W - 0.1 * T.dot(X, G)})
    (gemm,) = of_type(step, Gemm)
    assert gemm.op.inplace and gemm.op.destroy_map == {0: [0]}
    assert step.profile.applied["inplace"] >= 1

    buffer = W.get_value(borrow=True)
    expected = W0.copy()
    for _ in range(3):
        Xv, Gv = r.standard_normal((4, 5)), r.standard_normal((5, 3))
        step(Xv, Gv)
        expected = expected - 0.1 * Xv @ Gv
        assert W.get_value(borrow=True) is buffer
    np.testing.assert_allclose(W.get_value(), expected)


# ---------------------------------------------------------------- fusion


def test_connected_elementwise_subgraph_fuses_into_one_composite():
    x, y = T.matrices("x", "y")
    expr = T.exp(x) * T.sin(y) + T.tanh(x) - 2.0
    f = tensorjit.function([x, y], expr, mode=FAST_RUN.excluding("inplace"))
    (node,) = nodes(f)
    assert isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Composite)
    names = [op.name for op, _ in node.op.scalar_op.program]
    # ``- 2.0`` is canonically ``+ -2.0``.
    assert sorted(names) == ["add", "add", "exp", "mul", "sin", "tanh"]
    assert names[-1] == "add"  # the root is the last step
    fg_x, fg_y = f.fgraph.inputs
    assert fg_x in node.inputs and fg_y in node.inputs
    assert node.inputs.count(fg_x) == 1  # x feeds exp and tanh: one input
    assert f.profile.applied["elemwise_fusion"] == 1
    r = rng()
    xv, yv = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    g = tensorjit.function([x, y], expr, mode="FAST_COMPILE")
    np.testing.assert_allclose(f(xv, yv), g(xv, yv))
    np.testing.assert_allclose(f(xv, yv), np.exp(xv) * np.sin(yv) + np.tanh(xv) - 2.0)


# elemwise_fusion alone: the multi-output pass would join its groups
# (test_multi_output_fusion.py).
SINGLE_OUTPUT_FUSION = FAST_RUN.excluding("inplace").without("multi_output_fusion")


def test_fusion_keeps_an_intermediate_with_several_clients_outside_the_groups():
    x, y = T.matrices("x", "y")
    t = T.exp(x) * y
    outs = [T.sin(t) + 1.0, T.cos(t)]
    f = tensorjit.function([x, y], outs, mode=SINGLE_OUTPUT_FUSION)
    composites = [n for n in of_type(f, Elemwise) if isinstance(n.op.scalar_op, Composite)]
    assert len(composites) == 2
    (producer,) = [n for n in composites if "exp" in n.op.scalar_op.name]
    shared_t = producer.outputs[0]
    # t is computed once, and read by both consumers.
    consumers = [n for n in nodes(f) if shared_t in n.inputs]
    assert len(consumers) == 2
    assert not any("exp" in n.op.scalar_op.name for n in consumers)
    r = rng(1)
    xv, yv = r.standard_normal((2, 5)), r.standard_normal((2, 5))
    tv = np.exp(xv) * yv
    got = f(xv, yv)
    np.testing.assert_allclose(got[0], np.sin(tv) + 1.0)
    np.testing.assert_allclose(got[1], np.cos(tv))


def test_fusion_does_not_swallow_a_function_output():
    x, y = T.matrices("x", "y")
    e = T.exp(x)
    f = tensorjit.function([x, y], [e * y, e], mode=SINGLE_OUTPUT_FUSION)
    assert elemwise_names(f).count("exp") == 1
    r = rng(2)
    xv, yv = r.standard_normal((2, 3)), r.standard_normal((2, 3))
    got = f(xv, yv)
    np.testing.assert_allclose(got[0], np.exp(xv) * yv)
    np.testing.assert_allclose(got[1], np.exp(xv))


def test_fusion_with_broadcasting_inputs():
    # The matrix-shaped operations are one node; exp(r) and sqr(c) stay on the row and
    # the column (computed once each, not again for every element they broadcast to).
    x, r_, c = T.matrix("x"), T.row("r"), T.col("c")
    expr = T.exp(r_) * x + T.sqr(c) - x * c
    f = tensorjit.function([x, r_, c], expr, mode=FAST_RUN.excluding("inplace"))
    (node,) = [n for n in nodes(f) if n.outputs[0].type.broadcastable == (False, False)]
    assert isinstance(node.op.scalar_op, Composite)
    assert "exp" not in node.op.scalar_op.name and "sqr" not in node.op.scalar_op.name
    small = {n.op.scalar_op.name for n in nodes(f) if n is not node}
    assert small == {"exp", "sqr"}
    r = rng(3)
    xv, rv, cv = r.standard_normal((4, 3)), r.standard_normal((1, 3)), r.standard_normal((4, 1))
    got = f(xv, rv, cv)
    assert got.shape == (4, 3)
    np.testing.assert_allclose(got, np.exp(rv) * xv + cv**2 - xv * cv)


def test_fusion_stops_at_a_dimension_change():
    x, v = T.matrix("x"), T.vector("v")
    expr = T.exp(x) + T.sin(v)
    f = tensorjit.function([x, v], expr, mode=FAST_RUN.excluding("inplace"))
    composite = [n for n in of_type(f, Elemwise) if isinstance(n.op.scalar_op, Composite)]
    assert len(composite) == 1
    assert "sin" not in composite[0].op.scalar_op.name
    assert "sin" in elemwise_names(f)
    r = rng(4)
    xv, vv = r.standard_normal((3, 4)), r.standard_normal(4)
    np.testing.assert_allclose(f(xv, vv), np.exp(xv) + np.sin(vv))


def test_no_composite_without_fusion():
    x, y = T.matrices("x", "y")
    f = tensorjit.function([x, y], T.exp(x) * T.sin(y), mode=ISOLATED)
    assert not any(isinstance(n.op.scalar_op, Composite) for n in of_type(f, Elemwise))
    assert sorted(elemwise_names(f)) == ["exp", "mul", "sin"]


# Library bug: canonical_product gives each ``0.5 * y`` its own new constant, so the
# chain's group has one input per multiplication; past MAX_INPUTS (32) the whole group is
# dropped and nothing fuses (a chain of 80 ops on one input stays 80 nodes).
def test_long_chain_on_one_input_is_fused():
    x = T.vector("x")
    y = x
    for _ in range(40):
        y = T.tanh(y * 0.5)
    f = tensorjit.function([x], y, mode=FAST_RUN.excluding("inplace"))
    xv = rng(5).standard_normal(6)
    want = xv
    for _ in range(40):
        want = np.tanh(want * 0.5)
    np.testing.assert_allclose(f(xv), want)
    # One Composite (or a few, if large groups were split): fails with 80 unfused nodes.
    assert len(nodes(f)) <= 3, len(nodes(f))
    assert all(isinstance(n.op.scalar_op, Composite) for n in nodes(f))


# ---------------------------------------------------------------- the paper's example


def logistic_regression(seed: int = 0, n: int = 400, features: int = 784):
    r = np.random.default_rng(seed)
    data = (r.standard_normal((n, features)), r.integers(0, 2, size=n))
    x, y = T.matrix("x"), T.lvector("y")
    w = tensorjit.shared(r.standard_normal(features), name="w")
    b = tensorjit.shared(0.0, name="b")
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
    prediction = p_1 > 0.5
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
    cost = xent.mean() + 0.01 * (w**2).sum()
    gw, gb = tensorjit.grad(cost, [w, b])
    updates = {w: w - 0.1 * gw, b: b - 0.1 * gb}
    return data, (x, y), (w, b), [prediction, xent.mean()], updates


def test_logistic_regression_step_has_fewer_nodes_after_fast_run():
    _, inputs, _, outputs, updates = logistic_regression()
    before = len(toposort(outputs + list(updates.values())))
    train = tensorjit.function(list(inputs), outputs, updates=updates)
    after = len(train.fgraph.apply_nodes)
    assert after < before
    assert after <= before // 2, (before, after)
    applied = train.profile.applied
    for name in ("local_sigmoid", "local_log_stable", "local_gemm", "elemwise_fusion"):
        assert applied[name] >= 1, name


def test_logistic_regression_training_stays_finite_with_unit_variance_weights():
    data, inputs, (w, b), outputs, updates = logistic_regression()
    train = tensorjit.function(list(inputs), outputs, updates=updates)
    costs = []
    for _ in range(30):
        prediction, cost = train(*data)
        costs.append(float(cost))
        assert np.isfinite(cost)
        assert np.all(np.isfinite(w.get_value())) and np.isfinite(b.get_value())
    assert costs[-1] < costs[0]
    # Without the stabilize phase the same step gives nan (log of an exact 0 or 1).
    data2, inputs2, _, outputs2, updates2 = logistic_regression()
    plain = tensorjit.function(
        list(inputs2), outputs2, updates=updates2, mode=FAST_RUN.excluding("stabilize")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(plain(*data2)[1])


def test_exp_over_one_plus_exp_becomes_sigmoid_in_gradients():
    x = T.vector("x")
    g = tensorjit.grad(T.log(1 + T.exp(x)).sum(), x)
    f = tensorjit.function([x], g, mode=ISOLATED)
    assert "sigmoid" in elemwise_names(f)
    np.testing.assert_allclose(f(np.array([1000.0, -1000.0, 0.0])), [1.0, 0.0, 0.5])
    h = tensorjit.function([x], tensorjit.grad((1 / (1 + T.exp(-x))).sum(), x), mode=ISOLATED)
    np.testing.assert_allclose(h(np.array([1000.0, -1000.0, 0.0])), [0.0, 0.0, 0.25])


def test_late_canonical_forms_clean_up_what_stabilize_creates():
    x = T.vector("x")
    f = tensorjit.function([x], T.log(1 - T.sigmoid(x)), mode=ISOLATED)
    names = elemwise_names(f)
    assert names.count("neg") <= 1  # no neg(neg(x)) left by log(sigmoid(-x)) -> -softplus(x)
    values = np.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(f(values), -np.logaddexp(0, values))
    without = tensorjit.function(
        [x], T.log(1 - T.sigmoid(x)), mode=ISOLATED.without("late_canonical_sum")
    )
    assert elemwise_names(without).count("neg") == 3


def test_outer_product_update_becomes_ger_in_place():
    rgen = rng(3)
    a = tensorjit.shared(rgen.standard_normal((3, 4)), name="a")
    x, y = T.vector("x"), T.vector("y")
    f = tensorjit.function([x, y], [], updates={a: a - 0.5 * T.outer(x, y)})
    from tensorjit.tensor.blas import Ger

    (node,) = of_type(f, Ger)
    assert node.op.inplace
    start = a.get_value()
    buffer = a.get_value(borrow=True)
    xv, yv = rgen.standard_normal(3), rgen.standard_normal(4)
    f(xv, yv)
    assert a.get_value(borrow=True) is buffer
    np.testing.assert_allclose(a.get_value(), start - 0.5 * np.outer(xv, yv))
    m = T.matrix("m")
    g, plain = compile_pair([m, x, y], m + T.outer(x, y) * 2)
    assert of_type(g, Ger)
    assert_same_values(g, plain, rgen.standard_normal((3, 4)), xv, yv)
    no_ger = tensorjit.function([m, x, y], m + T.outer(x, y), mode=ISOLATED.without("local_ger"))
    assert not of_type(no_ger, Ger)


def test_log_of_softmax_and_softmax_cross_entropy_become_log_softmax():
    from tensorjit.tensor.nnet import LogSoftmax, categorical_crossentropy, softmax

    x, y = T.matrix("x"), T.lvector("y")
    f = tensorjit.function([x], T.log(softmax(x)), mode=ISOLATED)
    assert of_type(f, LogSoftmax)
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 1.0, 2.0]])
    shifted = logits - logits.max(axis=1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(f(logits), expected)
    g = tensorjit.function([x, y], categorical_crossentropy(softmax(x), y), mode=ISOLATED)
    assert of_type(g, LogSoftmax)
    losses = g(logits, np.array([2, 0]))
    assert np.all(np.isfinite(losses))
    np.testing.assert_allclose(losses, [-expected[0, 2], -expected[1, 0]])
    # entries picked by indexing, then their log: the same entries of log_softmax
    n = y.shape[0]
    for picked in (softmax(x)[T.arange(n), y], softmax(x)[:, 2], softmax(x)[0]):
        h = tensorjit.function([x, y], -T.log(picked), mode=ISOLATED, on_unused_input="ignore")
        assert of_type(h, LogSoftmax)
        assert np.all(np.isfinite(h(logits, np.array([2, 0]))))
    h = tensorjit.function([x, y], -T.log(softmax(x)[T.arange(n), y]), mode=ISOLATED)
    np.testing.assert_allclose(h(logits, np.array([2, 0])), [-expected[0, 2], -expected[1, 0]])
    unstable = tensorjit.function(
        [x, y], categorical_crossentropy(softmax(x), y), mode=ISOLATED.excluding("stabilize")
    )
    with np.errstate(divide="ignore"):
        assert np.isinf(unstable(logits, np.array([2, 0]))[0])


@pytest.mark.parametrize("dtype", ["uint8", "uint64"])
def test_sums_with_constants_of_unsigned_dtypes_wrap_as_numpy(dtype):
    # canonicalising u - 200 negated the constant: data * -1 raised OverflowError
    u = T.vector("u", dtype=dtype)
    f = tensorjit.function([u], [u - 200, 3 - u - 5])
    a = np.array([250, 3], dtype)
    with np.errstate(over="ignore"):
        want = [a - 200, 3 - a - 5]
    for got, expected in zip(f(a), want):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_an_update_by_a_gradient_of_two_products_is_two_gemms_on_the_weight():
    """A tied weight's gradient (a product plus the transpose of another) scaled into
    the update: both products accumulate into the weight, in place; no gradient temp."""
    r = rng(3)
    w = tensorjit.shared(r.standard_normal((6, 4)), name="w")
    A, B, C, D = T.matrices("A", "B", "C", "D")
    grad = T.dot(A, B) + T.dot(C, D).T
    f = tensorjit.function([A, B, C, D], [], updates=[(w, w - 0.1 * grad)])
    gemms = of_type(f, Gemm)
    assert len(gemms) == 2 and all(g.op.inplace for g in gemms), gemms
    assert of_type(f, Dot) == []
    Av, Bv, Cv, Dv = (r.standard_normal(s) for s in [(6, 3), (3, 4), (4, 5), (5, 6)])
    before = w.get_value()
    f(Av, Bv, Cv, Dv)
    np.testing.assert_allclose(w.get_value(), before - 0.1 * (Av @ Bv + (Cv @ Dv).T))


def test_an_l2_penalty_update_decays_the_weight_then_accumulates_into_it():
    """``w - c * (x^T g + 2 l2 w)`` (the gradient of ``l2 * sum(w**2)`` plus a product):
    w decays and the product accumulates into the decayed copy in the pass that also
    sums the penalty's squares (see local_decay_with_penalty); no gradient temporary."""
    r = rng(4)
    w = tensorjit.shared(r.standard_normal((5, 3)), name="w")
    x, y = T.matrices("x", "y")
    cost = (T.dot(x, w) * y).sum() + np.float64(1e-2) * (w**2).sum()
    f = tensorjit.function([x, y], cost, updates=[(w, w - 0.5 * tensorjit.grad(cost, w))])
    (update,) = of_type(f, PenalisedGemm)
    assert update.inputs[0].name == "w" and not of_type(f, Gemm)
    assert of_type(f, Alloc) == []  # the penalty's gradient allocates nothing
    before = w.get_value()
    xv, yv = r.standard_normal((4, 5)), r.standard_normal((4, 3))
    cost_value = f(xv, yv)
    np.testing.assert_allclose(cost_value, (xv @ before * yv).sum() + 1e-2 * (before**2).sum())
    want = before - 0.5 * (xv.T @ yv + 2e-2 * before)
    np.testing.assert_allclose(w.get_value(), want, rtol=1e-12)


def test_a_penalty_on_another_weight_is_not_a_decay():
    r = rng(5)
    w = tensorjit.shared(r.standard_normal((3, 3)), name="w")
    v = tensorjit.shared(r.standard_normal((3, 3)), name="v")
    x, y = T.matrices("x", "y")
    grad = T.dot(x.T, y) + 0.1 * v  # a multiple of v, not of w
    f = tensorjit.function([x, y], [], updates=[(w, w - 0.5 * grad)])
    before, vv = w.get_value(), v.get_value()
    xv, yv = r.standard_normal((4, 3)), r.standard_normal((4, 3))
    f(xv, yv)
    np.testing.assert_allclose(w.get_value(), before - 0.5 * (xv.T @ yv + 0.1 * vv))


def _penalised_step(dtype: str, mode, w0: np.ndarray):
    """An L2-penalised step, as the tutorials' MLP writes it: (function, weight)."""
    w = tensorjit.shared(w0.copy(), name="w")
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    cost = (T.tanh(T.dot(x, w)) * y).sum() + np.asarray(1e-2, dtype) * (w**2).sum()
    update = w - np.asarray(0.5, dtype) * tensorjit.grad(cost, w)
    return tensorjit.function([x, y], cost, updates=[(w, update)], mode=mode), w


@pytest.mark.parametrize("mode", ["FAST_RUN", "DebugMode"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_l2_penalty_and_the_decay_of_its_weight_read_the_weight_once(dtype, mode):
    """``l2 * sum(w**2)`` in the cost and the decay of w in its update (a GEMM with beta
    other than 1): one PenalisedGemm gives both, and cost and weight are those of the
    unfused graph, for minibatches of 1, 5 and 40 rows, on one thread and two."""
    r = rng(11)
    w0 = r.standard_normal((70, 30)).astype(dtype)
    f, w = _penalised_step(dtype, mode, w0)
    g, v = _penalised_step(dtype, FAST_RUN.without("local_decay_with_penalty"), w0)
    assert of_type(f, PenalisedGemm) and not of_type(f, MappedReduce)
    assert not of_type(f, Gemm)  # the update's GEMM is the PenalisedGemm's
    assert not of_type(g, PenalisedGemm) and of_type(g, MappedReduce)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for threads, rows in [(1, 5), (1, 5), (1, 40), (1, 1), (2, 5)]:
        xv, yv = (r.standard_normal((rows, n)).astype(dtype) for n in (70, 30))
        with tensorjit.config.change_flags(threads=threads):
            np.testing.assert_allclose(f(xv, yv), g(xv, yv), rtol=tol)
        np.testing.assert_allclose(w.get_value(), v.get_value(), rtol=tol, atol=tol)


def test_penalties_summed_in_other_dtypes_and_weights_read_by_their_own_product():
    """A penalty summed as an integer or float16 keeps its MappedReduce (the pass sums
    in double into a float); a weight that is also the product's operand still gets a
    GEMM that accumulates in place."""
    r = rng(14)
    w0 = r.standard_normal((6, 4))
    x, g = T.matrices("x", "g")
    for dtype in ("int64", "float16"):
        values = []
        for mode in (FAST_RUN, FAST_RUN.without("local_decay_with_penalty")):
            w = tensorjit.shared(w0.copy(), name="w")
            pen = (w**2).sum(dtype=dtype)
            update = w - 0.1 * (T.dot(x.T, g) + 0.1 * w)
            f = tensorjit.function([x, g], pen, updates=[(w, update)], mode=mode)
            assert not of_type(f, PenalisedGemm)
            values.append(f(np.ones((3, 6)), np.ones((3, 4))))
        assert values[0] == values[1]
    w = tensorjit.shared(w0[:4].copy(), name="w")
    cost = T.dot(w, x).sum() + 0.01 * (w**2).sum()
    f = tensorjit.function([x], cost, updates=[(w, w - 0.1 * tensorjit.grad(cost, w))])
    assert of_type(f, PenalisedGemm) and not of_type(f, Gemm)
    xv = r.standard_normal((4, 3))
    f(xv)
    want = w0[:4] - 0.1 * (np.ones((4, 3)) @ xv.T + 0.02 * w0[:4])
    np.testing.assert_allclose(w.get_value(), want, rtol=1e-12)


def test_a_failing_penalised_step_leaves_the_weight_as_it_was():
    """A call that fails (shapes that do not match) changes nothing (all-or-nothing
    calls): the decayed copy of w is only stored once the step succeeded."""
    r = rng(13)
    w0 = r.standard_normal((70, 30))
    f, w = _penalised_step("float64", FAST_RUN, w0)
    assert of_type(f, PenalisedGemm)
    good = r.standard_normal((5, 70)), r.standard_normal((5, 30))
    for bad in [(good[0], good[1][:4]), (good[0][:, :69], good[1]), (good[0], good[1][:, :29])]:
        with pytest.raises(ValueError):
            f(*bad)
        np.testing.assert_array_equal(w.get_value(), w0)
    f(*good)
    assert not np.array_equal(w.get_value(), w0)


def _penalised_reference(z, alpha, x, y, beta, dtype):
    """PenalisedGemm's outputs in float64 NumPy, and the float64 sum."""
    z64, x64, y64 = (np.asarray(v, np.float64) for v in (z, x, y))
    return beta * z64 + alpha * (x64 @ y64), (z64**2).sum()


@pytest.mark.parametrize("mode", ["FAST_RUN", "DebugMode"])  # a program step; per node
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_penalised_gemm_kernel_layouts_shapes_and_threads(mode, dtype):
    """The kernel (the decay pass, then BLAS) on weights, operands and outputs of every
    layout, ragged shapes, vectors (GEMV's shapes), empty products, and two threads."""
    z, x, y = T.matrix("z", dtype=dtype), T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    alpha, beta = T.scalar("alpha", dtype=dtype), T.scalar("beta", dtype=dtype)
    f = tensorjit.function([z, alpha, x, y, beta], PenalisedGemm(dtype)(z, alpha, x, y, beta),
                           mode=mode)  # fmt: skip
    zv, xv, yv = (
        T.vector("zv", dtype=dtype),
        T.matrix("xm", dtype=dtype),
        T.vector("yv", dtype=dtype),
    )
    vector_op = PenalisedGemm("float64")  # a float64 sum of a float32 weight too
    fv = tensorjit.function([zv, alpha, xv, yv, beta], vector_op(zv, alpha, xv, yv, beta),
                            mode=mode)  # fmt: skip
    r = rng(12)
    tol = 2e-5 if dtype == "float32" else 1e-12

    def check(fn, zval, xval, yval, sum_dtype):
        before = zval.copy()
        updated, squares = fn(zval, -0.25, xval, yval, 0.75)
        want, want_sum = _penalised_reference(zval, -0.25, xval, yval, 0.75, dtype)
        scale = max(1.0, np.abs(want).max(initial=0.0))
        np.testing.assert_allclose(updated, want, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(squares, want_sum, rtol=tol)
        assert updated.dtype == np.dtype(dtype) and updated.shape == zval.shape
        assert squares.shape == () and squares.dtype == np.dtype(sum_dtype)
        np.testing.assert_array_equal(zval, before)  # the weight is not overwritten

    shapes = [(70, 5, 30), (13, 32, 17), (6, 1, 16), (61, 33, 40), (9, 0, 8), (0, 3, 4)]
    with tensorjit.config.change_flags(threads=1):
        for m, k, n in shapes:
            zval, xval = r.standard_normal((m, n)).astype(dtype), r.standard_normal((m, k))
            xval, yval = xval.astype(dtype), r.standard_normal((k, n)).astype(dtype)
            for layout in (lambda a: a, np.asfortranarray, lambda a: a[::-1]):
                check(f, layout(zval), xval, yval, dtype)
                check(f, zval, layout(xval), layout(yval), dtype)
            check(f, zval, np.ascontiguousarray(xval.T).T, yval, dtype)  # X^T of a minibatch
            check(fv, zval[:, 0].copy(), xval, yval[:, 0], "float64")
        wide = r.standard_normal((30, 50)).astype(dtype)
        check(f, wide[:, ::2], r.standard_normal((30, 4)).astype(dtype), wide[:4, 1::2], dtype)
    with tensorjit.config.change_flags(threads=2):
        zval, xval, yval = (
            r.standard_normal(s).astype(dtype) for s in [(40, 24), (40, 8), (8, 24)]
        )
        check(f, zval, xval, yval, dtype)
    with pytest.raises(ValueError, match="not aligned"):
        f(zval, 1.0, xval[:, :7], yval, 1.0)


@pytest.mark.parametrize("mode", ["FAST_RUN", "DebugMode"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_penalised_gemm_in_place_on_every_layout(mode, dtype):
    """In place (a mutable input): the update lands in z's own buffer, for C-ordered,
    Fortran-ordered and strided z, on one thread and two. An
    operand that is a view of z keeps the update out of place (the destroy handler)."""
    z, x, y = T.matrix("z", dtype=dtype), T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    alpha, beta = T.scalar("alpha", dtype=dtype), T.scalar("beta", dtype=dtype)
    op = PenalisedGemm(dtype)
    mutable = tensorjit.In(z, mutable=True)
    f = tensorjit.function([mutable, alpha, x, y, beta], op(z, alpha, x, y, beta), mode=mode)
    g = tensorjit.function([mutable, alpha, y, beta], op(z, alpha, z[:, :5], y, beta), mode=mode)
    assert [n.op.inplace for n in f.fgraph.toposort() if isinstance(n.op, PenalisedGemm)] == [True]
    assert [n.op.inplace for n in g.fgraph.toposort() if isinstance(n.op, PenalisedGemm)] == [False]
    r = rng(16)
    tol = 2e-5 if dtype == "float32" else 1e-12
    for threads in (1, 2):
        with tensorjit.config.change_flags(threads=threads):
            for layout in (np.ascontiguousarray, np.asfortranarray, lambda a: a[:, ::2]):
                zval = layout(r.standard_normal((14, 18)).astype(dtype))
                m, n = zval.shape
                xval, yval = (r.standard_normal(s).astype(dtype) for s in [(m, 5), (5, n)])
                want, want_sum = _penalised_reference(zval, -0.25, xval, yval, 0.75, dtype)
                updated, squares = f(zval, -0.25, xval, yval, 0.75)
                np.testing.assert_allclose(updated, want, rtol=tol, atol=tol * 10)
                np.testing.assert_allclose(squares, want_sum, rtol=tol)
                np.testing.assert_allclose(zval, want, rtol=tol, atol=tol * 10)  # in place
                before = zval.copy()
                want, _ = _penalised_reference(before, -0.25, before[:, :5], yval, 0.75, dtype)
                updated, _ = g(zval, -0.25, yval, 0.75)
                np.testing.assert_allclose(updated, want, rtol=tol, atol=tol * 10)
                np.testing.assert_array_equal(zval, before)  # out of place: z untouched


def test_penalised_gemm_gradient_and_types():
    z, x, y = T.matrices("z", "x", "y")
    alpha, beta = T.scalars("alpha", "beta")
    op = PenalisedGemm("float64")
    r = rng(15)
    values = [r.standard_normal((4, 3)), 0.5, r.standard_normal((4, 2)),
              r.standard_normal((2, 3)), 0.75]  # fmt: skip

    def outputs(*args):
        updated, squares = op(*args)
        return (updated * updated).sum() + 3 * squares

    tensorjit.verify_grad(outputs, values)
    with pytest.raises(TypeError, match="one BLAS dtype"):
        op(T.lmatrix("ints"), alpha, T.lmatrix("a"), T.lmatrix("b"), beta)
    c = [T.matrix(name, dtype="complex128") for name in ("cz", "cx", "cy")]
    with pytest.raises(TypeError, match="float weight and sum"):
        op(c[0], alpha, c[1], c[2], beta)
    with pytest.raises(TypeError, match="float weight and sum"):
        PenalisedGemm("int64")(z, alpha, x, y, beta)


# ---------------------------------------------------------------- local_elemwise_alloc


def test_broadcast_alloc_in_an_elementwise_op_is_the_value_broadcast():
    x = T.matrix("x")
    c = T.scalar("c")
    expr = x * T.alloc(c, x.shape[0], x.shape[1]) + 1
    f, g = compile_pair([x, c], expr)
    assert of_type(f, Alloc) == []
    assert f.profile.applied["local_elemwise_alloc"] >= 1
    xv = rng(6).standard_normal((3, 4))
    np.testing.assert_allclose(assert_same_values(f, g, xv, 2.5), xv * 2.5 + 1)
    # a shape other than x's: the alloc decides the shape (broadcasting x) and stays
    v = T.vector("v")
    f, g = compile_pair([v, c], v * T.alloc(c, 3, v.shape[0]))
    assert len(of_type(f, Alloc)) == 1
    np.testing.assert_allclose(assert_same_values(f, g, np.arange(4.0), 2.0),
                               np.broadcast_to(np.arange(4.0) * 2, (3, 4)))  # fmt: skip
    # a length that only matches at run time is not assumed: the mismatch still raises
    y = T.matrix("y")
    f = tensorjit.function([x, y, c], x * T.alloc(c, y.shape[0], y.shape[1]), mode=ISOLATED)
    assert len(of_type(f, Alloc)) == 1
    with pytest.raises(ValueError):
        f(xv, np.ones((2, 4)), 1.0)


def test_fused_alloc_covered_by_another_node_of_the_group():
    """``2 * alloc(c, *w.shape) * w``: the product with the alloc alone has its shape,
    so only the fused group (one Composite node) can drop it."""
    w = T.matrix("w")
    c = T.scalar("c")
    expr = (2.0 * T.alloc(c, w.shape[0], w.shape[1])) * T.exp(w)
    f = tensorjit.function([w, c], expr, mode=FAST_RUN.excluding("inplace"))
    assert of_type(f, Alloc) == []
    assert f.profile.applied["fused_elemwise_alloc"] + f.profile.applied["local_elemwise_alloc"]
    wv = rng(7).standard_normal((3, 5))
    np.testing.assert_allclose(f(wv, 0.25), 0.5 * np.exp(wv), rtol=1e-12)


# ---------------------------------------------------------------- local_reduce_of_map


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_sum_of_squares_and_of_absolute_values_read_once(dtype):
    w = T.matrix("w", dtype=dtype)
    exprs = [T.sqr(w).sum(), abs(w).sum(axis=0), T.sqr(w).max(axis=1), T.sqr(w).min(axis=0)]
    if dtype != "int64":  # (integer powers stay powers)
        exprs.append((w**2).sum())
    r = rng(8)
    value = (r.standard_normal((7, 300)) * 10).astype(dtype)
    for expr in exprs:
        f, g = compile_pair([w], expr)
        (node,) = nodes(f)  # the map is not computed on its own
        assert isinstance(node.op, MappedReduce)
        assert f.profile.applied["local_reduce_of_map"] == 1
        for layout in (value, np.asfortranarray(value), value[::2, ::-3], value.T.copy().T):
            assert_same_values(f, g, layout, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_a_map_read_elsewhere_stays_and_grads_go_through_the_mapped_reduction():
    w = T.matrix("w")
    sq = w**2
    f = tensorjit.function([w], [sq.sum(), sq], mode=ISOLATED)
    assert not of_type(f, MappedReduce)  # the squares are an output too
    wv = rng(9).standard_normal((3, 4))
    np.testing.assert_allclose(f(wv)[0], (wv**2).sum())
    for op in (MappedReduce("sum", (0, 1), None, "sqr"), MappedReduce("max", (1,), None, "abs")):
        tensorjit.verify_grad(lambda x, op=op: op(x), [wv])
    with pytest.raises(ValueError, match="unknown map"):
        MappedReduce("sum", (0,), None, "exp")


def test_no_mapped_reduction_for_a_device_function():
    from tensorjit.testing.device_under_test import DEVICE, REASON

    if REASON is not None:
        pytest.skip(f"no {DEVICE} device here (hardware/driver absent): {REASON}")
    w = T.matrix("w")
    with tensorjit.config.change_flags(device=DEVICE):
        f = tensorjit.function([w], (w**2).sum())
    assert not of_type(f, MappedReduce)
    wv = rng(10).standard_normal((3, 4))
    np.testing.assert_allclose(f(wv), (wv**2).sum(), rtol=1e-12)


def test_mapped_reductions_wrap_small_integers_like_numpy_and_keep_their_map():
    for dtype, value in (("int8", 100), ("int16", -300), ("int32", 70000)):
        x = T.vector("x", dtype=dtype)
        f = tensorjit.function([x], [T.sum(T.sqr(x)), T.sum(abs(x))])
        arg = np.full(16, value, dtype)
        for got, want in zip(f(arg), [np.square(arg).sum(), np.abs(arg).sum()]):
            assert got == want, (dtype, got, want)
    v = T.vector("v")
    assert tensorjit.function([v], T.max(abs(v)))(np.array([-0.0])) == 0.0
    m = T.matrix("m")
    rows = MappedReduce("sum", (1,), None, "sqr")(m)
    f = tensorjit.function([m], [Reduce("sum", (0,))(rows), MappedReduce("max", (1,), None, "abs")(
        m.dimshuffle(0, "x", 1))])  # fmt: skip
    mv = np.array([[1.0, -2.0], [3.0, 1.0]])
    total, largest = f(mv)
    assert total == 15.0  # the outer sum does not swallow the squares
    np.testing.assert_array_equal(largest, np.abs(mv))


def test_two_allocs_do_not_give_each_other_their_shape():
    w = T.matrix("w")
    c, d = T.scalars("c", "d")
    shape = (w.shape[0], w.shape[1])
    f = tensorjit.function([w, c, d], T.alloc(c, *shape) * T.alloc(d, *shape))
    np.testing.assert_array_equal(f(np.zeros((2, 3)), 2.0, 3.0), np.full((2, 3), 6.0))


# ---------------------------------------------------------------- local_sum_and_squared_deviations


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_sum_and_the_squared_deviations_from_its_mean_read_x_once(dtype):
    """mean, var, std and a layer norm along the last axis: one Moments node gives the
    sum and the squared deviations from its mean, where each reduction read x before."""
    x = T.tensor3("x", dtype=dtype)
    mean = T.mean(x, axis=-1, keepdims=True)
    d = x - mean
    norm = d / T.sqrt(T.mean(d * d, axis=-1, keepdims=True) + 1e-5)
    outputs = [mean, T.var(x, axis=-1), T.std(x, axis=2, keepdims=True), norm]
    f, g = compile_pair([x], outputs)
    (node,) = of_type(f, Moments)
    assert node.op.axis == (2,)
    assert not of_type(f, Reduce) and not of_type(f, MappedReduce)
    assert f.profile.applied["local_sum_and_squared_deviations"] >= 1
    value = (rng(40).standard_normal((3, 5, 200)) * 2 + 7).astype(dtype)
    tol = 2e-6 if dtype == "float32" else 1e-12
    ref = value.astype(np.float64)
    wants = [
        ref.mean(-1, keepdims=True),
        ref.var(-1),
        ref.std(-1, keepdims=True),
        (ref - ref.mean(-1, keepdims=True)) / np.sqrt(ref.var(-1, keepdims=True) + 1e-5),
    ]
    for got, unrewritten, want in zip(f(value), g(value), wants, strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        np.testing.assert_allclose(unrewritten, want, rtol=50 * tol, atol=50 * tol)


@pytest.mark.parametrize("axis", [0, 1])
def test_batch_norm_statistics_of_columns_read_x_once(axis):
    """A column's statistics (axis 0, a batch norm's or a feature standardisation's) and
    a middle axis's: the same one pass, the groups side by side."""
    x = T.tensor3("x", dtype="float32")
    mean = T.mean(x, axis=axis, keepdims=True)
    outputs = [(x - mean) / T.sqrt(T.var(x, axis=axis, keepdims=True) + 1e-5), mean]
    f, g = compile_pair([x], outputs)
    (node,) = of_type(f, Moments)
    assert node.op.axis == (axis,)
    value = (rng(43).standard_normal((300, 7, 40)) * 3 - 2).astype("float32")
    ref = value.astype(np.float64)
    m, v = ref.mean(axis, keepdims=True), ref.var(axis, keepdims=True)
    for got, want in zip(f(value), [(ref - m) / np.sqrt(v + 1e-5), m], strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_empty_rows_and_nonfinite_values_as_written_out():
    x = T.matrix("x")
    mean = T.mean(x, axis=1, keepdims=True)
    outputs = [T.sum((x - mean) ** 2, axis=1), T.sum(x, axis=1)]
    f, g = compile_pair([x], outputs)
    assert of_type(f, Moments)
    rows = np.array([[1.0, np.inf, 2.0], [np.nan, 0.0, 1.0], [0.0, 1e308, 1e308], [1, 2, 4]])
    for value in (np.zeros((3, 0)), rows):
        with np.errstate(all="ignore"):
            for got, want in zip(f(value), g(value), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-15, equal_nan=True)


def test_squared_deviations_stay_two_passes_where_one_pass_does_not_serve():
    x, c = T.matrix("x"), T.col("c")
    mean = T.mean(x, axis=1, keepdims=True)
    cases = [
        # over every axis, or a vector's (the reductions split over threads)
        ([x], [T.var(x)]),
        ([x], [T.var(x[0])]),
        # deviations from another value than x's mean: no sum of x to share a pass with,
        # or a centre the sum does not give alone
        ([x, c], [T.sum((x - c) ** 2, axis=1)]),
        ([x], [mean, T.sum((x - 2 * mean) ** 2, axis=1)]),
        # the mean in another dtype than the deviations' sum (an integer divisor; a
        # constant one is a float reciprocal after canonicalize: served, mean_by="mul")
        ([x], [T.sum((x - T.sum(x, axis=1, keepdims=True) / x.shape[1]) ** 2, axis=1)]),
    ]
    value = rng(41).standard_normal((4, 6))
    for inputs, outputs in cases:
        f, g = compile_pair(inputs, outputs)
        assert not of_type(f, Moments)
        args = [value, value[:, :1]][: len(inputs)]
        for got, want in zip(f(*args), g(*args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_no_moments_for_a_device_function():
    from tensorjit.testing.device_under_test import DEVICE, REASON

    if REASON is not None:
        pytest.skip(f"no {DEVICE} device here (hardware/driver absent): {REASON}")
    x = T.matrix("x")
    with tensorjit.config.change_flags(device=DEVICE):
        f = tensorjit.function([x], T.var(x, axis=1))
    assert not of_type(f, Moments)
    xv = rng(42).standard_normal((3, 4))
    np.testing.assert_allclose(f(xv), xv.var(axis=1), rtol=1e-12)


# ---------------------------------------------------------------- local_max_and_shifted_exp_sum


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_max_shifted_exponential_sums_read_x_once(dtype):
    """A logsumexp, a log-softmax and a cross-entropy from logits written out, along the
    last axis of a 3-d x: one MaxExpSum node gives the maximum and the sum of the shifted
    exponentials, where each reduction read x before."""
    x = T.tensor3("x", dtype=dtype)
    labels = T.matrix("labels", dtype=dtype)  # one-hot
    top = T.max(x, axis=-1, keepdims=True)
    lse = top + T.log(T.sum(T.exp(x - top), axis=-1, keepdims=True))
    outputs = [lse, x - lse, T.sum(labels.dimshuffle("x", 0, 1) * (lse - x), axis=-1)]
    f, g = compile_pair([x, labels], outputs)
    (node,) = of_type(f, MaxExpSum)
    assert node.op.axis == (2,)
    assert not [n for n in of_type(f, Reduce) if n.op.kind == "max"]
    assert f.profile.applied["local_max_and_shifted_exp_sum"] >= 1
    value = (rng(44).standard_normal((3, 5, 70)) * 4).astype(dtype)
    one_hot = np.eye(70, dtype=dtype)[rng(45).integers(0, 70, 5)]
    ref = value.astype(np.float64)
    m = ref.max(-1, keepdims=True)
    want_lse = m + np.log(np.exp(ref - m).sum(-1, keepdims=True))
    wants = [want_lse, ref - want_lse, np.sum(one_hot[None] * (want_lse - ref), axis=-1)]
    tol = 1e-5 if dtype == "float32" else 1e-13
    for got, unrewritten, want in zip(f(value, one_hot), g(value, one_hot), wants, strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        np.testing.assert_allclose(unrewritten, want, rtol=tol, atol=tol)


def test_shifted_exponential_sums_stay_two_passes_where_one_pass_does_not_serve():
    x, c = T.matrix("x"), T.col("c")
    top = T.max(x, axis=1, keepdims=True)
    cases = [
        # another axis than the last (columns), a vector's (a full reduction splits)
        ([x], [T.sum(T.exp(x - T.max(x, axis=0, keepdims=True)), axis=0)]),
        ([x], [T.sum(T.exp(x[0] - T.max(x[0])))]),
        # shifted by another value than the group's maximum, or by a maximum of other data
        ([x, c], [T.sum(T.exp(x - c), axis=1)]),
        ([x], [T.sum(T.exp(x - 2 * top), axis=1)]),
        ([x], [T.sum(T.exp(x - T.max(x * 2, axis=1, keepdims=True)), axis=1)]),
        # a softmax written out (its exponentials are divided too: computed once for both)
        ([x], [T.exp(x - top) / T.sum(T.exp(x - top), axis=1, keepdims=True)]),
        # not the exponentials alone (a constant factor is taken out of the sum: served),
        # or a sum in another dtype than x's
        ([x], [T.sum(T.exp(x - top) * x, axis=1)]),
        (
            [x],
            [T.sum(T.exp(T.cast(x, "float32") - T.cast(top, "float32")), axis=1, dtype="float64")],
        ),
    ]
    value = rng(46).standard_normal((4, 6))
    for inputs, outputs in cases:
        f, g = compile_pair(inputs, outputs)
        assert not of_type(f, MaxExpSum)
        args = [value, value[:, :1]][: len(inputs)]
        for got, want in zip(f(*args), g(*args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_no_max_exp_sum_for_a_device_function():
    from tensorjit.testing.device_under_test import DEVICE, REASON

    if REASON is not None:
        pytest.skip(f"no {DEVICE} device here (hardware/driver absent): {REASON}")
    x = T.matrix("x", dtype="float32")
    top = T.max(x, axis=1, keepdims=True)
    with tensorjit.config.change_flags(device=DEVICE):
        f = tensorjit.function([x], top + T.log(T.sum(T.exp(x - top), axis=1, keepdims=True)))
    assert not of_type(f, MaxExpSum)
    xv = rng(47).standard_normal((3, 4)).astype("float32")
    m = xv.max(1, keepdims=True)
    np.testing.assert_allclose(f(xv), m + np.log(np.exp(xv - m).sum(1, keepdims=True)), rtol=1e-6)


def test_a_sum_shifted_by_another_sum_is_not_taken_for_a_maximum():
    """sum(exp(x - t)) with t = sum(exp(x - max(x))): t is a MaxExpSum's total, not its
    maximum, so the second sum stays its own."""
    x = T.matrix("x")
    top = T.max(x, axis=1, keepdims=True)
    t = T.sum(T.exp(x - top), axis=1, keepdims=True)
    u = T.sum(T.exp(x - t), axis=1)
    f, g = compile_pair([x], [t, u])
    assert len(of_type(f, MaxExpSum)) == 1
    value = rng(48).standard_normal((3, 5))
    want_t = np.exp(value - value.max(1, keepdims=True)).sum(1, keepdims=True)
    for got, unrewritten, want in zip(
        f(value), g(value), [want_t, np.exp(value - want_t).sum(1)], strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-13)
        np.testing.assert_allclose(unrewritten, want, rtol=1e-13)
