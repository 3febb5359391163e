"""Entry point of the C backend (backend and kernel registration hooks).

It is the default CPU backend (priority above the Python backend's). Registration
probes nothing: whether cffi and a C compiler are usable is checked when the backend is
first asked for. Its kernels are the specs of kernel_table.py; a node no spec covers (a
scalar op without a C equivalent, float16, complex) falls back to the next backend.
"""

from __future__ import annotations

import os

from tensorjit.core.devices import HOST
from tensorjit.core.graph.basic import Apply
from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import (
    Backend,
    BackendRegistry,
    GraphPlan,
    Kernel,
    KernelRegistry,
    Program,
)

BACKEND = "c"
PLUGIN = "c_backend"
# Above the Python backend (priority 0): the default CPU backend wherever a C compiler
# runs; nodes without a C kernel fall back to Op.perform. Opt out per mode with
# tensorjit.FAST_RUN.with_backends("python").
PRIORITY = 10


def check_available() -> str | None:
    from tensorjit.plugins.c_backend.build.compiler import unavailable_reason

    return unavailable_reason()


@hookimpl
def tensorjit_register_backends(registry: BackendRegistry) -> None:
    # Importing these probes nothing: the compiler is looked for on first use.
    from tensorjit.plugins.c_backend.build.compiler import HOST_C_COMPILER
    from tensorjit.plugins.c_backend.generators.codegen import C_DIALECT

    registry.add(
        Backend(
            BACKEND,
            device=HOST,
            priority=PRIORITY,
            check_available=check_available,
            description="generated C (elementwise, fused, reductions, BLAS) compiled with cffi",
            plugin=PLUGIN,
            prepare=_prepare,
            whole_graph=_whole_graph,
            renderer=C_DIALECT,
            compiler=HOST_C_COMPILER,
            hardware=_hardware,
        )
    )


def _hardware() -> list[str]:
    """``python -m tensorjit info``'s lines: the BLAS and the kernels it runs here."""
    from tensorjit.plugins.c_backend.build import compiler, threads
    from tensorjit.plugins.c_backend.linalg import blas

    chosen = blas.provider()
    core = threads.blas_core(chosen.where)
    lines = [f"BLAS: {chosen.name} ({chosen.where}), kernels for {core or 'an unnamed core'}"]
    hint = threads.avx512_hint(core, compiler.cpu_flags(), os.environ.get("OPENBLAS_CORETYPE"))
    if hint:
        lines.append(hint)
    return lines


def _prepare(chosen: list[tuple[Apply, Kernel]]) -> None:
    from tensorjit.plugins.c_backend import kernel_table
    from tensorjit.plugins.c_backend.whole_graph import program

    kernel_table.prepare(chosen, extra=program.prebuild_entries())


def _whole_graph(plan: GraphPlan) -> Program | None:
    from tensorjit.plugins.c_backend.whole_graph.program import whole_graph

    return whole_graph(plan)


@hookimpl
def tensorjit_register_kernels(registry: KernelRegistry) -> None:
    from tensorjit.plugins.c_backend.kernel_table import SPECS

    for spec in SPECS:
        registry.add_spec(spec)
