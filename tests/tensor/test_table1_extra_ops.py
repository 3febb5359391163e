"""Table 1 "extra" ops (join/split/stack, tile, repeat, roll, sort, cumsum, diff, bincount,
unique, searchsorted, take_along_axis) against NumPy: values, dtypes, infer_shape,
gradients, DebugMode and error messages."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.gradient import NotDifferentiableError
from tensorjit.tensor import extra_ops as E
from tensorjit.tensor.extra_ops import (
    Argsort,
    Bincount,
    CumOp,
    CumprodGrad,
    Join,
    Repeat,
    RepeatGrad,
    Roll,
    ScatterAddAlongAxis,
    SearchSorted,
    Sort,
    Split,
    TakeAlongAxis,
    Tile,
    Unique,
)
from tensorjit.tensor.shape_ops import MakeVector, shape_entries
from tensorjit.tensor.variable import as_tensor_variable


def rng(seed=0):
    return np.random.default_rng(seed)


def sym(value, name="x"):
    """A symbolic input for ``value`` (unknown static shape, except length-1 dims)."""
    value = np.asarray(value)
    return T.tensor(value.dtype, shape=(None,) * value.ndim, name=name)


def run(inputs, outputs, *values, mode="DebugMode"):
    f = tensorjit.function(inputs, outputs, mode=mode, on_unused_input="ignore")
    return f(*values)


def check(out, inputs, values, expected, exact=False):
    """Value and dtype against NumPy in DebugMode, and infer_shape against the result."""
    got = run(inputs, out, *values)
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if exact or expected.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    check_infer_shape(out, inputs, values, expected.shape)
    return got


def check_infer_shape(out, inputs, values, expected_shape):
    """Evaluate the op's own infer_shape (and the compiled ``out.shape``)."""
    node = out.owner
    idx = node.outputs.index(out)
    input_shapes = [tuple(shape_entries(i)) for i in node.inputs]
    shapes = node.op.infer_shape(None, node, input_shapes)
    entries = shapes[idx] if shapes is not None else None
    if entries is not None:
        entries = [as_tensor_variable(e) for e in entries]
        got = tensorjit.function(inputs, entries, on_unused_input="ignore")(*values)
        assert tuple(int(g) for g in got) == tuple(expected_shape)
    shp = tensorjit.function(inputs, out.shape, on_unused_input="ignore")(*values)
    assert tuple(shp) == tuple(expected_shape)


def vgrad(fn, *points):
    T.verify_grad(fn, [np.asarray(p, dtype="float64") for p in points], rng=rng())


# ---------------------------------------------------------------- exports
def test_all_names_exist_and_reach_the_tensor_namespace():
    for name in E.__all__:
        assert hasattr(E, name), name
    assert T.cumsum is E.cumsum and T.concatenate is E.concatenate
    assert T.stack is E.stack


def test_ops_compare_by_props():
    assert Join(0) == Join(0) and hash(Join(1)) == hash(Join(1)) and Join(0) != Join(1)
    assert Split(2, 0) == Split(2, 0) and Split(2, 0) != Split(3, 0)
    assert Split(3, 1).view_map == {0: [0], 1: [0], 2: [0]}
    assert CumOp("add", 0) != CumOp("mul", 0)
    assert Sort(0) == Sort(0, "quicksort") and Sort(0) != Sort(0, "stable")
    assert Bincount(3, True) == Bincount(3, True) != Bincount(3)
    assert Roll(None) == Roll(None) != Roll(0)


# ---------------------------------------------------------------- concatenate / join
@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2, 3), (4, 3)], 0),
        ([(2, 3), (2, 1), (2, 0)], 1),
        ([(2, 3), (2, 5)], -1),
        ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], 1),
        ([(0, 3), (0, 3)], 0),
        ([(5,)], 0),
    ],
)
def test_concatenate_matches_numpy(shapes, axis):
    values = [rng(i).normal(size=s) for i, s in enumerate(shapes)]
    xs = [sym(v, f"x{i}") for i, v in enumerate(values)]
    check(E.concatenate(xs, axis=axis), xs, values, np.concatenate(values, axis=axis))
    check(E.join(axis, *xs), xs, values, np.concatenate(values, axis=axis))


@pytest.mark.parametrize(
    "dtypes", [("int8", "float32"), ("bool", "int16"), ("uint8", "int8"), ("float32", "float32")]
)
def test_concatenate_promotes_dtypes_like_numpy(dtypes):
    values = [(rng(i).normal(size=(2, 2)) * 3).astype(d) for i, d in enumerate(dtypes)]
    xs = [sym(v, f"x{i}") for i, v in enumerate(values)]
    check(E.concatenate(xs, axis=1), xs, values, np.concatenate(values, axis=1))


