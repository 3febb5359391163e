"""The C backend's kernel table: one ``KernelSpec`` per op family.

Each spec makes every decision about its family in one place: whether it covers a node
(its ``plan``, made when the kernel is chosen and carried by the chosen kernel), the C
sources to prebuild, the per-node kernel and the node's step in a whole-graph program
(``program._Tables``). The elementwise and reduction plans hold the generated source;
the other families' plans only say "covered", and their modules build the source. Selection
(core/kernel_selection.py), preparation (``prepare`` below) and programs all read these
specs, so they agree by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.c_backend.build import compiler
from tensorjit.plugins.c_backend.generators import (
    codegen,
    construct,
    convolution,
    host_target,
    indexing,
    kernels,
    pooling,
    rowwise,
)
from tensorjit.plugins.c_backend.linalg import blas, blas_batched, penalised
from tensorjit.tensor.allocation import ARange
from tensorjit.tensor.blas import Gemm, Ger
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.elemwise_reduce import ElemwiseReduce
from tensorjit.tensor.math import Alloc, Dot, MappedReduce, Reduce
from tensorjit.tensor.max_exp_sum import MaxExpSum
from tensorjit.tensor.moments import Moments
from tensorjit.tensor.moments_map import MomentsMap
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.tensor.shape_ops import MakeVector, Reshape, Shape
from tensorjit.tensor.subtensor import IncSubtensor, Subtensor

BACKEND = "c"
PLUGIN = "c_backend"


def _exactly(classes: tuple[type, ...], plan: Callable[[Apply], Any]) -> Callable[[Apply], Any]:
    """A plan for nodes whose op is exactly one of ``classes`` (subclasses may differ),
    None where the generator raises Unsupported."""

    def planned(node: Apply) -> Any:
        if type(node.op) not in classes:
            return None
        try:
            return plan(node)
        except codegen.Unsupported:
            return None

    return planned


def _covered_if(supported: Callable[[Apply], bool]) -> Callable[[Apply], Any]:
    return lambda node: True if supported(node) else None


def _blas_sources(node: Apply, plan: Any) -> list[tuple[str, str]]:
    return [(blas.blas_source()[0], "BLAS kernels")]


def _perform(node: Apply, plan: Any) -> Callable[[list, list], None]:
    """Views and shapes run Op.perform per node (NumPy makes the view); the program
    computes them itself."""
    return partial(node.op.perform, node)


def _elemwise_cannot_fail(node: Apply, plan: Any) -> bool:
    """An elementwise kernel's only failure, memory aside, is operands whose shapes do
    not broadcast (float arithmetic in C raises nothing): float operands of static
    shapes that broadcast can not make it fail."""
    variables = [*node.inputs, *node.outputs]
    if any(np.dtype(v.type.dtype).kind != "f" for v in variables):
        return False
    shapes = [v.type.shape for v in node.inputs]
    if any(length is None for shape in shapes for length in shape):
        return False
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _step(name: str) -> Callable[[Any, Apply, Any], Any]:
    """The program builder's method ``name`` as a spec's ``step``."""
    return lambda tables, node, plan: getattr(tables, name)(node, plan)


def _family(name: str, module: Any, sources: Callable, step: Callable | None = None) -> KernelSpec:
    """The spec of a module with ``OPS``, ``supported(node)`` and ``factory(node)``."""
    return KernelSpec(
        f"c:{name}",
        BACKEND,
        module.OPS,
        lambda node, plan: module.factory(node),
        plan=_exactly(module.OPS, _covered_if(module.supported)),
        sources=sources,
        step=step,
        plugin=PLUGIN,
    )


def _generated(
    name: str, ops: tuple[type, ...], factory: Callable, plan: Callable, step: str
) -> KernelSpec:
    """The spec of a family whose plan holds its generated source (exactly ``ops``; the
    plan, ``factory`` and the program's ``step`` builder take that plan)."""
    return KernelSpec(
        f"c:{name}",
        BACKEND,
        ops,
        factory,
        plan=_exactly(ops, plan),
        sources=lambda node, plan: [(plan.source, str(node.op))],
        step=_step(step),
        plugin=PLUGIN,
    )


def _per_dtype_library(name: str, module: Any) -> KernelSpec:
    """The spec of per-node kernels that ``module`` keeps in one library per float dtype
    (``OPS``, ``supported``, ``factory``, ``source_of(dtype)``); no program step."""
    return _family(
        name,
        module,
        lambda node, plan: [(module.source_of(node.outputs[0].type.dtype)[0], f"{name} kernels")],
    )


SPECS = (
    KernelSpec(
        "c:elemwise",
        BACKEND,
        (Elemwise, MultiOutputElemwise),
        kernels.elemwise_factory,
        plan=_exactly((Elemwise, MultiOutputElemwise), kernels.elemwise_plan),
        sources=lambda node, plan: [(plan.source, str(node.op))],
        step=_step("elemwise"),
        plugin=PLUGIN,
        cannot_fail=_elemwise_cannot_fail,
    ),
    _generated(
        "reduce",
        (Reduce, MappedReduce, ElemwiseReduce),
        kernels.reduce_factory,
        kernels.reduce_plan,
        "reduce",
    ),
    _generated("moments", (Moments,), kernels.moments_factory, kernels.moments_plan, "reduce"),
    _generated(
        "moments_map",
        (MomentsMap,),
        kernels.moments_map_factory,
        kernels.moments_map_plan,
        "elemwise",
    ),
    _generated(
        "max_exp_sum",
        (MaxExpSum,),
        kernels.max_exp_sum_factory,
        kernels.max_exp_sum_plan,
        "reduce",
    ),
    KernelSpec(
        "c:blas",
        BACKEND,
        (Dot, Gemm, Ger),
        lambda node, plan: blas.factory(node),
        plan=_exactly((Dot, Gemm, Ger), _covered_if(blas.supported)),
        sources=_blas_sources,
        step=_step("blas"),
        plugin=PLUGIN,
    ),
    _family("blas", blas_batched, _blas_sources),
    _family(
        "rowwise",
        rowwise,
        lambda node, plan: [(rowwise.source_of(node)[0], str(node.op))],
        _step("rowwise"),
    ),
    _family("penalised", penalised, _blas_sources, _step("penalised")),
    _per_dtype_library("convolution", convolution),
    _per_dtype_library("pooling", pooling),
    _family(
        "indexing",
        indexing,
        lambda node, plan: [(indexing.source_of(node), str(node.op))],
        _step("indexing"),
    ),
    KernelSpec(
        "c:construct",
        BACKEND,
        construct.OPS,
        lambda node, plan: construct.factory(node),
        plan=_exactly(construct.OPS, _covered_if(construct.supported)),
        sources=lambda node, plan: [(construct.source_of(node)[0], str(node.op))],
        step=lambda tables, node, plan: (
            tables.alloc(node, plan)
            if type(node.op) is Alloc
            else tables.arange(node, plan)
            if type(node.op) is ARange
            else tables.decline(node)
        ),
        plugin=PLUGIN,
    ),
    KernelSpec(
        "c:view",
        BACKEND,
        (DimShuffle, Subtensor, Shape, Reshape, MakeVector),
        _perform,
        plan=_exactly((DimShuffle, Subtensor, Shape, Reshape, MakeVector), lambda node: True),
        step=lambda tables, node, plan: {
            DimShuffle: tables.dimshuffle,
            Subtensor: tables.subtensor,
            Shape: tables.shape,
            Reshape: tables.reshape,
            MakeVector: tables.make_vector,
        }[type(node.op)](node, plan),
        plugin=PLUGIN,
    ),
    KernelSpec(
        "c:inc_subtensor",
        BACKEND,
        (IncSubtensor,),
        _perform,  # NumPy's in-place add per node; programs run it as a C step
        plan=_exactly((IncSubtensor,), lambda node: True),
        step=lambda tables, node, plan: tables.inc_subtensor(node, plan),
        plugin=PLUGIN,
    ),
)


# The shared device families on the host target, for ops with no C kernel of their own
# (host_target.py): MRG31k3p.
SPECS = (*SPECS, *host_target.specs())


def prepare(chosen: list[tuple[Apply, Any]], extra: list[tuple] = ()) -> None:
    """Build every kernel the chosen ``(node, kernel)`` pairs need, and the ``extra``
    entries (see ``compiler.prebuild``), before their factories load them one by one."""
    wanted = list(extra)
    for node, kernel in chosen:
        spec = kernel.spec
        if spec is not None and spec.sources is not None:
            wanted.extend(spec.sources(node, kernel.plan))
    compiler.prebuild(wanted)
