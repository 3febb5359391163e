"""scan over values living on the tested device: the loop runs on the host (its step
function too), with the device's shared weights and initial states copied to it."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE

pytestmark = NEEDS_DEVICE


def rnn_step(device: str) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(0)
    with config.change_flags(device=device):
        w = tensorjit.shared(rng.standard_normal((3, 3)) * 0.5, name="w", target=DEVICE)
        h0 = tensorjit.shared(np.ones(3), name="h0", target=DEVICE)
        hs, _ = tensorjit.scan(lambda h: T.tanh(T.dot(w, h)), outputs_info=[h0], n_steps=4)
        cost = hs[-1].sum()
        f = tensorjit.function([], [cost, hs], updates={w: w - 0.1 * tensorjit.grad(cost, w)})
        results = [f() for _ in range(3)]
    return results, w.get_value()


@pytest.mark.parametrize("default", [DEVICE, "cpu"])
def test_scan_over_device_shared_weights_trains_like_the_host(default):
    rng = np.random.default_rng(0)
    w_host = rng.standard_normal((3, 3)) * 0.5
    results, w_after = rnn_step(default)
    h, want = np.ones(3), []
    for _ in range(4):
        h = np.tanh(w_host @ h)
        want.append(h)
    np.testing.assert_allclose(results[0][1], want, rtol=1e-12)
    np.testing.assert_allclose(results[0][0], want[-1].sum(), rtol=1e-12)
    assert not np.allclose(w_after, w_host)  # the weights were updated on the device
