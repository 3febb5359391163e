"""C kernels for convolution (im2col + GEMM) and pooling: every border mode, stride,
flip, pooling mode and padding, float64 and float32, across input layouts (contiguous,
Fortran, strided, negative strides, broadcast, empty), each compared with Op.perform by
the test kit (and the gradients by finite differences); a LeNet-style training step in
DebugMode runs its convolutions and poolings on them."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor import nnet
from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights, conv2d
from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool, pool_2d
from tensorjit.testing import check_op
from tensorjit.testing.conformance.test_convolution import CONV_CASES

rng = np.random.default_rng(0)
DTYPES = ("float64", "float32")


def conv_shapes(border_mode, subsample):
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2))
    op = Conv2d(border_mode, subsample)
    _, _, out_hw = op._geometry(x.shape[2:], w.shape[2:])
    g = rng.standard_normal((2, 4, *out_hw))
    return x, w, g


def on_c(report):
    assert "c" in report.backends, report.checks
    return report


@pytest.mark.parametrize("border_mode,subsample,flip", CONV_CASES)
def test_conv2d_kernel_matches_perform(border_mode, subsample, flip):
    x, w, _ = conv_shapes(border_mode, subsample)
    on_c(check_op(Conv2d(border_mode, subsample, flip), x, w, dtypes=DTYPES))


@pytest.mark.parametrize("border_mode,subsample,flip", CONV_CASES)
def test_conv2d_gradient_kernels_match_perform(border_mode, subsample, flip):
    x, w, g = conv_shapes(border_mode, subsample)
    params = (border_mode, subsample, flip)
    on_c(check_op(Conv2dGradWeights(*params), x, g, 3, 2, dtypes=DTYPES, gradients=False))
    on_c(check_op(Conv2dGradInputs(*params), w, g, 7, 6, dtypes=DTYPES, gradients=False))


def test_a_filter_larger_than_the_image_raises_performs_error():
    x, w = T.tensor4("x"), T.tensor4("w")
    f = tensorjit.function([x, w], conv2d(x, w))
    with pytest.raises(ValueError, match="larger than the padded image"):
        f(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 3, 3)))


POOL_CASES = [
    ((2, 2), True, None, (0, 0)),
    ((3, 2), False, None, (0, 0)),
    ((3, 3), True, (2, 1), (1, 1)),
    ((2, 3), False, (1, 2), (0, 0)),
]
MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ws,ignore_border,stride,pad", POOL_CASES)
def test_pooling_kernels_match_perform(ws, ignore_border, stride, pad, mode):
    x = rng.standard_normal((2, 3, 7, 8))
    x[0, 0, :2, :2] = 1.5  # ties in a max window
    params = (ws, ignore_border, stride, pad, mode)
    pool = Pool(*params)
    on_c(check_op(pool, x, dtypes=DTYPES, gradients=mode != "max"))
    out_shape = pool._out_shape(x.shape)
    g = rng.standard_normal(out_shape)
    if mode == "max":
        storage = [[None]]
        pool.perform(pool.make_node(T.as_tensor_variable(x)), [x], storage)
        z = storage[0][0]
        on_c(check_op(MaxPoolGrad(*params), x, z, g, dtypes=DTYPES, gradients=False))
    else:
        on_c(check_op(AveragePoolGrad(*params), x, g, dtypes=DTYPES, gradients=False))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "ws,shape",
    [
        ((2, 2), (2, 3, 9, 10)),
        ((3, 2), (1, 2, 7, 2100)),  # a row of tiles wider than a chunk
        ((2, 2), (3, 2, 30, 30)),  # a plane's tile rows in one chunk
        ((2, 2), (1, 2, 70, 64)),  # chunks of 16 tile rows, then 3
        ((3, 3), (2, 2, 31, 35)),  # border rows and columns, chunks of whole tile rows
    ],
)
def test_tiled_max_pooling_matches_perform_with_nans_ties_and_wide_rows(ws, shape, dtype):
    """Windows that tile the image (stride = window, no padding) take the contiguous-row
    kernel: a NaN anywhere in a window wins, ties all receive the gradient, rows wider
    than its chunk of tiles, chunks of several tile rows, and border rows/columns no
    window covers get zeros."""
    x = rng.standard_normal(shape).astype(dtype)
    x[0, 0, 1, 1] = np.nan  # the last element of the first 2x2 window
    x[0, 1, 4, 5] = np.nan
    x[0, 0, 2:4, 2:4] = 0.5  # a tie
    xs = T.tensor4("x", dtype=dtype)
    pooled = pool_2d(xs, ws, ignore_border=True)
    g = T.tensor4("g", dtype=dtype)
    grad = T.grad((pooled * g).sum(), xs)
    out_shape = Pool(ws, True)._out_shape(shape)
    gv = rng.standard_normal(out_shape).astype(dtype)
    f = tensorjit.function([xs, g], [pooled, grad])
    ref = tensorjit.function([xs, g], [pooled, grad], mode="FAST_COMPILE")
    for got, want in zip(f(x, gv), ref(x, gv)):
        np.testing.assert_array_equal(got, want)
    assert np.isnan(f(x, gv)[0][0, 0, 0, 0])


def test_max_pooling_propagates_nan_and_skips_padding():
    x = np.full((1, 1, 4, 4), -np.inf)
    x[0, 0, 0, 0] = np.nan  # in the first window only
    xs = T.tensor4("x")
    f = tensorjit.function([xs], pool_2d(xs, (3, 3), stride=(2, 2), pad=(1, 1)))
    out = f(x)
    assert np.isnan(out[0, 0, 0, 0]) and np.isneginf(out[0, 0, 1, 1])


def test_a_lenet_step_in_debugmode_runs_convolution_and_pooling_in_c():
    x, y = T.tensor4("x"), T.lvector("y")
    w0 = tensorjit.shared(rng.standard_normal((4, 1, 3, 3)) * 0.3, name="w0")
    w1 = tensorjit.shared(rng.standard_normal((6, 4, 2, 2)) * 0.3, name="w1")
    w2 = tensorjit.shared(rng.standard_normal((6, 3)) * 0.3, name="w2")
    h = T.tanh(pool_2d(conv2d(x, w0, border_mode="half"), (2, 2)))
    h = T.tanh(pool_2d(conv2d(h, w1), (2, 2), ignore_border=False, mode="average_exc_pad"))
    p = nnet.softmax(T.dot(h.flatten(2), w2))
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    params = [w0, w1, w2]
    grads = tensorjit.grad(cost, params)
    mode = tensorjit.core.compile.mode.Mode("DebugMode", tensorjit.FAST_RUN.query, debug=True)
    f = tensorjit.function([x, y], [cost, *grads], mode=mode)
    names = {k.name.removeprefix("debug:") for k in f.kernels.values()}
    assert {"c:convolution", "c:pooling"} <= names, names
    xv, yv = rng.standard_normal((3, 1, 6, 6)), np.array([0, 2, 1])
    host = tensorjit.function([x, y], [cost, *grads], mode=tensorjit.FAST_COMPILE)
    for got, want in zip(f(xv, yv), host(xv, yv)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_lenet_sized_layers_match_perform():
    """Filters large enough that a freed temporary's memory is reused at once (the
    flipped filters must stay alive while C reads them)."""
    x, w = T.tensor4("x"), T.tensor4("w")
    xv, wv = rng.standard_normal((6, 20, 12, 12)), rng.standard_normal((50, 20, 5, 5))
    g = rng.standard_normal((6, 50, 8, 8))
    out = conv2d(x, w)
    gx, gw = tensorjit.grad((out * g).sum(), [x, w])
    fast = tensorjit.function([x, w], [out, gx, gw])
    slow = tensorjit.function([x, w], [out, gx, gw], mode=tensorjit.FAST_COMPILE)
    assert "c:convolution" in {k.name for k in fast.kernels.values()}
    for got, want in zip(fast(xv, wv), slow(xv, wv)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_filters_without_rows_and_mismatched_pooling_gradients_raise_on_every_backend():
    x, w = T.tensor4("x"), T.tensor4("w")
    g = T.tensor4("g")
    for mode in (tensorjit.FAST_RUN, tensorjit.FAST_COMPILE):
        f = tensorjit.function([x, w], conv2d(x, w, border_mode="full"), mode=mode)
        with pytest.raises(ValueError, match="at least one row and one column"):
            f(np.zeros((2, 3, 5, 5)), np.zeros((4, 3, 0, 2)))
        avg = tensorjit.function([x, g], AveragePoolGrad((2, 2))(x, g), mode=mode)
        with pytest.raises(ValueError, match="does not match"):
            avg(np.zeros((2, 3, 4, 4)), np.zeros((1, 3, 2, 2)))  # no silent broadcast


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("images", [1, 2, 7])
def test_convolutions_split_over_threads_agree_with_one_thread(threads, images):
    """With config threads above 1 the images are split over the worker pool (parts of
    adjacent images; the weights' gradient summed per part, then in part order): the
    forward pass and both gradients agree with the one-thread kernels and NumPy's
    reference, for image counts smaller than, equal to and not a multiple of the parts."""
    x, w, g = T.tensor4("x"), T.tensor4("w"), T.tensor4("g")
    out = conv2d(x, w, border_mode="half", filter_flip=False)
    outputs = [out, *T.grad((out * g).sum(), [x, w])]
    local = np.random.default_rng(images)
    xv = local.standard_normal((images, 3, 9, 8))
    wv = local.standard_normal((4, 3, 3, 3))
    gv = local.standard_normal((images, 4, 9, 8))
    reference = tensorjit.function([x, w, g], outputs, mode="FAST_COMPILE")(xv, wv, gv)
    with tensorjit.config.change_flags(threads=1):
        serial = tensorjit.function([x, w, g], outputs)(xv, wv, gv)
    with tensorjit.config.change_flags(threads=threads):
        split = tensorjit.function([x, w, g], outputs)(xv, wv, gv)
    for got, one, want in zip(split, serial, reference):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
        np.testing.assert_allclose(got, one, rtol=1e-12, atol=1e-12 * np.abs(one).max())


def test_split_products_without_a_per_thread_blas_count_restore_the_library_count():
    """Where OpenBLAS has no per-thread count (NumPy 2.5's scipy-openblas64 has none),
    the split convolutions set the library's count to one for the call and restore it
    after; the values are those of one thread. Run here by initialising the kernels
    without the per-thread setter."""
    from tensorjit.plugins.c_backend.build import threads
    from tensorjit.plugins.c_backend.generators import convolution
    from tensorjit.plugins.c_backend.linalg import blas

    chosen = blas.provider()
    local, setter, getter = threads.blas_thread_controls(chosen.where)
    if not (setter and getter):
        pytest.skip(f"the BLAS at {chosen.where} has no thread-count setter and getter")
    x, w, g = T.tensor4("x"), T.tensor4("w"), T.tensor4("g")
    out = conv2d(x, w, border_mode="valid", filter_flip=False)
    outputs = [out, *T.grad((out * g).sum(), [x, w])]
    local_rng = np.random.default_rng(11)
    xv = local_rng.standard_normal((6, 3, 9, 8))
    wv = local_rng.standard_normal((4, 3, 3, 3))
    gv = local_rng.standard_normal((6, 4, 7, 6))
    with tensorjit.config.change_flags(threads=1):
        serial = tensorjit.function([x, w, g], outputs)(xv, wv, gv)
    ffi, lib, _ = convolution.library("float64")
    gemm = chosen.pointers[blas.ROUTINES.index("dgemm")]

    def init(local_setter: int) -> None:
        pointers = (gemm, local_setter, setter, getter)
        assert lib.tj_conv_init(*(ffi.cast("void *", p) for p in pointers)) == 0

    init(0)
    try:
        with tensorjit.config.change_flags(threads=2):
            before = threads.blas_threads()
            split = tensorjit.function([x, w, g], outputs)(xv, wv, gv)
            assert threads.blas_threads() == before == 2
    finally:
        init(local)
    for got, one in zip(split, serial):
        np.testing.assert_allclose(got, one, rtol=1e-12, atol=1e-12 * np.abs(one).max())
