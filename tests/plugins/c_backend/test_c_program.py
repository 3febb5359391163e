"""Whole-graph C programs: one C call per function call when every node has a C kernel.

Each program is compared with the same function run node by node (config
``whole_graph=False``), on contiguous, Fortran, strided, reversed, broadcast, 0-d and
empty inputs, in place, with shared variables and updates, and with the arguments the
program leaves to the general path (lists, other dtypes, subclasses, byte-swapped).
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from helpers.layouts import matrix_layouts

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.program import ProgramVM
from tensorjit.core.hooks import get_plugin_system
from tensorjit.plugins.c_backend.build import compiler
from tensorjit.tensor import nnet

REASON = get_plugin_system().registries.backends.unavailable_reason("c")
REASON = REASON or compiler.extension_unavailable_reason()
pytestmark = pytest.mark.skipif(
    REASON is not None, reason=f"no whole-graph C programs on this machine: {REASON}"
)
RNG = np.random.default_rng(7)


def both(inputs, outputs, **kwargs):
    """(program function, per-node function) of the same graph."""
    f = tensorjit.function(inputs, outputs, **kwargs)
    with tensorjit.config.change_flags(whole_graph=False):
        g = tensorjit.function(inputs, outputs, **kwargs)
    assert f.calls.program is not None, [str(n.op) for n in f.kernels]
    assert g.calls.program is None
    return f, g


def agree(f, g, *args):
    got, want = f(*args), g(*args)
    if not isinstance(got, list):
        got, want = [got], [want]
    for a, b in zip(got, want):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True)
    return got


def layouts(shape):
    base = RNG.standard_normal((2 * shape[0], 2 * shape[1]))
    return matrix_layouts(base, shape)


@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
def test_fused_broadcast_reduce_and_dimshuffle_agree_on_every_layout(layout):
    x, r = T.matrix("x"), T.row("r")
    outputs = [
        T.exp(x) * 2 + r,  # fused, with a broadcast row
        (x**2).sum(axis=0),
        x.max(axis=1),
        (x > 0).any(),
        x.T * 3,  # a dimshuffle view feeding an elementwise node
        x.dimshuffle(0, "x", 1) + 1,
    ]
    f, g = both([x, r], outputs)
    assert isinstance(f.vm, ProgramVM)
    arg = layouts((5, 4))[layout]
    row = RNG.standard_normal((1, 4))
    agree(f, g, arg, row)


def test_zero_dimensional_and_empty_inputs():
    s, v = T.scalar("s"), T.vector("v")
    f, g = both([s, v], [s * 2 + 1, v * s, v.sum(), T.exp(s)])
    agree(f, g, np.float64(1.5), np.arange(4.0))
    agree(f, g, np.array(-2.0), np.zeros(0))


def test_max_of_nothing_is_numpys_error():
    v = T.vector("v")
    f, g = both([v], v.max())
    with pytest.raises(ValueError) as expected:
        g(np.zeros(0))
    with pytest.raises(ValueError) as got:
        f(np.zeros(0))
    assert str(got.value) == str(expected.value)


def test_shape_mismatch_gives_the_per_node_error():
    a, b = T.vector("a"), T.vector("b")
    f, g = both([a, b], a * 2 + b)
    with pytest.raises(ValueError) as expected:
        g(np.ones(3), np.ones(4))
    with pytest.raises(ValueError) as got:
        f(np.ones(3), np.ones(4))
    # The same message (the fused node of each function was created on its own line).
    assert str(got.value).split("created at")[0] == str(expected.value).split("created at")[0]
    assert "while computing" in str(got.value)


@pytest.mark.parametrize(
    "arg",
    [
        [1.0, 2.0, 3.0],  # a list: converted by the input's filter
        np.arange(3, dtype=np.int32),  # another dtype: converted
        np.arange(3.0).astype(">f8"),  # byte-swapped
        np.ma.masked_array(np.arange(3.0)),  # a subclass
        np.frombuffer(b"\0" + np.arange(3.0).tobytes(), dtype=np.float64, offset=1),
    ],
    ids=["list", "int32", "byteswapped", "subclass", "unaligned"],
)
def test_arguments_the_program_declines_take_the_general_path(arg):
    x = T.vector("x")
    f, g = both([x], x * 3 + 1)
    np.testing.assert_allclose(f(arg), g(arg))
    np.testing.assert_allclose(f(arg), np.asarray(arg, dtype=np.float64) * 3 + 1)


def test_bad_argument_error_is_the_filters():
    x = T.vector("x")
    f, _ = both([x], x + 1)
    with pytest.raises(ValueError, match="expects .*got ndarray of dtype float64 and shape"):
        f(np.ones((2, 2)))


def test_inplace_updates_of_shared_variables():
    x = T.vector("x")
    w = tensorjit.shared(np.arange(4.0), name="w")
    v = tensorjit.shared(np.ones(4), name="v")
    out = (w * x).sum()
    f = tensorjit.function([x], out, updates=[(w, w - 0.5 * x), (v, v * 2 + w)])
    assert f.calls.program is not None
    w0 = w.get_value()
    got = f(np.full(4, 2.0))
    assert got == pytest.approx((w0 * 2).sum())
    np.testing.assert_allclose(w.get_value(), w0 - 1.0)
    np.testing.assert_allclose(v.get_value(), 2 + w0)  # updates see the old values
    f(np.full(4, 2.0))
    np.testing.assert_allclose(w.get_value(), w0 - 2.0)


@pytest.mark.parametrize("set_", [False, True])
def test_in_place_increments_of_rows_are_program_steps(set_):
    # A scan gradient's pattern: rows of a fresh zero buffer incremented (or set) in
    # place, with a broadcast value, a negative step and an integer index too.
    x, y = T.matrix("x"), T.row("y")
    change = T.set_subtensor if set_ else T.inc_subtensor
    bases = [T.zeros_like(x) + k for k in (1, 2, 3)]  # fresh buffers, one per update
    outs = [
        change(bases[0][1:], y * 2),
        change(bases[1][::-2], x[::2] * 3),
        change(bases[2][0], y[0]),
    ]
    f, g = both([x, y], [o.sum(axis=0) for o in outs])
    kinds = {type(n.op).__name__ for n in f.fgraph.toposort()}
    assert "IncSubtensor" in kinds
    assert all(n.op.inplace for n in f.fgraph.toposort() if type(n.op).__name__ == "IncSubtensor")
    xv, yv = RNG.standard_normal((5, 3)), RNG.standard_normal((1, 3))
    agree(f, g, xv, yv)
    with pytest.raises(ValueError):  # a value that does not broadcast: the per-node error
        f(xv, RNG.standard_normal((1, 4)))


def test_an_in_place_increment_of_a_shared_variable_commits_only_on_success():
    w = tensorjit.shared(np.zeros((4, 3)), name="w")
    v, k = T.matrix("v"), T.lscalar("k")
    f = tensorjit.function([v, k], w.sum(), updates=[(w, T.inc_subtensor(w[k:], v))])
    assert f.calls.program is not None
    f(np.ones((2, 3)), 2)
    np.testing.assert_array_equal(w.get_value(), [[0] * 3, [0] * 3, [1] * 3, [1] * 3])
    with pytest.raises(ValueError):
        f(np.ones((5, 3)), 2)  # does not fit the two rows from 2 on
    np.testing.assert_array_equal(w.get_value(), [[0] * 3, [0] * 3, [1] * 3, [1] * 3])


@pytest.mark.parametrize("whole_graph", [True, False])
def test_an_increment_numpy_refuses_after_writing_is_added_once(whole_graph):
    # NumPy raises a float error set to raise after the add has run: the program must
    # not decline then (the per-node path would add again), but report that error.
    w = tensorjit.shared(np.array([[0.0, 1e308]]), name="w")
    v = T.matrix("v")
    with tensorjit.config.change_flags(whole_graph=whole_graph):
        f = tensorjit.function([v], w.sum(), updates=[(w, T.inc_subtensor(w[0:], v))])
    assert (f.calls.program is not None) == whole_graph
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        f(np.array([[1.0, 1e308]]))
    np.testing.assert_array_equal(w.get_value(), [[1.0, np.inf]])  # added once, as NumPy


def test_user_arrays_are_never_modified_and_outputs_are_fresh():
    x = T.vector("x")
    f, _ = both([x], [T.exp(x) + 1, x * 2])
    arg = np.arange(5.0)
    before = arg.copy()
    first = f(arg)
    second = f(arg)
    np.testing.assert_array_equal(arg, before)
    assert not any(np.shares_memory(a, b) for a in first for b in second)
    assert not any(np.shares_memory(a, arg) for a in first)


def test_no_reference_leaks():
    x = T.matrix("x")
    f, _ = both([x], [(T.exp(x) + 1).sum(axis=1), x.T * 2])
    arg = np.ones((3, 4))
    f(arg)
    before = sys.getrefcount(arg)
    outputs = [f(arg) for _ in range(50)]
    assert sys.getrefcount(arg) == before  # x.T is a temporary view: freed with the call
    for pair in outputs:
        for out in pair:  # held by the list and by `out` (and getrefcount's argument)
            assert sys.getrefcount(out) == 3 and out.base is None
    with pytest.raises(ValueError):
        f(np.ones((3, 4, 1)))
    assert sys.getrefcount(arg) == before


def test_call_trusted_runs_the_program():
    x = T.vector("x")
    f, _ = both([x], x + 1)
    (got,) = f.call_trusted([np.arange(3.0)])
    np.testing.assert_array_equal(got, [1.0, 2.0, 3.0])


def test_graphs_the_program_does_not_cover_keep_the_per_node_vm():
    # An in-place node without a program step (the inplace pass makes this sum into
    # rows picked by an index vector write into x + 1) keeps the per-node VM.
    x, v = T.matrix("x"), T.vector("v")
    rows = T.lvector("rows")
    f = tensorjit.function([x, v, rows], T.inc_subtensor((x + 1)[rows], v) * 2)
    assert f.calls.program is None and not isinstance(f.vm, ProgramVM)
    got = f(np.zeros((3, 2)), np.ones(2), np.array([2, 0, 2]))
    np.testing.assert_array_equal(got, [[4.0, 4.0], [2.0, 2.0], [6.0, 6.0]])
    debug = tensorjit.function([x], x + 1, mode="DebugMode")
    assert debug.calls.program is None


def test_large_arrays_from_two_threads():
    # Kernels on large arrays run with the GIL released.
    x = T.vector("x")
    f, _ = both([x], T.tanh(x) * 2 + 1)
    args = [RNG.standard_normal(300_000) for _ in range(4)]
    expected = [f(arg) for arg in args]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(3):
            results[i] = f(args[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, arg in enumerate(args):
        np.testing.assert_array_equal(results[i], expected[i])
        np.testing.assert_allclose(results[i], np.tanh(arg) * 2 + 1, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_blas_products_agree_on_every_layout(layout, dtype):
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    u, w = T.vector("u", dtype=dtype), T.vector("w", dtype=dtype)
    outputs = [
        T.dot(x, y),  # gemm
        T.dot(x, u),  # gemv
        T.dot(w, y),  # gemv on the transpose
        T.dot(u, u),  # dot
        T.exp(x) + 0.5 * T.dot(y, x),  # gemm updating a temporary in place
        T.exp(x) + T.outer(u, w),  # ger
    ]
    f, g = both([x, y, u, w], outputs)
    kinds = {type(n.op).__name__ for n in f.kernels}
    assert {"Dot", "Gemm", "Ger"} <= kinds, kinds
    mats = layouts((4, 4))
    a = mats[layout].astype(dtype)
    b = layouts((4, 4))[layout].astype(dtype)
    vec = RNG.standard_normal(8).astype(dtype)
    got = agree(f, g, a, b, vec[::2], vec[::-2])
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)


def test_blas_shape_mismatch_gives_the_per_node_error():
    x, u = T.matrix("x"), T.vector("u")
    f, g = both([x, u], T.dot(x, u))
    with pytest.raises(ValueError) as expected:
        g(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError) as got:
        f(np.ones((2, 3)), np.ones(4))
    assert str(got.value).split("created at")[0] == str(expected.value).split("created at")[0]


def test_basic_indexing_views():
    x, i = T.matrix("x"), T.lscalar("i")
    outputs = [x[i] * 2, x[-1, ::-2] + 1, x[1:, i] * 3, x[::2, -3:-1] + 0, x[i, i] + 1]
    f, g = both([x, i], outputs)
    arg = layouts((5, 6))["strided"]
    for index in (0, 2, -1, -5):
        agree(f, g, arg, np.int64(index))
    with pytest.raises(IndexError) as expected:
        g(arg, np.int64(7))
    with pytest.raises(IndexError) as got:
        f(arg, np.int64(7))
    assert str(got.value).split("created at")[0] == str(expected.value).split("created at")[0]


@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_row_kernels_agree_on_every_layout(layout, dtype):
    x, y = T.matrix("x", dtype=dtype), T.lvector("y")
    outputs = [
        nnet.softmax(x),  # along the last axis
        nnet.softmax(x, axis=0),  # along the first: rows of stride != itemsize
        nnet.log_softmax(x) * 2,
        T.argmax(x, axis=1),
        T.argmin(x, axis=0),
        nnet.categorical_crossentropy(nnet.softmax(x), y),  # SelectClass
    ]
    f, g = both([x, y], outputs)
    kinds = {type(n.op).__name__ for n in f.kernels}
    assert {"Softmax", "LogSoftmax", "Argmax", "SelectClass"} <= kinds, kinds
    arg = layouts((5, 4))[layout].astype(dtype)
    agree(f, g, arg, np.array([0, 3, 1, 2, 3]))


def test_cross_entropy_training_step_is_one_program():
    # The MLP's step: shape, softmax, the class selection and its gradient, BLAS updates
    # of shared weights in place (the mean's gradient, an alloc, is now broadcast by the
    # elementwise op that reads it: local_elemwise_alloc; alloc steps: test below).
    rng = np.random.default_rng(3)
    x, y = T.matrix("x"), T.lvector("y")
    w = tensorjit.shared(rng.standard_normal((6, 4)), name="w")
    b = tensorjit.shared(np.zeros(4), name="b")
    cost = nnet.categorical_crossentropy(nnet.softmax(T.dot(x, w) + b), y).mean()
    gw, gb = tensorjit.grad(cost, [w, b])
    updates = [(w, w - 0.1 * gw), (b, b - 0.1 * gb)]
    f = tensorjit.function([x, y], cost, updates=updates)
    kinds = {type(n.op).__name__ for n in f.kernels}
    assert {"Shape", "SelectClassGrad", "Gemm"} <= kinds, kinds
    assert f.calls.program is not None
    w0, b0 = w.get_value(), b.get_value()
    with tensorjit.config.change_flags(whole_graph=False):
        g = tensorjit.function([x, y], cost, updates=updates)
    xs, ys = rng.standard_normal((5, 6)), np.array([0, 1, 3, 3, 2])
    got = f(xs, ys)
    w1, b1 = w.get_value(), b.get_value()
    w.set_value(w0)
    b.set_value(b0)
    want = g(xs, ys)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(w1, w.get_value(), rtol=1e-12)
    np.testing.assert_allclose(b1, b.get_value(), rtol=1e-12)
    # An out-of-range class is the per-node kernel's IndexError, and nothing is updated.
    w.set_value(w0)
    with pytest.raises(IndexError, match="class index 4 is out of range for 4 classes"):
        f(xs, np.array([0, 1, 4, 3, 2]))
    np.testing.assert_array_equal(w.get_value(), w0)


def test_row_kernels_on_empty_and_mismatched_inputs_give_the_per_node_results():
    x, y = T.matrix("x"), T.lvector("y")
    f, g = both([x], [nnet.softmax(x), T.argmax(x, axis=1)])
    agree(f, g, np.zeros((0, 3)))
    with pytest.raises(ValueError) as expected:
        g(np.zeros((3, 0)))
    with pytest.raises(ValueError) as got:
        f(np.zeros((3, 0)))
    assert str(got.value).split("created at")[0] == str(expected.value).split("created at")[0]
    f, g = both([x, y], nnet.categorical_crossentropy(nnet.softmax(x), y))
    with pytest.raises(ValueError, match="does not match the class indices' shape"):
        f(np.ones((3, 2)), np.zeros(4, dtype=np.int64))


def test_alloc_and_shape_steps():
    v, n, m = T.vector("v"), T.lscalar("n"), T.lscalar("m")
    x = T.matrix("x")
    outputs = [T.alloc(v, n, v.shape[0]) * 2, T.alloc(np.float64(1.5), n, m) + 0, x.shape]
    f, g = both([v, n, m, x], outputs)
    kinds = {type(node.op).__name__ for node in f.kernels}
    assert {"Alloc", "Shape"} <= kinds, kinds
    got = agree(f, g, np.arange(3.0), np.int64(2), np.int64(4), np.ones((5, 7)))
    np.testing.assert_array_equal(got[2], [5, 7])
    agree(f, g, np.arange(3.0), np.int64(0), np.int64(0), np.ones((0, 2)))
    with pytest.raises(ValueError) as expected:
        g(np.arange(3.0), np.int64(-1), np.int64(4), np.ones((5, 7)))
    with pytest.raises(ValueError) as got:
        f(np.arange(3.0), np.int64(-1), np.int64(4), np.ones((5, 7)))
    assert str(got.value).split("created at")[0] == str(expected.value).split("created at")[0]


def test_large_outputs_reuse_the_memory_of_freed_ones():
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    pool = _interpreter()
    pool.release_pool()
    x = T.vector("x")
    f, g = both([x], T.exp(x) + 1)
    big = RNG.standard_normal(1 << 18)  # 2 MiB: above the pool's 128 KiB threshold
    first = f(big)
    address = first.ctypes.data
    assert first.flags.owndata and first.base is None
    assert address % 4096 == 0  # page-aligned: see output_pool.c
    del first  # NumPy hands the block to the pool's free ...
    assert pool.pool_info() == (1, big.nbytes)
    second = f(big)  # ... and the next output of that size gets it back
    assert second.ctypes.data == address and pool.pool_info() == (0, 0)
    np.testing.assert_array_equal(second, g(big))
    third = f(big)  # the second is alive: fresh memory
    assert not np.shares_memory(second, third)
    np.testing.assert_array_equal(third, second)
    small = f(np.ones(8))  # small outputs never enter the pool
    del small, second, third
    assert pool.pool_info()[0] == 2
    pool.release_pool()
    assert pool.pool_info() == (0, 0)


def test_temporaries_come_back_to_the_program_on_later_calls():
    """Temporaries dead at the end of a call stay with the program for the next call
    (program.c, tj_take): a later call allocates its outputs only, and outputs are still
    fresh arrays whatever the program reuses."""
    import tracemalloc

    x, w = T.matrix("x"), T.matrix("w")
    hidden = T.tanh(T.dot(x, w))  # two temporaries: the product, then its tanh
    f, g = both([x, w], T.dot(hidden, w.T).sum(axis=0))
    xv, wv = RNG.standard_normal((64, 256)), RNG.standard_normal((256, 256)) / 16
    temporaries = 2 * 64 * 256 * 8
    outs = [f(xv, wv), f(xv, wv)]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        outs.append(f(xv, wv))
        extra = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    # without reuse the products' temporaries (three of 64x256: the product, the tanh,
    # the second product) would be allocated again
    assert extra < temporaries, extra
    for a in outs:
        np.testing.assert_allclose(a, g(xv, wv), rtol=1e-12)
    assert not any(np.shares_memory(a, b) for a in outs for b in outs if a is not b)
    # other shapes: the kept arrays do not fit, fresh ones are made
    agree(f, g, xv[:5], wv)
    agree(f, g, xv, wv)


def test_temporaries_reused_by_two_threads_stay_correct():
    x = T.vector("x")
    f, g = both([x], (T.exp(T.dot(x, T.ones((x.shape[0], x.shape[0])))) * 2).sum())
    values = [RNG.standard_normal(n) / 50 for n in (300, 301, 300, 299)]
    results = {}

    def work(k):
        results[k] = [float(f(values[(k + i) % 4])) for i in range(40)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        want = [float(g(values[(k + i) % 4])) for i in range(40)]
        np.testing.assert_allclose(results[k], want, rtol=1e-12)


def test_pool_keeps_the_latest_freed_blocks_when_full():
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    pool = _interpreter()
    pool.release_pool()
    x = T.vector("x")
    f, _ = both([x], x + 1)
    sizes = [(1 << 17) + k for k in range(18)]  # 18 sizes above 128 KiB, each freed once
    for n in sizes:
        f(np.ones(n))
    assert pool.pool_info() == (16, 8 * sum(sizes[-16:]))  # the sixteen freed last
    address = None
    for _ in range(3):  # a loop's size keeps its block
        out = f(np.ones(sizes[0]))
        assert address in (None, out.ctypes.data)
        address = out.ctypes.data
        del out
    pool.release_pool()


def test_only_output_steps_stream_from_the_configured_size():
    from tensorjit.plugins.c_backend.build.caches import last_level_cache_bytes

    x, y = T.vector("x"), T.vector("y")
    t = T.exp(x) + y  # a temporary: its step never streams (it is read again soon)
    outputs = [t.sum() * x, t * 2]

    def thresholds(**flags):
        with tensorjit.config.change_flags(**flags):
            f, _ = both([x, y], outputs)
        return f.calls.program.stream_thresholds()

    default = thresholds(threads=1)
    assert sorted(set(default)) == [0, last_level_cache_bytes() // 2]
    # Two threads keep outputs cached up to the whole cache (their stores are faster).
    assert sorted(set(thresholds(threads=2))) == [0, last_level_cache_bytes()]
    assert default.count(0) >= 2  # the temporary and the sum
    assert sorted(set(thresholds(stream_min_bytes=4096))) == [0, 4096]
    assert set(thresholds(stream_min_bytes=0)) == {0}
    with pytest.raises(ValueError, match="'auto' or a number of bytes"):
        tensorjit.config.stream_min_bytes = "big"


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000, (1 << 20) + 3])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int64"])
def test_streamed_outputs_agree_with_the_per_node_kernels(n, dtype):
    # Every output streams (non-temporal stores) whatever its size. Lengths around a
    # cache line's worth of elements exercise the tail loop; the last length comes from
    # the pool (line-aligned, so it streams), the others from NumPy.
    a, b = T.tensor(dtype, shape=(None,), name="a"), T.tensor(dtype, shape=(None,), name="b")
    s = T.tensor(dtype, shape=(), name="s")
    outputs = [a * 2 + b * s, a + 1, (a * b).astype("float64"), a.sum() * b]
    with tensorjit.config.change_flags(stream_min_bytes=1):
        f, g = both([a, b, s], outputs)
    values = (RNG.standard_normal((2, n)) * 10).astype(dtype)
    agree(f, g, values[0], values[1], np.asarray(3, dtype))


@pytest.mark.parametrize("new_length", [1 << 19, 1 << 17, 3])
def test_pool_arrays_resize_like_any_array(new_length):
    # ndarray.resize reallocates through the memory handler that made the array: the
    # pool's realloc moves between mapped and heap blocks and keeps the leading values.
    x = T.vector("x")
    f, _ = both([x], x * 2)
    values = RNG.standard_normal(1 << 18)
    out = f(values)
    out.resize(new_length, refcheck=False)
    kept = min(new_length, values.size)
    np.testing.assert_array_equal(out[:kept], values[:kept] * 2)
    out[:] = 1.0  # the whole new length is writable
    assert out.sum() == new_length


def _rnn(two_taps: bool):
    from tensorjit.scan import scan

    X, W, U = T.matrix("X"), T.matrix("W"), T.matrix("U")
    h0, b = T.vector("h0"), T.vector("b")
    if two_taps:  # h[t] = tanh(x[t] W + h[t-1] U + b) + h[t-2] / 2
        hs, _ = scan(
            lambda xt, h2, h1, W, U, b: T.tanh(T.dot(xt, W) + T.dot(h1, U) + b) + 0.5 * h2,
            sequences=[X],
            outputs_info=[{"initial": T.stack([h0, h0]), "taps": [-2, -1]}],
            non_sequences=[W, U, b],
        )
        return [X, h0, W, U, b], [hs]
    hs, _ = scan(
        lambda xt, h, W, U, b: T.tanh(T.dot(xt, W) + T.dot(h, U) + b),
        sequences=[X],
        outputs_info=[h0],
        non_sequences=[W, U, b],
    )
    cost = (hs**2).sum()
    return [X, h0, W, U, b], [cost, hs, *tensorjit.grad(cost, [W, U, b, h0])]


@pytest.mark.parametrize("two_taps", [False, True], ids=["forward and grad", "two taps"])
def test_scan_loops_run_in_c_and_agree_with_the_python_loop(monkeypatch, two_taps):
    from tensorjit.core.compile.function import Function

    inputs, outputs = _rnn(two_taps)
    f = tensorjit.function(inputs, outputs)
    inner = [n.op.compiled() for n in f.kernels if type(n.op).__name__ == "Scan"]
    assert len(inner) == 1 + (not two_taps)
    assert all(fn.program_loop() is not None for fn in inner)
    values = [
        RNG.standard_normal((20, 3)),
        RNG.standard_normal(4),
        RNG.standard_normal((3, 4)) / 2,
        RNG.standard_normal((4, 4)) / 3,
        RNG.standard_normal(4),
    ]
    cases = [values, [values[0][:0], *values[1:]], [values[0][::-2], *values[1:]]]
    got = [f(*case) for case in cases]  # no step at all; a strided sequence
    monkeypatch.setattr(Function, "program_loop", lambda self: None)  # the Python loop
    for case, results in zip(cases, got):
        for a, b in zip(results, f(*case)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)


def test_scan_output_changing_shape_gives_the_python_loops_error():
    from tensorjit.scan import scan

    v = T.vector("v")
    rows, _ = scan(lambda t, v: v[:t], sequences=[T.arange(3)], non_sequences=[v])
    f = tensorjit.function([v], rows)
    (inner,) = [n.op.compiled() for n in f.kernels if type(n.op).__name__ == "Scan"]
    assert inner.program_loop() is not None
    with pytest.raises(ValueError, match="step 1 output 0 has shape .* but step 0 gave"):
        f(np.arange(5.0))


@pytest.mark.parametrize("shape_dtype", ["int64", "int32"])
def test_reshape_and_make_vector_run_as_program_steps(shape_dtype):
    # Reshape is a view of a C-contiguous input and of a C-ordered copy otherwise (as
    # NumPy's); its shape vector (MakeVector of scalars, one -1) is made in C too. A
    # shape that does not fit gives NumPy's error through the node's own kernel.
    from tensorjit.tensor.shape_ops import MakeVector, Reshape

    x, n = T.tensor3("x"), T.scalar("n", dtype=shape_dtype)
    flat = T.reshape(x, T.stack([x.shape[0] * x.shape[1], -1]).astype(shape_dtype))
    out = T.reshape(flat.T * 2, T.stack([n, -1]).astype(shape_dtype))
    f, g = both([x, n], [flat + 1, out.sum(axis=0)])
    kinds = {type(node.op) for node in f.kernels}
    assert {Reshape, MakeVector} <= kinds
    assert all(f.kernels[node].name == "c:view" for node in f.kernels if type(node.op) is Reshape)
    assert not f.calls.program.runs_python
    base = RNG.standard_normal((2, 3, 8))
    for xv in (base, base[:, :, ::2], np.asfortranarray(base), base[::-1]):
        agree(f, g, xv, np.asarray(2, shape_dtype))
    with pytest.raises(ValueError, match="reshape"):
        f(base, np.asarray(5, shape_dtype))
