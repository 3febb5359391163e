"""Entry point of the C backend (backend and kernel registration hooks).

It is the default CPU backend (priority above the Python backend's). Registration
probes nothing: whether cffi and a C compiler are usable is checked when
the backend is first asked for. Kernels are chosen per node through
``tensorjit_select_kernel``, so a node the C code generator does not cover (a scalar op
without a C equivalent, float16, complex) falls back to the next backend.
"""

from __future__ import annotations

from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import Backend, BackendRegistry

BACKEND = "c"
PLUGIN = "c_backend"
# Above the Python backend (priority 0): the default CPU backend wherever a C compiler
# runs; nodes without a C kernel fall back to Op.perform. Opt out per mode with
# tensorjit.FAST_RUN.with_backends("python").
PRIORITY = 10


def check_available() -> str | None:
    from tensorjit.plugins.c_backend.compiler import unavailable_reason

    return unavailable_reason()


@hookimpl
def tensorjit_register_backends(registry: BackendRegistry) -> None:
    registry.add(
        Backend(
            BACKEND,
            device="cpu",
            priority=PRIORITY,
            check_available=check_available,
            description="generated C (elementwise, fused, reductions, BLAS) compiled with cffi",
            plugin=PLUGIN,
            prepare=_prepare,
            whole_graph=_whole_graph,
        )
    )


def _prepare(nodes: list) -> None:
    from tensorjit.plugins.c_backend import kernels, program

    kernels.prepare(nodes, extra=program.prebuild_entries())


def _whole_graph(plan):
    from tensorjit.plugins.c_backend.program import whole_graph

    return whole_graph(plan)


@hookimpl
def tensorjit_select_kernel(node, backend: str):
    if backend != BACKEND:
        return None
    from tensorjit.plugins.c_backend.kernels import select

    return select(node)
