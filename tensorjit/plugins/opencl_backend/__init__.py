"""The OpenCL backend: device arrays, kernels from the shared C-like renderer
(plugins/cstyle) in an OpenCL dialect, run through pyopencl.

Install it with the ``opencl`` extra (pyopencl and PoCL, a CPU OpenCL, so every machine
has a device). It is a plugin like any third party's (entry point ``opencl_backend``):

- ``runtime.py``: the chosen device, its context and queue, the program cache, launches;
- ``arrays.py``: the device's array kind (``pyopencl.array.Array`` values, strided);
- ``dialect.py``: the OpenCL dialect of the shared renderer;
- one module per kernel family, each giving its ``KernelSpec`` entries, gathered by
  ``kernel_table.py``; ``plugin.py`` registers the backend and its kernels.
"""

DEVICE = "opencl"
BACKEND = "opencl"
