"""Row-blocked runs of a program's elementwise and reduction steps (whole_graph/
row_blocks.c): the values are exactly those of the steps run one after the other over
all rows, whether the steps' memory lets them run in blocks (a layer norm, a logsumexp
written out) or makes the group run first (a value read across rows, transposed or
broadcast over them, a column sum, an in-place update of what the group reads), on one
and two threads. A small ``row_block_bytes`` makes small arrays run in many blocks."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import C_ONLY

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.build.compiler import extension_unavailable_reason

REASON = extension_unavailable_reason()
pytestmark = pytest.mark.skipif(
    REASON is not None, reason=f"no whole-graph C programs on this machine: {REASON}"
)
RNG = np.random.default_rng(11)
SMALL_BLOCKS = 4096  # bytes: a 100 x 64 float64 matrix runs in about 25 blocks


def blocked_groups() -> int:
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    return _interpreter().row_block_info()[0]


def compile_both(inputs: list, outputs: list, threads: int = 1, **flags: object) -> tuple:
    """The function with small blocks and with blocks off (every step over all rows).
    A layer norm's map stays apart from its Moments (as in a training graph, whose
    gradient reads the statistics), so its steps run in row blocks, not as one
    MomentsMap node (test_c_moments_map.py)."""
    flags.setdefault("excluded_rewrites", "local_moments_map")
    with tensorjit.config.change_flags(row_block_bytes=SMALL_BLOCKS, threads=threads, **flags):
        blocked = tensorjit.function(inputs, outputs, mode=C_ONLY)
    with tensorjit.config.change_flags(row_block_bytes=0, threads=threads, **flags):
        whole = tensorjit.function(inputs, outputs, mode=C_ONLY)
    assert blocked.calls.program is not None and whole.calls.program is not None
    return blocked, whole


def assert_same(blocked, whole, *args, runs_blocks: bool) -> list:
    before = blocked_groups()
    got, want = blocked(*args), whole(*args)
    assert (blocked_groups() > before) == runs_blocks
    got, want = (v if isinstance(v, list) else [v] for v in (got, want))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    return got


def layer_norm(x, g, b):
    mu = T.mean(x, axis=1, keepdims=True)
    var = T.mean((x - mu) ** 2, axis=1, keepdims=True)
    return (x - mu) / T.sqrt(var + 1e-5) * g + b


@pytest.mark.parametrize("stream", [0, 64], ids=["cached", "streamed"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_layer_norm_runs_in_blocks_with_the_values_of_whole_steps(threads, dtype, stream):
    # (streamed: the output, broadcast from g and b, is stored with non-temporal stores,
    # block by block)
    x, g, b = T.matrix("x", dtype=dtype), T.vector("g", dtype=dtype), T.vector("b", dtype=dtype)
    blocked, whole = compile_both(
        [x, g, b], [layer_norm(x, g, b)], threads, stream_min_bytes=stream
    )
    xv = RNG.standard_normal((300, 64)).astype(dtype)
    gv, bv = RNG.standard_normal(64).astype(dtype), RNG.standard_normal(64).astype(dtype)
    (got,) = assert_same(blocked, whole, xv, gv, bv, runs_blocks=True)
    xd = xv.astype("float64")
    mu = xd.mean(1, keepdims=True)
    want = (xd - mu) / np.sqrt(((xd - mu) ** 2).mean(1, keepdims=True) + 1e-5) * gv + bv
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def test_a_logsumexp_written_out_and_its_total_run_in_blocks():
    x = T.matrix("x")
    m = T.max(x, axis=1, keepdims=True)
    lse = m + T.log(T.sum(T.exp(x - m), axis=1, keepdims=True))
    # (x - lse, an output, streams when its group runs)
    blocked, whole = compile_both([x], [x - lse, T.sum(x - lse)], stream_min_bytes=64)
    xv = RNG.standard_normal((200, 50)) * 10
    got = assert_same(blocked, whole, xv, runs_blocks=True)
    want = xv - np.log(np.exp(xv).sum(1, keepdims=True))
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-12)


def test_rows_of_column_slices_strided_and_fortran_views_run_in_blocks():
    # (a Fortran-ordered input's rows are its adjacent elements: read only, they split)
    x = T.matrix("x")
    left, right = x[:, :20], x[:, 20:]
    out = left - T.mean(right, axis=1, keepdims=True)
    blocked, whole = compile_both([x], [out])
    big = RNG.standard_normal((250, 90))
    assert_same(blocked, whole, big[:, ::2], runs_blocks=True)
    assert_same(blocked, whole, np.asfortranarray(big[:, :45]), runs_blocks=True)


def test_a_row_statistic_read_across_rows_makes_the_group_run_first():
    # m is computed per row, then read along the columns (broadcast over the rows):
    # row r of the output needs every row's m, so the group can not run in blocks
    x = T.matrix("x")
    m = T.max(x, axis=1)
    out = T.exp(x - m.dimshuffle("x", 0)) + T.sum(x, axis=1, keepdims=True)
    blocked, whole = compile_both([x], [out])
    xv = RNG.standard_normal((120, 120))
    (got,) = assert_same(blocked, whole, xv, runs_blocks=True)
    want = np.exp(xv - xv.max(1)[None, :]) + xv.sum(1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_transposed_group_value_and_a_column_sum_make_the_group_run_first():
    x = T.matrix("x")
    e = T.exp(x)
    r = e / T.sum(e, axis=1, keepdims=True)
    out = r + r.T * 2 + T.sum(r, axis=0)
    blocked, whole = compile_both([x], [out])
    xv = RNG.standard_normal((100, 100))
    (got,) = assert_same(blocked, whole, xv, runs_blocks=True)
    rv = np.exp(xv) / np.exp(xv).sum(1, keepdims=True)
    np.testing.assert_allclose(got, rv + rv.T * 2 + rv.sum(0), rtol=1e-12)


def test_an_in_place_update_of_a_value_the_group_read_waits_for_the_group():
    # y is read by the row sums, then overwritten in place (exp_inplace) and read again:
    # in blocks each block's sums read y before its update
    x = T.matrix("x")
    y = x * 3
    s = T.sum(y, axis=1, keepdims=True)
    out = T.exp(y) * s
    blocked, whole = compile_both([x], [out, s])
    xv = RNG.standard_normal((150, 40))
    got = assert_same(blocked, whole, xv, runs_blocks=True)
    np.testing.assert_allclose(got[0], np.exp(xv * 3) * (xv * 3).sum(1, keepdims=True), rtol=1e-12)


def test_an_input_of_the_wrong_length_still_names_the_shapes():
    x, g, b = T.matrix("x"), T.vector("g"), T.vector("b")
    blocked, _ = compile_both([x, g, b], [layer_norm(x, g, b)])
    with pytest.raises(ValueError, match=r"64.*63|63.*64"):
        blocked(RNG.standard_normal((300, 64)), np.ones(63), np.ones(64))
    # and the function still runs in blocks afterwards
    before = blocked_groups()
    blocked(RNG.standard_normal((300, 64)), np.ones(64), np.ones(64))
    assert blocked_groups() > before


def test_short_rows_or_little_work_run_without_blocks():
    x = T.matrix("x")
    blocked, whole = compile_both([x], [x - T.mean(x, axis=1, keepdims=True)])
    assert_same(blocked, whole, RNG.standard_normal((4, 8)), runs_blocks=False)
    assert_same(blocked, whole, RNG.standard_normal((1, 3000)), runs_blocks=False)


def test_a_reshape_copying_a_pending_value_waits_for_the_group():
    # exp(x).T is not C-contiguous: the reshape copies it, so the exponentials must have
    # run for every row first
    x = T.matrix("x")
    blocked, whole = compile_both([x], [T.reshape(T.exp(x).T, (-1,)) + 1.0])
    xv = RNG.standard_normal((100, 64))
    (got,) = assert_same(blocked, whole, xv, runs_blocks=False)
    np.testing.assert_allclose(got, np.exp(xv).T.reshape(-1) + 1, rtol=1e-12)


def test_an_in_place_update_reading_a_copy_of_its_overlapping_operand_waits():
    # w's row sums are pending when the update w - 0.5 * g runs in place with g a
    # reversed view of w itself: g is read from a copy, after the sums ran
    start = RNG.standard_normal((64, 64))
    g = T.matrix("g")
    results = []
    for row_bytes in (SMALL_BLOCKS, 0):
        w = tensorjit.shared(start.copy(), name="w")
        with tensorjit.config.change_flags(row_block_bytes=row_bytes, threads=1):
            f = tensorjit.function([g], [T.sum(w, axis=1)], updates={w: w - 0.5 * g}, mode=C_ONLY)
        (sums,) = f(w.get_value(borrow=True)[::-1])
        results.append((sums, w.get_value()))
        np.testing.assert_allclose(sums, start.sum(1), rtol=1e-12)
        np.testing.assert_allclose(w.get_value(), start - 0.5 * start[::-1], rtol=1e-12)
    np.testing.assert_array_equal(results[0][0], results[1][0])


def test_programs_flushing_groups_on_two_python_threads_at_once():
    # Recording a call may run the group first, with the GIL released: another thread's
    # program records meanwhile (each run's calls are its own)
    import threading

    x = T.matrix("x")
    y = T.exp(x)
    with tensorjit.config.change_flags(row_block_bytes=SMALL_BLOCKS, threads=1):
        f = tensorjit.function([x], y + y.T, mode=C_ONLY)
        f3 = tensorjit.function([x], (y + y.T) * 3.0, mode=C_ONLY)
    cases = [(f, RNG.standard_normal((400, 400)) * 0.1, 1.0)]
    cases.append((f3, RNG.standard_normal((300, 300)) * 0.1, 3.0))
    wrong = [0, 0]

    def run(k: int) -> None:
        fn, v, scale = cases[k]
        want = (np.exp(v) + np.exp(v).T) * scale
        for _ in range(60):
            wrong[k] += not np.allclose(fn(v), want, rtol=1e-12)

    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [0, 0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_blocks_shared_out_over_two_threads_give_the_values_of_whole_steps(dtype):
    """Enough blocks for each of two threads to take a range of them (a sleeping worker
    is woken for 8 blocks or more), called again and again, and from two Python threads
    at once (one of them then runs its blocks itself): the values of whole steps, which
    do not depend on which thread ran a block."""
    import threading

    x, g, b = T.matrix("x", dtype=dtype), T.vector("g", dtype=dtype), T.vector("b", dtype=dtype)
    blocked, whole = compile_both([x, g, b], [layer_norm(x, g, b)], threads=2)
    xv = RNG.standard_normal((2048, 64)).astype(dtype)  # 32 blocks of 64 rows
    gv, bv = RNG.standard_normal(64).astype(dtype), RNG.standard_normal(64).astype(dtype)
    with tensorjit.config.change_flags(threads=2):
        want = whole(xv, gv, bv)
        for _ in range(5):
            assert_same(blocked, whole, xv, gv, bv, runs_blocks=True)
        wrong = [0, 0]

        def run(k: int) -> None:
            for _ in range(30):
                wrong[k] += not np.array_equal(blocked(xv, gv, bv), want)

        workers = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    assert wrong == [0, 0]