def test_concatenate_axis_none_flattens_and_mixes_ranks():
    a, b = rng().normal(size=(2, 3)), rng(1).normal(size=(4,))
    x, y = sym(a), sym(b, "y")
    check(E.concatenate([x, y], axis=None), [x, y], [a, b], np.concatenate([a, b], axis=None))


def test_concatenate_static_shape_and_constants():
    x = T.tensor("float64", shape=(2, 3))
    y = T.tensor("float64", shape=(None, 3))
    assert E.concatenate([x, x]).type.shape == (4, 3)
    assert E.concatenate([x, y]).type.shape == (None, 3)
    assert E.concatenate([x, x], axis=1).type.shape == (2, 6)
    out = E.concatenate([T.vector("v"), [1.0, 2.0]])
    np.testing.assert_array_equal(run([out.owner.inputs[0]], out, np.array([0.5])), [0.5, 1, 2])


def test_concatenate_gradient():
    a, b, c = rng().normal(size=(2, 3)), rng(1).normal(size=(2, 1)), rng(2).normal(size=(2, 2))
    vgrad(lambda x, y, z: E.concatenate([x, y, z], axis=1), a, b, c)
    vgrad(lambda x, y: E.concatenate([x, y], axis=0), a, rng(3).normal(size=(4, 3)))
    vgrad(lambda x, y: E.join(0, x, x * y), a, a + 1)  # an input used twice
    vgrad(lambda x: E.concatenate([x], axis=0), a)


def test_concatenate_gradient_skips_integer_inputs():
    x = T.vector("x")
    i = T.lvector("i")
    cost = (E.concatenate([x, i]) ** 2).sum()
    g = tensorjit.grad(cost, x)
    np.testing.assert_allclose(run([x, i], g, np.array([1.0, -2.0]), np.array([3])), [2.0, -4.0])


def test_concatenate_errors():
    x, v, s = T.matrix("x"), T.vector("v"), T.scalar("s")
    with pytest.raises(ValueError, match="same number of dimensions.*'v'"):
        E.concatenate([x, v])
    with pytest.raises(ValueError, match="0-d tensor 's'"):
        E.concatenate([s, s])
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        E.concatenate([x, x], axis=2)
    with pytest.raises(ValueError, match="at least one tensor"):
        E.concatenate([])
    with pytest.raises(TypeError, match="list of tensors"):
        E.concatenate(x)
    with pytest.raises(TypeError, match="symbolic"):
        E.join(T.lscalar("a"), x, x)
    a, b = T.tensor("float64", shape=(2, 3)), T.tensor("float64", shape=(2, 4))
    with pytest.raises(ValueError, match="dimension 1 differ"):
        E.concatenate([a, b], axis=0)
    y = T.matrix("y")
    f = tensorjit.function([x, y], E.concatenate([x, y]))
    with pytest.raises(ValueError, match=r"join along axis 0.*\(2, 3\), \(2, 2\)"):
        f(np.zeros((2, 3)), np.zeros((2, 2)))


# ---------------------------------------------------------------- stack
def test_stack_scalars_keeps_make_vector():
    a, b = T.scalar("a"), T.iscalar("b")
    v = E.stack([a, b])
    assert isinstance(v.owner.op, MakeVector) and v.type.shape == (2,)
    np.testing.assert_array_equal(run([a, b], v, 1.5, 2), [1.5, 2.0])
    w = as_tensor_variable([a, 3.0])
    np.testing.assert_array_equal(run([a], w, 2.0), [2.0, 3.0])
    assert E.stack([]).type.shape == (0,)
    np.testing.assert_array_equal(run([a], E.stack([a, a], axis=-1), 1.0), [1.0, 1.0])


@pytest.mark.parametrize("shape", [(3,), (2, 3), (0, 2), (2, 1, 3)])
def test_stack_matches_numpy(shape):
    values = [rng(i).normal(size=shape) for i in range(3)]
    xs = [sym(v, f"x{i}") for i, v in enumerate(values)]
    for axis in range(-len(shape) - 1, len(shape) + 1):
        check(E.stack(xs, axis=axis), xs, values, np.stack(values, axis=axis))


