"""TensorType and the symbolic tensor constructors: dtypes, ranks, static shapes, filter()."""

import warnings

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor import TensorType

PREFIX_DTYPES = {
    "b": "int8",
    "w": "int16",
    "i": "int32",
    "l": "int64",
    "f": "float32",
    "d": "float64",
    "c": "complex64",
    "z": "complex128",
}

KIND_SHAPES = {
    "scalar": (),
    "vector": (None,),
    "matrix": (None, None),
    "row": (1, None),
    "col": (None, 1),
    "tensor3": (None, None, None),
    "tensor4": (None,) * 4,
    "tensor5": (None,) * 5,
}


# ---------------------------------------------------------------- constructors
@pytest.mark.parametrize("prefix", sorted(PREFIX_DTYPES))
@pytest.mark.parametrize("kind", sorted(KIND_SHAPES))
def test_prefixed_constructor_dtype_ndim_broadcastable(prefix, kind):
    var = getattr(T, prefix + kind)("v")
    shape = KIND_SHAPES[kind]
    assert isinstance(var, T.TensorVariable)
    assert var.name == "v"
    assert var.dtype == PREFIX_DTYPES[prefix]
    assert var.type.dtype == PREFIX_DTYPES[prefix]
    assert var.ndim == len(shape)
    assert var.type.shape == shape
    assert var.broadcastable == tuple(s == 1 for s in shape)
    assert var.owner is None


@pytest.mark.parametrize("kind", sorted(KIND_SHAPES))
def test_unprefixed_constructor_uses_floatx(kind):
    assert getattr(T, kind)().dtype == "float64"  # the default floatX
    with tensorjit.config.change_flags(floatX="float32"):
        var = getattr(T, kind)("a")
        assert var.dtype == "float32"
        assert var.type.shape == KIND_SHAPES[kind]
    # the flag is restored after the block
    assert tensorjit.config.floatX == "float64"
    assert getattr(T, kind)().dtype == "float64"


def test_floatx_applies_to_tensor_and_python_float_constants():
    with tensorjit.config.change_flags(floatX="float32"):
        assert T.tensor(shape=(None,)).dtype == "float32"
        assert T.constant(1.5).dtype == "float32"
        assert T.constant(2).dtype == "int64"  # ints are unaffected
        assert T.zeros((2, 3)).dtype == "float32"
        # an explicit prefix wins over floatX
        assert T.dmatrix().dtype == "float64"
    assert T.constant(1.5).dtype == "float64"


def test_floatx_rejects_invalid_value_with_message():
    with pytest.raises(ValueError, match=r"floatX.*expected one of .*got 'int32'"):
        with tensorjit.config.change_flags(floatX="int32"):
            pass  # pragma: no cover - never reached
    assert tensorjit.config.floatX == "float64"


def test_row_and_col_static_shapes():
    r = T.frow("r")
    c = T.icol("c")
    assert r.type.shape == (1, None)
    assert r.broadcastable == (True, False)
    assert c.type.shape == (None, 1)
    assert c.broadcastable == (False, True)
    assert c.dtype == "int32"
    # adding a row and a column broadcasts to a full matrix
    s = r + c
    assert s.type.shape == (None, None)
    assert s.dtype == "float64"  # float32 + int32 -> float64, as in NumPy
    out = tensorjit.function([r, c], s)(
        np.array([[1.0, 2.0, 3.0]], dtype="float32"), np.array([[10], [20]], dtype="int32")
    )
    np.testing.assert_array_equal(out, [[11, 12, 13], [21, 22, 23]])


def test_row_short_str():
    assert T.frow().type.short_str() == "float32 row"
    assert T.dmatrix().type.short_str() == "float64 matrix"
    assert T.lscalar().type.short_str() == "int64 scalar"
    assert T.btensor3().type.short_str() == "int8 tensor3"


@pytest.mark.parametrize(
    "dtype, shape",
    [
        ("float32", (None, 3)),
        ("int16", (1, 1)),
        ("float64", ()),
        ("complex64", (2, None, 1)),
        ("bool", (None,)),
        ("uint8", (4,)),
    ],
)
def test_tensor_with_dtype_and_shape(dtype, shape):
    var = T.tensor(dtype, shape=shape, name="t")
    assert var.dtype == dtype
    assert var.type.shape == shape
    assert var.ndim == len(shape)
    assert var.broadcastable == tuple(s == 1 for s in shape)
    assert var.name == "t"


