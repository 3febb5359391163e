"""``theano.compile.ops``: small ops Theano code builds graphs with."""

from typing import Any

from tensorjit.compat.op import as_op  # noqa: F401
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.core.memory.copy_op import DeepCopy as DeepCopyOp

deep_copy_op = DeepCopyOp()


class ViewOp(Op):
    """Returns its input as a view (the same value; rewrites may remove it)."""

    __props__ = ()
    view_map = {0: [0]}  # noqa: RUF012  (the Op protocol's class attribute)
    may_raise = False
    device_generic = True  # returns whatever it gets, on any device

    def make_node(self, x: Any) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes

    def L_op(self, inputs, outputs, output_grads):
        return list(output_grads)


view_op = ViewOp()


def shape_i(var: Any, i: int, fgraph: Any = None) -> Any:
    """The length of ``var`` along axis ``i`` (a symbolic int64 scalar)."""
    return var.shape[i]
