"""The OpenCL backend: device arrays, kernels from the shared C-like renderer
(plugins/cstyle) in an OpenCL dialect, run through pyopencl.

Install it with the ``opencl`` extra (pyopencl and PoCL, a CPU OpenCL, so every machine
has a device). It is a plugin like any third party's (entry point ``opencl_backend``):

- ``runtime.py``: the chosen device, its context and queue, the program cache, launches;
- ``arrays.py``: the device's array kind (``pyopencl.array.Array`` values, strided);
- ``dialect.py``: the OpenCL dialect of the shared renderer;
- ``target.py``: the backend as the shared kernel families see it (dialect, runtime,
  arrays): the families themselves (elementwise, views, indexing, reductions, rowwise,
  random) and their work-per-item tuning live in ``plugins/device_kernels``, shared
  with CUDA;
- ``blas.py``: the backend's own GEMM family (packed GEMM, GEMV, GER, dot);
- ``kernel_table.py`` gathers both; ``plugin.py`` registers the backend and its kernels.
"""

DEVICE = "opencl"
BACKEND = "opencl"