def test_tensor_numpy_dtype_objects_and_broadcastable_pattern():
    assert T.tensor(np.float32, shape=(None,)).dtype == "float32"
    assert T.tensor(np.dtype("int64"), shape=()).dtype == "int64"
    var = T.tensor("int16", broadcastable=(True, False))
    assert var.type.shape == (1, None)
    assert T.tensor(shape=(2,)).dtype == "float64"


def test_constructor_shape_override():
    m = T.matrix("m", shape=(2, None))
    assert m.type.shape == (2, None)
    assert m.broadcastable == (False, False)
    v = T.fvector(shape=(1,))
    assert v.broadcastable == (True,)
    with pytest.raises(ValueError, match=r"matrix\(\) has 2 dimensions, got shape=\(3,\)"):
        T.matrix(shape=(3,))


def test_plural_constructors():
    a, b = T.fmatrices("a", "b")
    assert (a.name, b.name) == ("a", "b")
    assert a.dtype == b.dtype == "float32" and a.ndim == 2
    vs = T.ivectors(3)
    assert len(vs) == 3
    assert all(v.dtype == "int32" and v.ndim == 1 and v.name is None for v in vs)
    (s,) = T.scalars("s", dtype="int8")
    assert s.dtype == "int8" and s.ndim == 0
    assert len({id(v) for v in vs}) == 3


@pytest.mark.parametrize(
    "kwargs, exc, message",
    [
        ({"dtype": "float32"}, TypeError, r"tensor\(\) needs shape="),
        ({"dtype": "float32", "shape": (-1,)}, TypeError, r"static shape entries must be None"),
        ({"dtype": "float32", "shape": (2.5,)}, TypeError, r"static shape entries must be None"),
        ({"dtype": "foo", "shape": ()}, TypeError, r"'foo' is not a NumPy dtype"),
        ({"dtype": "U8", "shape": ()}, TypeError, r"tensors of dtype <U8 are not supported"),
        ({"dtype": object, "shape": ()}, TypeError, r"tensors of dtype object are not supported"),
        (
            {"dtype": "float32", "shape": (1,), "broadcastable": (True,)},
            TypeError,
            r"either shape or broadcastable, not both",
        ),
    ],
)
def test_tensor_constructor_errors(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        T.tensor(**kwargs)


def test_tensor_rejects_a_type_instead_of_dtype():
    with pytest.raises(TypeError, match=r"takes a dtype; call the TensorType"):
        T.tensor(TensorType("float32", (None,)), shape=(None,))


def test_tensortype_equality_hash_str_and_clone():
    a = TensorType("float32", (None, 3))
    b = TensorType(np.float32, [None, 3])
    assert a == b and hash(a) == hash(b)
    assert a != TensorType("float32", (None, 4))
    assert a != TensorType("float64", (None, 3))
    assert str(a) == "TensorType(float32, shape=(?, 3))"
    assert str(TensorType("int8", (None,))) == "TensorType(int8, shape=(?,))"
    assert str(TensorType("int8", ())) == "TensorType(int8, shape=())"
    c = a.clone(dtype="float64")
    assert c.dtype == "float64" and c.shape == (None, 3)
    d = a.clone(shape=(1, 3))
    assert d.dtype == "float32" and d.broadcastable == (True, False)
    v = a()
    assert isinstance(v, T.TensorVariable) and v.type == a


def test_is_super_and_convert_variable():
    general = TensorType("float64", (None, None))
    specific = T.tensor("float64", shape=(2, 3))
    assert general.is_super(specific.type)
    assert not specific.type.is_super(general)
    assert general.convert_variable(specific) is specific
    assert specific.type.convert_variable(T.dmatrix()) is None
    assert general.convert_variable(T.fmatrix()) is None


# ---------------------------------------------------------------- filter: dtype rules
def test_filter_same_dtype_array_is_not_copied():
    t = TensorType("float32", (None,))
    a = np.arange(3, dtype="float32")
    assert t.filter(a) is a
    assert t.filter(a, strict=True) is a


@pytest.mark.parametrize(
    "src, dst",
    [
        ("int8", "int32"),
        ("int16", "int64"),
        ("int8", "float32"),
        ("int16", "float32"),
        ("int32", "float64"),
        ("float32", "float64"),
        ("uint8", "int16"),
        ("bool", "int8"),
        ("float32", "complex64"),
        ("float64", "complex128"),
    ],
)
def test_filter_accepts_safe_casts(src, dst):
    value = np.array([[1, 0], [1, 1]], dtype=src)
    out = TensorType(dst, (None, None)).filter(value)
    assert out.dtype == np.dtype(dst)
    np.testing.assert_array_equal(out, value.astype(dst))


@pytest.mark.parametrize(
    "src, dst",
    [
        ("float64", "float32"),
        ("int64", "int32"),
        ("int32", "int16"),
        ("float32", "int32"),
        ("float64", "int64"),
        ("int64", "float32"),
        ("int32", "float32"),
        ("complex64", "float64"),
        ("uint16", "int16"),
    ],
)
def test_filter_refuses_downcasts_of_arrays(src, dst):
    # values that would even survive the conversion: arrays are refused by dtype alone
    value = np.array([1, 2, 3], dtype=src)
    t = TensorType(dst, (None,))
    with pytest.raises(
        TypeError,
        match=rf"converting ndarray of dtype {src} and shape \(3,\) to {dst} would lose "
        rf"precision; pass a value of dtype {dst}",
    ):
        t.filter(value)
    with pytest.raises(TypeError, match="would lose precision"):
        t.filter(value, allow_downcast=False)


def test_filter_allow_downcast_converts_like_astype():
    t = TensorType("int32", (None,))
    out = t.filter(np.array([1.7, -2.2, 3.0]), allow_downcast=True)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1, -2, 3])
    f = TensorType("float32", ()).filter(np.float64(0.1), allow_downcast=True)
    assert f.dtype == np.float32 and f == np.float32(0.1)


