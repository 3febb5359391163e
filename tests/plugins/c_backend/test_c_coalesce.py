"""Axes folded into the last one at run time (generators/coalesce.py): strided elementwise
and reduction kernels give NumPy's values on every layout, whether the axes merge
(contiguous, size-1 axes with any stride) or the stride check stops them (reversed,
transposed, stepped views), alone and split over two threads."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import C_ONLY

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators.coalesce import merge_into_last

RNG = np.random.default_rng(7)


def _views(base: np.ndarray) -> dict[str, np.ndarray]:
    """Views of a 4-D array of shape (4, 3, 10, 12) (some made from a larger one)."""
    big = RNG.standard_normal((4, 3, 10, 24)).astype(base.dtype)
    return {
        "contiguous": base,
        "middle axis reversed": base[:, :, ::-1],
        "last two swapped": np.ascontiguousarray(base.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2),
        "every other column": big[..., ::2],
        "all reversed": base[::-1, ::-1, ::-1, ::-1],
        "a block of a larger array": np.pad(base, ((0, 0), (0, 0), (1, 1), (2, 2)))[
            :, :, 1:-1, 2:-2
        ],
        "Fortran order": np.asfortranarray(base),
    }


VIEW_NAMES = list(_views(np.zeros((4, 3, 10, 12), "float32")))


@pytest.mark.parametrize("view", VIEW_NAMES)
@pytest.mark.parametrize("threads", [1, 2])
def test_a_bias_over_channels_on_every_layout(view, threads):
    x = T.tensor4("x", dtype="float32")
    b = T.vector("b", dtype="float32")
    with tensorjit.config.change_flags(threads=threads):
        out = T.maximum(x + b.dimshuffle("x", 0, "x", "x"), 0)
        f = tensorjit.function([x, b], out, mode=C_ONLY)
        xv = _views(RNG.standard_normal((4, 3, 10, 12)).astype("float32"))[view]
        bv = RNG.standard_normal(3).astype("float32")
        np.testing.assert_array_equal(f(xv, bv), np.maximum(xv + bv[None, :, None, None], 0))


@pytest.mark.parametrize("view", VIEW_NAMES)
@pytest.mark.parametrize("axes", [(0, 2, 3), (2, 3), (1, 2, 3), (0, 1, 2, 3), (1, 3)])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reductions_keeping_outer_or_middle_axes_on_every_layout(view, axes, kind):
    x = T.tensor4("x", dtype="float64")
    f = tensorjit.function([x], getattr(T, kind)(x, axis=axes), mode=C_ONLY)
    xv = _views(RNG.standard_normal((4, 3, 10, 12)))[view]
    want = getattr(np, kind)(xv, axis=axes)
    np.testing.assert_allclose(f(xv), want, rtol=1e-13 * xv.size, atol=0)


def test_a_size_one_axis_with_any_stride_merges_and_a_nan_still_wins():
    # x[:, :, None] has a size-1 axis whose stride NumPy sets freely
    x = T.tensor4("x", dtype="float32")
    f = tensorjit.function([x], [T.sum(x * 2, axis=(1, 2, 3)), T.max(x, axis=(2, 3))], mode=C_ONLY)
    base = RNG.standard_normal((5, 6, 40)).astype("float32")
    base[3, 2, 17] = np.nan
    xv = base[:, :, None, :]
    total, largest = f(xv)
    np.testing.assert_allclose(total, (xv * 2).sum(axis=(1, 2, 3)), rtol=1e-5)
    np.testing.assert_array_equal(largest, xv.max(axis=(2, 3)))


def test_only_axes_broadcast_like_the_last_are_folded():
    """The generated check: an operand broadcast along axis 2 but not along the last
    stops the fold there (axis 3 alone stays the last); axis 0 never folds."""
    operands = [("x", (False, False, False, False)), ("b", (True, False, True, True))]
    lines = "\n".join(merge_into_last(operands, 1, 3))
    assert "n3 *= m2" in lines and "n3 *= m1" not in lines  # b moves along axis 1 only
    assert "st_b_" not in lines  # b's strides along broadcast axes are never read
    assert merge_into_last([("x", (False, True, False))], 1, 2) == []  # x differs at axis 1
    assert "m0" not in "\n".join(merge_into_last([("x", (False,) * 3)], 1, 2))
