"""The host as a Target of the shared device kernel families (c_backend/generators/host_target.py):
a family's OpenCL-style kernels become C work-item functions with launchers that split
the work-items over the worker pool. MRG31k3p runs this way on the C backend and gives
the host's stream bit for bit (Op.perform is the reference), serial and split."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C

import tensorjit
from tensorjit.core.compile.mode import Mode
from tensorjit.plugins.c_backend.generators.host_target import host_program
from tensorjit.tensor.random import MRG_RandomStreams

pytestmark = NEEDS_C
DEBUG = Mode("DebugMode", tensorjit.FAST_RUN.query, debug=True)  # kernel vs Op.perform


def test_a_kernel_becomes_a_work_item_function_and_a_launcher_over_parts():
    source = (
        "TJ_KERNEL void scale(long n, const double *x, long o_x, double *out, double a) {\n"
        "    long i = tj_gid;\n    if (i >= n) return;\n    out[i] = a * x[i];\n}\n"
    )
    full, cdef, names = host_program(source, ("-DTJ_CHUNK=4",))
    assert names == ["scale"]
    assert "#define TJ_CHUNK 4" in full
    assert "static inline void scale_item(long tj_gid, long n, const double *x" in full
    # pointers cross the cffi boundary as addresses; the launcher splits work-items
    assert (
        "void scale(int64_t tj_items, long n, intptr_t x, long o_x, intptr_t out, double a)" in cdef
    )
    assert "tj_parallel(scale_part, &tj_args, tj_items" in full
    assert "scale_item(g, a->n, (const double *)a->x, a->o_x, (double *)a->out, a->a)" in full


def test_device_type_names_reach_cffi_as_c_types_and_launcher_names_stay_apart():
    source = "TJ_KERNEL void flag(uchar on, ulong n, uchar *out) { out[tj_gid] = on; }\n"
    _, cdef, _ = host_program(source)
    assert "void flag(int64_t tj_items, unsigned char on, unsigned long n, intptr_t out)" in cdef
    with pytest.raises(ValueError, match="parameter named tj_items"):
        host_program("TJ_KERNEL void bad(long tj_items) { }\n")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("dist", ["uniform", "normal"])
def test_mrg31k3p_runs_the_shared_family_and_gives_the_host_stream(dist, dtype):
    host = MRG_RandomStreams(42)
    mine = MRG_RandomStreams(42)
    size = (2049,)  # odd: Box-Muller drops the last sine
    draw = getattr(host, dist)
    f_host = tensorjit.function(
        [], draw(size, dtype=dtype), mode=tensorjit.FAST_RUN.with_backends("python")
    )
    f_c = tensorjit.function([], getattr(mine, dist)(size, dtype=dtype), mode=DEBUG)
    names = {k.name.removeprefix("debug:") for k in f_c.kernels.values()}
    assert "c:mrg31k3p" in names, names
    eps = float(np.finfo(dtype).eps)
    for _ in range(3):  # the states advance alike
        got, want = f_c(), f_host()
        if dist == "uniform":
            np.testing.assert_array_equal(got, want)
        else:  # Box-Muller: libm's log/cos/sin here, NumPy's in Op.perform, each 1 ulp
            np.testing.assert_allclose(got, want, rtol=4 * eps, atol=16 * eps)


def test_many_substreams_are_split_over_the_pool_with_the_same_result():
    """With more substreams than the launcher's serial limit, work-items (one per
    substream) run in parts on the worker pool: each writes its own rows."""
    streams = MRG_RandomStreams(3)
    sample = streams.uniform((300, 40), nstreams=300)
    with tensorjit.config.change_flags(threads=2):
        f = tensorjit.function([], sample)
        first = f()
    reference = MRG_RandomStreams(3)
    g = tensorjit.function(
        [],
        reference.uniform((300, 40), nstreams=300),
        mode=tensorjit.FAST_RUN.with_backends("python"),
    )
    np.testing.assert_array_equal(first, g())
