"""Entry point of the scan family (loops over sequences): its op and its rewrites,
registered through the same hooks and entry-point group as any third party's."""

from __future__ import annotations

from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import OpRegistry
from tensorjit.core.rewrites.db import RewriteDB

FAMILY = "scan"


@hookimpl
def tensorjit_register_ops(registry: OpRegistry) -> None:
    from tensorjit.scan import Scan

    registry.add(Scan, FAMILY)


@hookimpl
def tensorjit_register_rewrites(db: RewriteDB) -> None:
    from tensorjit.scan import rewriting

    rewriting.register(db)
