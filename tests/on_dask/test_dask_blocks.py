"""map_blocks on a LocalCluster equals the single-process function: block-wise outputs,
reductions combined across chunks, chunks inferred from the graph."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T

da = pytest.importorskip("dask.array", reason="the [dask] extra is not installed")
from tensorjit.dask import BlockwiseError, loaded_count, map_blocks, ship  # noqa: E402


@pytest.fixture
def mlp_forward():
    rng = np.random.default_rng(0)
    W = tensorjit.shared(rng.normal(size=(6, 3)), name="W")
    x, b = T.matrix("x"), T.vector("b")
    hidden = T.tanh(T.dot(x, W) + b)
    cost = T.mean(T.log(1 + T.exp(hidden)))
    outputs = [hidden, cost, hidden.sum(axis=0), T.max(hidden, axis=1), W.sum(), -hidden.min()]
    return tensorjit.function([x, b], outputs), rng.normal(size=(101, 6))


def test_outputs_equal_the_single_process_function(client, mlp_forward):
    f, X = mlp_forward
    bias = np.arange(3.0)
    results = map_blocks(f, da.from_array(X, chunks=(17, 6)), bias)
    expected = f(X, bias)
    computed = client.compute(results, sync=True)
    for got, want, lazy in zip(computed, expected, results):
        assert lazy.shape == want.shape and lazy.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    hidden, _, column_sums, row_max, _, _ = results
    assert hidden.chunks == ((17,) * 5 + (16,), (3,))  # rows kept, columns from W
    assert row_max.chunks == ((17,) * 5 + (16,),)  # a reduction over axis 1 keeps row chunks
    assert column_sums.chunks == ((3,),)


def test_chunks_along_both_axes_and_mean_over_columns(client):
    x = T.matrix("x")
    f = tensorjit.function([x], [T.exp(x) * 2, T.sum(x**2), T.mean(x, axis=0), x.mean()])
    X = np.random.default_rng(1).normal(size=(50, 9))
    results = map_blocks(f, da.from_array(X, chunks=(20, 4)))
    assert results[0].chunks == ((20, 20, 10), (4, 4, 1))
    for got, want in zip(client.compute(results, sync=True), f(X)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_broadcast_inputs_and_int_reductions(client):
    x, v = T.matrix("x", dtype="int32"), T.vector("v", dtype="int32")
    f = tensorjit.function([x, v], [x * v, T.prod(x + v, axis=0), T.all(x > -100)])
    X = np.arange(24, dtype="int32").reshape(8, 3) % 5
    V = np.array([1, 2, 3], dtype="int32")
    results = map_blocks(
        f, da.from_array(X, chunks=(3, 2)), da.from_array(V, chunks=2), align="right"
    )
    for got, want in zip(client.compute(results, sync=True), f(X, V)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_dict_outputs_and_single_output(client):
    x = T.vector("x")
    X = np.linspace(0.0, 1.0, 30)
    single = map_blocks(tensorjit.function([x], T.sin(x)), da.from_array(X, chunks=7))
    np.testing.assert_allclose(single.compute(), np.sin(X))
    keyed = map_blocks(
        tensorjit.function([x], {"s": x.sum(), "c": T.cos(x)}), da.from_array(X, chunks=7)
    )  # noqa: E501
    assert sorted(keyed) == ["c", "s"]
    np.testing.assert_allclose(keyed["s"].compute(), X.sum())


def _refused(graph_of, chunks=(3, 4), match="map_blocks"):
    x = T.matrix("x")
    f = tensorjit.function([x], graph_of(x))
    with pytest.raises(BlockwiseError, match=match):
        map_blocks(f, da.ones((10, 4), chunks=chunks))


@pytest.mark.parametrize(
    "graph_of",
    [
        lambda x: x - x.mean(),  # a reduction across chunks inside the graph
        lambda x: x - x.mean(axis=0),
        lambda x: x / x.sum(),
        lambda x: T.var(x),  # mean((x - mean(x))**2): the inner mean is not at the end
        lambda x: T.std(x, axis=0),
        lambda x: T.log(T.sum(T.exp(x - x.max()))),
        lambda x: x / x.shape[0],  # a chunk's length, not the array's
        lambda x: x + T.arange(x.shape[0]).dimshuffle(0, "x"),
        lambda x: T.cumsum(x, axis=0),
        lambda x: x[::-1],
        lambda x: x[1:],
        lambda x: x[0],
        lambda x: T.argmax(x, axis=0),
        lambda x: T.dot(x.T, x),
        lambda x: x[x[:, 0] > 0],  # rows kept by their values
    ],
)
def test_graphs_that_mix_chunks_are_refused_not_wrong(client, graph_of):
    _refused(graph_of)


def test_transposes_and_misaligned_operands_are_refused(client):
    _refused(lambda x: x.T, chunks=(5, 2), match="another order")
    _refused(
        lambda x: x.max(axis=1, keepdims=True) - x, chunks=(5, 2), match="reduces across the chunks"
    )
    x, v = T.matrix("x"), T.vector("v")
    f = tensorjit.function([x, v], x * v)  # v broadcasts along x's columns
    square, vector = da.ones((4, 4), chunks=2), da.arange(4.0, chunks=2)
    with pytest.raises(BlockwiseError, match="different grid axes.*align='right'"):
        map_blocks(f, square, vector)  # align="rows" would pair v with the rows
    got = map_blocks(f, square, vector, align="right").compute()
    np.testing.assert_array_equal(got, np.ones((4, 4)) * np.arange(4.0))
    with pytest.raises(BlockwiseError, match="do not line up"):
        map_blocks(f, da.ones((6, 4), chunks=2), vector)


def test_wrong_ranks_dtypes_updates_and_arity_are_refused(client):
    x = T.matrix("x")
    X = da.ones((10, 4), chunks=2)
    with pytest.raises(BlockwiseError, match="works along an axis cut into chunks"):
        map_blocks(tensorjit.function([x], T.argmax(x, axis=1)), X)
    v = T.vector("v")
    with pytest.raises(BlockwiseError, match="no axis along grid axis 1, which is cut"):
        map_blocks(tensorjit.function([x, v], [x, v * 2]), X, da.ones(10, chunks=2))
    with pytest.raises(TypeError, match="float64 .* expects float32"):
        x32 = T.matrix("x32", dtype="float32")
        map_blocks(tensorjit.function([x32], x32 * 2), X)
    with pytest.raises(BlockwiseError, match="has updates"):
        s = tensorjit.shared(0.0, name="s")
        map_blocks(tensorjit.function([x], x, updates=[(s, s + 1)]), X)
    with pytest.raises(TypeError, match="takes 1 inputs"):
        map_blocks(tensorjit.function([x], x), X, X)


def test_block_local_reductions_softmax_and_dot_along_single_chunks(client):
    x = T.matrix("x")
    W = tensorjit.shared(np.arange(12.0).reshape(4, 3) / 10, name="W")
    rows = x / x.sum(axis=1, keepdims=True)
    f = tensorjit.function([x], [rows, T.nnet.softmax(x), T.dot(x, W), T.var(x, axis=1)])
    X = np.random.default_rng(2).normal(size=(11, 4)) + 3
    results = map_blocks(f, da.from_array(X, chunks=(4, 4)))
    for got, want in zip(client.compute(results, sync=True), f(X)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_shared_values_are_read_when_map_blocks_is_called(client):
    W = tensorjit.shared(1.0, name="W")
    v = T.vector("v")
    f = tensorjit.function([v], v * W)
    first = map_blocks(f, da.ones(3, chunks=1))
    W.set_value(7.0)
    second = map_blocks(f, da.ones(3, chunks=1))
    import dask

    with dask.config.set(scheduler="sync"):  # in this process: the same snapshot
        np.testing.assert_array_equal(first.compute(), np.ones(3))
    np.testing.assert_array_equal(client.compute(first, sync=True), np.ones(3))
    np.testing.assert_array_equal(client.compute(second, sync=True), np.full(3, 7.0))
    assert first.name != second.name  # no stale result under the same keys


def test_shipped_function_compiles_once_per_worker(client):
    x = T.vector("x")
    f = tensorjit.function([x], T.tanh(x) * 3 + 0.25, name="shipped_once")
    shipped = ship(f)
    assert pickle.loads(pickle.dumps(shipped)).function is not None
    before = client.run(loaded_count)
    futures = [client.submit(shipped, np.full(4, float(i)), pure=False) for i in range(12)]
    for i, future in enumerate(futures):
        np.testing.assert_allclose(future.result(), np.tanh(np.full(4, float(i))) * 3 + 0.25)
    after = client.run(loaded_count)
    assert sum(after[w] - before.get(w, 0) for w in after) <= len(after)


def test_row_wise_outputs_and_labels_aligned_with_rows(client):
    """Predictions per row and an accuracy (a mean over rows) from rows in chunks."""
    x, y = T.matrix("x"), T.lvector("y")
    label = T.argmax(x, axis=1)
    f = tensorjit.function([x, y], [label, T.mean(T.eq(label, y)), x[:, 0] * 2])
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(45, 5)), rng.integers(0, 5, size=45)
    labels, accuracy, first = map_blocks(
        f, da.from_array(X, chunks=(10, 5)), da.from_array(Y, chunks=10)
    )  # noqa: E501
    assert labels.chunks == ((10, 10, 10, 10, 5),) and first.chunks == labels.chunks
    for got, want in zip(client.compute([labels, accuracy, first], sync=True), f(X, Y)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="align must be"):
        map_blocks(f, da.from_array(X), da.from_array(Y), align="left")


def test_the_tutorials_negative_log_likelihood_and_errors_over_chunks(client):
    """-mean(log(p)[arange(y.shape[0]), y]): arange over a block's rows is right there."""
    rng = np.random.default_rng(5)
    x, y = T.matrix("x"), T.lvector("y")
    W = tensorjit.shared(rng.normal(size=(5, 3)), name="W")
    p = T.nnet.softmax(T.dot(x, W))
    picked = T.log(p)[T.arange(y.shape[0]), y]
    f = tensorjit.function([x, y], [-T.mean(picked), T.mean(T.neq(T.argmax(p, axis=1), y)), picked])  # noqa: E501
    X, Y = rng.normal(size=(23, 5)), rng.integers(0, 3, size=23)
    results = map_blocks(f, da.from_array(X, chunks=(7, 5)), da.from_array(Y, chunks=7))
    for got, want in zip(client.compute(results, sync=True), f(X, Y)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert results[2].chunks == ((7, 7, 7, 2),)
    g = tensorjit.function([x, y], T.log(p)[T.arange(y.shape[0]), y] + T.arange(y.shape[0]))
    with pytest.raises(BlockwiseError, match="other than as the row index"):
        map_blocks(g, da.from_array(X, chunks=(7, 5)), da.from_array(Y, chunks=7))