def test_stack_gradient_and_static_shape():
    a, b = rng().normal(size=(2, 3)), rng(1).normal(size=(2, 3))
    vgrad(lambda x, y: E.stack([x, y], axis=1), a, b)
    vgrad(lambda x, y: E.stack([x, y * x], axis=-1), a, b)
    vgrad(lambda x, y: E.stack([x.sum(), y.sum()]), a, b)
    x = T.tensor("float32", shape=(2, None))
    assert E.stack([x, x, x], axis=1).type.shape == (2, 3, None)


def test_stack_errors():
    x, v = T.matrix("x"), T.vector("v")
    with pytest.raises(ValueError, match="same shape.*'v'"):
        E.stack([x, v])
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        E.stack([x, x], axis=3)
    y = T.matrix("y")
    f = tensorjit.function([x, y], E.stack([x, y]))
    with pytest.raises(ValueError, match="join"):
        f(np.zeros((2, 3)), np.zeros((3, 3)))


# ---------------------------------------------------------------- split
def test_split_theano_signature_matches_numpy():
    a = rng().normal(size=(6, 4))
    x = sym(a)
    parts = E.split(x, [1, 3, 2], 3, axis=0)
    got = run([x], parts, a)
    for g, e in zip(got, np.split(a, [1, 4], axis=0)):
        np.testing.assert_array_equal(g, e)
    for p, e in zip(parts, np.split(a, [1, 4], axis=0)):
        check_infer_shape(p, [x], [a], e.shape)
    assert [p.type.shape for p in parts] == [(1, None), (3, None), (2, None)]


def test_split_symbolic_sizes_negative_axis_and_empty_pieces():
    a = rng().normal(size=(2, 5))
    x, sizes = sym(a), T.lvector("sizes")
    parts = E.split(x, sizes, 3, axis=-1)
    got = run([x, sizes], parts, a, np.array([0, 5, 0]))
    assert [g.shape for g in got] == [(2, 0), (2, 5), (2, 0)]
    np.testing.assert_array_equal(got[1], a)
    check_infer_shape(parts[0], [x, sizes], [a, np.array([2, 1, 2])], (2, 2))
    k = T.lscalar("k")
    parts = E.split(x, [k, 5 - k], 2, axis=1)
    got = run([x, k], parts, a, 4)
    np.testing.assert_array_equal(got[0], a[:, :4])
    np.testing.assert_array_equal(got[1], a[:, 4:])


def test_split_outputs_are_declared_views():
    a = rng().normal(size=(4, 3))
    x = sym(a)
    node = E.split(x, [2, 2], 2)[0].owner
    storage = [[None], [None]]
    node.op.perform(node, [a, np.array([2, 2])], storage)
    assert np.shares_memory(storage[0][0], a) and np.shares_memory(storage[1][0], a)
    out = run([x], [p * 1 for p in E.split(x, [2, 2], 2)], a)  # DebugMode checks view_map
    np.testing.assert_array_equal(out[1], a[2:])


def test_split_gradient():
    a = rng().normal(size=(5, 3))
    vgrad(lambda x: E.split(x, [2, 3], 2)[1], a)
    vgrad(lambda x: E.split(x, [1, 0, 2], 3, axis=1)[2] * E.split(x, [1, 0, 2], 3, axis=1)[0], a)
    vgrad(lambda x: E.concatenate(E.split(x, [3, 2], 2)[::-1]), a)


def test_split_errors():
    x = T.matrix("x")
    with pytest.raises(ValueError, match="3 entries but n_splits is 2"):
        E.split(x, [1, 2, 3], 2)
    with pytest.raises(ValueError, match="0-d tensor 's'"):
        E.split(T.scalar("s"), [1], 1)
    with pytest.raises(TypeError, match="integer vector"):
        Split(2, 0)(x, T.vector("f"))
    with pytest.raises(ValueError, match="add up to 5.*has length 4"):
        E.split(T.tensor("float64", shape=(4, 2), name="y"), [2, 3], 2)
    with pytest.raises(ValueError, match="positive int"):
        Split(0, 0)
    f = tensorjit.function([x], E.split(x, [1, 1], 2))
    with pytest.raises(ValueError, match=r"add up to 2, but dimension 0 of 'x'.*length 3"):
        f(np.zeros((3, 2)))
    sizes = T.lvector("sizes")
    g = tensorjit.function([x, sizes], E.split(x, sizes, 2))
    with pytest.raises(ValueError, match="negative split size"):
        g(np.zeros((1, 2)), np.array([2, -1]))


