"""``theano.gof.fg``: tensorjit's FunctionGraph with Theano 1.0's extra methods.

Same graph object, features and transactions as tensorjit's (rewrites validate through
the same DestroyHandler); only Theano's spellings are added: ``validate()``,
``consistent()``, ``replace_validate``, ``check_integrity`` and the printed form
``[Op(x, y)]``.
"""

from tensorjit.core.graph import FunctionGraph as _FunctionGraph
from tensorjit.core.graph import InconsistencyError, MissingInputError  # noqa: F401
from tensorjit.core.graph.basic import Constant
from tensorjit.core.graph.traversal import toposort


class FunctionGraph(_FunctionGraph):
    def __init__(self, inputs, outputs, features=None, clone=True, update_mapping=None):
        super().__init__(inputs, outputs, features or (), clone)
        self.update_mapping = update_mapping

    def validate(self) -> bool:
        """Let every feature check the graph; raises InconsistencyError."""
        for feature in self.features:
            feature.on_validate(self, [], "validate")
        return True

    def consistent(self) -> bool:
        """Whether the features accept the graph as it is (no exception)."""
        try:
            self.validate()
        except InconsistencyError:
            return False
        return True

    def replace_validate(self, r, new_r, reason=None):
        """``replace`` as one validated transaction (rolled back if a feature vetoes)."""
        self.replace_all_validate([(r, new_r)], reason)

    def replace_all_validate_remove(self, replacements, remove, reason=None, warn=True):
        self.replace_all_validate(replacements, reason)
        for node in remove:
            if node in self.apply_nodes:
                self.replace_all_validate([], reason)  # still consistent
                raise ReplacementDidntRemovedError()

    def check_integrity(self) -> None:
        nodes = set(toposort(self.outputs, self.inputs))
        if nodes != self.apply_nodes:
            raise Exception("the graph's nodes and its traversal disagree")

    def __str__(self) -> str:
        return f"[{', '.join(_as_strings(self.inputs, self.outputs))}]"

    def __repr__(self) -> str:
        return str(self)


class ReplacementDidntRemovedError(Exception):
    """A replacement left a node that should have gone."""


def _as_strings(inputs, outputs):
    """Theano's ``graph.as_string``: each output as an expression; a node used more than
    once is written ``*k -> Op(...)`` the first time and ``*k`` after."""
    inputs = set(inputs)
    uses: dict = {}
    for node in toposort(outputs, inputs):
        for var in node.inputs:
            if var.owner is not None:
                uses[var.owner] = uses.get(var.owner, 0) + 1
    for out in outputs:
        if out.owner is not None:
            uses[out.owner] = uses.get(out.owner, 0) + 1
    labels: dict = {}

    def text(var) -> str:
        node = var.owner
        if node is None or var in inputs:
            if isinstance(var, Constant) and var.name is None:
                return str(var.data)
            return str(var)
        if node in labels:
            return labels[node]
        body = f"{node.op}({', '.join(text(i) for i in node.inputs)})"
        if len(node.outputs) > 1:
            body += f".{var.index}"
        if uses.get(node, 0) > 1:
            labels[node] = f"*{len(labels) + 1}"
            return f"{labels[node]} -> {body}"
        return body

    return [text(out) for out in outputs]
