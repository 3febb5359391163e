"""The OpenCL runtime makes array headers with pyopencl's fast constructor where it has
one (arrays.new_array): they must be what the public constructor makes."""

from __future__ import annotations

import math

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


def test_an_array_over_the_devices_buffer_limit_is_a_memory_error_naming_it():
    from tensorjit.plugins.opencl_backend.runtime import runtime

    rt = runtime()
    limit = rt.max_buffer_bytes
    side = math.isqrt(limit // 4) + 2  # float32 side x side: just over the limit
    with pytest.raises(MemoryError) as caught:
        rt.empty((side, side), "float32")
    message = str(caught.value)
    assert f"shape ({side}, {side}) and dtype float32" in message
    assert f"the OpenCL device {rt.name!r}" in message
    assert f"({limit} bytes) (CL_DEVICE_MAX_MEM_ALLOC_SIZE)" in message


def test_a_function_allocating_too_much_says_which_node_and_how_much():
    """A user's graph whose shape comes from an input: the error is a MemoryError with
    the size and the node's origin, not pyopencl's INVALID_BUFFER_SIZE."""
    import tensorjit.tensor as T
    from tensorjit.plugins.opencl_backend.runtime import runtime
    from tensorjit.testing.device_under_test import FAST_DEVICE, on_device

    n = T.lscalar("n")
    f = on_device([n], (T.zeros((n, n), dtype="float32") + 1).sum(), mode=FAST_DEVICE)
    assert f(3) == 9
    side = math.isqrt(runtime().max_buffer_bytes // 4) + 2
    with pytest.raises(MemoryError) as caught:
        f(side)
    message = str(caught.value)
    assert f"for an array of shape ({side}, {side}) and dtype float32" in message
    assert "test_opencl_array_headers.py" in message  # where the node was created


def test_a_buffer_the_pool_would_round_past_the_limit_is_allocated_exactly():
    """The pool rounds a request up to its bin (up to an eighth more): a buffer under the
    device's largest whose bin is over it comes straight from the device, exact."""
    from tensorjit.plugins.opencl_backend.runtime import runtime

    rt = runtime()
    pool = rt.allocator
    nbytes = 4 * 1000_000  # a bin of 4,194,303 bytes
    assert pool.alloc_size(pool.bin_number(nbytes)) > nbytes
    rt.__dict__["max_buffer_bytes"] = nbytes  # as if this were the device's largest
    try:
        value = rt.empty((1000_000,), "float32")
        assert value.base_data.size == nbytes
        value.fill(2.0)
        assert float(value.get().sum()) == 2.0 * 1000_000
        with pytest.raises(MemoryError, match=r"3\.81 MiB \(4000000 bytes\)"):
            rt.empty((1000_001,), "float32")
    finally:
        del rt.__dict__["max_buffer_bytes"]
