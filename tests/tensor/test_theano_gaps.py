"""What Theano programs call and tensorjit lacked: reductions' dtype/acc_dtype, the
NumPy methods of variables, N-d dot, specify_shape, Assert, (un)broadcast, an update's
broadcast pattern, reductions over empty axes that are not reduced."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T


def test_mean_sum_prod_take_dtype_and_acc_dtype():
    x = T.bmatrix("x")  # an MCMC sampler's acceptance flags: accept.mean(dtype=floatX)
    xv = np.array([[1, 0, 1], [1, 1, 0]], dtype="int8")
    m = x.mean(dtype="float32")
    assert m.dtype == "float32"
    np.testing.assert_allclose(tensorjit.function([x], m)(xv), np.mean(xv, dtype="float32"))
    y = T.fvector("y")
    yv = np.linspace(-1, 1, 1001, dtype="float32") ** 3 + np.float32(1e4)
    s = T.sum(y, acc_dtype="float64")
    assert s.dtype == "float32"  # the result keeps NumPy's dtype, the accumulator is wider
    assert tensorjit.function([y], s)(yv) == np.float32(np.sum(yv, dtype="float64"))
    s64 = y.sum(dtype="float64", acc_dtype="float64")
    assert s64.dtype == "float64"
    np.testing.assert_allclose(tensorjit.function([y], s64)(yv), np.sum(yv, dtype="float64"))
    p = x.prod(axis=0, dtype="int16")
    assert p.dtype == "int16"
    np.testing.assert_array_equal(tensorjit.function([x], p)(xv), np.prod(xv, axis=0))
    mm = T.mean(y, dtype="float64", acc_dtype="float64")
    assert mm.dtype == "float64"
    np.testing.assert_allclose(tensorjit.function([y], mm)(yv), np.mean(yv, dtype="float64"))
    with pytest.raises(TypeError, match="acc_dtype float32 is less precise than the input's"):
        T.sum(T.dvector("d"), acc_dtype="float32")
    assert T.sum(x, acc_dtype="float32").dtype == "int64"  # a float accumulator of ints


def test_integer_mean_with_an_integer_dtype_truncates_as_numpy():
    x = T.lvector("x")
    xv = np.array([1, 2, 4], dtype="int64")
    got = tensorjit.function([x], x.mean(dtype="int32"))(xv)
    assert got.dtype == np.int32 and got == np.mean(xv, dtype="int32")


def test_numpy_methods_of_variables_match_numpy():
    x = T.dmatrix("x")
    xv = np.array([[3.0, -1.5, 2.0], [0.5, 4.0, -2.0]])
    cases = {
        "var": (x.var(axis=0), xv.var(axis=0)),
        "std": (x.std(ddof=1), xv.std(ddof=1)),
        "ptp": (x.ptp(axis=1), np.ptp(xv, axis=1)),
        "cumsum": (x.cumsum(axis=1), xv.cumsum(axis=1)),
        "cumprod": (x.cumprod(), xv.cumprod()),
        "clip": (x.clip(-1, 1), xv.clip(-1, 1)),
        "round": (x.round(), xv.round()),
        "trace": (x.trace(), xv.trace()),
        "diagonal": (x.diagonal(), xv.diagonal()),
        "sort": (x.sort(axis=0), np.sort(xv, axis=0)),
        "argsort": (x.argsort(), xv.argsort()),
        "repeat": (x.repeat(2, axis=0), xv.repeat(2, axis=0)),
        "take": (x.take([2, 0], axis=1), xv.take([2, 0], axis=1)),
        "swapaxes": (x.swapaxes(0, 1), xv.swapaxes(0, 1)),
        "ravel": (x.ravel(), xv.ravel()),
        "conj": (x.conj(), xv.conj()),
        "real": (x.real, xv.real),
        "norm": (x.norm(2), np.linalg.norm(xv.ravel())),
        "norm1_axes": (x.norm(1, axis=(0, 1)), np.abs(xv).sum()),
        "norm3_axis": (x.norm(3, axis=0), (np.abs(xv) ** 3).sum(axis=0) ** (1 / 3)),
        "copy": (x.copy(), xv.copy()),
    }
    f = tensorjit.function([x], [sym for sym, _ in cases.values()])
    for name, got, (_, want) in zip(cases, f(xv), cases.values()):
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)
    assert x.squeeze().ndim == 2 and T.row("r").squeeze().ndim == 1


@pytest.mark.parametrize(
    "shape_a,shape_b",
    [((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (6, 4, 5)), ((2, 3, 4), (4,))],
)
def test_dot_of_nd_operands_is_numpys(shape_a, shape_b):
    a = T.tensor("float64", shape=(None,) * len(shape_a), name="a")
    b = T.tensor("float64", shape=(None,) * len(shape_b), name="b")
    rng = np.random.default_rng(3)
    av, bv = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    out = T.dot(a, b)
    f = tensorjit.function([a, b], [out, tensorjit.grad(out.sum(), a)])
    value, grad_a = f(av, bv)
    np.testing.assert_allclose(value, np.dot(av, bv), rtol=1e-12)
    # d sum(dot(a, b)) / da: the sums of b over everything but its contracted axis
    b_sums = bv.sum(axis=tuple(i for i in range(bv.ndim) if i != max(0, bv.ndim - 2)))
    np.testing.assert_allclose(grad_a, np.broadcast_to(b_sums, shape_a), rtol=1e-12)


def test_specify_shape_checks_and_gives_the_static_shape():
    x = T.matrix("x")
    n = T.lscalar("n")
    y = T.specify_shape(x, (2, None))
    assert y.type.shape == (2, None)
    f = tensorjit.function([x, n], [T.specify_shape(x, (n, 3)).sum(), (y * 2).sum()])
    assert f(np.ones((2, 3)), 2) == [6, 12]
    with pytest.raises(AssertionError, match=r"'x'.*has shape \(3, 3\), expected \(2, None\)"):
        f(np.ones((3, 3)), 3)  # n fits, the static 2 does not
    with pytest.raises(AssertionError, match=r"has shape \(2, 3\), expected \(5, 3\)"):
        f(np.ones((2, 3)), 5)
    with pytest.raises(ValueError, match="static length 3, not 2"):
        T.specify_shape(T.tensor("float64", shape=(3,)), (2,))
    g = tensorjit.function([x], tensorjit.grad((T.specify_shape(x, (2, 3)) ** 2).sum(), x))
    np.testing.assert_array_equal(g(np.ones((2, 3))), 2 * np.ones((2, 3)))


def test_assert_passes_its_value_or_raises_naming_the_condition():
    x = T.vector("x")
    checked = T.assert_op(x, (x > 0).all())
    f = tensorjit.function([x], checked * 2)
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
    with pytest.raises(AssertionError, match=r"Assert failed: the condition .*test_.* on 'x'"):
        f(-np.ones(2))


def test_update_with_another_broadcast_pattern_is_a_type_error():
    w = tensorjit.shared(np.zeros((10, 10), "float32"), name="W")
    x = T.fmatrix("x")
    out = T.dot(x, w)
    with pytest.raises(TypeError, match=r"'W'.*broadcast pattern \(True, True\).*unbroadcast"):
        tensorjit.function([x], out, updates={w: out.sum().dimshuffle("x", "x")})
    f = tensorjit.function(
        [x], out, updates={w: T.unbroadcast(out.sum().dimshuffle("x", "x"), 0, 1)}
    )
    f(np.ones((2, 10), "float32"))
    assert w.get_value().shape == (1, 1)  # a shared value may change its length


def test_addbroadcast_checks_the_length_and_patternbroadcast_sets_both_ways():
    m, v = T.fmatrix("m"), T.fvector("v")
    b = T.addbroadcast(m, 0)
    assert b.type.shape == (1, None)
    f = tensorjit.function([m, v], b + v)
    np.testing.assert_array_equal(f(np.ones((1, 3), "float32"), np.ones(3, "float32")), 2)
    with pytest.raises(AssertionError, match=r"has shape \(2, 3\), expected \(1, None\)"):
        f(np.ones((2, 3), "float32"), np.ones(3, "float32"))
    p = T.patternbroadcast(T.row("r"), (False, True))
    assert p.type.shape == (None, 1)


@pytest.mark.parametrize("reduce", ["max", "min", "argmax", "sum", "prod"])
@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE"])
def test_reductions_over_nonempty_axes_of_arrays_with_an_empty_axis(reduce, mode):
    x0 = T.tensor(dtype="int32", shape=(None, 0, None), name="x0")
    value = np.zeros((3, 0, 2), "int32")
    for axis in (0, 2):
        got = tensorjit.function([x0], getattr(T, reduce)(x0, axis=axis), mode=mode)(value)
        want = getattr(np, reduce)(value, axis=axis)
        assert got.shape == want.shape and got.dtype == want.dtype


def test_max_over_an_empty_axis_is_numpys_error_at_build_and_run_time():
    x0 = T.tensor(dtype="int32", shape=(None, 0, None), name="x0")
    with pytest.raises(ValueError, match="'x0'.*axis 1.*zero-size array to reduction operation"):
        T.max(x0, axis=1)
    y = T.imatrix("y")
    f = tensorjit.function([y], T.max(y, axis=0))
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        f(np.zeros((0, 3), "int32"))
    assert f(np.zeros((2, 0), "int32")).shape == (0,)


def test_an_update_given_as_data_takes_the_variables_type():
    """Data (not a variable) is a constant of the shared variable's own type: a bias
    reset to ones((1, n)) is no broadcast-pattern change (Theano's rule too)."""
    w = tensorjit.shared(np.zeros((3, 5)), name="w")
    tensorjit.function([], [], updates={w: np.ones((1, 5))})()
    np.testing.assert_array_equal(w.get_value(), np.ones((1, 5)))
    with pytest.raises(TypeError, match="no value of TensorType"):
        tensorjit.function([], [], updates={w: np.ones(5)})


def test_penalised_gemm_with_alpha_zero_reads_no_operand():
    from tensorjit.tensor.blas import PenalisedGemm

    z, x, y = T.dmatrix("z"), T.dmatrix("x"), T.dmatrix("y")
    a, b = T.dscalar("a"), T.dscalar("b")
    node = PenalisedGemm("float64")(z, a, x, y, b)[0].owner
    zv = np.arange(6.0).reshape(2, 3)
    storage = [[None], [None]]
    nan = np.full((2, 4), np.nan)
    node.op.perform(
        node, [zv, np.float64(0), nan, np.full((4, 3), np.nan), np.float64(0.5)], storage
    )
    np.testing.assert_array_equal(storage[0][0], 0.5 * zv)
    assert storage[1][0] == (zv**2).sum()


def test_broadcast_helpers_and_specify_shape_refuse_bad_axes_and_lengths():
    m = T.matrix("m")
    with pytest.raises(ValueError, match="'m'.*axis 5 is out of range for 2 dimensions"):
        T.addbroadcast(m, 5)
    with pytest.raises(ValueError, match="axis -3 is out of range"):
        T.unbroadcast(m, -3)
    with pytest.raises(ValueError, match="must be a vector of 2 lengths"):
        T.specify_shape(m, T.constant(np.array([2, 3, 4])))
    s = T.lvector("s")
    f = tensorjit.function([m, s], T.specify_shape(m, s).sum())
    assert f(np.ones((2, 3)), np.array([2, 3])) == 6
    with pytest.raises(AssertionError, match=r"has shape \(3,\), expected \(2,\)"):
        f(np.ones((2, 3)), np.array([2, 3, 4]))  # the vector's own length is checked
    with pytest.raises(AssertionError, match=r"has shape \(2, 3\), expected \(2, -7\)"):
        f(np.ones((2, 3)), np.array([2, -7]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_penalised_gemm_kernels_with_alpha_zero_read_no_operand(dtype):
    """The compiled kernels as perform."""
    from tensorjit.tensor.blas import PenalisedGemm

    z, x, y = (T.matrix(n, dtype=dtype) for n in "zxy")
    a, b = T.scalar("a", dtype=dtype), T.scalar("b", dtype=dtype)
    f = tensorjit.function([z, a, x, y, b], PenalisedGemm(dtype)(z, a, x, y, b))
    zv = np.arange(12, dtype=dtype).reshape(3, 4)
    x_nan, y_nan = np.full((3, 5), np.nan, dtype), np.full((5, 4), np.nan, dtype)
    updated, squares = f(zv, 0, x_nan, y_nan, 0.5)
    np.testing.assert_array_equal(updated, 0.5 * zv)
    np.testing.assert_allclose(squares, (zv.astype("float64") ** 2).sum(), rtol=1e-6)
