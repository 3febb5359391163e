"""CudaArray headers without a GPU: shapes, byte strides and offsets of views, the
contiguity flags the kernels rely on, overlap between views of one allocation, 0-d
values kept 0-d, and the PTX architecture clamped to what the compiler knows."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cuda import ptx_only_device

from tensorjit.plugins.cuda_backend.arrays import CUDA_ARRAYS, CudaArray
from tensorjit.plugins.cuda_backend.compiler import _architectures, compiler, supported_arch

BASE = 1 << 20  # a stand-in device address: views only do arithmetic on it


def test_flags_and_strides_follow_numpys_for_the_same_layouts():
    for shape in [(3, 4), (1, 5), (5, 1), (0, 3), ()]:
        host = np.zeros(shape)
        a = CudaArray(shape, "float64", BASE)
        assert a.flags.c_contiguous
        assert a.strides == host.strides or host.size == 0  # (NumPy: 0 for empty arrays)
        assert a.flags.f_contiguous == host.flags.f_contiguous
    t = CUDA_ARRAYS.view(CudaArray((3, 4), "float64", BASE), (4, 3), (8, 32), 0)
    assert not t.flags.c_contiguous and t.flags.f_contiguous


def test_views_share_memory_only_where_their_bytes_overlap():
    base = CudaArray((10,), "float64", BASE)
    first = CUDA_ARRAYS.view(base, (5,), (8,), 0)
    last = CUDA_ARRAYS.view(base, (5,), (8,), 40)
    reversed_all = CUDA_ARRAYS.view(base, (10,), (-8,), 72)
    other = CudaArray((10,), "float64", BASE + 4096)
    assert not CUDA_ARRAYS.may_share_memory(first, last)
    assert CUDA_ARRAYS.may_share_memory(first, reversed_all)
    assert CUDA_ARRAYS.may_share_memory(last, reversed_all)
    assert not CUDA_ARRAYS.may_share_memory(base, other)
    assert last.pointer == BASE + 40 and reversed_all.pointer == BASE + 72


def test_zero_d_values_stay_zero_d():
    with ptx_only_device():
        scalar = CUDA_ARRAYS.from_host(np.float32(2))
        assert scalar.shape == () and scalar.dtype == np.float32
        scalar.set(np.asarray(1.0, "float32"))
        with pytest.raises(ValueError, match=r"set\(\) of shape \(2,\)"):
            scalar.set(np.ones(2, "float32"))


def test_the_ptx_architecture_is_clamped_to_what_the_compiler_knows():
    known = _architectures(compiler())
    assert known and min(known) <= 75
    assert supported_arch(f"compute_{max(known)}") == f"compute_{max(known)}"
    newer = supported_arch(f"compute_{max(known) + 50}")
    assert newer == f"compute_{max(known)}"
    assert supported_arch("compute_30") == f"compute_{min(known)}"