# ---------------------------------------------------------------- axes: swapaxes & co.
def test_swapaxes_squeeze_expand_dims_transpose_flatten():
    a = rng().normal(size=(2, 3, 4))
    x = sym(a)
    check(E.swapaxes(x, 0, 2), [x], [a], np.swapaxes(a, 0, 2))
    check(E.swapaxes(x, -1, 1), [x], [a], np.swapaxes(a, -1, 1))
    check(E.transpose(x, (1, 2, 0)), [x], [a], np.transpose(a, (1, 2, 0)))
    check(E.transpose(x), [x], [a], a.T)
    check(E.flatten(x, 2), [x], [a], a.reshape(2, 12))
    check(E.expand_dims(x, (0, -1)), [x], [a], np.expand_dims(a, (0, -1)))
    b = rng().normal(size=(1, 3, 1))
    y = T.tensor("float64", shape=(1, None, 1), name="y")
    check(E.squeeze(y), [y], [b], np.squeeze(b))
    check(E.squeeze(y, axis=-1), [y], [b], np.squeeze(b, axis=-1))
    vgrad(lambda x: E.swapaxes(x, 0, 1) * np.arange(6.0).reshape(3, 2), a[:, :, 0])
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        E.swapaxes(x, 0, 3)
    with pytest.raises(ValueError, match="does not have static length 1"):
        E.squeeze(x, axis=0)


# ---------------------------------------------------------------- tile
@pytest.mark.parametrize(
    "shape, reps",
    [((2, 3), (2, 3)), ((3,), 2), ((2, 3), (2,)), ((3,), (2, 1, 2)), ((2, 0), (3, 2)),
     ((2, 3), (0, 1)), ((), (3,)), ((), ())],
)  # fmt: skip
def test_tile_matches_numpy(shape, reps):
    a = rng().normal(size=shape)
    x = sym(a)
    check(E.tile(x, reps), [x], [a], np.tile(a, reps))


def test_tile_int_dtype_symbolic_reps_and_static_shape():
    a = np.arange(6, dtype="int16").reshape(2, 3)
    x, r = sym(a), T.lscalar("r")
    check(E.tile(x, (r, 2)), [x, r], [a, 3], np.tile(a, (3, 2)))
    rv = T.tensor("int32", shape=(2,), name="rv")
    check(E.tile(x, rv), [x, rv], [a, np.array([1, 2], dtype="int32")], np.tile(a, (1, 2)))
    assert E.tile(T.tensor("float64", shape=(2, None)), (3, 2)).type.shape == (6, None)


def test_tile_gradient():
    vgrad(lambda x: E.tile(x, (2, 3)), rng().normal(size=(2, 3)))
    vgrad(lambda x: E.tile(x, (2, 1, 2)), rng().normal(size=(3,)))
    vgrad(lambda x: E.tile(x, (3,)), np.array(1.5))


def test_tile_errors():
    x = T.matrix("x")
    with pytest.raises(ValueError, match="negative repetition count -1"):
        E.tile(x, (-1, 2))
    with pytest.raises(TypeError, match="integer"):
        E.tile(x, (1.5, 2))
    with pytest.raises(ValueError, match="length of reps"):
        E.tile(x, T.lvector("r"))
    r = T.lscalar("r")
    f = tensorjit.function([x, r], E.tile(x, (r, 1)))
    with pytest.raises(ValueError, match="negative repetition"):
        f(np.zeros((2, 2)), -2)
    with pytest.raises(ValueError, match="Tile"):
        Tile(2)(T.vector("v"), 1, 2)


# ---------------------------------------------------------------- repeat
@pytest.mark.parametrize(
    "shape, repeats, axis",
    [((2, 3), 2, 1), ((2, 3), 3, None), ((4,), [1, 0, 2, 3], 0), ((2, 3), [2, 0], 0),
     ((2, 3), [2], 1), ((0, 3), 2, 0), ((2, 3), 0, -1), ((), 3, None)],
)  # fmt: skip
def test_repeat_matches_numpy(shape, repeats, axis):
    a = rng().normal(size=shape)
    x = sym(a)
    check(E.repeat(x, repeats, axis=axis), [x], [a], np.repeat(a, repeats, axis=axis))


