"""The C kernel of ``PenalisedGemm`` (an L2-penalised weight's update and its penalty's
sum of squares, see tensor/blas.py), part of the BLAS library of ``blas.py``:
``out = beta * c + alpha * a . b`` and ``sum(c ** 2)``, with ``out`` a new array or, for
the in-place variant (a weight update), ``c`` itself.

One pass over the weight takes its squares' sum and its decay (``beta * c``, into out),
then the BLAS GEMM accumulates ``alpha * a . b`` into out: two passes where the
unfused graph makes three (the sum, the GEMM's own scaling by beta, its accumulation).
The squares are taken in the weight's dtype and summed in eight double sums. Both float
dtypes, any thread count, through the configured BLAS (benchmarks/penalised_update.py;
the times are in benchmarks/RESULTS.md). An earlier float32 kernel made the products
itself in the same pass (x86 FMA builtins, six rows at a time); on AMD Zen 5 it lost to
OpenBLAS's own kernels by 25-40% inside the MLP step and was removed.

Whole-graph programs call the same function (program.c's penalised step).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.tensor.blas import PenalisedGemm

OPS = (PenalisedGemm,)

TEMPLATE = r"""
/* out[i] = beta * c[i] for n contiguous elements; returns the sum of the c[i] * c[i]
   (eight double partial sums). */
static inline __attribute__((always_inline)) double
tj_decay_body_{p}(const {T} *c, {T} *out, long long n, {T} beta)
{
    double s[8] = {0};
    long long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            const {T} v = c[i + j];
            s[j] = s[j] + (double)(v * v);
            out[i + j] = v * beta;
        }
    double total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) {
        total = total + (double)(c[i] * c[i]);
        out[i] = c[i] * beta;
    }
    return total;
}

/* In place (out == c) the loop runs on one pointer: with two that may overlap, the
   vectoriser's run-time check sends it to scalar code. */
static double tj_decay_{p}(const {T} *c, {T} *out, long long n, {T} beta)
{
    if ((const {T} *)out == c)
        return tj_decay_body_{p}(out, out, n, beta);
    return tj_decay_body_{p}(c, out, n, beta);
}

/* out (m x n) = alpha * a (m x k) . b (k x n) + beta * c and *squares = sum(c * c), c
   and out C-contiguous; out may be c (in place), a and b must not overlap it. Statuses
   as tj_gemm's (bits 1 and 2: a and b to be copied), returned before anything is
   written: an in-place call repeated with copies decays c once. */
int tj_penalised_{p}(char *a, long long m, long long k, long long as0, long long as1,
                     char *b, long long n, long long bs0, long long bs1, char *c, char *out,
                     double alpha, double beta, double *squares)
{
    const long long z = sizeof({T});
    if (m > 0 && n > 0 && k > 0 && alpha != 0) { /* tj_gemm's checks, before the decay */
        char ta, tb;
        tj_int lda, ldb, ldc;
        int flip, need;
        if (tj_too_big(m, n, k))
            return -1;
        need = tj_gemm_operands(a, m, k, as0, as1, b, n, bs0, bs1, out, n * z, z, z, &ta, &tb,
                                &lda, &ldb, &ldc, &flip);
        if (need)
            return need;
    }
    *squares = tj_decay_{p}((const {T} *)c, ({T} *)out, m * n, ({T})beta);
    if (k == 0 || alpha == 0) /* no products (alpha 0 reads neither a nor b, as tj_gemm) */
        return 0;
    return tj_gemm_{p}(a, m, k, as0, as1, b, n, bs0, bs1, out, n * z, z, alpha, 1.0);
}
"""

CDEF = """
int tj_penalised_{p}(char *, long long, long long, long long, long long, char *, long long,
                     long long, long long, char *, char *, double, double, double *);
"""

_PREFIXES = {"float64": "d", "float32": "s"}  # blas.DTYPES' (blas.py includes this source)


def source(p: str, ctype: str) -> str:
    """The kernel for BLAS prefix ``p`` ("s"/"d") and C type ``ctype`` (after tj_gemm)."""
    return TEMPLATE.replace("{p}", p).replace("{T}", ctype)


def function_name(dtype: str) -> str:
    """The kernel for a weight of ``dtype``."""
    return f"tj_penalised_{_PREFIXES[dtype]}"


def supported(node: Apply) -> bool:
    """Float weights, x and y of the weight's dtype, a float sum (the kernel's double
    total is cast to it)."""
    z, alpha, x, y, beta = node.inputs
    return (
        z.type.dtype in _PREFIXES
        and x.type.dtype == y.type.dtype == z.type.dtype
        and node.outputs[1].type.dtype in _PREFIXES
    )


def factory(node: Apply) -> Callable[[list, list], None]:
    """The per-node kernel: the C function on C-contiguous (and, in place, writeable)
    weights of the node's dtype, Op.perform otherwise. In place, an x or y that shares
    memory with the weight is read from a copy."""
    from tensorjit.plugins.c_backend.linalg import blas

    ffi, lib = blas.library()
    dtype = node.inputs[0].type.numpy_dtype
    fn = getattr(lib, function_name(dtype.name))
    sum_dtype = node.outputs[1].type.numpy_dtype
    op = node.op
    check = op.input_check(node)
    inplace = op.inplace
    new_double, address = ffi.new, ffi.cast

    def ptr(a: np.ndarray):
        return address("char *", a.ctypes.data)

    def run(inputs: list, output_storage: list) -> None:
        z, alpha, x, y, beta = inputs
        check(inputs)
        if not (z.dtype == x.dtype == y.dtype == dtype) or not (
            z.flags.c_contiguous and z.flags.aligned and (z.flags.writeable or not inplace)
        ):
            op.perform(node, inputs, output_storage)  # another layout: NumPy's passes
            return
        if inplace:
            out = z
            x = x.copy() if np.may_share_memory(x, z) else x
            y = y.copy() if np.may_share_memory(y, z) else y
        else:
            out = output_buffer(output_storage[0][0], z.shape, dtype, inputs)
        squares = new_double("double *")
        m, k = x.shape
        n = y.shape[1] if y.ndim == 2 else 1

        def call(x: np.ndarray, y: np.ndarray) -> int:
            ys = y.strides if y.ndim == 2 else (y.strides[0], y.itemsize)
            return fn(ptr(x), m, k, x.strides[0], x.strides[1], ptr(y), n, ys[0], ys[1],
                      ptr(z), ptr(out), float(alpha), float(beta), squares)  # fmt: skip

        status = call(x, y)
        if status < 0:  # a dimension past BLAS's int (nothing written yet): NumPy's way
            op.perform(node, inputs, output_storage)
            return
        if status != 0:
            blas._retry(call, status, [x, y], (1, 2))
        output_storage[0][0] = out
        output_storage[1][0] = np.asarray(squares[0], dtype=sum_dtype)

    return run


factory.kernel_name = "penalised"
