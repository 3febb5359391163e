"""Dot, 2-d MatMul, Gemm and Ger on a device, written once over a ``GemmProvider``: the
backend's way of computing a product (OpenCL: our packed kernels; CUDA: cuBLAS).

Everything else is the same on every device and lives here: the plans (blas_plan.py:
which nodes a device takes, where alpha and beta come from), the shape checks in the
words of ``Dot.perform`` (the ops' ``check_shapes``), the new outputs, and reading an
operand that overlaps an in-place target from a private copy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels.blas_plan import BlasPlan, BlasPlanner
from tensorjit.plugins.device_kernels.indexing import private_copy
from tensorjit.plugins.device_kernels.target import (
    Factory,
    Planner,
    Target,
    node_label,
    table_specs,
)

if TYPE_CHECKING:
    from tensorjit.tensor.blas import Gemm, Ger

Run = Callable[[list, list], None]


class Products(Protocol):
    """One plan's products on a device (``GemmProvider.bind``). ``alpha``/``beta`` are
    the node's input values where the plan reads them from inputs
    (``BlasPlan.is_input``), else None and the plan's constants apply. ``x`` and ``y``
    never overlap ``out``."""

    def product(self, out: Any, c: Any, x: Any, y: Any, alpha: Any, beta: Any) -> None:
        """``out = alpha dot(x, y) + beta c`` for vectors and matrices (``c`` may be
        ``out``; beta 0 never reads it)."""

    def ger(self, out: Any, z: Any, x: Any, y: Any, alpha: Any) -> None:
        """``out = z + alpha x y^T`` (``z`` may be ``out``)."""


class GemmProvider(Protocol):
    """How one device backend computes products."""

    @property
    def target(self) -> Target: ...

    #: whether a launch plan may record the products (only launches through the runtime)
    @property
    def launches_only(self) -> bool: ...

    def bind(self, plan: BlasPlan) -> Products:
        """The products of ``plan`` (what they need prepared once, when the kernel is
        made, not on each call)."""


def dot_factory(provider: GemmProvider) -> Callable[[Apply, BlasPlan], Run]:
    def factory(node: Apply, plan: BlasPlan) -> Run:
        from tensorjit.tensor.math import Dot

        where, rt, products = node_label(node), provider.target.runtime(), provider.bind(plan)

        def run(inputs: list, output_storage: list) -> None:
            x, y = inputs
            Dot.check_shapes(x, y, where)
            out = rt.empty(x.shape[:-1] + y.shape[1:], plan.dtype)
            products.product(out, out, x, y, None, None)
            output_storage[0][0] = out

        return run

    return factory


def _target_and_operands(
    t: Target, rt: Any, plan: BlasPlan, z: Any, x: Any, y: Any
) -> tuple[Any, Any, Any]:
    """The output (``z`` itself in place, else new) and x, y kept apart from it."""
    if not plan.inplace:
        return rt.empty(z.shape, plan.dtype), x, y
    return z, private_copy(t, x, z), private_copy(t, y, z)


def gemm_factory(provider: GemmProvider) -> Callable[[Apply, BlasPlan], Run]:
    def factory(node: Apply, plan: BlasPlan) -> Run:
        check = cast("Gemm", node.op).check_shapes
        t, products = provider.target, provider.bind(plan)
        rt = t.runtime()

        def run(inputs: list, output_storage: list) -> None:
            check(inputs)
            z, alpha, x, y, beta = inputs
            out, x, y = _target_and_operands(t, rt, plan, z, x, y)
            products.product(out, z, x, y, alpha, beta)
            output_storage[0][0] = out

        return run

    return factory


def ger_factory(provider: GemmProvider) -> Callable[[Apply, BlasPlan], Run]:
    def factory(node: Apply, plan: BlasPlan) -> Run:
        check = cast("Ger", node.op).check_shapes
        t, products = provider.target, provider.bind(plan)
        rt = t.runtime()

        def run(inputs: list, output_storage: list) -> None:
            check(inputs)
            z, alpha, x, y = inputs
            out, x, y = _target_and_operands(t, rt, plan, z, x, y)
            products.ger(out, z, x, y, alpha)
            output_storage[0][0] = out

        return run

    return factory


def specs(provider: GemmProvider, plans: BlasPlanner) -> list[KernelSpec]:
    """The backend's dot, matmul, gemm and ger kernels."""
    from tensorjit.tensor.blas import Gemm, Ger
    from tensorjit.tensor.linalg import MatMul
    from tensorjit.tensor.math import Dot

    def planner(plan: Callable[[Apply], BlasPlan | None]) -> Planner:
        return lambda _target, node: plan(node)  # (the planner knows its device)

    table: list[tuple[str, type, Factory, Planner]] = [
        ("dot", Dot, dot_factory(provider), planner(plans.dot_plan)),
        ("matmul", MatMul, dot_factory(provider), planner(plans.matmul_plan)),
        ("gemm", Gemm, gemm_factory(provider), planner(plans.gemm_plan)),
        ("ger", Ger, ger_factory(provider), planner(plans.gemm_plan)),
    ]
    names = {name for name, *_ in table} if provider.launches_only else set()
    return table_specs(provider.target, table, launches_only=names)