def test_repeat_symbolic_repeats_and_dtypes():
    a = np.arange(6, dtype="uint8").reshape(3, 2)
    x, r, rv = sym(a), T.iscalar("r"), T.lvector("rv")
    check(E.repeat(x, r, axis=0), [x, r], [a, np.int32(2)], np.repeat(a, 2, axis=0))
    reps = np.array([3, 1])
    check(E.repeat(x, rv, axis=1), [x, rv], [a, reps], np.repeat(a, reps, axis=1))
    assert E.repeat(T.tensor("float32", shape=(2, 3)), 2, axis=1).type.shape == (2, 6)
    assert E.repeat(T.tensor("float32", shape=(2, 3)), [1, 2], axis=0).type.shape == (3, 3)


def test_repeat_gradient():
    a = rng().normal(size=(3, 2))
    vgrad(lambda x: E.repeat(x, 3, axis=0), a)
    vgrad(lambda x: E.repeat(x, 2), a)
    vgrad(lambda x: E.repeat(x, [2, 0, 3], axis=0), a)
    vgrad(lambda x: E.repeat(x, [1, 4], axis=1), a)
    vgrad(lambda x: E.repeat(x, [1, 4, 0, 1, 2, 2]), a)
    # The gradient op itself and its gradient (a repeat again).
    g = rng(1).normal(size=(2, 5))
    gv = sym(g)
    check(
        RepeatGrad(1)(gv, np.array([2, 0, 3])),
        [gv],
        [g],
        np.stack([g[:, :2].sum(1), np.zeros(2), g[:, 2:].sum(1)], axis=1),
    )
    vgrad(lambda g: RepeatGrad(1)(g, np.array([2, 0, 3])), g)


def test_repeat_errors():
    x = T.matrix("x")
    with pytest.raises(ValueError, match="negative repeats"):
        E.repeat(x, -1, axis=0)
    with pytest.raises(TypeError, match="repeats must be of an integer dtype"):
        E.repeat(x, T.scalar("f"), axis=0)
    with pytest.raises(ValueError, match="3 entries but dimension 0.*length 2"):
        E.repeat(T.tensor("float64", shape=(2, 2), name="y"), [1, 2, 3], axis=0)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        E.repeat(x, 2, axis=2)
    rv = T.lvector("rv")
    f = tensorjit.function([x, rv], E.repeat(x, rv, axis=0))
    with pytest.raises(ValueError, match="repeat: repeats 'rv' .* has 3 entries"):
        f(np.zeros((2, 2)), np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="negative repeats"):
        f(np.zeros((2, 2)), np.array([1, -1]))


# ---------------------------------------------------------------- roll
@pytest.mark.parametrize(
    "shape, shift, axis",
    [((5,), 2, None), ((2, 3), -1, None), ((2, 3), 4, 1), ((2, 3), 7, 0), ((3, 4), (1, -2), (0, 1)),
     ((3, 4), 1, (0, 1)), ((0, 3), 1, 0), ((), 3, None), ((2, 3), 0, -1)],
)  # fmt: skip
def test_roll_matches_numpy(shape, shift, axis):
    a = rng().normal(size=shape)
    x = sym(a)
    check(E.roll(x, shift, axis=axis), [x], [a], np.roll(a, shift, axis=axis))


def test_roll_symbolic_shift_int_dtype_and_gradient():
    a = np.arange(12, dtype="int32").reshape(3, 4)
    x, s = sym(a), T.iscalar("s")
    check(E.roll(x, s, axis=1), [x, s], [a, np.int32(-3)], np.roll(a, -3, axis=1))
    b = rng().normal(size=(3, 4))
    vgrad(lambda x: E.roll(x, 2, axis=1), b)
    vgrad(lambda x: E.roll(x, -5), b)
    vgrad(lambda x: E.roll(x, (1, 2), axis=(0, 1)), b)
    with pytest.raises(TypeError, match="shift must be an integer"):
        E.roll(x, 1.5, axis=0)
    with pytest.raises(ValueError, match="do not match"):
        E.roll(x, (1, 2, 3), axis=(0, 1))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        E.roll(x, 1, axis=2)


# ---------------------------------------------------------------- sort / argsort
@pytest.mark.parametrize("dtype", ["float64", "float32", "int16", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (0, 3)])
def test_sort_and_argsort_match_numpy(dtype, shape):
    a = (rng().normal(size=shape) * 10).astype(dtype)
    x = sym(a)
    for axis in [-1, 0, None]:
        check(E.sort(x, axis=axis), [x], [a], np.sort(a, axis=axis))
        check(
            E.argsort(x, axis=axis, kind="stable"),
            [x],
            [a],
            np.argsort(a, axis=axis, kind="stable"),
        )


