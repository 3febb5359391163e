"""The dense tensor family's plugin: found through the ``tensorjit.plugins`` entry point
like any third party's, it registers TensorType, the shared constructor and its ops."""

from __future__ import annotations

from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import InplaceRegistry, KernelRegistry, OpRegistry, TypeRegistry
from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.tensor import allocation, extra_ops, linalg, nnet
from tensorjit.tensor.blas import Gemm, Ger, PenalisedGemm, numpy_blas_kernel
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.ifelse import IfElse
from tensorjit.tensor.math import Alloc, Argmax, Dot, Reduce
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.tensor.shape_ops import Join, MakeVector, Reshape, Shape, Split
from tensorjit.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
    advanced_incsubtensor_inplace_variant,
)
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import accepts_tensor_value, tensor_shared_constructor

FAMILY = "tensor"
OP_CLASSES = (
    Elemwise,
    DimShuffle,
    Alloc,
    Argmax,
    Dot,
    Reduce,
    MakeVector,
    Reshape,
    Shape,
    Subtensor,
    IncSubtensor,
    Gemm,
    Ger,
    IfElse,
    Join,
    Split,
    extra_ops.Tile,
    extra_ops.Repeat,
    extra_ops.RepeatGrad,
    extra_ops.Roll,
    extra_ops.Sort,
    extra_ops.Argsort,
    extra_ops.TakeAlongAxis,
    extra_ops.ScatterAddAlongAxis,
    extra_ops.CumOp,
    extra_ops.CumprodGrad,
    extra_ops.Bincount,
    extra_ops.Unique,
    extra_ops.SearchSorted,
    linalg.MatMul,
    linalg.TensorDot,
    linalg.AllocDiag,
    linalg.ExtractDiag,
    linalg.IncDiagonal,
    linalg.TriangularPart,
    linalg.SolveTriangular,
    linalg.Cholesky,
    linalg.MatrixInverse,
    linalg.MatrixPinv,
    linalg.Solve,
    linalg.Det,
    linalg.SLogDet,
    linalg.Eigh,
    linalg.QR,
    linalg.SVD,
    *nnet.OP_CLASSES,
    allocation.Second,
    allocation.Eye,
    allocation.Tri,
    allocation.ARange,
    AdvancedSubtensor,
    AdvancedIncSubtensor,
)


@hookimpl
def tensorjit_register_types(registry: TypeRegistry) -> None:
    registry.add_type(TensorType)
    registry.add_shared_constructor("ndarray", accepts_tensor_value, tensor_shared_constructor)


def elemwise_inplace_variant(node, candidates: list[int]):
    """Write an elementwise result into the first candidate input that can hold it."""
    out_type = node.outputs[0].type
    for i in candidates:
        t = node.inputs[i].type
        if t.dtype == out_type.dtype and t.broadcastable == out_type.broadcastable:
            return Elemwise(node.op.scalar_op, inplace=i)
    return None


def multi_output_inplace_variant(node, candidates: list[int]):
    """One more output written into a candidate input's buffer (the maker is asked
    again for further outputs)."""
    return node.op.with_inplace(node, candidates)


def incsubtensor_inplace_variant(node, candidates: list[int]):
    if 0 not in candidates:
        return None
    op = node.op
    return IncSubtensor(op.entries, op.set_instead_of_inc, inplace=True)


def gemm_inplace_variant(node, candidates: list[int]):
    return type(node.op)(inplace=True) if 0 in candidates else None


def penalised_gemm_inplace_variant(node, candidates: list[int]):
    return PenalisedGemm(node.op.dtype, inplace=True) if 0 in candidates else None


@hookimpl
def tensorjit_register_inplace(registry: InplaceRegistry) -> None:
    registry.add(Elemwise, elemwise_inplace_variant, plugin=FAMILY)
    registry.add(MultiOutputElemwise, multi_output_inplace_variant, plugin=FAMILY, repeatable=True)
    registry.add(IncSubtensor, incsubtensor_inplace_variant, plugin=FAMILY)
    registry.add(Gemm, gemm_inplace_variant, plugin=FAMILY)
    registry.add(Ger, gemm_inplace_variant, plugin=FAMILY)
    registry.add(PenalisedGemm, penalised_gemm_inplace_variant, plugin=FAMILY)
    registry.add(AdvancedIncSubtensor, advanced_incsubtensor_inplace_variant, plugin=FAMILY)


@hookimpl
def tensorjit_register_kernels(registry: KernelRegistry) -> None:
    for op_class in (Gemm, Ger):
        registry.add("python", op_class, numpy_blas_kernel, name="numpy-blas", plugin=FAMILY)


@hookimpl
def tensorjit_register_rewrites(db: RewriteDB) -> None:
    from tensorjit.tensor import rewriting

    rewriting.register(db)


@hookimpl
def tensorjit_register_ops(registry: OpRegistry) -> None:
    for op_class in OP_CLASSES:
        registry.add(op_class, FAMILY)
