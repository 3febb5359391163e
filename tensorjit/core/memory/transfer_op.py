"""Transfer: a value copied to another device (host to device, back, or between devices).

The placement pass (core/rewrites/transfer.py) inserts transfers at device boundaries;
users may also write ``transfer(x, "opencl")``. A transfer always makes a new buffer on
its target, so it declares no view. Its gradient is the transfer back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeGuard

from tensorjit.core.devices import HOST, array_kind
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op


class Transfer(Op):
    """Copies its input to ``target``; the output's type is the input's on ``target``."""

    __props__ = ("target",)
    constant_folding = False  # a folded transfer would be a device constant: keep it explicit
    device_generic = True  # moves values through the devices' array kinds
    may_raise = False

    def __init__(self, target: str):
        self.target = target

    def make_node(self, x: Variable) -> Apply:  # type: ignore[override]  # one input
        if not isinstance(x, Variable):
            raise TypeError(f"transfer() takes a symbolic variable, got {x!r}")
        return Apply(self, [x], [x.type.on_device(self.target).make_variable()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list]) -> None:
        output_storage[0][0] = move(inputs[0], node.inputs[0].type.device, self.target)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence) -> list:
        return [transfer(output_grads[0], inputs[0].type.device)]

    def __str__(self) -> str:
        return f"Transfer{{{self.target}}}" if self.target != HOST else "TransferToHost"


class TransferNode(Apply):
    """(For type checkers) an Apply whose op is a Transfer: what ``is_transfer`` tells."""

    op: Transfer


class Copiers(Protocol):
    """Direct device-to-device copiers that backends registered (the transfer registry)."""

    def copier(self, source: str, target: str) -> Callable[[Any], Any] | None: ...


_copiers: Callable[[], Copiers] | None = None


def use_copiers(source: Callable[[], Copiers] | None) -> None:
    """Where ``move`` finds direct copiers: the plugin system installs its transfer
    registry here (core/hooks.py); without one, every copy goes through the host."""
    global _copiers
    _copiers = source


def move(value: Any, source: str, target: str) -> Any:
    """A copy of ``value`` (living on ``source``) on ``target``, through a direct copier
    when a backend registered one, else through the host."""
    if source == target:
        return array_kind(source).copy(value)
    copier = _copiers().copier(source, target) if _copiers is not None else None
    if copier is not None:
        return copier(value)
    host = value if source == HOST else array_kind(source).to_host(value)
    if target == HOST:
        return host
    return array_kind(target).from_host(host)


def transfer(x: Variable, target: str) -> Variable:
    """``x`` on device ``target`` (itself when it is there already)."""
    if x.type.device == target:
        return x
    return Transfer(target)(x)


class DeviceConstant(Constant):
    """A constant placed on a device: ``data`` stays the host value (for rewrites,
    printing, kernels that inline it, merging equal constants), and the device copy is
    made once, when a function first holds it, instead of a transfer on every call.
    Nothing may destroy a constant, so the one copy is safe to share."""

    __slots__ = ("_device_value", "host_constant")

    def __init__(self, type: Any, data: Any, name: str | None = None):
        super().__init__(type, data, name)
        self._device_value = None
        self.host_constant: Constant | None = None  # the constant it was placed from

    @classmethod
    def of(cls, constant: Constant, device: str) -> DeviceConstant:
        placed = cls(constant.type.on_device(device), constant.data, constant.name)
        placed.created_at = constant.created_at
        placed.host_constant = constant
        return placed

    def clone(self) -> DeviceConstant:
        cp = super().clone()
        assert isinstance(cp, DeviceConstant)
        cp.host_constant = self.host_constant
        return cp

    def stored_value(self) -> Any:
        if self._device_value is None:
            self._device_value = array_kind(self.type.device).from_host(self.data)
        return self._device_value


def before_transfers(var: Variable) -> Variable:
    """The value ``var`` is a copy of (through transfers), or ``var`` itself: the user's
    variable, for messages about a value placement copied to a device."""
    while is_transfer(var.owner):
        var = var.owner.inputs[0]
    return var


def is_transfer(node: Any) -> TypeGuard[TransferNode]:
    return node is not None and isinstance(getattr(node, "op", None), Transfer)
