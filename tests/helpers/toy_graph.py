"""A tiny op family for testing the core without the tensor family."""

from __future__ import annotations

from tensorjit.core.graph import Apply, Op, Type


class Kind(Type):
    """A minimal Type: values are anything, types compare by ``kind``."""

    def __init__(self, kind="a"):
        self.kind = kind

    def __eq__(self, other):
        return type(other) is type(self) and other.kind == self.kind

    def __hash__(self):
        return hash((Kind, self.kind))

    def filter(self, value, strict=False, allow_downcast=None):
        return value

    def __str__(self):
        return f"Kind({self.kind})"


class Fn(Op):
    """A named n-ary op on Kind(a) values; its value records the call as a tuple."""

    __props__ = ("fname",)

    def __init__(self, fname):
        self.fname = fname

    def make_node(self, *inputs):
        return Apply(self, inputs, [Kind("a")()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = (self.fname, *inputs)

    def __str__(self):
        return self.fname


class Combine(Op):
    """Any number of Kind(a) inputs -> one Kind(a) output."""

    __props__ = ("tag",)

    def __init__(self, tag="c"):
        self.tag = tag

    def make_node(self, *inputs):
        for i in inputs:
            if i.type != Kind("a"):
                raise TypeError(f"Combine wants Kind(a) inputs, got {i.type}")
        return Apply(self, inputs, [Kind("a")()])


class Split(Op):
    """One input -> two Kind(a) outputs."""

    def make_node(self, x):
        return Apply(self, [x], [Kind("a")(), Kind("a")()])
