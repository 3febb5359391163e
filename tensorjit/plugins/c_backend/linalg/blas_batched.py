"""C kernels for products of stacks and of tensors, on the BLAS kernels of ``blas``:
MatMul (one GEMM per broadcast batch index, the loop over the batch in C:
``tj_gemm_batched``, split over the thread pool with config ``threads`` above 1) and
TensorDot (one GEMM on the operands seen as matrices, as ``numpy.tensordot`` computes
it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import threads
from tensorjit.plugins.c_backend.linalg import blas
from tensorjit.tensor.linalg import MatMul, TensorDot

Run = Callable[[list, list], None]
OPS = (MatMul, TensorDot)


def supported(node: Apply) -> bool:
    return type(node.op) in OPS and blas.PLANS.float_dtype(node, list(node.inputs)) is not None


def _gemm_call(node: Apply):
    """call(x, y, out) computing out = x @ y for 2-d arrays, copying what BLAS can not
    address (see ``blas._retry``)."""
    ffi, lib = blas.library()
    p = blas.DTYPES[node.outputs[0].type.dtype][0]
    ptr, output = blas._helpers(ffi, node.outputs[0].type.numpy_dtype)
    gemm = getattr(lib, f"tj_gemm_{p}")

    def call(x, y, out):
        m, k = x.shape
        return gemm(
            ptr(x), m, k, *x.strides, ptr(y), y.shape[1], *y.strides, ptr(out), *out.strides,
            1.0, 0.0,
        )  # fmt: skip

    def product(x, y, out) -> None:
        status = call(x, y, out)
        if status:
            arrays = blas._retry(call, status, [x, y, out], (1, 2, 4))
            if arrays[2] is not out:  # the result went to a contiguous copy
                out[...] = arrays[2]

    return product, output


def _batched_call(node: Apply) -> Callable[[np.ndarray, np.ndarray, np.ndarray], int]:
    """call(a, b, out) computing every out[i] = a[i] @ b[i] over the batch axes of
    ``out`` (``a`` and ``b`` broadcast to them) in one C loop; its status: 0 done, else
    nonzero (an operand BLAS can not address, too many axes, too large: the caller's
    own loop handles it)."""
    ffi, lib = blas.library()
    p = blas.DTYPES[node.outputs[0].type.dtype][0]
    ptr = blas._helpers(ffi, node.outputs[0].type.numpy_dtype)[0]
    batched = getattr(lib, f"tj_gemm_batched_{p}")

    def call(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> int:
        nd = out.ndim - 2
        shape, sa, sb, sc = (
            ffi.new("long long[]", list(v)) for v in (out.shape, a.strides, b.strides, out.strides)
        )
        m, k = a.shape[-2:]
        return batched(
            ptr(a), ptr(b), ptr(out), m, k, out.shape[-1], a.strides[-2], a.strides[-1],
            b.strides[-2], b.strides[-1], out.strides[-2], out.strides[-1], nd, shape, sa,
            sb, sc, threads.thread_count(),
        )  # fmt: skip

    return call


def _matmul_factory(node: Apply) -> Run:
    product, output = _gemm_call(node)
    batched = _batched_call(node)
    perform = node.op.perform
    # A batch dimension broadcasts only where its static length is 1 (MatMul's rule).
    na, nb = (v.type.ndim - 2 for v in node.inputs)
    n = max(na, nb)
    fixed_a = (True,) * (n - na) + tuple(s == 1 for s in node.inputs[0].type.shape[:-2])
    fixed_b = (True,) * (n - nb) + tuple(s == 1 for s in node.inputs[1].type.shape[:-2])

    def batch_shape(sa: tuple, sb: tuple) -> tuple | None:
        sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
        batch = []
        for x, y, one_a, one_b in zip(sa, sb, fixed_a, fixed_b):
            if x != y and not (one_a or one_b):
                return None
            batch.append(max(x, y) if x and y else 0)
        return tuple(batch)

    def run(inputs: list, output_storage: list) -> None:
        a, b = inputs
        batch = batch_shape(a.shape[:-2], b.shape[:-2])
        if batch is None or a.shape[-1] != b.shape[-2]:
            perform(node, inputs, output_storage)  # the reference error
            return
        out = output(output_storage[0][0], batch + (a.shape[-2], b.shape[-1]))
        a = np.broadcast_to(a, batch + a.shape[-2:])  # views: broadcast batches repeat
        b = np.broadcast_to(b, batch + b.shape[-2:])
        if batched(a, b, out) != 0:  # (products done before the failing one are redone)
            for index in np.ndindex(*batch):
                product(a[index], b[index], out[index])
        output_storage[0][0] = out

    return run


def _tensordot_factory(node: Apply) -> Run:
    product, output = _gemm_call(node)
    op = node.op
    perform = op.perform
    nda, ndb = (v.type.ndim for v in node.inputs)
    free_a = tuple(i for i in range(nda) if i not in op.axes_a)
    free_b = tuple(i for i in range(ndb) if i not in op.axes_b)

    def run(inputs: list, output_storage: list) -> None:
        a, b = inputs
        if any(a.shape[i] != b.shape[j] for i, j in zip(op.axes_a, op.axes_b)):
            perform(node, inputs, output_storage)  # the reference error
            return
        shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b)
        m = int(np.prod([a.shape[i] for i in free_a]))
        n = int(np.prod([b.shape[i] for i in free_b]))
        k = int(np.prod([a.shape[i] for i in op.axes_a]))
        # As numpy.tensordot does: a reshape copies only what is not already a matrix view.
        x = a.transpose(free_a + op.axes_a).reshape(m, k)
        y = b.transpose(op.axes_b + free_b).reshape(k, n)
        out = output(output_storage[0][0], shape)
        product(x, y, out.reshape(m, n))  # a view: out is C-contiguous
        output_storage[0][0] = out

    return run


def factory(node: Apply) -> Run:
    if type(node.op) is MatMul:
        return _matmul_factory(node)
    return _tensordot_factory(node)


factory.kernel_name = "blas"
