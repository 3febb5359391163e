"""``theano.Op`` / ``theano.gof.Op``: tensorjit's Op with Theano 1.0's conventions.

- ``infer_shape(node, input_shapes)`` (Theano 1.0, no ``fgraph``) is adapted to
  tensorjit's ``infer_shape(fgraph, node, input_shapes)``; either form may be written.
- ``itypes``/``otypes`` instead of ``make_node``; ``default_output``.
- ``grad`` may return ``theano.gradient.DisconnectedType()()`` for an input.
- ``as_op(itypes, otypes, infer_shape=None)`` wraps a Python function as an Op.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op as _TJOp
from tensorjit.core.graph.type import Type

__all__ = [
    "DisconnectedType",
    "Op",
    "PureOp",
    "as_op",
    "consider_constant",
    "disconnected_grad",
    "zero_grad",
]


class DisconnectedType(Type):
    """Theano's marker type: an Op's ``grad`` returns ``DisconnectedType()()`` for an
    input the outputs do not depend on (tensorjit's own convention is ``None``)."""

    def filter(self, value: Any, strict: bool = False, allow_downcast: bool | None = None):
        raise TypeError("DisconnectedType has no values")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __str__(self) -> str:
        return "DisconnectedType"


def _is_theano_infer_shape(fn: Callable) -> bool:
    """True for ``infer_shape(self, node, input_shapes)`` (Theano 1.0's signature)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return False
    return len(positional) == 3 and positional[1].name != "fgraph"


def as_type(t: Any) -> Type:
    """``t`` as a Type: in Theano ``T.dmatrix`` is a type, in tensorjit a constructor
    (whose variable's type is taken)."""
    if isinstance(t, Type):
        return t
    if callable(t):
        var = t()
        if isinstance(var, Variable):
            return var.type
    raise TypeError(f"expected a type (e.g. T.dmatrix), got {t!r}")


class Op(_TJOp):
    """Base class for Ops written for Theano; see the module docstring. As in Theano, a
    subclass without ``__props__`` compares by identity (tensorjit's own Ops always
    compare by class and props)."""

    default_output: int | None = None
    itypes: Sequence[Type] | None = None
    otypes: Sequence[Type] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Theano: an Op class that declares no __props__ compares by identity.
        declares_props = any(
            "__props__" in k.__dict__ for k in cls.__mro__[: cls.__mro__.index(Op)]
        )
        if not declares_props:
            if "__eq__" not in cls.__dict__:
                cls.__eq__ = object.__eq__
            if "__hash__" not in cls.__dict__:
                cls.__hash__ = object.__hash__
        fn = cls.__dict__.get("infer_shape")
        if fn is not None and _is_theano_infer_shape(fn):

            @functools.wraps(fn)
            def infer_shape(self, fgraph, node, input_shapes, _theano_fn=fn):
                return _theano_fn(self, node, input_shapes)

            cls.infer_shape = infer_shape

    def make_node(self, *inputs: Any) -> Apply:
        if self.itypes is None or self.otypes is None:
            raise NotImplementedError(
                f"{type(self).__name__} must implement make_node (or set itypes and otypes)"
            )
        if len(inputs) != len(self.itypes):
            raise TypeError(f"{self} takes {len(self.itypes)} inputs, got {len(inputs)}")
        from tensorjit.tensor.variable import as_tensor_variable

        checked = []
        for i, (inp, t) in enumerate(zip(inputs, map(as_type, self.itypes))):
            var = inp if isinstance(inp, Variable) else as_tensor_variable(inp)
            converted = t.convert_variable(var)
            if converted is None:
                raise TypeError(f"{self}: input {i} must be of type {t}, got {var.describe()}")
            checked.append(converted)
        return Apply(self, checked, [as_type(t)() for t in self.otypes])

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        return_list = kwargs.pop("return_list", False)
        node = self.make_node(*inputs, **kwargs)
        if return_list:
            return list(node.outputs)
        if self.default_output is not None:
            return node.outputs[self.default_output]
        return node.outputs[0] if len(node.outputs) == 1 else node.outputs

    def L_op(self, inputs, outputs, output_grads):
        grads = self.grad(inputs, output_grads)
        return [
            None if isinstance(g, Variable) and isinstance(g.type, DisconnectedType) else g
            for g in grads
        ]


PureOp = Op


class _FromFunctionOp(Op):
    __props__ = ("fn", "itypes", "otypes", "infer_shape_fn")
    has_side_effects = True  # the user's function: it may do anything

    def __init__(self, fn, itypes, otypes, infer_shape_fn):
        self.fn = fn
        self.itypes = tuple(as_type(t) for t in itypes)
        self.otypes = tuple(as_type(t) for t in otypes)
        self.infer_shape_fn = infer_shape_fn
        if infer_shape_fn is not None:
            self.infer_shape = lambda fgraph, node, shapes: infer_shape_fn(node, shapes)

    def perform(self, node, inputs, output_storage):
        results = self.fn(*inputs)
        if len(self.otypes) == 1:
            results = [results]
        for storage, t, value in zip(output_storage, self.otypes, results):
            storage[0] = t.filter(value)

    def __str__(self) -> str:
        return f"FromFunctionOp{{{getattr(self.fn, '__name__', self.fn)}}}"


def as_op(itypes: Sequence[Type], otypes: Sequence[Type], infer_shape: Callable | None = None):
    """Decorator: the Python function on NumPy values becomes an Op (no gradient)."""
    if not isinstance(itypes, (list, tuple)):
        itypes = [itypes]
    if not isinstance(otypes, (list, tuple)):
        otypes = [otypes]

    def decorator(fn: Callable) -> Op:
        return _FromFunctionOp(fn, itypes, otypes, infer_shape)

    return decorator


# ---------------------------------------------------------------- gradient blockers
class _GradBlock(Op):
    """Identity (a view of its input) whose gradient is zero or disconnected."""

    __props__ = ("disconnected",)
    view_map = {0: [0]}

    def __init__(self, disconnected: bool):
        self.disconnected = disconnected

    def make_node(self, x: Any) -> Apply:
        from tensorjit.tensor.variable import as_tensor_variable

        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        if self.disconnected:
            return [None]
        from tensorjit.tensor.math import zeros_like

        return [zeros_like(inputs[0])]

    def __str__(self) -> str:
        return "DisconnectedGrad" if self.disconnected else "ZeroGrad"


def zero_grad(x: Any) -> Variable:
    """``x``, through which gradients are zero (Theano's ``gradient.zero_grad``)."""
    return _GradBlock(False)(x)


def disconnected_grad(x: Any) -> Variable:
    """``x``, through which the graph is disconnected for ``grad``."""
    return _GradBlock(True)(x)


consider_constant = disconnected_grad