def test_argsort_with_ties_default_kind_matches_numpy():
    a = np.array([[3, 1, 2, 1, 3, 0, 2]] * 2)
    x = sym(a)
    check(E.argsort(x), [x], [a], np.argsort(a))
    check(E.argsort(x, axis=0, kind="mergesort"), [x], [a], np.argsort(a, axis=0, kind="mergesort"))


def test_sort_gradient_scatters_back_through_the_permutation():
    a = rng().permutation(12).reshape(3, 4) * 0.3 - 1.0  # distinct values
    vgrad(lambda x: E.sort(x), a)
    vgrad(lambda x: E.sort(x, axis=0), a)
    vgrad(lambda x: E.sort(x, axis=None), a)
    vgrad(lambda x: E.sort(x * x, axis=1), a)
    x = T.vector("x")
    g = tensorjit.grad((E.sort(x) * np.array([1.0, 10.0, 100.0])).sum(), x)
    np.testing.assert_array_equal(run([x], g, np.array([5.0, -1.0, 2.0])), [100.0, 1.0, 10.0])


def test_argsort_gradient_is_zero():
    x = T.matrix("x")
    (gx,) = Argsort(1).grad([x], [T.lmatrix("g")])
    np.testing.assert_array_equal(run([x], gx, np.ones((2, 3))), np.zeros((2, 3)))
    assert Argsort(0).grad([T.lvector("i")], [T.lvector("g")]) == [None]


def test_sort_errors():
    with pytest.raises(ValueError, match="can not sort the 0-d 's'"):
        E.sort(T.scalar("s"))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        E.argsort(T.matrix("m"), axis=2)
    with pytest.raises(ValueError, match="kind must be one of"):
        E.sort(T.vector(), kind="bogo")
    with pytest.raises(ValueError, match="out of range for 'v'"):
        Sort(1)(T.vector("v"))


# ---------------------------------------------------------------- take_along_axis
def test_take_along_axis_matches_numpy_and_gradient():
    a = rng().normal(size=(3, 4))
    idx = np.array([[0, 2, 2], [1, 1, 3], [3, 0, 0]])
    x = sym(a)
    check(E.take_along_axis(x, idx, axis=1), [x], [a], np.take_along_axis(a, idx, axis=1))
    bidx = np.array([[2, 0, 1, 1]])  # broadcasts along dimension 0
    check(E.take_along_axis(x, bidx, 0), [x], [a], np.take_along_axis(a, bidx, axis=0))
    flat = np.array([11, 0, 5, 5])
    check(E.take_along_axis(x, flat, None), [x], [a], np.take_along_axis(a, flat, axis=None))
    neg = np.array([[-1, 0], [-4, -4], [2, -2]])
    check(E.take_along_axis(x, neg, 1), [x], [a], np.take_along_axis(a, neg, axis=1))
    vgrad(lambda x: E.take_along_axis(x, idx, axis=1), a)  # repeated indices accumulate
    vgrad(lambda x: E.take_along_axis(x, bidx, axis=0), a)
    vgrad(lambda x: E.take_along_axis(x, neg, axis=1), a)
    g = rng(1).normal(size=(3, 3))
    vgrad(lambda g: ScatterAddAlongAxis(1)(g, idx, 3, 4), g)
    with pytest.raises(ValueError, match="as many dimensions"):
        E.take_along_axis(x, np.array([0, 1]), axis=0)
    with pytest.raises(TypeError, match="indices must be of an integer dtype"):
        E.take_along_axis(x, np.zeros((1, 1)), axis=0)
    f = tensorjit.function([x], E.take_along_axis(x, idx, axis=1))
    with pytest.raises(IndexError, match="take_along_axis of 'x'"):
        f(np.zeros((3, 2)))


# ---------------------------------------------------------------- cumsum / cumprod
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "uint8", "int32", "bool"])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2), (0, 2), ()])
def test_cumsum_cumprod_match_numpy(dtype, shape):
    a = (rng().uniform(-2, 2, size=shape) * 2).astype(dtype)
    x = sym(a)
    axes = [None] + list(range(-len(shape), len(shape)))
    for axis in axes:
        check(E.cumsum(x, axis=axis), [x], [a], np.cumsum(a, axis=axis))
        check(E.cumprod(x, axis=axis), [x], [a], np.cumprod(a, axis=axis))


def test_cumsum_gradient():
    a = rng().normal(size=(3, 4))
    vgrad(lambda x: E.cumsum(x), a)
    vgrad(lambda x: E.cumsum(x, axis=0), a)
    vgrad(lambda x: E.cumsum(x, axis=-1), a)
    vgrad(lambda x: E.cumsum(E.cumsum(x, axis=0), axis=1), a)


