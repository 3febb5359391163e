"""Readable views of graphs: ``debugprint`` (a tree with ids) and ``pprint`` (infix),
and the ``Print`` op (prints a value when it is computed)."""

from __future__ import annotations

import string
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.graph.op import Op


def _roots(obj: Any) -> tuple[list[Variable], dict]:
    """Output variables to print, and node -> kernel name for compiled functions."""
    if isinstance(obj, FunctionGraph):  # Theano programs print fgraphs they rewrote
        return list(obj.outputs), {}
    fgraph = getattr(obj, "fgraph", None)
    if fgraph is not None:
        kernels = {node: k.name for node, k in getattr(obj, "kernels", {}).items()}
        return list(fgraph.outputs), kernels
    if isinstance(obj, Variable):
        return [obj], {}
    if isinstance(obj, Iterable):
        items = list(obj)
        if all(isinstance(v, Variable) for v in items):
            return items, {}
    raise TypeError(
        "debugprint/pprint take a Variable, a list of them, a FunctionGraph or a function, "
        f"got {obj!r}"
    )


def _id_name(n: int) -> str:
    letters = string.ascii_uppercase
    name = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        name = letters[r] + name
    return name


def debugprint(
    obj: Any, file: TextIO | str | None = None, print_type: bool = False, depth: int = -1
) -> str | None:
    """Print the graph of ``obj`` (variables, a FunctionGraph or a compiled function) as an
    indented tree; each node gets an id, and a node seen before is printed once (later
    only its id). ``file="str"`` returns the text."""
    roots, kernels = _roots(obj)
    ids: dict[Any, str] = {}
    lines: list[str] = []

    def label(var: Variable) -> str:
        key = var.owner if var.owner is not None else var
        first = key not in ids
        if first:
            ids[key] = _id_name(len(ids))
        if var.owner is not None:
            op = var.owner.op
            out = f".{var.index}" if len(var.owner.outputs) > 1 else ""
            text = f"{op}{out} [id {ids[key]}]"
            if var.owner in kernels:
                text += f" [{kernels[var.owner]}]"
        elif isinstance(var, Constant):
            text = f"{var} [id {ids[key]}]"
        else:
            text = f"{var.name or '<input>'} [id {ids[key]}]"
        if var.name and var.owner is not None:
            text += f" '{var.name}'"
        if print_type:
            text += f" <{var.type.short_str()}>"
        return text, first

    for root in roots:
        # Explicit stack (not recursion) so that graphs of any depth print.
        stack: list[tuple[Variable, str, int]] = [(root, "", 0)]
        while stack:
            var, prefix, level = stack.pop()
            text, first = label(var)
            lines.append(prefix + text)
            if var.owner is None or not first or level == depth:
                continue
            child_prefix = prefix.replace("|", " ") + " |"
            for inp in reversed(var.owner.inputs):
                stack.append((inp, child_prefix, level + 1))
    text = "\n".join(lines)
    if file == "str":
        return text
    print(text, file=file or sys.stdout)
    return None


def pprint(obj: Any) -> str:
    """An infix rendering of the expression(s), e.g. ``(x + exp(y))``."""
    roots, _ = _roots(obj)
    cache: dict[Variable, str] = {}

    def leaf_text(var: Variable, top: bool) -> str | None:
        if var.owner is None or (var.name and not top):
            if var.name or isinstance(var, Constant):
                return str(var)
            return f"<{var.type.short_str()}>"
        return None

    def render(root: Variable) -> str:
        # Post-order over an explicit stack, so deep graphs do not hit the recursion limit.
        stack: list[tuple[Variable, bool]] = [(root, False)]
        while stack:
            var, expanded = stack.pop()
            if var in cache:
                continue
            leaf = leaf_text(var, var is root)
            if leaf is not None:
                cache[var] = leaf
                continue
            node = var.owner
            operands = node.op.pprint_operands(node)
            if not expanded:
                stack.append((var, True))
                stack.extend((i, False) for i in reversed(operands) if i not in cache)
                continue
            args = [cache[i] for i in operands]
            text = node.op.pprint(args) or f"{node.op}({', '.join(args)})"
            if len(node.outputs) > 1:
                text += f"[{var.index}]"
            cache[var] = text
        return cache[root]

    return "\n".join(render(r) for r in roots)


pp = pprint


# ---------------------------------------------------------------- Print op
def _print_fn(op: Print, value: Any) -> None:
    for attr in op.attrs:
        shown = getattr(value, attr)
        if callable(shown):
            shown = shown()
        print(op.message, attr, "=", shown)


class Print(Op):
    """Theano's ``printing.Print``: ``Print("x is")(x)`` equals ``x`` and, each time it is
    computed, prints ``"x is __str__ = <value>"`` (one line per name in ``attrs``, e.g.
    ``attrs=("shape",)``; a callable attribute is called). ``global_fn(op, value)``
    replaces the printing. The output is a view of the input; gradients pass through,
    and the op is never constant-folded (it would print at compile time only)."""

    __props__ = ("message", "attrs", "global_fn")
    view_map = {0: [0]}
    constant_folding = False
    has_side_effects = True

    def __init__(
        self,
        message: str = "",
        attrs: Sequence[str] = ("__str__",),
        global_fn: Callable[[Any, Any], None] = _print_fn,
    ):
        if isinstance(attrs, str):
            attrs = (attrs,)
        self.message = message
        self.attrs = tuple(attrs)
        self.global_fn = global_fn

    def make_node(self, x: Any) -> Apply:
        if not isinstance(x, Variable):
            from tensorjit.tensor.variable import as_tensor_variable

            x = as_tensor_variable(x)
        return Apply(self, [x], [x.type.make_variable()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        output_storage[0][0] = x
        self.global_fn(self, x)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [output_grads[0]]

    def __str__(self) -> str:
        return f"Print{{{self.message!r}}}"

    __repr__ = __str__


def pydotprint(fct: Any, outfile: Any = None, **options: Any) -> Any:
    """Draw a graph with graphviz: see ``tensorjit.pictures.pydotprint``."""
    from tensorjit.pictures import pydotprint as draw  # graphviz is an optional extra

    return draw(fct, outfile, **options)
