"""Functions sharing device kernels called from several threads at once: each call's
arguments reach its own launch (a kernel's arguments are set, then it is enqueued)."""

from __future__ import annotations

import threading

import numpy as np

import tensorjit.tensor as T
from tensorjit.testing.device_under_test import FAST_DEVICE, NEEDS_DEVICE, on_device

pytestmark = NEEDS_DEVICE


def test_threads_calling_functions_with_the_same_kernel_get_their_own_results():
    x = T.vector("x")
    functions = [on_device([x], T.exp(x) * 2 + 1, mode=FAST_DEVICE) for _ in range(4)]
    errors: list[str] = []

    def work(k: int) -> None:
        value = np.full(1000, float(k))
        want = np.exp(value) * 2 + 1
        for _ in range(50):
            got = functions[k](value)
            if not np.allclose(got, want):
                errors.append(f"thread {k}: got {got[:3]}, want {want[:3]}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