@pytest.mark.parametrize(
    "dtype, value, expected",
    [
        ("int8", 3, 3),
        ("int8", -128, -128),
        ("int16", True, 1),
        ("float32", 0.5, 0.5),
        ("float32", 3, 3.0),
        ("float32", 16777216, 16777216.0),  # 2**24 is exact in float32
        ("int32", 4.0, 4),
        ("complex64", 2.5, 2.5),
        ("float64", 7, 7.0),
    ],
)
def test_filter_accepts_python_scalars_that_keep_their_value(dtype, value, expected):
    out = TensorType(dtype, ()).filter(value)
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == ()
    assert out == expected


@pytest.mark.parametrize(
    "dtype, value, shown",
    [
        ("int8", 300, "int 300"),
        ("int8", -129, "int -129"),
        ("int32", 2.5, "float 2.5"),
        ("float32", 0.1, "float 0.1"),  # 0.1 is not representable in float32
        ("float32", 1e40, "float 1e\\+40"),
        ("float32", 16777217, "int 16777217"),  # 2**24 + 1 is not
        ("int64", 1.5, "float 1.5"),
        ("float64", 1 + 2j, r"complex \(1\+2j\)"),
    ],
)
def test_filter_refuses_python_scalars_that_change_value(dtype, value, shown):
    with pytest.raises(TypeError, match=rf"converting {shown} to {dtype} would lose precision"):
        TensorType(dtype, ()).filter(value)


@pytest.mark.parametrize("dtype, value", [("float32", 1e40), ("float64", 1 + 2j), ("int8", 1e10)])
def test_filter_refusal_emits_no_numpy_warning(dtype, value):
    # a refused conversion reports one clear TypeError, not NumPy cast warnings on the side
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match=rf"to {dtype} would lose precision"):
            TensorType(dtype, ()).filter(value)


@pytest.mark.parametrize("value", [2**53 + 1, 16777217, 0.1, float("nan"), np.uint64(2**64 - 1)])
def test_filter_scalar_and_list_rules_agree(value):
    # A 0-d value is checked as a one-element list is (values compared as NumPy compares
    # them: 2**53 + 1 equals its float32 rounding once both are float64).
    scalar, listed = TensorType("float32", ()), TensorType("float32", (None,))
    try:
        got = scalar.filter(value)
    except TypeError:
        with pytest.raises(TypeError, match="would lose precision"):
            listed.filter([value])
    else:
        np.testing.assert_array_equal(listed.filter([value]), [got])


