"""Convolution and pooling on the tested device: ``conv2d`` in every border mode, with
strides and both filter orientations, its two gradients, ``pool_2d`` in every mode
(partial windows, padding, overlapping strides) and its gradients; inputs in awkward
layouts; each checked against Op.perform by DebugMode and against the host's values;
the ops' own errors for channels and shapes that do not match."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights, conv2d
from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool, pool_2d
from tensorjit.testing.device_under_test import (
    BACKEND,
    FAST_DEVICE,
    NEEDS_DEVICE,
    device_var,
    names_all,
    on_device,
    runs_on_device,
    strided_views,
    target,
    to_device,
)

pytestmark = NEEDS_DEVICE


def device_kernels_expected() -> bool:
    """Whether the backend runs convolutions itself here: the shared device family
    leaves them to the host on a CPU device unless config.device_schedule forces the
    GPU shapes (the suite's groups run on PoCL does)."""
    if BACKEND not in ("opencl", "cuda"):
        return True
    from tensorjit.plugins.device_kernels.transfers import takes_convolutions

    return takes_convolutions(target())


def ran_where_expected(f, ops, kernel: str) -> None:
    if device_kernels_expected():
        runs_on_device(f, ops, kernel)


DTYPES = ["float64", "float32"]
CONV_CASES = [
    ("valid", (1, 1), True),
    ("full", (1, 1), False),
    ("half", (2, 1), True),
    ("same", (1, 2), False),
    ((1, 2), (2, 2), True),
]
POOL_CASES = [  # ws, ignore_border, stride, pad, mode
    ((2, 2), True, None, (0, 0), "max"),
    ((3, 2), False, (2, 1), (0, 0), "max"),
    ((2, 2), True, (1, 1), (1, 1), "max"),
    ((3, 3), True, (2, 2), (1, 1), "average_inc_pad"),
    ((3, 3), True, (2, 2), (1, 2), "average_exc_pad"),
    ((2, 3), False, None, (0, 0), "sum"),
]


def tolerance(dtype: str) -> dict:
    # Sums of a few dozen products: the order differs between kernels.
    return {"rtol": 1e-10, "atol": 1e-10} if dtype == "float64" else {"rtol": 2e-5, "atol": 2e-5}


def host_values(build, values: list) -> list:
    """``build``'s outputs computed on the host (Op.perform) from host ``values``."""
    inputs = [T.tensor(v.dtype, shape=(None,) * v.ndim) for v in values]
    f = tensorjit.function(inputs, build(*inputs), mode=tensorjit.FAST_COMPILE)
    return f(*values)


def conv_and_gradients(border_mode, subsample, flip):
    def build(x, w, g):
        out = conv2d(x, w, border_mode=border_mode, subsample=subsample, filter_flip=flip)
        return [out, *T.grad((out * g).sum(), [x, w])]

    return build


def pool_and_gradient(ws, ignore_border, stride, pad, mode):
    def build(x, g):
        out = pool_2d(x, ws, ignore_border=ignore_border, stride=stride, pad=pad, mode=mode)
        return [out, T.grad((out * g).sum(), x)]

    return build


@pytest.mark.parametrize("border_mode,subsample,flip", CONV_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_convolution_and_its_gradients_in_every_layout(border_mode, subsample, flip, dtype):
    x, w, g = (device_var(name, (None,) * 4, dtype) for name in "xwg")
    build = conv_and_gradients(border_mode, subsample, flip)
    f = on_device([x, w, g], build(x, w, g))
    ran_where_expected(f, (Conv2d, Conv2dGradInputs, Conv2dGradWeights), "convolution")
    rng = np.random.default_rng(len(str(border_mode)) + subsample[0])
    xv = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    wv = rng.standard_normal((4, 3, 3, 2)).astype(dtype)
    _, _, out_hw = Conv2d(border_mode, subsample, flip)._geometry(xv.shape[2:], wv.shape[2:])
    gv = rng.standard_normal((2, 4, *out_hw)).astype(dtype)
    want = host_values(build, [xv, wv, gv])
    for layout, arg in sorted(strided_views(xv).items()):
        got = f(arg, to_device(wv), to_device(gv))
        for mine, theirs in zip(got, want):
            np.testing.assert_allclose(mine, theirs, err_msg=layout, **tolerance(dtype))


@pytest.mark.parametrize("ws,ignore_border,stride,pad,mode", POOL_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pooling_and_its_gradient_in_every_layout(ws, ignore_border, stride, pad, mode, dtype):
    x, g = device_var("x", (None,) * 4, dtype), device_var("g", (None,) * 4, dtype)
    build = pool_and_gradient(ws, ignore_border, stride, pad, mode)
    f = on_device([x, g], build(x, g))
    ran_where_expected(f, (Pool, MaxPoolGrad, AveragePoolGrad), "pooling")
    rng = np.random.default_rng(ws[0] * 10 + ws[1])
    xv = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    xv[0, 0, :2, :2] = 1.5  # a tie: the max-pool gradient goes to every maximum
    pooled = Pool(ws, ignore_border, stride, pad, mode)._out_shape(xv.shape)
    gv = rng.standard_normal(pooled).astype(dtype)
    want = host_values(build, [xv, gv])
    for layout, arg in sorted(strided_views(xv).items()):
        got = f(arg, to_device(gv))
        for mine, theirs in zip(got, want):
            np.testing.assert_allclose(mine, theirs, err_msg=layout, **tolerance(dtype))


def test_max_pooling_propagates_nan():
    x = device_var("x", (None,) * 4, "float64")
    f = on_device([x], pool_2d(x, (2, 2)))
    value = np.arange(16.0).reshape(1, 1, 4, 4)
    value[0, 0, 0, 1] = np.nan
    got = f(to_device(value))
    assert np.isnan(got[0, 0, 0, 0]) and got[0, 0, 1, 1] == 15.0


def test_channels_that_do_not_match_are_the_ops_error():
    x, w = device_var("x", (None,) * 4), device_var("w", (None,) * 4)
    f = on_device([x, w], conv2d(x, w), mode=FAST_DEVICE)
    with pytest.raises(ValueError) as error:
        f(to_device(np.zeros((1, 3, 5, 5))), to_device(np.zeros((2, 4, 3, 3))))
    assert names_all(error.value, "Conv2d", "3 channels", "expect 4"), error.value


def test_a_pooled_gradient_of_the_wrong_shape_is_the_ops_error():
    x, g = device_var("x", (None,) * 4), device_var("g", (None,) * 4)
    out = pool_2d(x, (2, 2), mode="average_inc_pad")
    f = on_device([x, g], T.grad((out * g).sum(), x), mode=FAST_DEVICE)
    with pytest.raises(ValueError) as error:
        f(to_device(np.zeros((1, 1, 4, 4))), to_device(np.zeros((1, 1, 3, 3))))
    assert names_all(error.value, "(1, 1, 3, 3)", "(1, 1, 4, 4)"), error.value


def test_gradients_of_a_plain_sum_compile_in_debugmode():
    """``T.grad(out.sum(), x)`` fills the output's gradient with Alloc: DebugMode's
    unrewritten graphs once could not place it (its lengths, read on the host, were
    sent to the device: Op.host_inputs keeps them there)."""
    x, w = device_var("x", (None,) * 4), device_var("w", (None,) * 4)
    f = on_device([x, w], T.grad(conv2d(x, w).sum(), [x, w]))
    gx, gw = f(to_device(np.ones((2, 3, 5, 5))), to_device(np.ones((4, 3, 3, 3))))
    assert gx.shape == (2, 3, 5, 5) and gw.shape == (4, 3, 3, 3)
    np.testing.assert_allclose(gw, np.full((4, 3, 3, 3), 18.0))
    g = on_device([x], T.grad(pool_2d(x, (2, 2), mode="sum").sum(), x))
    np.testing.assert_allclose(g(to_device(np.ones((1, 1, 4, 4)))), np.ones((1, 1, 4, 4)))
