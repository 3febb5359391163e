"""MRG31k3p (``MRGSample``) on the tested device: the same seed gives the host's stream
(bit-identical uniforms, normals to the last ulp of log/cos/sin), the substream states
advance identically on both devices, and the state lives and is updated on the device."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.devices import HOST
from tensorjit.core.rewrites.transfer import host_nodes_of_device_function
from tensorjit.tensor.random import MRG_RandomStreams, MRGSample, mrg31k3p_uniform
from tensorjit.tensor.type import TensorType
from tensorjit.testing.device_under_test import (
    DEVICE,
    FAST_DEVICE,
    NEEDS_DEVICE,
    all_nodes_on_device,
    names_all,
    on_device,
    runs_on_device,
    runs_on_the_device,
    strided_views,
    to_device,
)
from tensorjit.testing.device_under_test import (
    to_host as on_host,
)

pytestmark = NEEDS_DEVICE
DTYPES = ["float32", "float64"]
# Sizes around the substream count (13 below): empty, fewer, equal, not a multiple.
SIZES = [0, 1, 12, 13, 14, 100, 1001]
CALLS = 3


def state_of(streams):
    (state, _), *_ = streams.state_updates
    return state


def host_and_device(draw, seed=1234):
    """The same draw (``draw(streams)``) compiled on the host and on the device (its
    state a shared variable on the device), with both streams."""
    host, dev = MRG_RandomStreams(seed), MRG_RandomStreams(seed)
    f_host = tensorjit.function([], draw(host))
    with config.change_flags(device=DEVICE):
        sample = draw(dev)
    f_dev = on_device([], sample)
    assert state_of(dev).type.device == DEVICE
    runs_on_device(f_dev, MRGSample, "mrg31k3p")
    return (host, f_host), (dev, f_dev)


def assert_same_states(host, dev):
    a, b = state_of(host).get_value(), state_of(dev).get_value()
    assert a.dtype == b.dtype == np.int64
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_uniform_is_the_host_stream_bit_for_bit(dtype, n):
    (host, f_host), (dev, f_dev) = host_and_device(
        lambda s: s.uniform((n,), dtype=dtype, nstreams=13)
    )
    for _ in range(CALLS):
        want, got = f_host(), f_dev()
        assert got.dtype == want.dtype == dtype and got.shape == want.shape == (n,)
        np.testing.assert_array_equal(got, want)
        assert np.all((got > 0) & (got < 1))
        assert_same_states(host, dev)


def assert_normals_close(got, want, dtype):
    """Box-Muller's log/cos/sin on the device may differ from the host's libm in the
    last ulp: float64 within a few ulps of the result's size, float32 (rounded from
    the same double) within one ulp."""
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    if dtype == "float32":
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=4e-15)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_normal_is_the_host_stream_to_the_last_ulp(dtype, n):
    (host, f_host), (dev, f_dev) = host_and_device(
        lambda s: s.normal((n,), dtype=dtype, nstreams=13)
    )
    for _ in range(CALLS):
        assert_normals_close(f_dev(), f_host(), dtype)
        assert_same_states(host, dev)


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_substreams_and_matrices(dtype):
    # 5 * 40 elements: Theano's heuristic gives 33 substreams, 200 is not a multiple.
    (host, f_host), (dev, f_dev) = host_and_device(lambda s: s.uniform((5, 40), dtype=dtype))
    assert state_of(dev).get_value().shape == (33, 6)
    for _ in range(CALLS):
        want, got = f_host(), f_dev()
        assert got.shape == (5, 40)
        np.testing.assert_array_equal(got, want)
        assert_same_states(host, dev)


def test_many_substreams_and_a_large_draw():
    (host, f_host), (dev, f_dev) = host_and_device(
        lambda s: s.normal((3, 7, 1111), dtype="float64", nstreams=4099)
    )
    for _ in range(2):
        assert_normals_close(f_dev(), f_host(), "float64")
        assert_same_states(host, dev)


def test_reseeding_restarts_the_device_stream():
    (host, f_host), (dev, f_dev) = host_and_device(lambda s: s.uniform((50,), nstreams=7))
    first = f_dev()
    f_dev()
    dev.seed(1234)
    np.testing.assert_array_equal(f_dev(), first)
    np.testing.assert_array_equal(first, f_host())


def test_a_symbolic_size_is_read_at_run_time():
    n = T.lscalar("n")
    host, dev = MRG_RandomStreams(77), MRG_RandomStreams(77)
    f_host = tensorjit.function([n], host.uniform((n, 3), nstreams=5))
    with config.change_flags(device=DEVICE):
        sample = dev.uniform((n, 3), nstreams=5)
    f_dev = on_device([n], sample)
    runs_on_device(f_dev, MRGSample, "mrg31k3p")
    for size in (4, 0, 9, 1):
        got, want = f_dev(size), f_host(size)
        assert got.shape == (size, 3)
        np.testing.assert_array_equal(got, want)
        assert_same_states(host, dev)


def test_a_host_state_is_moved_to_the_device_and_its_update_back():
    host, dev = MRG_RandomStreams(9), MRG_RandomStreams(9)
    f_host = tensorjit.function([], host.uniform((31,), nstreams=6))
    sample = dev.uniform((31,), nstreams=6)  # state on the host
    assert state_of(dev).type.device == HOST
    f_dev = on_device([], sample)
    runs_on_device(f_dev, MRGSample, "mrg31k3p")
    for _ in range(CALLS):
        np.testing.assert_array_equal(f_dev(), f_host())
        assert_same_states(host, dev)


def test_the_placed_node_runs_on_the_device_without_debug_mode():
    (host, f_host), _ = host_and_device(lambda s: s.uniform((10,)))
    dev = MRG_RandomStreams(1234)
    with config.change_flags(device=DEVICE):
        f_dev = tensorjit.function([], dev.uniform((10,)), mode=FAST_DEVICE)
    runs_on_device(f_dev, MRGSample, "mrg31k3p")
    if all_nodes_on_device(("mrg31k3p",)):
        assert host_nodes_of_device_function(f_dev.fgraph, DEVICE) == []
    for _ in range(CALLS):
        np.testing.assert_array_equal(f_dev(), f_host())
        assert_same_states(host, dev)


def test_bounds_and_binomial_built_on_the_device_stream():
    def draws(s):
        u = s.uniform((40,), low=-2.0, high=3.0, dtype="float64", nstreams=9)
        b = s.binomial((6, 5), n=4, p=0.3, nstreams=11)
        return [u, b]

    (_, f_host), (_, f_dev) = host_and_device(draws)
    for _ in range(CALLS):
        (u_want, b_want), (u_got, b_got) = f_host(), f_dev()
        # (low, high) scaling may fuse into an fma on the device: one rounding less.
        np.testing.assert_allclose(u_got, u_want, rtol=1e-15, atol=1e-15)
        assert b_got.dtype == b_want.dtype == np.int64
        np.testing.assert_array_equal(b_got, b_want)


def device_state_function(dist, dtype, ndim=1):
    """``rstate, *sizes -> (new_rstate, sample)`` with ``rstate`` a device input."""
    rstate = TensorType("int64", (None, None), device=DEVICE)("rstate")
    sizes = [T.lscalar(f"n{k}") for k in range(ndim)]
    new_state, sample = MRGSample(dist, dtype, ndim)(rstate, *sizes)
    f = on_device([rstate, *sizes], [new_state, sample])
    runs_on_device(f, MRGSample, "mrg31k3p")
    return f


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_state_inputs_are_read_and_left_unchanged(dtype):
    f = device_state_function("uniform", dtype)
    state = MRG_RandomStreams(4242).get_substream_rstates(5)
    want_state, want = mrg31k3p_uniform(state, 23)
    for layout, value in strided_views(state).items():
        new_state, got = f(value, 23)
        np.testing.assert_array_equal(new_state, want_state, err_msg=layout)
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=layout)
        # functional: the input state is not advanced
        np.testing.assert_array_equal(on_host(value), state, err_msg=layout)


def test_only_substreams_that_drew_advance():
    f = device_state_function("normal", "float64")
    state = MRG_RandomStreams(31).get_substream_rstates(8)
    new_state, got = f(to_device(state), 3)  # 4 uniforms: substreams 0..3
    np.testing.assert_array_equal(new_state[4:], state[4:])
    assert not np.any(np.all(new_state[:4] == state[:4], axis=1))
    assert got.shape == (3,)


def test_z_equal_to_m1_stays_below_one():
    # x12 = x13 = 0 makes y1 = 0 and x21 = x23 = 0 makes t2 = 0, so the first z is m1:
    # m1 / 2**31 rounds to 1.0 in float32, clamped below 1 as the host does.
    state = np.array([[1, 0, 0, 0, 1, 0], [5, 6, 7, 8, 9, 10]], dtype=np.int64)
    _, want = mrg31k3p_uniform(state, 40)
    assert want[0] == 2147483647 / 2**31
    for dtype in DTYPES:
        f = device_state_function("uniform", dtype)
        _, got = f(to_device(state), 40)
        expected = want.astype(dtype)
        if dtype == "float32":
            expected = np.minimum(expected, np.float32(1 - 2**-24))
            assert got[0] == np.float32(1 - 2**-24)
        np.testing.assert_array_equal(got, expected)
        assert got.max() < 1


def test_bad_states_raise_clear_errors():
    f = device_state_function("uniform", "float64")
    with pytest.raises(ValueError) as error:
        f(to_device(np.zeros((0, 6), np.int64)), 4)
    assert names_all(error.value, "MRGSample", "no substreams", "(0, 6)"), error.value
    with pytest.raises(ValueError) as error:
        f(to_device(np.ones((3, 5), np.int64)), 4)
    assert names_all(error.value, "MRGSample", "(n_streams, 6)", "(3, 5)"), error.value
    new_state, got = f(to_device(np.zeros((0, 6), np.int64)), 0)  # nothing to draw
    assert new_state.shape == (0, 6) and got.shape == (0,)


def test_float16_stays_on_the_host_with_the_host_stream():
    host, dev = MRG_RandomStreams(3), MRG_RandomStreams(3)
    f_host = tensorjit.function([], host.uniform((20,), dtype="float16", nstreams=4))
    with config.change_flags(device=DEVICE):
        sample = dev.uniform((20,), dtype="float16", nstreams=4)
    f_dev = on_device([], sample)
    node = next(n for n in f_dev.kernels if isinstance(n.op, MRGSample))
    assert not runs_on_the_device(f_dev.kernels[node].name)
    np.testing.assert_array_equal(f_dev(), f_host())
    assert_same_states(host, dev)
