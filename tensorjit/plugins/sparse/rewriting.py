"""The sparse family's rewrites (registered through its ``tensorjit_register_rewrites``).

- ``local_sparse_dense_roundtrip`` (canonicalize): ``csr_from_dense(dense_from_sparse(x))``
  -> ``x`` when x is already CSR (likewise CSC); of the other format it becomes a
  format conversion, never a dense temporary.
- ``local_sparse_transpose_transpose`` (canonicalize): ``transpose(transpose(x))`` -> x.
- ``local_dot_transposed_sparse`` (specialize): a product of a transposed sparse matrix
  and a dense *vector* is computed on x itself: ``dot(x.T, v)`` -> ``dot(v, x)`` and
  ``dot(v, x.T)`` -> ``dot(x, v)``, so no Transpose node remains. With a dense matrix
  the Transpose stays (it is a view: a CSR matrix's arrays read as CSC), because the
  swapped product's result would be the transpose of a C-ordered matrix: every reader
  then walks it across rows (an SGD update of a sparse model's weights ran 2.5x slower,
  benchmarks/RESULTS.md "Native steps").
"""

from __future__ import annotations

from tensorjit.core.rewrites import node_rewriter
from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.plugins.sparse.basic import (
    ConvertFormat,
    DenseFromSparse,
    DenseSparseDot,
    SparseFromDense,
    StructuredDot,
    Transpose,
)

PLUGIN = "sparse"


def _owner_op(var, op_class):
    owner = var.owner
    return owner if owner is not None and isinstance(owner.op, op_class) else None


@node_rewriter([SparseFromDense], name="local_sparse_dense_roundtrip")
def local_sparse_dense_roundtrip(fgraph, node):
    inner = _owner_op(node.inputs[0], DenseFromSparse)
    if inner is None:
        return None
    x = inner.inputs[0]
    out_type = node.outputs[0].type
    if x.type.dtype != out_type.dtype:
        return None
    if x.type.format == out_type.format:
        return [x]
    return [ConvertFormat(out_type.format)(x)]


@node_rewriter([Transpose], name="local_sparse_transpose_transpose")
def local_sparse_transpose_transpose(fgraph, node):
    inner = _owner_op(node.inputs[0], Transpose)
    if inner is None:
        return None
    return [inner.inputs[0]]


@node_rewriter([StructuredDot, DenseSparseDot], name="local_dot_transposed_sparse")
def local_dot_transposed_sparse(fgraph, node):
    out_type = node.outputs[0].type
    if isinstance(node.op, StructuredDot):
        x_t, v = node.inputs
        swapped = DenseSparseDot  # x.T @ v == v @ x
    else:
        v, x_t = node.inputs
        swapped = StructuredDot  # v @ x.T == x @ v
    inner = _owner_op(x_t, Transpose)
    if inner is None or v.type.ndim != 1:
        return None
    x = inner.inputs[0]
    new = swapped()(v, x) if swapped is DenseSparseDot else swapped()(x, v)
    if new.type.dtype != out_type.dtype or new.type.ndim != out_type.ndim:
        return None
    return [new]


REWRITES = [
    ("local_sparse_dense_roundtrip", local_sparse_dense_roundtrip, "canonicalize"),
    ("local_sparse_transpose_transpose", local_sparse_transpose_transpose, "canonicalize"),
    ("local_dot_transposed_sparse", local_dot_transposed_sparse, "specialize"),
]


def register(db: RewriteDB) -> None:
    for name, rewriter, phase in REWRITES:
        tags = ("fast_run", "sparse") + (("fast_compile",) if phase == "canonicalize" else ())
        db.register(name, rewriter, phase, *tags, plugin=PLUGIN)
