"""Small helpers shared by the tensor rewrites."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.tensor.elemwise import DimShuffle, scalar_name
from tensorjit.tensor.rewriting.shape import shape_of
from tensorjit.tensor.shape_ops import Shape
from tensorjit.tensor.subtensor import Subtensor


def op_name(var: Variable) -> str | None:
    return scalar_name(var.owner)


def single_client(fgraph: FunctionGraph, var: Variable) -> Apply | None:
    """The only node using ``var`` (None if several, or if it is a graph output)."""
    clients = fgraph.clients.get(var, {})
    if len(clients) != 1:
        return None
    ((client, _),) = clients
    return None if client == OUTPUT else client


def reduced_value_restored(var: Variable, axis: int) -> Variable | None:
    """``r`` when ``var`` is ``r`` with its reduced axis ``axis`` put back (a DimShuffle
    inserting a broadcastable axis there: a reduction's result with keepdims)."""
    restore = var.owner
    if restore is None or type(restore.op) is not DimShuffle:
        return None
    ndim = var.type.ndim
    order = tuple(range(axis)) + ("x",) + tuple(range(axis, ndim - 1))
    return restore.inputs[0] if tuple(restore.op.new_order) == order else None


def constant_data(var: Variable) -> np.ndarray | None:
    return var.data if isinstance(var, Constant) else None


def is_constant_value(var: Variable, value: float) -> bool:
    data = constant_data(var)
    return data is not None and bool(np.all(data == value))


def fits(old: Variable, new: Variable) -> Variable | None:
    """``new`` as a replacement for ``old`` (same type), or None if it can not be."""
    if new.type == old.type:
        return new
    return old.type.convert_variable(new)


def same_expression(a: Variable, b: Variable) -> bool:
    """Whether two graphs compute the same thing node for node (leaves by identity,
    constants by value). Iterative."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, Constant) and isinstance(y, Constant):
            if x.signature() != y.signature():
                return False
            continue
        if x.owner is None or y.owner is None:
            return False
        if x.owner.op != y.owner.op or x.index != y.index:
            return False
        if len(x.owner.inputs) != len(y.owner.inputs):
            return False
        stack.extend(zip(x.owner.inputs, y.owner.inputs))
    return True


def order_key(var: Variable) -> tuple:
    """A deterministic order for the terms of a sum or product (constants last)."""
    return (isinstance(var, Constant), int(var.auto_name[1:]))


def is_length_of(fgraph: FunctionGraph, dim, x, axis: int) -> bool:
    """``dim`` is provably ``x.shape[axis]``: x's static length, or the same expression
    as the length infer_shape gives x (e.g. both read one input's shape)."""
    if isinstance(dim, Constant):
        return x.type.shape[axis] is not None and int(dim.data) == x.type.shape[axis]
    node = dim.owner  # v.shape[i]: what infer_shape says of it
    if node is not None and isinstance(node.op, Subtensor) and node.op.entries == ("i",):
        shape, index = node.inputs[0].owner, node.inputs[1]
        if shape is not None and isinstance(shape.op, Shape) and isinstance(index, Constant):
            dim = shape_of(fgraph, shape.inputs[0])[int(index.data)]
    return same_expression(dim, shape_of(fgraph, x)[axis])


def _placement_devices(fgraph: FunctionGraph) -> tuple[Any, set[str]]:
    """(the function's BackendChoice or None, the devices besides the host that
    placement may put ``fgraph``'s nodes on: the default device, its inputs')."""
    from tensorjit.core.devices import HOST
    from tensorjit.core.kernel_selection import BackendChoice

    choice = fgraph.get_feature(BackendChoice)
    devices = {getattr(v.type, "device", HOST) for v in fgraph.inputs}
    if choice is not None:
        devices.add(choice.default_device)
    devices.discard(HOST)
    return choice, devices


def devices_have_kernels(fgraph: FunctionGraph, op_class: type) -> bool:
    """Whether each device placement may put ``fgraph``'s nodes on has a backend of the
    function with kernels for ``op_class`` (a cheap first test; devices_run asks about
    one node). Not compiling (no BackendChoice), only a host graph qualifies."""
    choice, devices = _placement_devices(fgraph)
    if not devices:
        return True
    return choice is not None and all(choice.registers(d, op_class) for d in devices)


def devices_run(fgraph: FunctionGraph, node: Apply) -> bool:
    """Whether each device placement may put ``fgraph``'s nodes on would run ``node``, a
    rewrite's host-typed replacement: one that joins nodes a device runs into one it
    does not (a scalar op or dtype its kernels can not render) would move their work off
    the device. Not compiling (no BackendChoice), only a host graph qualifies."""
    choice, devices = _placement_devices(fgraph)
    if not devices:
        return True
    return choice is not None and all(choice.runs_once_placed(node, d) for d in devices)


def compiles_for_host(fgraph: FunctionGraph) -> bool:
    """Whether ``fgraph`` compiles for the host (rewrites whose ops only host backends
    have kernels for): the default device is the host and no input lives on a device
    (placement would move the nodes reading it there)."""
    return not _placement_devices(fgraph)[1]
