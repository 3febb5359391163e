"""The OpenCL C dialect of the shared renderer (plugins/cstyle).

OpenCL's math builtins are overloaded for float and double (no ``f`` suffix), 64-bit
integers are ``long``/``ulong``, and a bool is stored as a byte (``uchar``): OpenCL
kernels can not take ``bool`` buffers. The helpers are the device dialects' shared ones
(cstyle/numpy_helpers.py, spelled by device_kernels/dialect.py).
"""

from __future__ import annotations

from tensorjit.plugins.cstyle.scalar import supported_names
from tensorjit.plugins.device_kernels.dialect import (
    DEVICE_TYPES,
    HELPERS,
    UNARY,
    DeviceDialect,
    device_helpers,
    powi,
)

TYPES = DEVICE_TYPES

LONG_NAMES = """
typedef long int64_t;
typedef ulong uint64_t;
#define INT64_C(x) (x##L)
#define UINT64_C(x) (x##UL)
#define INT64_MIN (-0x7fffffffffffffffL - 1)
#define tj_float_rn convert_float_rte"""

FP64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"

PREAMBLE_F32 = LONG_NAMES + device_helpers("inline", ("float",))
PREAMBLE = FP64 + LONG_NAMES + device_helpers("inline", ("float", "double"))

# A work-item computes a contiguous chunk of TJ_CHUNK elements (a build option, the
# kernel's tunable): on a CPU runtime (PoCL) chunks keep each core streaming through
# memory; a GPU prefers one element per work-item (TJ_CHUNK=1).
FLAT_LOOP = (
    "for (long {i} = get_global_id(0) * TJ_CHUNK, tj_end = min({i} + TJ_CHUNK, (long){n}); "
    "{i} < tj_end; {i}++)"
)

OPENCL_DIALECT = DeviceDialect(
    "OpenCL",
    TYPES,
    math_suffix_f32=False,
    unary=UNARY,
    helpers=HELPERS,
    kernel_qualifier="__kernel",
    global_qualifier="__global",
    function_qualifier="inline",
    restrict="restrict",
    powi=powi,
    flat_loop=FLAT_LOOP,
    preamble=PREAMBLE,
    global_id="get_global_id(0)",
    group_id="get_group_id(0)",
    local_id="get_local_id(0)",
    local_qualifier="__local",
    local_barrier="barrier(CLK_LOCAL_MEM_FENCE)",
)
SUPPORTED_NAMES = supported_names(OPENCL_DIALECT)


def preamble(dtypes: set[str]) -> str:
    """The preamble for kernels on ``dtypes``: double helpers (and the fp64 extension)
    only where a double is used, so float32 kernels build on devices without fp64."""
    return PREAMBLE if "float64" in dtypes else PREAMBLE_F32
