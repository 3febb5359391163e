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