def test_filter_python_lists_keep_value_rule():
    t = TensorType("int8", (None,))
    out = t.filter([1, -2, 127])
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, [1, -2, 127])
    with pytest.raises(TypeError, match=r"converting list \[1, 300\] to int8 would lose"):
        t.filter([1, 300])
    m = TensorType("float32", (None, None)).filter([[0.5, 1.0], [2.0, -4.25]])
    assert m.dtype == np.float32 and m.shape == (2, 2)


def test_filter_numpy_scalars_and_0d_arrays():
    t = TensorType("float32", ())
    # 0-d values convert when they keep their value and allow_downcast is unset
    assert t.filter(np.float64(0.5)) == 0.5
    assert TensorType("int8", ()).filter(np.int64(7)).dtype == np.int8
    with pytest.raises(TypeError, match=r"converting float64 \S*0\.1\S* to float32 would lose"):
        t.filter(np.float64(0.1))
    # ... but not when downcasting was explicitly refused
    with pytest.raises(TypeError, match="would lose precision"):
        t.filter(np.array(0.5), allow_downcast=False)


def test_filter_strict_allows_no_conversion():
    t = TensorType("float64", (None,))
    with pytest.raises(
        TypeError,
        match=r"expected an ndarray of dtype float64, got list \[1\.0, 2\.0\] "
        r"\(strict=True allows no conversion\)",
    ):
        t.filter([1.0, 2.0], strict=True)
    with pytest.raises(TypeError, match=r"got ndarray of dtype float32 and shape \(2,\)"):
        t.filter(np.zeros(2, dtype="float32"), strict=True)


@pytest.mark.parametrize(
    "value, message",
    [
        ("abc", r"expected numeric data of dtype float64, got str 'abc'"),
        (None, r"expected numeric data of dtype float64, got NoneType None"),
        ({"a": 1}, r"expected numeric data of dtype float64"),
        ([[1.0], [1.0, 2.0]], r"can not convert list \[\[1\.0\], \[1\.0, 2\.0\]\] to an array"),
    ],
)
def test_filter_non_numeric_values(value, message):
    with pytest.raises(TypeError, match=message):
        TensorType("float64", (None, None)).filter(value)


def test_filter_symbolic_variable_is_refused():
    x = T.dvector("x")
    with pytest.raises(TypeError, match=r"expected a value, got the symbolic variable 'x'"):
        x.type.filter(x)


# ---------------------------------------------------------------- filter: ndim and shape
@pytest.mark.parametrize(
    "shape, value, message",
    [
        ((None, None), np.zeros(3), r"expected 2 dimensions, got 1 \(shape \(3,\)\)"),
        ((None,), np.zeros((2, 2)), r"expected 1 dimensions, got 2 \(shape \(2, 2\)\)"),
        ((), np.zeros(1), r"expected 0 dimensions, got 1 \(shape \(1,\)\)"),
        ((None,), 5.0, r"expected 1 dimensions, got 0 \(shape \(\)\)"),
    ],
)
def test_filter_wrong_ndim(shape, value, message):
    with pytest.raises(ValueError, match=message):
        TensorType("float64", shape).filter(value)


@pytest.mark.parametrize(
    "shape, value_shape, message",
    [
        (
            (None, 3),
            (2, 4),
            r"dimension 1 has length 4, but the type's static shape \(None, 3\) requires 3",
        ),
        (
            (1, None),
            (2, 5),
            r"dimension 0 has length 2, but the type's static shape \(1, None\) requires 1",
        ),
        ((2,), (0,), r"dimension 0 has length 0, but the type's static shape \(2,\) requires 2"),
    ],
)
def test_filter_static_shape_mismatch(shape, value_shape, message):
    with pytest.raises(ValueError, match=message):
        TensorType("float64", shape).filter(np.zeros(value_shape))


def test_filter_accepts_matching_static_shape():
    t = TensorType("float64", (1, None, 3))
    value = np.ones((1, 5, 3))
    assert t.filter(value) is value


