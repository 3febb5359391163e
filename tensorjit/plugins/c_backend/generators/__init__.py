"""The C backend's kernel generators: elementwise loops (codegen), reductions, row
functions, indexing, construction, convolution and pooling, vector special functions,
the per-node kernels' wrappers, and the host as a Target of the shared device families."""
