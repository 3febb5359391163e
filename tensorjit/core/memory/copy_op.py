"""DeepCopy: a fresh copy of a value, for any Type (through ``Type.copy_value``)."""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op


class DeepCopy(Op):
    """Returns a copy that aliases nothing; used to protect values from destruction."""

    __props__ = ()
    constant_folding = False
    device_generic = True  # Type.copy_value copies on the value's own device
    may_raise = False

    def make_node(self, x: Variable) -> Apply:  # type: ignore[override]  # one input
        return Apply(self, [x], [x.type.make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = node.outputs[0].type.copy_value(inputs[0])

    def grad(self, inputs, output_grads):
        return [output_grads[0]]


deep_copy = DeepCopy()
