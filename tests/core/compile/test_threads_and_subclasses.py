"""Calls from several threads at once, and NumPy subclasses as arguments."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.program import ProgramVM


def _hammer(f, n_threads=8, calls=10_000):
    """Call ``f(x, y)`` from threads with their own arguments; every result must be
    the right one for that thread's arguments."""
    errors: list[str] = []
    start = threading.Barrier(n_threads)

    def work(t: int) -> None:
        x = np.full(4, float(t))
        y = np.arange(4.0) * t
        want = np.tanh(x) * 2 + y
        start.wait()
        for _ in range(calls):
            got = f(x, y)
            if not np.allclose(got, want):
                errors.append(f"thread {t}: {got} != {want}")
                return

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


@pytest.mark.parametrize("path", ["per-node VM", "whole-graph program"])
def test_one_function_called_from_eight_threads(path):
    x, y = T.vectors("x", "y")
    with tensorjit.config.change_flags(whole_graph=path != "per-node VM"):
        f = tensorjit.function([x, y], T.tanh(x) * 2 + y)
    assert isinstance(f.vm, ProgramVM) == (path == "whole-graph program")
    _hammer(f, calls=10_000 if path != "per-node VM" else 3_000)


@pytest.mark.parametrize("argument", ["array", "Python float"])
def test_calls_that_update_a_shared_value_from_threads_lose_no_update(argument):
    # Each call reads w and stores w + r: two calls must not both read the same w. The
    # 300 x 300 product releases the GIL (other threads run meanwhile), so calls that
    # overlapped would store the same w + r and lose updates.
    w = tensorjit.shared(np.zeros((300, 300)), name="w")
    eye = tensorjit.shared(np.eye(300), name="eye")
    r = T.dscalar("r")
    f = tensorjit.function([r], [], updates=[(w, T.dot(w, eye) + r)])
    assert f.calls.direct is not None
    step = np.asarray(0.5) if argument == "array" else 0.5
    start = threading.Barrier(4)

    def work() -> None:
        start.wait()
        for _ in range(50):
            f(step)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_array_equal(w.get_value()[:2, :2], np.full((2, 2), 100.0))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_ndarray_subclasses_are_plain_arrays_inside():
    x = T.vector("x")
    m = T.matrix("m")
    f = tensorjit.function([m], m.sum(axis=0) * 2)
    out = f(np.matrix([[1.0, 2.0], [3.0, 4.0]]))
    assert type(out) is np.ndarray and out.shape == (2,)
    np.testing.assert_allclose(out, [8.0, 12.0])
    g = tensorjit.function([x], x + 1)
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    with pytest.raises(TypeError, match=r"'x'.*masked array.*mask would be lost"):
        g(masked)
    np.testing.assert_allclose(g(masked.filled(0.0)), [2.0, 1.0])
