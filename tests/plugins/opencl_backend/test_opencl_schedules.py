"""config.device_schedule chooses the shape of the row kernels: a work-group per row
(what a GPU wants) or a chunk of rows per work-item (what a CPU device wants); 'auto'
takes the device's type. Both give Op.perform's values (DebugMode) on PoCL here."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.plugins.opencl_backend.target import OPENCL
from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE, ONLY_OPENCL, on_device
from tensorjit.testing.device_under_test import device_var as var

pytestmark = [NEEDS_DEVICE, ONLY_OPENCL]


@pytest.mark.parametrize("schedule, kernel", [("groups", "tj_rows_grouped"), ("items", "tj_rows")])
@pytest.mark.parametrize("log", [False, True])
def test_the_schedule_picks_the_row_kernel_and_both_agree(schedule, kernel, log, monkeypatch):
    rt = OPENCL.runtime()
    launched = []
    original = type(rt).kernel

    def recording(self, source, name, options=()):
        launched.append(name)
        return original(self, source, name, options)

    monkeypatch.setattr(type(rt), "kernel", recording)
    x = var("x", (None, None))
    fn = T.nnet.log_softmax if log else T.nnet.softmax
    # rows longer than a group, with a ragged tail, and a NaN that must win the max
    value = np.random.default_rng(0).standard_normal((5, 300))
    value[2, 150] = np.nan
    with config.change_flags(device_schedule=schedule):
        f = on_device([x], fn(x))  # DebugMode: the kernel against Op.perform
        got = f(value)
    assert kernel in launched and DEVICE == "opencl"
    assert np.isnan(got[2]).all() and np.isfinite(np.delete(got, 2, axis=0)).all()


def test_auto_takes_the_items_shape_on_a_cpu_device():
    from tensorjit.plugins.device_kernels.tuning import uses_groups

    rt = OPENCL.runtime()
    with config.change_flags(device_schedule="auto"):
        assert uses_groups(rt) is (not rt.is_cpu)
