"""The memory plan of a compiled function: every memory decision, made once.

The seed documents' contract (see the README's memory model) is kept here and only
here: which storage cell holds each value (a shared variable's own cell), which inputs
the DestroyHandler protects, how arguments are filtered and when they are copied
(borrowed arguments that are defaults, read-only or aliased), which outputs are copied
so they alias nothing, which output buffers ``Out(borrow=True)`` keeps between calls,
and how updates are stored (after every output, as if simultaneously). ``Function``'s
call paths, whole-graph programs and scan's loop all go through one plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorjit.core.devices import writeable
from tensorjit.core.graph.basic import Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.memory.aliasing import alias_root
from tensorjit.core.memory.destroy_handler import destroyed_inputs
from tensorjit.core.memory.io import Container, In, Out
from tensorjit.core.memory.shared import SharedVariable

MISSING = object()  # an argument not given (its default is used)


def protected_inputs(
    ins: Sequence[In], fgraph: FunctionGraph, updated: set[Variable]
) -> list[Variable]:
    """The graph inputs nothing may destroy: explicit inputs that are neither mutable nor
    borrowed, and shared variables the function does not update."""
    n_in = len(ins)
    protected = [v for v, i in zip(fgraph.inputs, ins) if not (i.mutable or i.borrow)]
    protected += [v for v in fgraph.inputs[n_in:] if v not in updated]
    return protected


def describe_value(value: Any) -> str:
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"{type(value).__name__} of dtype {dtype} and shape {shape}"
    return f"{type(value).__name__} {value!r}"


def _default_container(inp: In) -> Container:
    """A new container holding ``inp``'s default, filtered to its type once (so that
    ``f[x]`` reads a value of the input's type, as Theano's did)."""
    value = inp.value
    if value is not None:
        try:
            value = inp.variable.type.filter(
                value, strict=inp.strict, allow_downcast=inp.allow_downcast
            )
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"In({inp.variable.describe()}, value=...): {exc}") from None
    return Container(inp.variable, value, inp.strict)


class MemoryPlan:
    """Storage cells and the memory rules of one function (see the module docstring)."""

    def __init__(
        self,
        inputs: list[In],
        outputs: list[Out],
        fgraph: FunctionGraph,
        shared_inputs: list[SharedVariable],
        updated_shared: list[SharedVariable],
        label: str,
    ):
        self.inputs = inputs
        self.outputs = outputs
        self.fgraph = fgraph
        self.label = label
        n_in = len(inputs)
        self.n_outputs = len(outputs)
        self.input_vars = fgraph.inputs[:n_in]
        self.updated_shared = updated_shared
        # Per-function defaults: In(update=...) replaces them after each call. An
        # In(value=container) shares another function's.
        self.containers = [
            inp.value if isinstance(inp.value, Container) else _default_container(inp)
            for inp in inputs
        ]
        self.updated_inputs = [i for i, inp in enumerate(inputs) if inp.update is not None]
        self.has_updates = bool(updated_shared or self.updated_inputs)

        storage: dict[Variable, list] = {}
        for var, shared in zip(fgraph.inputs[n_in:], shared_inputs):
            storage[var] = shared.storage  # the VM reads the shared variable's own cell
        for var in fgraph.variables:
            if var not in storage:
                storage[var] = [var.stored_value()] if isinstance(var, Constant) else [None]
        self.storage = storage
        self.input_cells = [storage[v] for v in self.input_vars]
        self.all_input_cells = [(v, storage[v]) for v in fgraph.inputs]
        self.shared_cells = [(v, storage[v]) for v in fgraph.inputs[n_in:]]
        self.output_cells = [storage[v] for v in fgraph.outputs]
        # Cells the VM computed into: cleared after each call so no value is kept alive.
        # Out(borrow=True) keeps its buffer for the next call to compute into.
        borrowed_out = {v for v, o in zip(fgraph.outputs, outputs) if o.borrow}
        self.computed_output_cells = [
            storage[v] for v in fgraph.outputs if v.owner is not None and v not in borrowed_out
        ]
        self.borrowed_output_cells = [
            (v.type, storage[v])
            for v in fgraph.outputs
            if v.owner is not None and v in borrowed_out
        ]
        self.copy_plan = self._plan_output_copies(shared_inputs)
        # Shared variables some node overwrites in place: a value the user made read-only
        # since lending it (shared(a, borrow=True), then a.setflags(write=False)) is
        # replaced by a copy before a call, never written.
        destroyed = {
            alias_root(node.inputs[i])
            for node in fgraph.apply_nodes
            for i in destroyed_inputs(node)
        }
        self.destroyed_shared_cells = [
            (var, cell) for var, cell in self.shared_cells if var in destroyed
        ]
        self.positions = {inp.name: i for i, inp in enumerate(inputs) if inp.name}
        # A name several inputs carry can not be given as a keyword.
        named = [inp.name for inp in inputs if inp.name]
        self.ambiguous_names = {n for n in named if named.count(n) > 1}
        # Every argument given positionally and none destroyable: each is only filtered
        # (the common call, without the bookkeeping of defaults, keywords and aliasing).
        self.plain_filters = (
            None
            if any(inp.borrow for inp in inputs)
            else [(inp.variable.type.filter, inp.strict, inp.allow_downcast) for inp in inputs]
        )
        self.n_required = 0
        for i, container in enumerate(self.containers):
            if container.storage[0] is None:
                self.n_required = i + 1
        self._arg_values: list[Any] = []

    # ---------------------------------------------------------------- decisions
    @property
    def plain(self) -> bool:
        """Whether a positional call may go straight into a whole-graph program: nothing
        to copy, no destroyable input, no input updates, no kept output buffers."""
        return (
            self.plain_filters is not None
            and not self.updated_inputs
            and not self.borrowed_output_cells
            and not any(self.copy_plan)
        )

    def _plan_output_copies(self, shared_inputs: list[SharedVariable]) -> list[bool]:
        """Which outputs (user outputs, then updates) must be copied to stay un-aliased.

        An output needs a copy if its memory (through declared views) belongs to an input,
        a shared variable or a constant, or to an earlier output. ``Out(borrow=True)`` of
        an ``In(borrow=True)`` may alias it; an update may be a view of its own variable.
        """
        fgraph, n_out = self.fgraph, self.n_outputs
        n_in = len(self.input_vars)
        borrowed = {v for v, i in zip(self.input_vars, self.inputs) if i.borrow}
        own_input = {
            n_out + k: fgraph.inputs[n_in + shared_inputs.index(shared)]
            for k, shared in enumerate(self.updated_shared)
        }
        # A buffer an Out(borrow=True) keeps is overwritten by the next call: every other
        # output living in it must be a copy, wherever it stands in the list.
        kept_by_borrow = {
            alias_root(out)
            for k, out in enumerate(fgraph.outputs[:n_out])
            if self.outputs[k].borrow
        }
        plan = []
        seen_roots: set[Variable] = set()
        for k, out in enumerate(fgraph.outputs):
            root = alias_root(out)
            borrowed_out = k < n_out and self.outputs[k].borrow
            if root in seen_roots or (root in kept_by_borrow and not borrowed_out):
                copy = True
            elif root.owner is not None or root is own_input.get(k):
                copy = False
            else:
                copy = not (k < n_out and self.outputs[k].borrow and root in borrowed)
            seen_roots.add(root)
            plan.append(copy)
        return plan

    # ---------------------------------------------------------------- a call
    def copy_read_only_destroyed(self) -> None:
        """Give each shared variable a node overwrites a writeable copy of its value if
        its value is read-only (the copy becomes the variable's own storage)."""
        for var, cell in self.destroyed_shared_cells:
            value = cell[0]
            if value is not None and not writeable(value):
                cell[0] = var.type.copy_value(value)

    def load_arguments(self, args: tuple, kwargs: dict) -> None:
        """Filter the arguments into the input cells (defaults for those not given),
        copying a borrowed one that must not be used as workspace."""
        filters = self.plain_filters
        if filters is not None and not kwargs and len(args) == len(filters):
            try:
                for cell, (filter_value, strict, downcast), value in zip(
                    self.input_cells, filters, args
                ):
                    cell[0] = filter_value(value, strict, downcast)
                self._arg_values = list(args)
                return
            except (TypeError, ValueError):
                pass  # the full path below explains the error
        n = len(self.inputs)
        label = self.label
        if len(args) > n:
            names = ", ".join(i.variable.describe() for i in self.inputs) or "none"
            raise TypeError(f"{label} takes {n} arguments, got {len(args)}; its inputs: {names}")
        values: list[Any] = list(args) + [MISSING] * (n - len(args))
        self._arg_values = values  # the raw arguments, for the aliasing check
        for key, value in kwargs.items():
            if key in self.ambiguous_names:
                raise TypeError(
                    f"{label}: several inputs are named {key!r}; give them positionally"
                )
            pos = self.positions.get(key)
            if pos is None:
                raise TypeError(
                    f"{label} got an unexpected keyword argument {key!r}; "
                    f"named inputs: {sorted(self.positions)}"
                )
            if values[pos] is not MISSING:
                raise TypeError(f"{label} got multiple values for input {key!r}")
            values[pos] = value
        for i, (inp, value) in enumerate(zip(self.inputs, values)):
            from_default = value is MISSING
            if from_default:
                if self.containers[i].storage[0] is None:
                    missing = [
                        self.inputs[j].variable.describe()
                        for j in range(n)
                        if values[j] is MISSING and self.containers[j].storage[0] is None
                    ]
                    raise TypeError(
                        f"{label} is missing {len(missing)} required argument(s): "
                        f"{', '.join(missing)} (expected {self.n_required} positional "
                        f"arguments, got {len(args)})"
                    )
                value = self.containers[i].storage[0]
            try:
                filtered = inp.variable.type.filter(
                    value, strict=inp.strict, allow_downcast=inp.allow_downcast
                )
            except (TypeError, ValueError) as exc:
                hint = ""
                if "lose precision" in str(exc):
                    hint = " (In(x, allow_downcast=True) or allow_input_downcast=True allow it)"
                raise type(exc)(
                    f"bad argument {i} to {label}: input {inp.variable.describe()} expects "
                    f"{inp.variable.type}, got {describe_value(value)}: {exc}{hint}"
                ) from None
            if inp.borrow and (
                from_default or not writeable(filtered) or self._aliases_another(i, filtered)
            ):
                # A destroyable input must not be a default (reused by later calls), a
                # read-only array, or memory another argument or a shared variable reads:
                # the function gets a private copy.
                filtered = inp.variable.type.copy_value(filtered)
            self.input_cells[i][0] = filtered
            self._arg_values[i] = value

    def _aliases_another(self, i: int, value: Any) -> bool:
        may_share = self.inputs[i].variable.type.may_share_memory
        for j, other in enumerate(self._arg_values):
            if j != i and other is not MISSING and may_share(value, other):
                return True
        for _, cell in self.shared_cells:
            if may_share(value, cell[0]):
                return True
        return False

    def set_trusted_arguments(self, values: Sequence[Any]) -> None:
        """Arguments already of the inputs' types (a loop's), stored as they are."""
        for cell, value in zip(self.input_cells, values):
            cell[0] = value

    def clear(self) -> None:
        """After a call: the cells keep no argument and no computed output alive."""
        self._arg_values = []
        for cell in self.input_cells:
            cell[0] = None
        for cell in self.computed_output_cells:
            cell[0] = None

    def release_borrowed_buffers(self, values: Sequence[Any]) -> None:
        """An Out(borrow=True) buffer that comes back as an argument (a loop's carried
        state) must not be overwritten while this call still reads it."""
        for out_type, cell in self.borrowed_output_cells:
            kept = cell[0]
            if kept is not None and any(out_type.may_share_memory(kept, v) for v in values):
                cell[0] = None

    def copy_outputs(self, values: list[Any]) -> list[Any]:
        """The values, with those that would alias something replaced by copies."""
        outputs = self.fgraph.outputs
        for k, copy in enumerate(self.copy_plan):
            if copy:
                values[k] = outputs[k].type.copy_value(values[k])
        return values

    def store_updates(self, values: list[Any]) -> list[Any]:
        """Stores the updates' values, which follow the outputs in ``values`` (shared
        variables' first, then updated inputs'), and returns the outputs. Every output
        is computed before any update is stored: they happen as if simultaneously."""
        n_out = self.n_outputs
        n_shared = len(self.updated_shared)
        for shared, value in zip(self.updated_shared, values[n_out : n_out + n_shared]):
            shared.storage[0] = value
        for i, value in zip(self.updated_inputs, values[n_out + n_shared :]):
            self.containers[i].storage[0] = value
        return values[:n_out]
