"""The CUDA C++ dialect of the shared renderer (plugins/cstyle).

Kernels are ``extern "C" __global__`` (unmangled names to look up in the module),
helpers ``__device__``, device pointers need no address-space qualifier, and the
running thread's index along the (1-d) launch is ``blockIdx.x * blockDim.x +
threadIdx.x``. The type names are OpenCL's (``long``, ``uchar``...: a bool is a byte, so
both devices share the host code that fills their buffers), defined by the preamble;
``long`` is 64 bits wide on the LP64 hosts CUDA supports (Linux). CUDA's math library
overloads its functions for float as OpenCL's builtins are, so the renderer spells them
alike. Every constant the kernels use that a header might not define (NVRTC has none)
is defined here, each guarded.
"""

from __future__ import annotations

from tensorjit.plugins.cstyle.scalar import supported_names
from tensorjit.plugins.device_kernels.dialect import (
    DEVICE_TYPES,
    HELPERS,
    UNARY,
    UNSIGNED_TYPEDEFS,
    DeviceDialect,
    device_helpers,
    powi,
)

FN = "__device__ inline"
GLOBAL_ID = "((long)blockIdx.x * (long)blockDim.x + (long)threadIdx.x)"

_LIMITS = {
    "CHAR_MIN": "(-128)",
    "CHAR_MAX": "127",
    "SHORT_MIN": "(-32767 - 1)",
    "SHORT_MAX": "32767",
    "INT_MIN": "(-2147483647 - 1)",
    "INT_MAX": "2147483647",
    "LONG_MIN": "(-0x7fffffffffffffffL - 1)",
    "LONG_MAX": "0x7fffffffffffffffL",
    "UCHAR_MAX": "255",
    "USHORT_MAX": "65535",
    "UINT_MAX": "4294967295U",
    "ULONG_MAX": "0xffffffffffffffffUL",
    "INT64_MIN": "(-0x7fffffffffffffffL - 1)",
    "INFINITY": "(__int_as_float(0x7f800000))",
    "NAN": "(__int_as_float(0x7fffffff))",
    "M_PI": "3.14159265358979323846",
}


def _guarded(name: str, value: str) -> str:
    return f"#ifndef {name}\n#define {name} {value}\n#endif"


HEADER = "\n".join(
    [
        UNSIGNED_TYPEDEFS,
        "#ifndef INT64_C",
        "#define INT64_C(x) (x##L)",
        "#define UINT64_C(x) (x##UL)",
        "#endif",
        *(_guarded(name, value) for name, value in _LIMITS.items()),
        # OpenCL's convert_float_rte: a long rounded to the nearest float
        "#define tj_float_rn(z) __ll2float_rn(z)",
    ]
)
PREAMBLE_F32 = HEADER + device_helpers(FN, ("float",))
PREAMBLE = HEADER + device_helpers(FN, ("float", "double"))

FLAT_LOOP = (
    f"for (long {{i}} = {GLOBAL_ID} * TJ_CHUNK, tj_end = min({{i}} + TJ_CHUNK, (long){{n}}); "
    "{i} < tj_end; {i}++)"
)

CUDA_DIALECT = DeviceDialect(
    "CUDA",
    DEVICE_TYPES,
    math_suffix_f32=False,
    unary=UNARY,
    helpers=HELPERS,
    kernel_qualifier='extern "C" __global__',
    global_qualifier="",
    function_qualifier=FN,
    restrict="__restrict__",
    powi=powi,
    flat_loop=FLAT_LOOP,
    preamble=PREAMBLE,
    global_id=GLOBAL_ID,
    group_id="((long)blockIdx.x)",
    local_id="((long)threadIdx.x)",
    local_qualifier="__shared__",
    local_barrier="__syncthreads()",
)
SUPPORTED_NAMES = supported_names(CUDA_DIALECT)


def preamble(dtypes: set[str]) -> str:
    """The preamble for kernels on ``dtypes`` (double helpers only where used)."""
    return PREAMBLE if "float64" in dtypes else PREAMBLE_F32
