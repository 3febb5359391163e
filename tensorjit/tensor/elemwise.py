"""Elemwise (a scalar op broadcast over arrays) and DimShuffle (transpose/broadcast view)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.memory.transfer_op import before_transfers
from tensorjit.tensor.scalar import ScalarOp
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import TensorConstant, as_tensor_variable, constant


def broadcast_static_shapes(op_name: str, inputs: Sequence[Variable]) -> tuple:
    """The static output shape of broadcasting ``inputs`` (already of equal ndim)."""
    out = []
    for axis, lengths in enumerate(zip(*(i.type.shape for i in inputs))):
        known = {s for s in lengths if s is not None and s != 1}
        if len(known) > 1:
            shapes = ", ".join(str(i.type.shape) for i in inputs)
            raise ValueError(
                f"{op_name}: shapes {shapes} can not be broadcast together (dimension {axis}: "
                f"lengths {sorted(known)}); inputs: {', '.join(i.describe() for i in inputs)}"
            )
        if known:
            out.append(known.pop())
        elif all(s == 1 for s in lengths):
            out.append(1)
        else:
            out.append(None)
    return tuple(out)


def resolve_weak_constants(inputs: list[Variable]) -> list[Variable]:
    """Give Python-scalar constants the dtype NumPy would (NEP 50): that of the arrays
    they meet, if it can hold them. Other inputs are returned unchanged."""
    strong = [i.type.dtype for i in inputs if not _is_weak(i)]
    if not strong or len(strong) == len(inputs):
        return inputs
    result = []
    for i in inputs:
        if _is_weak(i):
            value = i.data.item()
            try:
                dtype = np.result_type(*strong, value)
            except (TypeError, OverflowError):
                dtype = i.type.dtype
            if np.asarray(value).astype(dtype) != value:
                dtype = np.result_type(*strong, i.type.dtype)
            i = constant(np.asarray(value, dtype=dtype))
        result.append(i)
    return result


def _is_weak(var: Variable) -> bool:
    return isinstance(var, TensorConstant) and var.weak


class Elemwise(Op):
    """Applies ``scalar_op`` elementwise with NumPy broadcasting.

    Broadcasting follows the static shape: a dimension broadcasts only if its static
    length is 1 (so gradients know where to sum). A dimension that is 1 only at run time
    is an error, as in PyTensor.
    """

    __props__ = ("scalar_op", "inplace")
    # Reading and writing the same element is safe: f(x, x) may overwrite x in place.
    destroyhandler_tolerate_same = True

    def __init__(self, scalar_op: ScalarOp, inplace: int | None = None):
        """``inplace=i``: the result is written into input ``i`` (which is destroyed)."""
        self.scalar_op = scalar_op
        self.inplace = inplace
        if inplace is not None:
            if not 0 <= inplace < scalar_op.nin:
                raise ValueError(f"{scalar_op.name} has no input {inplace} to work in place on")
            self.destroy_map = {0: [inplace]}

    def __str__(self) -> str:
        if self.inplace is None:
            return self.scalar_op.name
        return f"{self.scalar_op.name}_inplace{{{self.inplace}}}"

    def make_node(self, *inputs: Any) -> Apply:
        name = self.scalar_op.name
        vars_, shape = elemwise_inputs(self.scalar_op, inputs)
        try:
            dtype = self.scalar_op.output_dtype([v.type.dtype for v in vars_])
        except TypeError:
            dtypes = ", ".join(v.type.dtype for v in vars_)
            raise TypeError(
                f"{name} is not defined for inputs of dtype {dtypes}: "
                f"{', '.join(v.describe() for v in vars_)}"
            ) from None
        out_type = TensorType(dtype, shape)
        if self.inplace is not None:
            target = vars_[self.inplace]
            if target.type.dtype != dtype or target.type.broadcastable != out_type.broadcastable:
                raise TypeError(
                    f"{self}: can not write the result ({out_type}) into input "
                    f"{self.inplace} {target.describe()}: dtype or broadcasting differ"
                )
        return Apply(self, vars_, [out_type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [broadcast_output_shape(node, input_shapes)]

    def input_check(self, node: Apply) -> Callable[[list[Any]], None]:
        return partial(self.output_shape, node)

    def output_shape(self, node: Apply, inputs: Sequence[Any]) -> tuple[int, ...]:
        return elemwise_output_shape(node, inputs)

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        out_dtype = node.outputs[0].type.numpy_dtype
        # Checked before anything is written: an inplace op must not modify its input
        # on the way to an error.
        shape = self.output_shape(node, inputs)
        if self.inplace is not None:
            out = inputs[self.inplace]
        else:
            # A buffer left in the output cell (Out(borrow=True), the VM's pool) is reused
            # when it has the result's shape and dtype.
            out = output_storage[0][0]
            if out is not None and not (out.dtype == out_dtype and out.shape == shape):
                out = None
        if out is not None:
            result = self.scalar_op.impl_into(inputs, out)
        else:
            result = self.scalar_op.impl(*inputs)  # NumPy's warnings pass through
            if not isinstance(result, np.ndarray) or result.dtype != out_dtype:
                result = np.asarray(result, dtype=out_dtype)
        output_storage[0][0] = result

    def L_op(self, inputs, outputs, output_grads):
        grads = self.scalar_op.grad(inputs, outputs, output_grads)
        out_bcast = outputs[0].type.broadcastable
        result = []
        for x, g in zip(inputs, grads):
            if g is None:
                result.append(None)
                continue
            g = as_tensor_variable(g)
            axes = [
                a
                for a, (xb, ob) in enumerate(zip(x.type.broadcastable, out_bcast))
                if xb and not ob
            ]
            if axes:
                from tensorjit.tensor.math import sum as tsum

                g = tsum(g, axis=tuple(axes), keepdims=True)
            elif g.type.ndim < x.type.ndim:
                g = pad_left(g, x.type.ndim)
            result.append(g)
        return result

    def pprint_operands(self, node: Apply) -> list[Variable]:
        # Left-padding for broadcasting is implicit in an elementwise infix expression.
        return [(_padding_source(i) or (i,))[0] for i in node.inputs]

    def pprint(self, input_strs: Sequence[str]) -> str | None:
        symbol = self.scalar_op.symbol
        if symbol is None:
            return None
        if len(input_strs) == 1:
            return f"{symbol}{input_strs[0]}"
        return f"({f' {symbol} '.join(input_strs)})"


def elemwise_inputs(scalar_op: ScalarOp, inputs: Sequence[Any]) -> tuple[list[Variable], tuple]:
    """An elementwise node's inputs (constants given NumPy's dtypes, left-padded to one
    ndim) and their broadcast static shape."""
    if len(inputs) != scalar_op.nin:
        raise TypeError(f"{scalar_op.name} takes {scalar_op.nin} inputs, got {len(inputs)}")
    vars_ = resolve_weak_constants([as_tensor_variable(i) for i in inputs])
    ndim = max(v.type.ndim for v in vars_)
    vars_ = [pad_left(v, ndim) for v in vars_]
    return vars_, broadcast_static_shapes(scalar_op.name, vars_)


def broadcast_output_shape(node: Apply, input_shapes: Sequence[tuple]) -> tuple:
    """The symbolic shape of an elementwise node's outputs: each dimension's length
    comes from an input that does not broadcast there."""
    out_shape = []
    for axis, static in enumerate(node.outputs[0].type.shape):
        if static is not None:
            out_shape.append(static)
            continue
        for var, shape in zip(node.inputs, input_shapes):
            if not var.type.broadcastable[axis]:
                out_shape.append(shape[axis])
                break
    return tuple(out_shape)


def elemwise_output_shape(node: Apply, inputs: Sequence[Any]) -> tuple[int, ...]:
    """An elementwise node's result shape for these input values (of any device);
    raises as NumPy does on shapes that do not broadcast, and on a run-time length 1 the
    type does not declare broadcastable."""
    shape = inputs[0].shape
    if any(value.shape != shape for value in inputs):
        shape = np.broadcast_shapes(*(value.shape for value in inputs))
        for var, value in zip(node.inputs, inputs):
            if value.shape != shape and value.ndim:
                check_runtime_broadcast(node, var, value.shape, shape)
    return shape


def check_runtime_broadcast(node: Apply, var: Variable, shape: tuple, out_shape: tuple) -> None:
    """Raise when ``var``'s run-time length 1 would broadcast along an axis its type does
    not declare broadcastable (every backend's elementwise kernels share this check)."""
    for axis, (n, m) in enumerate(zip(shape, out_shape)):
        if n == 1 and m != 1 and not var.type.broadcastable[axis]:
            user_var, user_axis = unpadded(before_transfers(var), axis)
            user_var = before_transfers(user_var)  # the user's variable, not a device copy
            # The scalar op's name: an in-place variant (chosen on a device) says the same.
            raise ValueError(
                f"{node.op.scalar_op}: input {user_var.describe()} has length 1 in dimension "
                f"{user_axis} at run time but its type does not declare that dimension "
                "broadcastable "
                f"(static length 1), and the output has length {m}. Declare it, e.g. "
                "with tensorjit.tensor.row()/col() or tensor(shape=(1, None))."
            )


def _padding_source(var: Variable) -> tuple[Variable, int] | None:
    """(input, number of added axes) if ``var`` only left-pads its input with new axes."""
    owner = var.owner
    if owner is not None and isinstance(owner.op, DimShuffle):
        order = owner.op.new_order
        n_pad = len(order) - owner.op.input_ndim
        if n_pad > 0 and order == ("x",) * n_pad + tuple(range(owner.op.input_ndim)):
            return owner.inputs[0], n_pad
    return None


def unpadded(var: Variable, axis: int) -> tuple[Variable, int]:
    """The variable (and axis) before the left-padding Elemwise added for broadcasting."""
    source = _padding_source(var)
    if source is not None and axis >= source[1]:
        return source[0], axis - source[1]
    return var, axis


def pad_left(var: Variable, ndim: int) -> Variable:
    """``var`` with new broadcastable axes in front, to ``ndim`` axes."""
    missing = ndim - var.type.ndim
    if missing <= 0:
        return var
    return DimShuffle(var.type.ndim, ("x",) * missing + tuple(range(var.type.ndim)))(var)


class DimShuffle(Op):
    """Reorders dimensions, adds broadcastable ones ('x') and drops length-1 ones.

    The output is a view of the input.
    """

    __props__ = ("input_ndim", "new_order")
    view_map = {0: [0]}

    def __init__(self, input_ndim: int, new_order: Sequence[int | str]):
        self.input_ndim = int(input_ndim)
        self.new_order = tuple(new_order)
        kept = [d for d in self.new_order if d != "x"]
        for d in self.new_order:
            if d != "x" and not (isinstance(d, int) and 0 <= d < self.input_ndim):
                raise ValueError(
                    f"dimshuffle: {d!r} is not 'x' or a dimension of a {self.input_ndim}-d input"
                )
        if len(set(kept)) != len(kept):
            raise ValueError(f"dimshuffle: dimensions repeat in {self.new_order}")
        self.dropped = tuple(d for d in range(self.input_ndim) if d not in kept)
        self.perm = tuple(kept) + self.dropped
        self.new_shape_index = tuple(slice(None) if d != "x" else None for d in self.new_order)

    def __str__(self) -> str:
        return f"DimShuffle{{{','.join(map(str, self.new_order))}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim != self.input_ndim:
            raise TypeError(f"{self} expects a {self.input_ndim}-d input, got {x.describe()}")
        for d in self.dropped:
            if x.type.shape[d] != 1:
                raise ValueError(
                    f"{self}: can not drop dimension {d} of {x.describe()}: only dimensions "
                    "of static length 1 can be dropped"
                )
        shape = tuple(1 if d == "x" else x.type.shape[d] for d in self.new_order)
        return Apply(self, [x], [TensorType(x.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        (shape,) = input_shapes
        return [tuple(1 if d == "x" else shape[d] for d in self.new_order)]

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        (x,) = inputs
        if x.shape and any(x.shape[d] != 1 for d in self.dropped):
            raise ValueError(f"{self}: dropped dimensions must have length 1, got shape {x.shape}")
        view = x.transpose(self.perm) if self.perm != tuple(range(x.ndim)) else x
        if self.dropped:
            view = view.reshape(view.shape[: x.ndim - len(self.dropped)])
        output_storage[0][0] = view[self.new_shape_index] if "x" in self.new_order else view

    def pprint(self, input_strs: Sequence[str]) -> str | None:
        kept = [d for d in self.new_order if d != "x"]
        if self.new_order == tuple(reversed(range(self.input_ndim))) and self.input_ndim == 2:
            return f"{input_strs[0]}.T"
        if kept == list(range(self.input_ndim)):  # only new axes: NumPy's x[None, :] form
            index = ", ".join("None" if d == "x" else ":" for d in self.new_order)
            return f"{input_strs[0]}[{index}]"
        return None

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.math import sum as tsum

        (x,) = inputs
        (g,) = output_grads
        added = tuple(a for a, d in enumerate(self.new_order) if d == "x")
        if added:
            g = tsum(g, axis=added)  # summing a length-1 axis removes it
        kept = [d for d in self.new_order if d != "x"]
        # Now g's dims are x's kept dims in order ``kept``; restore x's order and add dropped.
        inverse = [kept.index(d) if d in kept else "x" for d in range(self.input_ndim)]
        return [DimShuffle(len(kept), inverse)(g)]


def scalar_name(node: Apply | None) -> str | None:
    """The scalar op name of a (non-inplace) Elemwise node, else None."""
    if node is None or not isinstance(node.op, Elemwise) or node.op.inplace is not None:
        return None
    return node.op.scalar_op.name
