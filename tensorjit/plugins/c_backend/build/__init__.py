"""Building the C backend's code: the compiler and its cache, the worker pool
(thread_pool.c) and kernels that split their loops over it."""
