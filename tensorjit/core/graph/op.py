"""Op: a stateless, hashable operation. Equal Ops (same class, same props) merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorjit.core.graph.basic import Apply, Variable


class Op:
    """Base class of operations.

    Subclasses list their parameters in ``__props__``; equality and hashing follow them,
    so that two nodes applying equal Ops to the same inputs merge.

    - ``make_node(*inputs)`` type-checks and returns an Apply.
    - ``perform(node, inputs, output_storage)`` is the reference implementation: it
      stores output ``i`` in ``output_storage[i][0]``.
    - ``grad(inputs, output_grads)`` / ``L_op(inputs, outputs, output_grads)`` give the
      symbolic gradient (optional).
    - ``infer_shape(fgraph, node, input_shapes)`` (optional).
    - ``view_map`` / ``destroy_map``: ``{output_index: [input_index]}``; an output that
      is a view of (or overwrote) an input declares it here.
    """

    __props__: tuple[str, ...] = ()
    view_map: dict[int, list[int]] = {}
    destroy_map: dict[int, list[int]] = {}

    # The rest of the protocol the core reads, with the defaults of an ordinary op:

    #: Which input an inplace variant overwrites: an input index (elementwise ops), True
    #: (ops overwriting their first input, like Gemm), or None/False (not inplace). The
    #: core's own checks read ``destroy_map``; this is for kernels and printing.
    inplace: Any = None
    #: False when the result must not be computed at compile time (a possibly huge
    #: array, a random draw, a transfer between devices).
    constant_folding: bool = True
    #: True for ops carrying shared state inside (loops): the shared variables they
    #: read are updated by what they return, not by their ``default_update``.
    skip_default_updates: bool = False
    #: True if a node may destroy an input that it also reads through another input
    #: (``add_inplace(x, x)``: each element is read before it is written).
    destroyhandler_tolerate_same: bool = False
    #: True when ``perform`` works on any device's values (it only goes through their
    #: types: copies, transfers): such a node runs where its inputs live, with no
    #: backend kernel, instead of being sent to the host.
    device_generic: bool = False
    #: True when ``perform`` reads only its inputs' shapes and dtypes (``x.shape``):
    #: such a node runs on the host on values of any device, with no copy of them.
    metadata_only: bool = False
    #: Lazy ops define a method ``lazy_branches(node) -> (cond_index, true_inputs,
    #: false_inputs)``: the VM then computes only the inputs of the branch taken.
    lazy_branches: Any = None
    #: False when a node never raises on inputs of its types (a copy, a shape read): an
    #: all-or-nothing call (core/compile/commit.py) then takes no precaution for it.
    may_raise: bool = True
    #: True when ``perform`` does more than compute its outputs (prints, calls the user's
    #: code): a call must run it exactly once, so no runner may run it again to recover
    #: (a device's launch plan then leaves the function to the VM).
    has_side_effects: bool = False

    def _props(self) -> tuple:
        return tuple(getattr(self, p) for p in self.__props__)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._props() == other._props()

    def __hash__(self) -> int:
        return hash((type(self), self._props()))

    def __str__(self) -> str:
        if self.__props__:
            params = ", ".join(f"{p}={getattr(self, p)!r}" for p in self.__props__)
            return f"{type(self).__name__}{{{params}}}"
        return type(self).__name__

    __repr__ = __str__

    def input_check(self, node: Apply) -> Callable[[list[Any]], None] | None:
        """A function that raises, for input values of ``node``, the error computing it
        would raise (a shape mismatch) without computing anything; None when the op has
        none. A call runs it before its first in-place update of a shared variable, so
        a failure later in the call leaves every shared variable unchanged. It must
        look at shapes and dtypes only: an input that an earlier in-place update of the
        same call produces is given as the buffer before that update."""
        return None

    def host_inputs(self, node: Apply) -> range:
        """Indices of ``node``'s inputs that every kernel of the op reads on the host
        (shapes, sizes, integer indices). Placement leaves such an input on the host
        when it is computed there, so a device kernel reads it without a copy to the
        device and back (a wait for the device's queue). Default: none."""
        return range(0)

    def rounding_bounds(self, node: Apply, inputs: Sequence[Any]) -> list[Any] | None:
        """How far two correct implementations of this node may differ on ``inputs``
        because they round in different orders (a sum's terms in the order one CPU's
        vector width likes, another BLAS kernel's): per output, an absolute bound (a
        scalar or an array broadcasting to the output) or None. DebugMode compares a
        kernel with ``perform`` within the larger of it and the type's tolerance.
        None (the default): the type's tolerance alone."""
        return None

    def make_node(self, *inputs: Variable) -> Apply:
        raise NotImplementedError(f"{type(self).__name__} must implement make_node")

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        node = self.make_node(*inputs, **kwargs)
        if len(node.outputs) == 1:
            return node.outputs[0]
        return node.outputs

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list]) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no perform implementation")

    def L_op(
        self, inputs: Sequence[Variable], outputs: Sequence[Variable], output_grads: Sequence
    ) -> list:
        return self.grad(inputs, output_grads)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence) -> list:
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError(f"{self} does not implement a gradient")

    def connection_pattern(self, node: Apply) -> list[list[bool]] | None:
        """``pattern[i][j]`` is True if output j depends on input i; None = all connected."""
        return None

    def pprint_operands(self, node: Apply) -> list[Variable]:
        """The variables ``pprint`` shows as this node's operands (default: its inputs)."""
        return node.inputs

    def pprint(self, input_strs: Sequence[str]) -> str | None:
        """Infix rendering for ``pprint``; None means use ``Op(args)``."""
        return None
