"""Diagnostics for developers and plugin authors (not part of the compiler itself):
``kernel_coverage`` (which backend gives the paper's Table 1 ops kernels) and the
probe graphs it compiles (``table1_probes``)."""
