"""DebugMode: checks every kernel against its declarations and every rewrite's result.

For each node it runs, DebugMode verifies that the kernel modified only the inputs its
``destroy_map`` declares, that its outputs alias only inputs declared in ``view_map`` or
``destroy_map``, and (when the kernel is not ``Op.perform`` itself) that it agrees with
``Op.perform``. For each substitution made while rewriting, it evaluates the replaced and
the replacing variable on the call's inputs and checks they are equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorjit.core.devices import HOST
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import Feature
from tensorjit.core.registries import Kernel


class DebugModeError(AssertionError):
    """A kernel or a rewrite broke its contract (raised by DebugMode only)."""


class BadDestroyMap(DebugModeError):
    """A kernel modified an input its op's destroy_map does not declare."""


class BadViewMap(DebugModeError):
    """A kernel returned memory shared with an input that view_map does not declare."""


class BadKernel(DebugModeError):
    """A backend kernel's result differs from Op.perform's."""


class BadOptimization(DebugModeError):
    """A rewrite replaced a variable by one with a different value."""


def _where(node: Apply) -> str:
    return f"{node.op} (created at {node.outputs[0].created_at or 'unknown'})"


def checked_kernel(kernel: Kernel) -> Kernel:
    """``kernel`` wrapped with DebugMode's per-node checks."""

    def factory(node: Apply) -> Callable[[list, list], None]:
        run = kernel.factory(node)
        destroyed = {i for ins in node.op.destroy_map.values() for i in ins}

        def checked(inputs: list, output_storage: list) -> None:
            in_types = [v.type for v in node.inputs]
            before = _copies(in_types, inputs)
            run(inputs, output_storage)
            # An input that is (or overlaps) a destroyed input may change with it.
            changeable = _overlapping(in_types, inputs, destroyed)
            for i, (t, old, new) in enumerate(zip(in_types, before, inputs)):
                if i not in changeable and old is not None and not t.values_eq(old, new):
                    raise BadDestroyMap(
                        f"{_where(node)} modified input {i} ({node.inputs[i]}), which its "
                        f"destroy_map {node.op.destroy_map} does not declare"
                    )
            for j, out in enumerate(node.outputs):
                declared = set(node.op.view_map.get(j, ())) | set(node.op.destroy_map.get(j, ()))
                allowed = _overlapping(in_types, inputs, declared)
                value = output_storage[j][0]
                for i, inp in enumerate(inputs):
                    if i in allowed or inp is None:
                        continue
                    if out.type.shares_memory(value, inp):
                        raise BadViewMap(
                            f"{_where(node)}: output {j} shares memory with input {i} "
                            f"({node.inputs[i]}), which its view_map {node.op.view_map} "
                            "does not declare"
                        )
            if kernel.name != "perform":
                # Op.perform is the host reference: a device node's values are compared
                # on the host (through each type's device).
                reference = [[None] for _ in node.outputs]
                host_inputs = [
                    None if v is None else t.host_value(t.copy_value(v))
                    for t, v in zip(in_types, before)
                ]  # (a host copy either way: ``before`` must stay intact for later checks)
                # the bounds first: perform may overwrite an input it destroys
                bounds = node.op.rounding_bounds(node, host_inputs) or [None] * len(reference)
                node.op.perform(node, host_inputs, reference)
                for j, out in enumerate(node.outputs):
                    got, want = out.type.host_value(output_storage[j][0]), reference[j][0]
                    same_kind = getattr(got, "dtype", None) == getattr(want, "dtype", None)
                    host_type = out.type.on_device(HOST)
                    if not (same_kind and _agree(host_type, got, want, bounds[j])):
                        raise BadKernel(
                            f"{_where(node)}: kernel {kernel.name} computed output {j} = "
                            f"{output_storage[j][0]!r}, but Op.perform gives "
                            f"{reference[j][0]!r}"
                        )

        return checked

    return Kernel(f"debug:{kernel.name}", kernel.backend, factory, kernel.plugin)


def _agree(host_type: Any, got: Any, want: Any, bound: Any) -> bool:
    """Whether a kernel's value agrees with perform's: within the type's tolerance, or
    within the op's bound on the difference that rounding orders explain."""
    if host_type.values_eq_approx(got, want):
        return True
    return bound is not None and host_type.values_eq_approx(got, want, atol=bound)


def _copies(types: list, values: list) -> list:
    # A lazy op's inputs from the branch not taken are None.
    return [None if v is None else t.copy_value(v) for t, v in zip(types, values)]


def _overlapping(types: list, inputs: list, indices: set[int]) -> set[int]:
    """``indices`` plus every input sharing memory with one of them."""
    result = set(indices)
    for i, value in enumerate(inputs):
        if i in result or value is None:
            continue
        if any(inputs[j] is not None and types[i].shares_memory(value, inputs[j]) for j in indices):
            result.add(i)
    return result


class ReplacementRecorder(Feature):
    """Remembers every (replaced, replacement, reason) made while rewriting."""

    def __init__(self) -> None:
        self.pairs: list[tuple[Variable, Variable, str | None]] = []
        self._seen: set[tuple[Variable, Variable]] = set()

    def on_change_input(self, fgraph, node, i, old, new, reason) -> None:
        if reason in ("rollback", "protect_input") or (old, new) in self._seen:
            return
        self._seen.add((old, new))
        self.pairs.append((old, new, reason))


class RewriteChecker:
    """Evaluates both sides of every recorded substitution on a call's inputs."""

    def __init__(self, inputs: Sequence[Variable], recorder: ReplacementRecorder, compile_fn):
        self.inputs = list(inputs)
        self.pairs = list(recorder.pairs)
        self._compile = compile_fn
        self._functions: list[Any] = []

    def check(self, input_values: Sequence[Any]) -> None:
        if not self._functions:
            for old, new, _ in self.pairs:
                self._functions.append(self._compile(self.inputs, [old, new]))
        for (old, new, reason), fn in zip(self.pairs, self._functions):
            values = [v.type.copy_value(x) for v, x in zip(self.inputs, input_values)]
            before, after = fn(*values)  # host values, whatever device computed them
            if not old.type.on_device(HOST).values_eq_approx(before, after):
                raise BadOptimization(
                    f"rewrite {reason!r} replaced {old} (by {new}) but the values differ: "
                    f"{before!r} before, {after!r} after"
                )


__all__ = [
    "BadDestroyMap",
    "BadKernel",
    "BadOptimization",
    "BadViewMap",
    "DebugModeError",
    "ReplacementRecorder",
    "RewriteChecker",
    "checked_kernel",
]
