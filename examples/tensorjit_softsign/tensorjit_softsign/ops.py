"""The op: what it computes (perform), its type rules (make_node), shape and gradient."""

from __future__ import annotations

from typing import Any

import numpy as np

import tensorjit.tensor as T
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op


class Softsign(Op):
    """Elementwise ``x / (1 + |x|)`` for float tensors. ``inplace=True`` is the variant
    that overwrites its input (tensorjit's inplace pass chooses it when that is safe)."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False):
        self.inplace = inplace
        # Output 0 overwrites input 0: the destroy handler must know.
        self.destroy_map = {0: [0]} if inplace else {}

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        if x.type.dtype not in ("float32", "float64"):
            # describe() names the variable, its type and the user's line that made it.
            raise TypeError(f"softsign needs a float32 or float64 tensor, got {x.describe()}")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        (x,) = inputs
        out = x if self.inplace else np.empty_like(x)
        np.divide(x, 1 + np.abs(x), out=out)
        output_storage[0][0] = out

    def infer_shape(self, fgraph: Any, node: Apply, input_shapes: list) -> list:
        return input_shapes

    def grad(self, inputs: list, output_grads: list) -> list:
        (x,), (g,) = inputs, output_grads
        return [g / T.sqr(1 + abs(x))]


_softsign = Softsign()


def softsign(x: Any) -> Any:
    """``x / (1 + |x|)``, elementwise."""
    return _softsign(x)
