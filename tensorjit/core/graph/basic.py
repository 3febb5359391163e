"""Variable, Constant and Apply: the nodes of a symbolic graph."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from tensorjit.core.graph.type import Type
from tensorjit.core.source import user_source_location

if TYPE_CHECKING:
    from tensorjit.core.graph.op import Op

_ids = itertools.count()


# ``function(inputs, outputs, **kwargs)``, which Variable.eval compiles with: installed
# by core/compile/function.py (a graph does not import the layers above it).
_compiler: Callable[..., Any] | None = None


def use_compiler(compiler: Callable[..., Any] | None) -> None:
    """Install the compiler behind ``Variable.eval``."""
    global _compiler
    _compiler = compiler


class _PicklesSlots:
    """Pickling of slotted graph objects with every protocol (0 and 1 included, which
    need an explicit ``__getstate__``); cached compiled functions are not kept."""

    __slots__ = ()

    def __getstate__(self) -> dict:
        state = dict(getattr(self, "__dict__", {}))
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if name not in ("__weakref__", "__dict__") and hasattr(self, name):
                    state[name] = getattr(self, name)
        if "_eval_fns" in state:
            state["_eval_fns"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)


class Variable(_PicklesSlots):
    """A symbolic value: an input (``owner is None``) or output ``index`` of an Apply.

    ``tag.created_at`` holds the ``file:line`` of the user code that created it.
    """

    __slots__ = (
        "type",
        "owner",
        "index",
        "name",
        "created_at",
        "auto_name",
        "_eval_fns",
        "_tag",
        "__weakref__",
    )

    def __init__(self, type: Type, owner: Apply | None = None, index: int | None = None, name=None):
        if not isinstance(type, Type):
            raise TypeError(f"Variable type must be a Type instance, got {type!r}")
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name
        self.created_at = user_source_location(2)
        self.auto_name = f"_{next(_ids)}"
        self._eval_fns: dict[tuple, Any] | None = None
        self._tag: SimpleNamespace | None = None

    @property
    def tag(self) -> SimpleNamespace:
        """Free-form annotations (Theano's ``var.tag``, e.g. ``tag.test_value``)."""
        if self._tag is None:
            self._tag = SimpleNamespace()
        return self._tag

    def clone(self) -> Variable:
        """A new, ownerless Variable of the same type and name."""
        cp = self.type.make_variable(self.name)
        cp.created_at = self.created_at
        return cp

    def describe(self) -> str:
        """Human description for error messages: name, type and creation site."""
        label = repr(self.name) if self.name else "<unnamed>"
        where = f", created at {self.created_at}" if self.created_at else ""
        return f"{label} ({self.type}{where})"

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.owner is not None:
            op = self.owner.op
            if len(self.owner.outputs) == 1:
                return f"{op}.out"
            return f"{op}.{self.index}"
        return f"<{self.type}>"

    def __repr__(self) -> str:
        return str(self)

    def eval(self, inputs_to_values: dict | None = None) -> Any:
        """Compile (cached) and evaluate this variable for the given input values."""
        if _compiler is None:
            raise RuntimeError(f"{self}.eval(): no compiler is installed (tensorjit.core.compile)")
        function = _compiler
        inputs_to_values = inputs_to_values or {}
        inputs = list(inputs_to_values)
        if self._eval_fns is None:
            self._eval_fns = {}
        cache = self._eval_fns
        key = tuple(inputs)
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = function(inputs, self, on_unused_input="ignore")
        return fn(*[inputs_to_values[v] for v in inputs])


class Constant(Variable):
    """A Variable with a fixed value; ``signature()`` lets equal constants merge."""

    __slots__ = ("data", "_signature")

    def __init__(self, type: Type, data: Any, name=None):
        super().__init__(type, None, None, name)
        self.data = data
        self._signature: tuple | None = None

    def signature(self) -> Any:
        if self._signature is None:
            self._signature = (self.type, _hashable_data(self.data))
        return self._signature

    def stored_value(self) -> Any:
        """The value a compiled function holds for this constant (its ``data``)."""
        return self.data

    def clone(self) -> Constant:
        cp = type(self)(self.type, self.data, self.name)
        cp.created_at = self.created_at
        return cp

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        text = str(self.data)
        return text if len(text) <= 20 else text[:17] + "..."


def _hashable_data(data: Any) -> Any:
    to_bytes = getattr(data, "tobytes", None)
    if to_bytes is not None:
        return (str(getattr(data, "dtype", "")), getattr(data, "shape", ()), to_bytes())
    try:
        hash(data)
        return data
    except TypeError:
        return repr(data)


class Apply(_PicklesSlots):
    """One application of an Op to input Variables, producing output Variables."""

    __slots__ = ("op", "inputs", "outputs", "__weakref__")

    def __init__(self, op: Op, inputs: Sequence[Variable], outputs: Sequence[Variable]):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        for i, inp in enumerate(self.inputs):
            if not isinstance(inp, Variable):
                raise TypeError(f"{op}: input {i} is not a Variable: {inp!r}")
        for i, out in enumerate(self.outputs):
            if out.owner is not None and (out.owner is not self or out.index != i):
                raise ValueError(f"{op}: output {i} already belongs to another Apply")
            out.owner = self
            out.index = i

    @property
    def out(self) -> Variable:
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op} has {len(self.outputs)} outputs; use .outputs")
        return self.outputs[0]

    def clone_with_new_inputs(self, inputs: Sequence[Variable]) -> Apply:
        """Rebuild this node on new inputs through ``op.make_node`` (re-type-checked)."""
        node = self.op.make_node(*inputs)
        for old, new in zip(self.outputs, node.outputs):
            if old.name is not None and new.name is None:
                new.name = old.name
            new.created_at = old.created_at
        return node

    def __str__(self) -> str:
        return f"{self.op}({', '.join(map(str, self.inputs))})"

    __repr__ = __str__


Type.variable_class = Variable
Type.constant_class = Constant
