"""What a device backend of the shared families registers, from the few facts that are
its own: its names, how to tell whether it runs here, and where (imported only when
asked, so registration loads no driver) its array kind, dialect, target and kernel
table are. Each backend's ``plugin.py`` makes one ``DeviceBackendHooks`` and exposes its
three hook implementations under the hooks' names:

- ``tensorjit_register_backends``: the ``Backend``, whose ``whole_graph`` gives a
  function its launch plan (launch_plan.py);
- ``tensorjit_register_kernels``: the kernel table;
- ``tensorjit_register_transfers``: the lifters deciding which device takes
  convolutions and pooling (transfers.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensorjit.core.hooks import hookimpl
from tensorjit.core.registries import (
    Backend,
    BackendRegistry,
    GraphPlan,
    KernelRegistry,
    Program,
    TransferRegistry,
)


def _attribute(path: str) -> Any:
    """``"package.module:NAME"``, imported now."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class DeviceBackendHooks:
    name: str
    device: str
    plugin: str
    priority: int
    description: str
    check_available: Callable[[], str | None]
    hardware: Callable[[], list[str]]
    #: "module:NAME" of the array kind, the dialect, the Target and the function giving
    #: the kernel table
    arrays: str
    dialect: str
    target: str
    specs: str

    @hookimpl
    def tensorjit_register_backends(self, registry: BackendRegistry) -> None:
        registry.add(
            Backend(
                self.name,
                device=self.device,
                priority=self.priority,
                check_available=self.check_available,
                description=self.description,
                plugin=self.plugin,
                array_kind=_attribute(self.arrays),
                renderer=_attribute(self.dialect),
                hardware=self.hardware,
                whole_graph=self.launch_plan,
            )
        )

    def launch_plan(self, plan: GraphPlan) -> Program | None:
        """A function's launch plan, when it has kernels of this backend."""
        from tensorjit.plugins.device_kernels.launch_plan import launch_plan_program

        return launch_plan_program(_attribute(self.target), plan)

    @hookimpl
    def tensorjit_register_kernels(self, registry: KernelRegistry) -> None:
        for spec in _attribute(self.specs)():
            registry.add_spec(spec)

    @hookimpl
    def tensorjit_register_transfers(self, registry: TransferRegistry) -> None:
        from tensorjit.plugins.device_kernels.transfers import register_transfers

        register_transfers(registry, _attribute(self.target))
