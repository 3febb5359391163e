"""The transfer phase: place every node on a device and copy values only at boundaries.

Each node goes to the best device whose backend covers it (with the op a transfer rule's
lifter gives, else its own op). Candidates are the devices its inputs live on, then the
function's default device (``config.device``). A node whose outputs are all scalars and
whose inputs all live on the host stays there, and so does a node no device covers;
device-generic ops (copies) run where their inputs live, with Op.perform;
values cross devices through ``Transfer`` nodes inserted only where a value's producer
and consumer disagree. ``remove_back_to_back_transfers`` then drops copies that go
there and back again. Nothing here is specific to one device.
"""

from __future__ import annotations

from typing import Any

from tensorjit.core.devices import HOST
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import OUTPUT, Feature, FunctionGraph, InconsistencyError
from tensorjit.core.kernel_selection import BackendChoice
from tensorjit.core.memory.transfer_op import (
    DeviceConstant,
    Transfer,
    before_transfers,
    is_transfer,
    transfer,
)
from tensorjit.core.rewrites.basic import GraphRewriter, node_rewriter


def _device(var: Variable) -> str:
    return var.type.device


def scalar_on_host(node: Apply) -> bool:
    """Scalar bookkeeping (sizes, counts) from host values: placement keeps it there."""
    return all(getattr(o.type, "ndim", None) == 0 for o in node.outputs) and all(
        _device(v) == HOST for v in node.inputs
    )


class PlaceOnDevices(GraphRewriter):
    """The core's placement pass (see the module docstring)."""

    name = "place_on_devices"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        choice = fgraph.get_feature(BackendChoice)
        if choice is None:
            return  # not compiling (function() attaches the choice): nowhere to place
        default = choice.default_device
        used = {_device(v) for v in fgraph.variables} | {default}
        if used == {HOST}:
            return  # a host-only function: nothing to place
        lifters = choice.source.transfers
        moved: dict[tuple[Variable, str], Variable] = {}

        def on(var: Variable, device: str) -> Variable:
            """``var`` on ``device``: itself, what it was copied from, or a new copy."""
            if _device(var) == device:
                return var
            if is_transfer(var.owner) and _device(var.owner.inputs[0]) == device:
                return var.owner.inputs[0]
            key = (var, device)
            if key not in moved:
                if isinstance(var, Constant) and device != HOST:
                    moved[key] = DeviceConstant.of(var, device)  # placed, not copied
                else:
                    moved[key] = transfer(var, device)
            return moved[key]

        def covered(node: Apply, device: str) -> tuple[Any, set[int]] | None:
            """The op running ``node`` on ``device`` and the inputs it reads where they
            are on the host (a kernel that takes them there, else none), or None."""
            if node.op.device_generic:
                return node.op, set()  # its perform works there
            backends = choice.of_device(device)
            if not backends:
                return None
            lifter = lifters.lifter(device, node.op)
            op = node.op if lifter is None else lifter(node, device)
            if op is None:
                return None
            for kept in dict.fromkeys((frozenset(_kept_on_host(op, node)), frozenset())):
                types = [
                    before_transfers(v).type if i in kept else v.type.on_device(device)
                    for i, v in enumerate(node.inputs)
                ]
                probe = _retyped(op, node, types, device)
                if choice.source.find_kernel(probe, backends) is not None:
                    return op, set(kept)
            return None

        for node in fgraph.toposort():
            if node not in fgraph.apply_nodes or is_transfer(node):
                continue
            if node.op.metadata_only:
                self._read_where_placed(node, apply_replacements)
                continue
            # Devices the inputs live on, or were just copied from to reach this node.
            origins = [_device(before_transfers(v)) for v in node.inputs]
            candidates = [device for device in origins if device != HOST]
            if default != HOST and not scalar_on_host(node) and not node.op.device_generic:
                candidates.append(default)  # (a copy stays where its input is)
            choices = []
            for device in dict.fromkeys(candidates):
                try:
                    lifted = covered(node, device)
                except TypeError:
                    lifted = None  # a type that can not live there
                if lifted is not None:
                    choices.append((device, *lifted))
            choices.append((HOST, node.op, set()))
            for target, op, kept in choices:
                placed = all(_device(v) == target for v in (*node.inputs, *node.outputs))
                if placed and op is node.op:
                    break
                if self._move(node, op, target, on, apply_replacements, kept):
                    break
            else:
                raise InconsistencyError(
                    f"{node.op} (created at {node.outputs[0].created_at or 'unknown'}) can "
                    "not be placed on any device: every placement was vetoed"
                )

    @staticmethod
    def _read_where_placed(node: Apply, apply_replacements: Any) -> None:
        """A metadata reader (``x.shape``) stays on the host and reads its inputs where
        they live: the copies to the host placement made for it are not needed."""
        origins = [before_transfers(v) for v in node.inputs]
        if origins == list(node.inputs):
            return
        new = node.op.make_node(*origins)
        if all(n.type == o.type for n, o in zip(new.outputs, node.outputs)):
            apply_replacements(list(zip(node.outputs, new.outputs)), "place_on_devices")

    @staticmethod
    def _move(
        node: Apply, op: Any, target: str, on: Any, apply_replacements: Any, kept: set[int]
    ) -> bool:
        """Rebuild ``node`` with ``op`` on ``target``; whether the graph accepted it."""
        # A destroyed input gets its own copy: the value it was copied from (a constant,
        # a protected input) may not be destroyable.
        destroyed = {i for ins in op.destroy_map.values() for i in ins}
        inputs = [
            before_transfers(v)
            if i in kept
            else transfer(v, target)
            if i in destroyed
            else on(v, target)
            for i, v in enumerate(node.inputs)
        ]
        new = _retyped(op, node, [v.type for v in inputs], target, inputs)
        pairs = []
        for old, out in zip(node.outputs, new.outputs):
            pairs.append((old, out if out.type == old.type else transfer(out, _device(old))))
        return bool(apply_replacements(pairs, "place_on_devices"))


