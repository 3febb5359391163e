"""The OpenCL runtime makes array headers with pyopencl's fast constructor where it has
one (arrays.new_array): they must be what the public constructor makes."""

from __future__ import annotations

import numpy as np
import pytest

from tensorjit.testing.device_under_test import NEEDS_DEVICE, ONLY_OPENCL

pytestmark = [NEEDS_DEVICE, ONLY_OPENCL]


@pytest.mark.parametrize("shape", [(3, 5), (4,), (), (0, 3), (2, 1, 3)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_headers_equal_pyopencls_own(shape, dtype):
    import pyopencl.array as cla

    from tensorjit.plugins.opencl_backend.arrays import OPENCL_ARRAYS
    from tensorjit.plugins.opencl_backend.runtime import runtime

    rt = runtime()
    ours = rt.empty(shape, dtype)
    theirs = cla.empty(rt.queue, shape, np.dtype(dtype), allocator=rt.allocator)
    for attribute in ("shape", "strides", "dtype", "size", "nbytes", "offset", "ndim"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert ours.flags.c_contiguous == theirs.flags.c_contiguous
    assert (ours.base_data is None) == (theirs.base_data is None)
    value = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    if value.size:
        ours.set(value)
        np.testing.assert_array_equal(ours.get(), value)
        if len(shape) == 2:  # a transposed view over the same buffer
            view = OPENCL_ARRAYS.view(ours, shape[::-1], ours.strides[::-1], ours.offset)
            np.testing.assert_array_equal(OPENCL_ARRAYS.to_host(view), value.T)


def test_negative_sizes_are_refused():
    from tensorjit.plugins.opencl_backend.runtime import runtime

    with pytest.raises(ValueError, match="negative dimensions"):
        runtime().empty((2, -1), "float32")