# ---------------------------------------------------------------- filter through function()
def test_compiled_function_input_conversion_rules():
    x = T.fvector("x")
    f = tensorjit.function([x], x * 2)
    out = f([1, 2, 3])  # python ints keep their value in float32
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [2, 4, 6])
    np.testing.assert_array_equal(f(np.array([1, 2], dtype="int16")), [2, 4])
    with pytest.raises(
        TypeError,
        match=r"bad argument 0 to compiled function: input 'x' .* expects "
        r"TensorType\(float32, shape=\(\?,\)\), got ndarray of dtype float64 and shape \(2,\): "
        r".*would lose precision",
    ):
        f(np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"bad argument 0 .*expected 1 dimensions, got 2"):
        f(np.zeros((2, 2), dtype="float32"))

    g = tensorjit.function([x], x * 2, allow_input_downcast=True)
    out = g(np.array([0.1, 0.2]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [0.2, 0.4], rtol=1e-6)


def test_python_scalar_arguments_run_the_whole_graph_program(monkeypatch):
    """The tutorials' call, ``train(minibatch_index)`` with a Python int (and a Python
    float for a rate, or NumPy scalars), goes straight into the program once the scalars
    are filtered, not through the general path; a scalar that does not convert still
    gets its error."""
    i, rate = T.lscalar("i"), T.fscalar("rate")
    data = tensorjit.shared(np.arange(12, dtype="float32").reshape(6, 2), name="data")
    w = tensorjit.shared(np.ones(2, dtype="float32"), name="w")
    cost = (data[i * 2 : (i + 1) * 2] * w).sum()
    f = tensorjit.function([i, rate], cost, updates=[(w, w - rate * w)])
    assert f.calls.direct is not None
    want = f(np.asarray(1), np.asarray(0.5, dtype="float32"))
    w.set_value(np.ones(2, dtype="float32"))

    def general_call(*args):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(f.calls, "_on_cells", general_call)
    assert f(1, 0.5) == want == 4 + 5 + 6 + 7  # rows 2 and 3
    np.testing.assert_array_equal(w.get_value(), [0.5, 0.5])
    assert f(True, 0.25) == (4 + 5 + 6 + 7) * 0.5
    assert f(np.int64(0), np.float32(0.0)) == (0 + 1 + 2 + 3) * 0.375  # NumPy scalars too
    monkeypatch.undo()
    with pytest.raises(TypeError, match=r"bad argument 1 .*converting float 0.1 to float32"):
        f(1, 0.1)
    with pytest.raises(TypeError, match=r"bad argument 0 .*converting float 1.5 to int64"):
        f(1.5, 0.5)
    np.testing.assert_array_equal(w.get_value(), [0.375, 0.375])


def test_a_scalar_filtered_for_the_program_is_not_filtered_again():
    # The program declines the list; the general path gets the scalar as filtered, so
    # its conversion warns once.
    a, v = T.dscalar("a"), T.dvector("v")
    f = tensorjit.function([a, v], a * v, allow_input_downcast=True)
    assert f.calls.direct is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(f(1 + 0j, [1.0, 2.0]), [1.0, 2.0])
    assert [w.category for w in caught] == [np.exceptions.ComplexWarning]


def test_compiled_function_checks_static_shape():
    x = T.tensor("float64", shape=(None, 3), name="x")
    f = tensorjit.function([x], x.sum(axis=1))
    np.testing.assert_array_equal(f(np.ones((2, 3))), [3, 3])
    with pytest.raises(
        ValueError, match=r"dimension 1 has length 2, but the type's static shape \(None, 3\)"
    ):
        f(np.ones((3, 2)))


# ---------------------------------------------------------------- value helpers
def test_values_eq_and_values_eq_approx():
    t = TensorType("float64", (None,))
    a = np.array([1.0, 2.0, np.nan])
    assert t.values_eq(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    assert not t.values_eq(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    assert not t.values_eq(np.array([1.0]), np.array([1.0], dtype="float32"))
    assert t.values_eq_approx(a, a + 1e-12)
    assert not t.values_eq_approx(a, a + 1e-3)
    assert not t.values_eq_approx(np.ones(2), np.ones(3))


def test_make_constant_and_copy_value():
    t = TensorType("float32", (None,))
    const = t.make_constant([1.5, 2.5])
    assert isinstance(const, T.TensorConstant)
    assert const.type == t and const.data.dtype == np.float32
    assert not const.data.flags.writeable
    src = np.arange(3.0)
    copied = t.copy_value(src)
    assert copied is not src and not np.may_share_memory(copied, src)
    np.testing.assert_array_equal(copied, src)
