"""Shipped functions: one compile per process however many threads unpickle them, the
same snapshot of shared values wherever they run."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T

pytest.importorskip("dask", reason="the [dask] extra is not installed")
from tensorjit.dask import compile_count, ship  # noqa: E402


def test_threads_unpickling_one_function_compile_it_once():
    x = T.vector("x")
    payload = pickle.dumps(ship(tensorjit.function([x], T.tanh(x) * 5 + 1, name="raced")))
    before = compile_count()
    loaded, barrier = [], threading.Barrier(4)

    def load():
        barrier.wait()
        loaded.append(pickle.loads(payload))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compile_count() - before == 1
    assert len({id(s.function) for s in loaded}) == 1
    np.testing.assert_allclose(loaded[0](np.zeros(2)), [1.0, 1.0])


def test_a_shipped_function_keeps_the_shared_values_it_was_shipped_with():
    w = tensorjit.shared(2.0, name="w")
    x = T.vector("x")
    f = tensorjit.function([x], x * w)
    shipped = ship(f)
    w.set_value(3.0)
    np.testing.assert_allclose(f(np.ones(2)), [3.0, 3.0])  # the function itself is live
    np.testing.assert_allclose(shipped(np.ones(2)), [2.0, 2.0])  # here, as on a worker
    np.testing.assert_allclose(pickle.loads(pickle.dumps(shipped))(np.ones(2)), [2.0, 2.0])
    assert ship(shipped) is shipped and ship(f).token != shipped.token
    with pytest.raises(TypeError, match="compiled tensorjit Function"):
        ship(lambda v: v)
