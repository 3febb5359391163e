"""The OpenCL backend: device arrays, kernels from the shared C-like renderer
(plugins/cstyle) in an OpenCL dialect, run through pyopencl.

Install it with the ``opencl`` extra (pyopencl and PoCL, a CPU OpenCL, so every machine
has a device). It is a plugin like any third party's (entry point ``opencl_backend``):

- ``runtime.py``: the chosen device, its context and queue, the program cache, launches;
- ``arrays.py``: the device's array kind (``pyopencl.array.Array`` values, strided);
- ``dialect.py``: the OpenCL dialect of the shared renderer;
- ``tuning.py``: work per work-item of the flat kernels (CPU and GPU devices differ);
- one module per kernel family, each giving its ``KernelSpec`` entries (``specs()``),
  gathered by ``kernel_table.py``: ``elementwise`` (fused maps, casts, copies),
  ``views`` (dimshuffle, reshape, basic indexing, alloc, fill), ``indexing`` (set/inc
  subtensor, advanced gather/scatter, class selection), ``reductions``, ``rowwise``
  (softmax, log_softmax), ``blas`` (packed GEMM, GEMV, GER, dot) and ``random``
  (MRG31k3p); ``plugin.py`` registers the backend and its kernels.
"""

DEVICE = "opencl"
BACKEND = "opencl"