@pytest.mark.parametrize(
    "zeros", [[], [(1, 2)], [(0, 1), (1, 2)], [(2, 0), (2, 3)], [(0, 0), (0, 3), (1, 0)]]
)
def test_cumprod_gradient_exact_with_zeros(zeros):
    a = rng().uniform(0.5, 1.5, size=(3, 4)) * rng(1).choice([-1, 1], size=(3, 4))
    for z in zeros:
        a[z] = 0.0
    vgrad(lambda x: E.cumprod(x, axis=1), a)
    vgrad(lambda x: E.cumprod(x, axis=0), a)
    vgrad(lambda x: E.cumprod(x), a)


def test_cumprod_gradient_values_and_op():
    x = T.vector("x")
    g = tensorjit.grad(E.cumprod(x).sum(), x)
    # d/dx of x0 + x0 x1 + x0 x1 x2 at (2, 0, 3): (1 + 0 + 0, 2 + 6, 0)
    np.testing.assert_array_equal(run([x], g, np.array([2.0, 0.0, 3.0])), [1.0, 8.0, 0.0])
    np.testing.assert_array_equal(run([x], g, np.array([0.0, 0.0, 3.0])), [1.0, 0.0, 0.0])
    m, gm = T.matrix("m"), T.matrix("gm")
    out = CumprodGrad(1)(m, gm)
    check(out, [m, gm], [np.ones((2, 0)), np.ones((2, 0))], np.ones((2, 0)))


def test_cum_errors():
    with pytest.raises(ValueError, match="cumsum: axis 1 is out of range"):
        E.cumsum(T.vector("v"), axis=1)
    with pytest.raises(ValueError, match="mode must be"):
        CumOp("max", 0)
    with pytest.raises(ValueError, match="out of range for 'v'"):
        CumOp("add", 1)(T.vector("v"))


# ---------------------------------------------------------------- diff
@pytest.mark.parametrize("dtype", ["float64", "int32", "uint8", "bool"])
@pytest.mark.parametrize(
    "shape, n, axis",
    [((6,), 1, -1), ((6,), 3, 0), ((3, 4), 1, 0), ((3, 4), 2, -1), ((3, 4), 5, 1),
     ((3, 4), 0, 0), ((0, 3), 1, 0), ((2, 3, 4), 2, 1)],
)  # fmt: skip
def test_diff_matches_numpy(dtype, shape, n, axis):
    a = (rng().normal(size=shape) * 5).astype(dtype)
    x = sym(a)
    with np.errstate(over="ignore"):
        expected = np.diff(a, n=n, axis=axis)
    out = E.diff(x, n=n, axis=axis)
    got = run([x], out, a)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if n:
        assert tuple(run([x], out.shape, a, mode=None)) == expected.shape


def test_diff_gradient_and_errors():
    a = rng().normal(size=(4, 5))
    vgrad(lambda x: E.diff(x), a)
    vgrad(lambda x: E.diff(x, n=2, axis=0), a)
    with pytest.raises(ValueError, match="at least one dimensional.*'s'"):
        E.diff(T.scalar("s"))
    with pytest.raises(ValueError, match="non-negative"):
        E.diff(T.vector(), n=-1)
    with pytest.raises(ValueError, match="axis 1 is out of range"):
        E.diff(T.vector(), axis=1)


# ---------------------------------------------------------------- bincount
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint16"])
def test_bincount_matches_numpy(dtype):
    a = rng().integers(0, 7, size=20).astype(dtype)
    w = rng(1).normal(size=20)
    x, wv = sym(a), sym(w, "w")
    check(E.bincount(x), [x], [a], np.bincount(a))
    check(E.bincount(x, minlength=12), [x], [a], np.bincount(a, minlength=12))
    check(E.bincount(x, minlength=2), [x], [a], np.bincount(a, minlength=2))
    check(E.bincount(x, wv), [x, wv], [a, w], np.bincount(a, w))
    check(
        E.bincount(x, wv.astype("float32"), 10),
        [x, wv],
        [a, w],
        np.bincount(a, w.astype("float32"), 10),
    )
    empty = np.zeros(0, dtype=dtype)
    check(E.bincount(x), [x], [empty], np.bincount(empty))
    check(E.bincount(x, minlength=3), [x], [empty], np.bincount(empty, minlength=3))


