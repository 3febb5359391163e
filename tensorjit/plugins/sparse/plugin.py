"""Entry point of the sparse op family (registration hooks).

It registers SparseType, the shared constructor for scipy.sparse values, the op classes
(family "sparse"), the rewrites, and C kernels (backend "c") for the sparse x dense
products ``StructuredDot`` and ``DenseSparseDot`` (see ``c_kernels``); every other op
runs its ``perform`` on scipy.sparse. The kernels compile nothing at registration: the
C backend is imported when a function using one is compiled with that backend.
"""

from __future__ import annotations

from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import KernelRegistry, OpRegistry, TypeRegistry
from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.plugins.sparse.basic import OP_CLASSES
from tensorjit.plugins.sparse.type import (
    SparseType,
    is_sparse_value,
    sparse_shared_constructor,
)

FAMILY = "sparse"


@hookimpl
def tensorjit_register_types(registry: TypeRegistry) -> None:
    registry.add_type(SparseType)
    registry.add_shared_constructor("scipy.sparse", is_sparse_value, sparse_shared_constructor)


@hookimpl
def tensorjit_register_ops(registry: OpRegistry) -> None:
    for op_class in OP_CLASSES:
        registry.add(op_class, FAMILY)


@hookimpl
def tensorjit_register_rewrites(db: RewriteDB) -> None:
    from tensorjit.plugins.sparse import rewriting

    rewriting.register(db)


@hookimpl
def tensorjit_register_kernels(registry: KernelRegistry) -> None:
    from tensorjit.plugins.sparse import c_kernels

    c_kernels.register(registry)