def _kept_on_host(op: Any, node: Apply) -> set[int]:
    """The inputs of ``node`` that ``op`` reads on the host (``Op.host_inputs``) and
    that are computed there (or were copied from there): they stay, uncopied."""
    return {i for i in op.host_inputs(node) if _device(before_transfers(node.inputs[i])) == HOST}


def keep_placement(new: Apply, old: Apply) -> Apply:
    """``new`` (built by ``make_node``, which knows nothing of devices) with its outputs
    on the devices of ``old``'s: rewrites after placement (the inplace pass) use it."""
    if all(_device(n) == _device(o) for n, o in zip(new.outputs, old.outputs)):
        return new
    return _retyped(new.op, new, [v.type for v in new.inputs], _device(old.outputs[0]), new.inputs)


def runs_where_placed(node: Apply, fgraph: FunctionGraph) -> bool:
    """Whether a node placed on a device (by a rewrite after placement) has a kernel
    there; host nodes always do (Op.perform)."""
    device = _device(node.outputs[0]) if node.outputs else HOST
    if device == HOST or node.op.device_generic:
        return True
    choice = fgraph.get_feature(BackendChoice)
    return choice is not None and choice.has_kernel(node, device)


def _retyped(
    op: Any, node: Apply, in_types: list, device: str, inputs: list | None = None
) -> Apply:
    """``node`` with ``op``, on inputs of ``in_types`` (fresh ones unless given), with its
    outputs' types moved to ``device``."""
    if inputs is None:
        inputs = [
            v if v.type == t else t.make_variable(v.name) for v, t in zip(node.inputs, in_types)
        ]
    outputs = []
    for old in node.outputs:
        out = old.type.on_device(device).make_variable(old.name)
        out.created_at = old.created_at
        outputs.append(out)
    return Apply(op, inputs, outputs)


class InternalOutputs(Feature):
    """The graph outputs a function returns as they are on their device
    (``Out(y, return_internal_type=True)``), attached by ``function()``."""

    def __init__(self, indices: list[int]):
        self.indices = indices


class ReturnInternalValues(GraphRewriter):
    """Drops the final copy to the host of the outputs ``InternalOutputs`` lists. It runs
    right after placement, before the inplace phase, so the DestroyHandler then sees the
    device value as a function output (which nothing may destroy)."""

    name = "return_internal_values"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        wanted = fgraph.get_feature(InternalOutputs)
        if wanted is None:
            return
        for k in wanted.indices:
            var = fgraph.outputs[k]
            if not (is_transfer(var.owner) and _device(var) == HOST):
                continue
            inner = var.owner.inputs[0]
            fgraph.change_node_input(OUTPUT, k, inner, self.name, any_type=True)
            try:
                for feature in fgraph.features:
                    feature.on_validate(fgraph, [], self.name)
            except InconsistencyError:
                fgraph.change_node_input(OUTPUT, k, var, "rollback", any_type=True)


@node_rewriter([Transfer], name="remove_back_to_back_transfers")
def remove_back_to_back_transfers(fgraph: FunctionGraph, node: Apply) -> Any:
    """A copy of a value to where it already is, or back to where it came from, is the
    value itself."""
    (x,) = node.inputs
    target = node.op.target  # type: ignore[attr-defined]  # the rewriter tracks Transfer
    if _device(x) == target and x.type == node.outputs[0].type:
        return [x]
    back = _view_made_on_the_host(x, target)
    if back is not None:
        return [back]
    if is_transfer(x.owner):
        source = x.owner.inputs[0]
        if source.type == node.outputs[0].type:
            return [source]
        return [Transfer(target)(source)]  # a device-to-device copy, one hop
    return None


def _hostbefore_transfers(var: Variable) -> Variable:
    """What ``var`` was copied (or placed as a constant) from."""
    placed_from = getattr(var, "host_constant", None)
    return before_transfers(var) if placed_from is None else placed_from


def _view_made_on_the_host(x: Variable, target: str) -> Variable | None:
    """A view made on a device of a value copied there from the host, copied back: the
    same view made on the host, with no copy at all (``x.T`` of a host input returned)."""
    view = x.owner
    if target != HOST or view is None or not view.op.view_map or view.op.destroy_map:
        return None
    if len(view.outputs) != 1 or len(view.op.view_map) != 1:
        return None
    inputs = [_hostbefore_transfers(v) for v in view.inputs]
    if any(_device(v) != HOST for v in inputs):
        return None
    made = view.op.make_node(*inputs).outputs[0]
    return made if made.type == x.type.on_device(HOST) else None


def host_nodes_of_device_function(fgraph: FunctionGraph, default_device: str) -> list[Apply]:
    """Nodes that run on the host in a function using a device (transfers, and the
    scalar work placement keeps on the host, excepted); empty for host-only functions."""
    devices = {_device(v) for v in fgraph.variables} | {default_device}
    if devices == {HOST}:
        return []
    return [
        node
        for node in fgraph.toposort()
        if not node.op.device_generic
        and not node.op.metadata_only
        and node.outputs
        and all(_device(o) == HOST for o in node.outputs)
        and not scalar_on_host(node)
    ]
