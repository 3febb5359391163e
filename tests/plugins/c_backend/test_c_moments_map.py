"""MomentsMap (tensor/moments_map.py, rewriting/moments_map.py, generators/moments_map.py):
a layer norm or a row standardisation becomes one node computing each row's Moments and
its outputs together. Its values are those of the two kernels written out, bit for bit,
in every layout, both dtypes, one and two threads, streamed or not, in programs and per
node; where the statistics are read elsewhere the graph keeps two kernels."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, DEBUG_C, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor.moments import Moments
from tensorjit.tensor.moments_map import MomentsMap

pytestmark = NEEDS_C
REWRITE = "local_moments_map"
EPS = 1e-5


def layer_norm(x, g, b):
    mean = T.mean(x, axis=-1, keepdims=True)
    d = x - mean
    return d / T.sqrt(T.mean(d * d, axis=-1, keepdims=True) + EPS) * g + b


def reference(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return np.zeros(x.shape)
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + EPS) * g + b


def functions(inputs: list, output, mode=C_ONLY, **flags):
    """(with the rewrite, without it): the second keeps Moments and the map apart."""
    with tensorjit.config.change_flags(**flags):
        fused = compiled_with("moments_map", MomentsMap, inputs, output, mode=mode)
    with tensorjit.config.change_flags(excluded_rewrites=REWRITE, **flags):
        apart = tensorjit.function(inputs, output, mode=mode)
    assert not [n for n in apart.kernels if isinstance(n.op, MomentsMap)]
    return fused, apart


def data(shape: tuple, dtype: str, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    g = rng.standard_normal(shape[-1]).astype(dtype)
    b = rng.standard_normal(shape[-1]).astype(dtype)
    return x, g, b


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "shape", [(257, 1000), (3, 5, 64), (40, 1), (6, 19), (0, 7), (4, 0, 3), (5, 0), (2, 3, 4, 9)]
)
def test_layer_norm_is_one_node_with_the_values_of_two_kernels(dtype, shape):
    x = T.tensor(dtype=dtype, shape=(None,) * len(shape), name="x")
    g, b = T.vector("g", dtype=dtype), T.vector("b", dtype=dtype)
    fused, apart = functions([x, g, b], layer_norm(x, g, b))
    value = data(shape, dtype, 1)
    got = fused(*value)
    np.testing.assert_array_equal(got, apart(*value))
    rtol = 1e-4 if dtype == "float32" else 1e-11
    np.testing.assert_allclose(got, reference(*value), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_layout_streamed_or_not_and_two_threads(dtype):
    """Transposed and sliced x (rows of stride > 1: the strided loop), a strided g,
    rows whose length is no multiple of a line and an output whose rows start anywhere
    in a line (streamed with stream_min_bytes=1: the head, lines and tail)."""
    x = T.matrix("x", dtype=dtype)
    g, b = T.vector("g", dtype=dtype), T.vector("b", dtype=dtype)
    base, g_value, b_value = data((90, 1003), dtype, 2)
    layouts = [base, base[:, 3:], base.T.copy().T, base[::2, ::3]]
    results = {}
    for threads in (1, 2):
        for stream in (1, 0):
            fused, apart = functions(
                [x, g, b], layer_norm(x, g, b), threads=threads, stream_min_bytes=stream
            )
            for k, value in enumerate(layouts):
                n = value.shape[1]
                args = (value, np.repeat(g_value, 2)[: 2 * n : 2], b_value[:n])
                got = fused(*args)
                np.testing.assert_array_equal(got, apart(*args))
                np.testing.assert_array_equal(got, results.setdefault(k, got))


def test_standardised_rows_with_a_column_weight():
    """No g or b: the map reads x, its statistics and a column of weights (a leaf the
    rows read one value of)."""
    x = T.matrix("x", dtype="float64")
    w = T.col("w", dtype="float64")
    y = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True) * w
    fused, apart = functions([x, w], y)
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((33, 48)), rng.standard_normal((33, 1)))
    np.testing.assert_array_equal(fused(*args), apart(*args))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_static_row_length_gives_a_constant_factor(dtype):
    """x of static row length 48: the mean is the total times 1/48 (canonicalize's form),
    Moments takes that factor (mean_by="mul"), a constant the kernel inlines."""
    x = T.tensor(dtype=dtype, shape=(None, 48), name="x")
    w = T.col("w", dtype=dtype)
    y = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True) * w
    fused, apart = functions([x, w], y)
    (node,) = [n for n in fused.kernels if isinstance(n.op, MomentsMap)]
    assert node.op.mean_by == "mul"
    debug = compiled_with("moments_map", MomentsMap, [x, w], y, mode=DEBUG_C)
    rng = np.random.default_rng(10)
    args = (
        rng.standard_normal((33, 48)).astype(dtype) + 3,
        rng.standard_normal((33, 1)).astype(dtype),
    )
    got = fused(*args)
    np.testing.assert_array_equal(got, apart(*args))
    np.testing.assert_array_equal(got, debug(*args))


def test_per_node_kernel_and_debug_mode_agree():
    """Outside whole-graph programs the node's own kernel runs it; DebugMode compares
    that with Op.perform (NumPy's Moments and the map) on each call."""
    x = T.matrix("x", dtype="float32")
    g, b = T.vector("g", dtype="float32"), T.vector("b", dtype="float32")
    value = data((64, 200), "float32", 4)
    debug = compiled_with("moments_map", MomentsMap, [x, g, b], layer_norm(x, g, b), mode=DEBUG_C)
    fused, apart = functions([x, g, b], layer_norm(x, g, b), whole_graph=False)
    got = fused(*value)
    np.testing.assert_array_equal(got, apart(*value))
    np.testing.assert_allclose(debug(*value), got, rtol=1e-5, atol=1e-5)


def test_maps_to_dtypes_the_host_does_not_render_keep_two_kernels():
    """A complex or float16 result: the node would run Op.perform (NumPy's float32
    statistics), the graph apart keeps Moments in C."""
    x = T.matrix("x", dtype="float32")
    for dtype in ("complex64", "float16"):
        y = T.cast(layer_norm(x, 1.0, 0.0), dtype)
        f = tensorjit.function([x], y, mode=C_ONLY)
        assert not [n for n in f.kernels if isinstance(n.op, MomentsMap)]
        assert [n for n in f.kernels if isinstance(n.op, Moments)]


def test_a_constant_x_of_one_element_runs_op_perform():
    from tensorjit.tensor.composite import Composite
    from tensorjit.tensor.scalar import scalar_op_named

    total_plus_x = Composite(((scalar_op_named("add"), (("in", 0), ("in", 2))),), 3, "float32")
    x = T.constant(np.full((1, 1), 2.0, "float32"))
    one = T.constant(np.ones((1, 1), "float32"))
    f = tensorjit.function([], MomentsMap(total_plus_x)(x, one, x), mode=C_ONLY)
    np.testing.assert_array_equal(f(), [[4.0]])


def test_statistics_read_elsewhere_keep_two_kernels():
    """The mean also an output, a gradient reading the statistics, or the statistics
    of columns: no MomentsMap (it would compute the Moments twice, or not row-wise)."""
    x = T.matrix("x", dtype="float32")
    g, b = T.vector("g", dtype="float32"), T.vector("b", dtype="float32")
    y = layer_norm(x, g, b)
    mean = T.mean(x, axis=1)
    cost = T.sum(y**2)
    columns = (x - x.mean(axis=0, keepdims=True)) / x.std(axis=0, keepdims=True)
    for inputs, outputs in [
        ([x, g, b], [y, mean]),
        ([x, g, b], [cost, *tensorjit.grad(cost, [x, g])]),
        ([x], columns),
    ]:
        f = tensorjit.function(inputs, outputs, mode=C_ONLY)
        assert not [n for n in f.kernels if isinstance(n.op, MomentsMap)]
        assert [n for n in f.kernels if isinstance(n.op, Moments)]


def test_an_operand_of_the_wrong_length_is_named():
    x = T.matrix("x", dtype="float32")
    g, b = T.vector("g", dtype="float32"), T.vector("b", dtype="float32")
    y = T.matrix("y", dtype="float32")
    x_value, g_value, b_value = data((4, 10), "float32", 5)
    for whole_graph in (True, False):
        with tensorjit.config.change_flags(whole_graph=whole_graph):
            f = tensorjit.function([x, g, b], layer_norm(x, g, b), mode=C_ONLY)
            h = tensorjit.function([x, y], layer_norm(x, 1.0, y), mode=C_ONLY)
        for function in (f, h):
            assert [n for n in function.kernels if isinstance(n.op, MomentsMap)]
        with pytest.raises(ValueError, match="'g'.*length 9 in dimension 0.*length 10"):
            f(x_value, g_value[:9], b_value)
        # a row of y would broadcast over x's rows, which y's type does not declare
        with pytest.raises(ValueError, match="'y'.*has length 1 in dimension 0"):
            h(x_value, x_value[:1])


def test_a_map_reading_only_x_and_a_statistic():
    """The map's one operand is x itself (and the squares, not the mean)."""
    x = T.matrix("x", dtype="float32")
    y = x * T.sum((x - x.mean(axis=1, keepdims=True)) ** 2, axis=1, keepdims=True)
    fused, apart = functions([x], y)
    value = data((30, 70), "float32", 6)[0]
    np.testing.assert_array_equal(fused(value), apart(value))


def test_a_static_operand_length_with_a_dynamic_x():
    x = T.matrix("x", dtype="float32")
    g = T.tensor(dtype="float32", shape=(12,), name="g")
    fused, apart = functions([x, g], layer_norm(x, g, 0.5))
    x_value, g_value, _ = data((5, 12), "float32", 7)
    np.testing.assert_array_equal(fused(x_value, g_value), apart(x_value, g_value))


def test_debug_mode_accepts_the_kernels_rows_far_from_zero():
    """Rows of 1e5 + N(0, 1): the kernel's statistics (float64 sums) and perform's
    (NumPy's float32) differ by more than float32's tolerance, within Moments' bounds
    carried through the map."""
    x = T.matrix("x", dtype="float32")
    g, b = T.vector("g", dtype="float32"), T.vector("b", dtype="float32")
    f = compiled_with("moments_map", MomentsMap, [x, g, b], layer_norm(x, g, b), mode=DEBUG_C)
    _, apart = functions([x, g, b], layer_norm(x, g, b))
    x_value, g_value, b_value = data((3, 100000), "float32", 8)
    value = ((x_value + 1e5).astype("float32"), g_value, b_value)
    np.testing.assert_array_equal(f(*value), apart(*value))


def test_row_blocks_run_a_moments_map_with_another_step_over_the_rows():
    """A program's row-blocked group holding the MomentsMap step (an elementwise step
    without flat entries) and an exponential over the same rows."""
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    x = T.matrix("x", dtype="float64")
    g, b = T.vector("g", dtype="float64"), T.vector("b", dtype="float64")
    outputs = [layer_norm(x, g, b), T.exp(x) * 2.0]
    with tensorjit.config.change_flags(row_block_bytes=4096, stream_min_bytes=1):
        blocked = compiled_with("moments_map", MomentsMap, [x, g, b], outputs, mode=C_ONLY)
    with tensorjit.config.change_flags(row_block_bytes=0):
        whole = compiled_with("moments_map", MomentsMap, [x, g, b], outputs, mode=C_ONLY)
    value = data((300, 64), "float64", 9)
    before = _interpreter().row_block_info()[0]
    got = blocked(*value)
    assert _interpreter().row_block_info()[0] > before
    np.testing.assert_array_equal(got, whole(*value))


def test_bad_nodes_are_refused_with_the_variable():
    from tensorjit.tensor.composite import Composite
    from tensorjit.tensor.scalar import scalar_op_named

    total_plus_x = Composite(((scalar_op_named("add"), (("in", 0), ("in", 2))),), 3, "float32")
    one = T.constant(np.ones((1, 1), "float32"))
    with pytest.raises(TypeError, match="two or more axes.*'v'"):
        MomentsMap(total_plus_x)(T.vector("v", dtype="float32"), one, T.vector("v"))
    with pytest.raises(TypeError, match="takes 3 inputs"):
        MomentsMap(total_plus_x)(T.matrix("m", dtype="float32"), one)
    with pytest.raises(TypeError, match="divisor must broadcast over every axis"):
        MomentsMap(total_plus_x)(T.matrix("m", dtype="float32"), T.constant(1.0), T.matrix())
    with pytest.raises(TypeError, match="expected a float32 divisor"):
        MomentsMap(total_plus_x)(T.matrix("m", dtype="float32"), T.constant(np.ones((1, 1))))
