"""What the core itself registers: the Python backend (Op.perform, on the host device),
the generic rewrites (merge, constant folding) that every op family benefits from, and
the placement pass of the transfer phase."""

from __future__ import annotations

from tensorjit.core.devices import HOST, HOST_ARRAYS
from tensorjit.core.hooks import hookimpl, registries
from tensorjit.core.registries import Backend, BackendRegistry
from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.core.rewrites.inplace import InplacePass
from tensorjit.core.rewrites.merge import MergeRewriter, constant_folding
from tensorjit.core.rewrites.transfer import (
    PlaceOnDevices,
    ReturnInternalValues,
    remove_back_to_back_transfers,
)

PYTHON_BACKEND = "python"


def _always_available() -> str | None:
    return None


@hookimpl
def tensorjit_register_backends(registry: BackendRegistry) -> None:
    registry.add(
        Backend(
            PYTHON_BACKEND,
            device=HOST,
            priority=0,
            check_available=_always_available,
            description="reference kernels (Op.perform, NumPy); runs everywhere",
            plugin="core",
            array_kind=HOST_ARRAYS,
        )
    )


@hookimpl
def tensorjit_register_rewrites(db: RewriteDB) -> None:
    db.register(
        "merge",
        MergeRewriter(),
        "canonicalize",
        "fast_run",
        "fast_compile",
        "merge",
        position=-1,
        plugin="core",
    )
    db.register(
        "constant_folding",
        constant_folding,
        "canonicalize",
        "fast_run",
        "fast_compile",
        plugin="core",
    )
    db.register(
        "late_constant_folding",
        constant_folding,
        "specialize",
        "fast_run",
        plugin="core",
    )
    db.register(
        "pre_fusion_merge",
        MergeRewriter(),
        "fusion",
        "fast_run",
        "merge",
        position=-1,
        plugin="core",
    )
    # Placement is needed for correctness (a device's values never reach a host kernel):
    # function() adds the tag "transfer" to every mode's query.
    for name, rewriter in (
        ("place_on_devices", PlaceOnDevices()),
        ("return_internal_values", ReturnInternalValues()),
        ("remove_back_to_back_transfers", remove_back_to_back_transfers),
    ):
        db.register(
            name, rewriter, "transfer", "fast_run", "fast_compile", "transfer", plugin="core"
        )
    db.register(
        "inplace",
        InplacePass(lambda: registries().inplace),
        "inplace",
        "fast_run",
        "inplace",
        plugin="core",
    )
    db.register(
        "final_merge",
        MergeRewriter(),
        "cleanup",
        "fast_run",
        "fast_compile",
        "merge",
        plugin="core",
    )
