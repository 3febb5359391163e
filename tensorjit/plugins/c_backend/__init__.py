"""The C backend: generated C compiled with cffi (a plugin).

Laid out by job: ``build/`` (the compiler and its cache, the worker pool), ``generators/``
(the kernel generators, and the host as a Target of the shared device families),
``linalg/`` (BLAS calls and other products), ``whole_graph/`` (programs that run a whole
function in one C call); ``kernel_table.py`` (one ``KernelSpec`` per op family),
``plugin.py`` (the hooks) and ``api.py`` (what plugin authors' C kernels use).
"""
