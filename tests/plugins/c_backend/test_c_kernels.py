"""C kernels (Elemwise, Composite, inplace, Reduce) against Op.perform under DebugMode."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import DEBUG_C, NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.math import Reduce

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(0)


def compile_c(inputs, outputs, **kwargs):
    f = tensorjit.function(inputs, outputs, mode=DEBUG_C, **kwargs)
    for node, kernel in f.kernels.items():
        if isinstance(node.op, (Elemwise, Reduce)):
            assert kernel.name.startswith("debug:c:"), (node.op, kernel.name)
    return f


def layouts(shape, dtype, low=-3.0, high=3.0):
    """The same logical values laid out contiguously, transposed, strided, reversed."""
    base = RNG.uniform(low, high, size=(2 * shape[0], 2 * shape[1])).astype(dtype)
    contiguous = np.ascontiguousarray(base[: shape[0], : shape[1]])
    yield "contiguous", contiguous
    yield "fortran", np.asfortranarray(contiguous)
    yield "strided", base[::2, ::2][: shape[0], : shape[1]]
    yield "negative", contiguous[::-1, ::-1]


def check(f, args, expected_fn, dtype=None):
    got = f(*args)
    expected = expected_fn(*args)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7, equal_nan=True)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype)
    return got


UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.1),
    "log1p": lambda x: np.log1p(np.abs(x)),
    "expm1": np.expm1,
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "sqr": np.square,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "softplus": lambda x: np.logaddexp(0, x),
    "floor": np.floor,
    "ceil": np.ceil,
    "sign": np.sign,
}


def symbolic_unary(name, x):
    if name == "log":
        return T.log(abs(x) + 0.1)
    if name == "log1p":
        return T.log1p(abs(x))
    if name == "sqrt":
        return T.sqrt(abs(x))
    if name == "neg":
        return -x
    if name == "abs":
        return abs(x)
    return getattr(T, name)(x)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float_ops_all_layouts(name):
    x = T.matrix("x")
    f = compile_c([x], symbolic_unary(name, x))
    for _, value in layouts((5, 7), "float64", -20, 20):
        check(f, [value], UNARY[name], "float64")
    check(f, [np.zeros((0, 3))], UNARY[name], "float64")  # empty


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint32"])
def test_unary_other_dtypes(dtype):
    x = T.tensor(dtype, shape=(None, None), name="x")
    f = compile_c([x], [T.exp(x), abs(x), T.sign(x)])
    for _, value in layouts((4, 6), dtype, 0 if dtype == "uint32" else -5, 5):
        got = f(value)
        for g, e in zip(got, [np.exp(value), np.abs(value), np.sign(value)]):
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-5)


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "true_div": (lambda a, b: a / b, np.true_divide),
    "int_div": (lambda a, b: a // b, np.floor_divide),
    "mod": (lambda a, b: a % b, np.mod),
    "pow": (lambda a, b: abs(a) ** b, lambda a, b: np.abs(a) ** b),
    "maximum": (T.maximum, np.maximum),
    "minimum": (T.minimum, np.minimum),
    "lt": (T.lt, np.less),
    "le": (T.le, np.less_equal),
    "gt": (T.gt, np.greater),
    "ge": (T.ge, np.greater_equal),
    "eq": (T.eq, np.equal),
    "neq": (T.neq, np.not_equal),
}


@pytest.mark.filterwarnings("ignore:.*encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float_ops_broadcast_row(name):
    sym, ref = BINARY[name]
    a, r = T.matrix("a"), T.row("r")
    f = compile_c([a, r], sym(a, r))
    row = RNG.uniform(-3, 3, size=(1, 7))
    row[0, 0] = 0.0  # a zero divisor, NaN from 0/0 compare
    for _, value in layouts((5, 7), "float64"):
        value = value.copy() if name in ("lt", "eq") else value
        value[0, 0] = 0.0 if value.flags.writeable else value[0, 0]
        check(f, [value, row], ref)
        check(f, [value, row[:, ::-1]], ref)
    check(f, [np.zeros((0, 7)), row], ref)


def test_float_floor_division_and_modulo_follow_numpy():
    a, b = T.vector("a"), T.vector("b")
    f = compile_c([a, b], [a // b, a % b])
    x = np.array([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1.0, np.inf, np.nan, 5.0, 1e300])
    y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 0.0, 2.0, 1.0, np.inf, 1e-300])
    with np.errstate(all="ignore"):
        got = f(x, y)
        expected = [np.floor_divide(x, y), np.mod(x, y)]
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8"])
def test_integer_ops_python_semantics(dtype):
    a = T.tensor(dtype, shape=(None,), name="a")
    b = T.tensor(dtype, shape=(None,), name="b")
    outs = [a // b, a % b, a & b, a | b, a ^ b, ~a, -a, abs(a), a * b + a]
    f = compile_c([a, b], outs)
    info = np.iinfo(dtype)
    x = np.array([7, -7, 7, -7, 0, 5, info.min, info.min, info.max, 3], dtype=np.int64)
    y = np.array([2, 2, -2, -2, 3, 0, -1, 1, -1, 0], dtype=np.int64)
    x, y = x.astype(dtype), y.astype(dtype)  # unsigned: negatives wrap, as NumPy's astype
    with np.errstate(all="ignore"):
        got = f(x, y)
        expected = [x // y, x % y, x & y, x | y, x ^ y, ~x, -x, np.abs(x), x * y + x]
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_bool_ops_and_switch():
    p, q = T.tensor("bool", shape=(None, None)), T.tensor("bool", shape=(None, None))
    x = T.matrix("x")
    f = compile_c([p, q, x], [p & q, p | q, p ^ q, ~p, T.switch(p, x, -x), p + q])
    bp, bq = RNG.random((4, 5)) > 0.5, RNG.random((4, 5)) > 0.5
    for _, value in layouts((4, 5), "float64"):
        got = f(bp, bq[::-1], value)
        expected = [bp & bq[::-1], bp | bq[::-1], bp ^ bq[::-1], ~bp]
        expected += [np.where(bp, value, -value), bp + bq[::-1]]
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)


def test_mixed_dtypes_and_casts():
    i8 = T.tensor("int8", shape=(None, None))
    f32 = T.tensor("float32", shape=(None, None))
    u16 = T.tensor("uint16", shape=(None, None))
    outs = [i8 + f32, i8 / u16, T.cast(f32 * 10, "int32"), T.cast(i8, "bool"), i8 < u16]
    f = compile_c([i8, f32, u16], outs)
    a = RNG.integers(-100, 100, size=(3, 4)).astype("int8")
    b = RNG.uniform(-5, 5, size=(3, 4)).astype("float32")
    c = RNG.integers(1, 1000, size=(3, 4)).astype("uint16")
    got = f(a, b.T.copy().T, c[::-1])
    expected = [a + b, a / c[::-1], (b * np.float32(10)).astype("int32"), a.astype(bool)]
    expected.append(a < c[::-1])
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_composites_paper_formulae():
    a, b = T.vector("a"), T.vector("b")
    formulae = [a**2 + b**2 + 2 * a * b, 2 * a + 3 * b, a + 1, 2 * a + b**10]
    f = compile_c([a, b], formulae)
    composites = [n for n in f.kernels if "Composite" in str(n.op)]
    assert len(composites) == 3  # a + 1 is a single add
    for dtype in ["float64"]:
        x, y = RNG.uniform(-1, 1, 1000).astype(dtype), RNG.uniform(-1, 1, 1000).astype(dtype)
        got = f(x, y)
        expected = [x**2 + y**2 + 2 * x * y, 2 * x + 3 * y, x + 1, 2 * x + y**10]
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-15)
        got = f(x[::-2], y[1::2])  # the strided path of the same kernels
        np.testing.assert_allclose(got[3], 2 * x[::-2] + y[1::2] ** 10, rtol=1e-12)


def test_composite_float32_broadcast_3d_and_0d():
    x = T.tensor("float32", shape=(None, 1, None), name="x")
    y = T.tensor("float32", shape=(1, None, None), name="y")
    s = T.tensor("float32", shape=(), name="s")
    z = T.tanh(x * y + s) - T.sigmoid(y) / (1 + T.exp(-x))
    f = compile_c([x, y, s], z)
    xv = RNG.uniform(-2, 2, (3, 1, 4)).astype("float32")
    yv = RNG.uniform(-2, 2, (1, 5, 4)).astype("float32")
    sv = np.array(0.5, dtype="float32")

    def ref(xv, yv, sv):
        return np.tanh(xv * yv + sv) - 1 / (1 + np.exp(-yv)) / (1 + np.exp(-xv))

    check(f, [xv, yv, sv], ref, "float32")
    check(f, [xv[::-1, :, ::2], yv[:, ::-1, ::2], sv], ref, "float32")
    check(f, [xv[:0], yv, sv], ref, "float32")
    # 0-d everywhere
    p, q = T.scalar("p"), T.scalar("q")
    g = compile_c([p, q], T.exp(p) * q + p // q)
    check(g, [np.array(1.5), np.array(-0.25)], lambda p, q: np.exp(p) * q + p // q)


def test_runtime_broadcast_error_is_the_reference_one():
    a, b = T.matrix("a"), T.matrix("b")
    f = compile_c([a, b], a + b)
    with pytest.raises(ValueError, match="broadcast"):
        f(np.ones((3, 4)), np.ones((1, 4)))


def test_inplace_update_and_output_buffer_reuse():
    w = tensorjit.shared(np.arange(12.0).reshape(3, 4), name="w")
    g = T.matrix("g")
    step = compile_c([g], [], updates={w: w - 0.5 * g})
    nodes = [n for n in step.kernels if isinstance(n.op, Elemwise)]
    assert [n.op.inplace for n in nodes] == [0] or any(n.op.inplace is not None for n in nodes)
    gv = np.ones((3, 4))
    step(gv)
    step(gv[::-1])
    np.testing.assert_allclose(w.get_value(), np.arange(12.0).reshape(3, 4) - 1.0)
    # A hand-built inplace node on a non-contiguous buffer, fed a partly overlapping view.
    x = T.vector("x")
    from tensorjit.tensor.scalar import SCALAR_OPS

    y = Elemwise(SCALAR_OPS["add"], inplace=0)(x, x[::-1])
    h = compile_c([tensorjit.In(x, mutable=True)], y, accept_inplace=True)
    v = np.arange(6.0)
    np.testing.assert_allclose(h(v[::-1].copy()), np.arange(6.0)[::-1] + np.arange(6.0))


@pytest.mark.parametrize(
    "kind,axis,dtype",
    [
        ("sum", (0,), "float64"),
        ("sum", (1, 2), "float32"),
        ("sum", None, "int8"),
        ("prod", (1,), "float64"),
        ("max", (0, 2), "float64"),
        ("min", (2,), "int32"),
    ],
)
def test_reductions(kind, axis, dtype):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    f = compile_c([x], getattr(T, kind)(x, axis=axis))
    base = RNG.uniform(-2, 2, size=(6, 8, 10))
    if dtype.startswith("int"):
        base = base * 20
    base = base.astype(dtype)
    ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[kind]
    for value in [base[:3, :4, :5], base[::-2, 1::2, ::-3], base[:3, :4, :5].transpose(2, 0, 1)]:
        got = f(value)
        expected = ref(value, axis=axis)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    empty = np.zeros((0, 4, 5), dtype)
    if kind in ("sum", "prod") or 0 not in (axis or (0, 1, 2)):
        np.testing.assert_allclose(f(empty), ref(empty, axis=axis))
    else:
        with pytest.raises(ValueError):
            f(empty)


def test_nan_propagation_in_max_and_maximum():
    x = T.vector("x")
    f = compile_c([x], [T.max(x), T.maximum(x, 0.0), T.minimum(x, 0.0)])
    v = np.array([1.0, np.nan, 3.0])
    got = f(v)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1], np.maximum(v, 0.0))
    np.testing.assert_array_equal(got[2], np.minimum(v, 0.0))


def test_unsupported_ops_fall_back_to_python():
    x = T.vector("x", dtype="complex128")  # no complex C types: Python kernels
    f = tensorjit.function([x], T.exp(x), mode=DEBUG_C)
    (kernel,) = f.kernels.values()
    assert kernel.name == "debug:perform"
    np.testing.assert_allclose(f(np.array([1j * np.pi])), [-1.0 + 0j], atol=1e-15)
    y = T.tensor("float16", shape=(None,))
    g = tensorjit.function([y], y + y, mode=DEBUG_C)
    assert [k.name for k in g.kernels.values()] == ["debug:perform"]


def test_c_is_the_default_backend_and_python_can_be_chosen():
    x = T.vector("x")
    f = tensorjit.function([x], T.exp(x))
    assert [k.name for k in f.kernels.values()] == ["c:elemwise"]
    python_only = tensorjit.FAST_RUN.with_backends("python")
    g = tensorjit.function([x], T.exp(x), mode=python_only)
    assert [k.name for k in g.kernels.values()] == ["perform"]
    np.testing.assert_allclose(g(np.array([0.0, 1.0])), [1.0, np.e])