def test_bincount_weights_gradient_and_none_for_counts():
    a = np.array([0, 3, 3, 1, 0, 3])
    vgrad(lambda w: E.bincount(a, w, minlength=5), rng().normal(size=6))
    assert Bincount().grad([T.lvector()], [T.vector()]) == [None]


def test_bincount_errors():
    with pytest.raises(TypeError, match="integer dtype.*'f'"):
        E.bincount(T.vector("f"))
    with pytest.raises(ValueError, match="must be a vector.*'m'"):
        E.bincount(T.lmatrix("m"))
    with pytest.raises(ValueError, match="minlength"):
        E.bincount(T.lvector(), minlength=-1)
    x = T.lvector("x")
    with pytest.raises(ValueError, match="differ in length"):
        E.bincount(T.tensor("int64", shape=(3,)), T.tensor("float64", shape=(2,)))
    f = tensorjit.function([x], E.bincount(x))
    with pytest.raises(ValueError, match="bincount: 'x' .* has negative entries"):
        f(np.array([1, -2]))
    w = T.vector("w")
    g = tensorjit.function([x, w], E.bincount(x, w))
    with pytest.raises(ValueError, match="do not match"):
        g(np.array([1, 2]), np.array([1.0]))


# ---------------------------------------------------------------- unique
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
@pytest.mark.parametrize("shape", [(8,), (3, 4), (0,)])
def test_unique_matches_numpy(dtype, shape):
    a = rng().integers(-3, 3, size=shape).astype(dtype)
    x = sym(a)
    all_flags = [
        (False, False, False),
        (True, True, True),
        (False, True, False),
        (True, False, True),
    ]
    for flags in all_flags:
        outs = E.unique(x, *flags)
        expected = np.unique(a, *flags)
        if not isinstance(outs, list):
            outs, expected = [outs], (expected,)
        got = run([x], outs, a)
        for g, e in zip(got, expected):
            assert g.dtype == np.asarray(e).dtype or g.dtype == "int64"
            assert g.shape == e.shape
            np.testing.assert_array_equal(g, e)
        if flags[1]:
            inverse = outs[1 + flags[0]]
            check_infer_shape(inverse, [x], [a], a.shape)
        check_infer_shape(outs[0], [x], [a], expected[0].shape)


def test_unique_has_no_gradient():
    x = T.vector("x")
    with pytest.raises(NotDifferentiableError, match="unique has no gradient"):
        tensorjit.grad(E.unique(x).sum(), x)
    assert isinstance(E.unique(x).owner.op, Unique)


# ---------------------------------------------------------------- searchsorted
def test_searchsorted_matches_numpy():
    a = np.sort(rng().integers(0, 10, size=12)).astype("float64")
    v = rng(1).integers(-1, 12, size=(3, 4)).astype("float64")
    av, vv = sym(a, "a"), sym(v, "v")
    for side in ["left", "right"]:
        check(E.searchsorted(av, vv, side=side), [av, vv], [a, v], np.searchsorted(a, v, side))
    s = rng(2).normal(size=7)
    sorter = np.argsort(s)
    sv, so = sym(s, "s"), T.lvector("so")
    check(
        E.searchsorted(sv, 0.1, sorter=so),
        [sv, so],
        [s, sorter],
        np.searchsorted(s, 0.1, sorter=sorter),
    )
    check(E.searchsorted(av, vv), [av, vv], [np.zeros(0), v], np.searchsorted(np.zeros(0), v))
    (ga, gv) = SearchSorted().grad([av, vv], [T.lmatrix()])
    np.testing.assert_array_equal(run([av, vv], gv, a, v), np.zeros_like(v))
    with pytest.raises(ValueError, match="a must be a vector.*'m'"):
        E.searchsorted(T.matrix("m"), vv)
    with pytest.raises(ValueError, match="side must be"):
        E.searchsorted(av, vv, side="middle")


def test_new_ops_only_declare_views_where_they_are_views():
    # Every op that is not a view must return fresh memory: DebugMode checks it.
    a = rng().normal(size=(3, 4))
    x = sym(a)
    outs = [
        E.tile(x, (1, 1)),
        E.repeat(x, 1, axis=0),
        E.roll(x, 0, axis=0),
        E.sort(x),
        E.cumsum(x, axis=0),
        E.concatenate([x]),
        E.take_along_axis(x, np.array([[0, 1, 2, 3]]), axis=1),
        Repeat(0)(x, 1),
        Roll(1)(x, 4),
        TakeAlongAxis(0)(x, np.zeros((1, 4), dtype="int64")),
    ]
    got = run([x], outs, a)
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[8], a)
