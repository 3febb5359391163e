"""The CUDA backend: device arrays, kernels from the shared renderer in a CUDA dialect
(the kernel families of plugins/device_kernels), GEMM through cuBLAS, run through
pycuda.

Install it with the ``cuda`` extra. It is a plugin like any third party's (entry point
``cuda_backend``):

- ``dialect.py``: the CUDA C++ dialect of the shared renderer and its preamble;
- ``compiler.py``: CUDA source to PTX (nvcc, else NVRTC), cached on disk by source,
  architecture and toolkit version; it needs no GPU, so CI compiles every kernel;
- ``runtime.py``: the chosen device (``device=cuda``, ``cuda0``, ``cuda1``...), its
  context, memory pools (device and pinned), modules and launches;
- ``arrays.py``: the device's array kind (strided arrays over pooled allocations);
- ``cublas.py``: Dot, MatMul, Gemm, Gemv and Ger through cuBLAS (cffi, ABI mode);
- ``target.py``, ``kernel_table.py``, ``plugin.py``: the backend as the kernel families
  see it, its kernel table, its registration.
"""

DEVICE = "cuda"
BACKEND = "cuda"
