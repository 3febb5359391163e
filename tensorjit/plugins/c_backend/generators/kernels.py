"""Kernel factories of the C backend: generate, compile (cached) and call C per node.

A factory runs when a function is compiled; the ``run(inputs, output_storage)`` it
returns only checks shapes and contiguity, allocates (or reuses) the output and calls C.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant
from tensorjit.plugins.c_backend.build import compiler
from tensorjit.plugins.c_backend.generators import (
    codegen,
    max_exp_sum,
    moments,
    moments_map,
    reduction,
)
from tensorjit.plugins.c_backend.generators.buffers import reusable
from tensorjit.plugins.cstyle.dialect import Unsupported
from tensorjit.plugins.cstyle.elementwise import element_function
from tensorjit.tensor.elemwise_reduce import ElemwiseReduce
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

Run = Callable[[list, list], None]


# ---------------------------------------------------------------- Elemwise
class ElemwisePlan(NamedTuple):
    kinds: list[str]  # per input: "full", "scalar" (broadcast everywhere) or "const"
    bcast: list[tuple[bool, ...]]  # per input: which axes broadcast
    source: str
    cdef: str
    # Whether the kernel has the flat entries (tj_contig_u...); without them a program
    # calls the strided ones even for contiguous operands (a MomentsMap needs the rows).
    flat: bool = True


def elemwise_plan(node: Apply) -> ElemwisePlan:
    """What the C kernel of an Elemwise or MultiOutputElemwise node is (Unsupported if
    none can be made)."""
    op = node.op
    # (a MultiOutputElemwise's kernel has a pointer per output; in place, the program
    # passes the input's buffer as that output's)
    target = None if isinstance(op, MultiOutputElemwise) else op.inplace
    kinds, consts, bcast = elemwise_operands(node.inputs, target)
    dtypes = [v.type.dtype for v in node.inputs]
    out_dtypes = [v.type.dtype for v in node.outputs]
    source, cdef = codegen.elemwise_source(
        op.scalar_op, dtypes, out_dtypes, kinds, bcast, consts, target
    )
    n_ptrs = sum(k != "const" for k in kinds) + (len(out_dtypes) if target is None else 0)
    ndim = len(bcast[0]) if bcast else 0
    source += _uniform_elemwise(n_ptrs, ndim)
    cdef += UNIFORM_ELEMWISE_CDEF
    return ElemwisePlan(kinds, bcast, source, cdef)


def elemwise_operands(
    inputs: list, target: int | None = None
) -> tuple[list[str], dict[int, np.ndarray], list[tuple[bool, ...]]]:
    """Per input: its kind ("full", "scalar": broadcast everywhere, "const": inlined),
    the constants' values, and the axes it broadcasts over (``target``: written in
    place, so always "full")."""
    kinds, consts, bcast = [], {}, []
    for i, var in enumerate(inputs):
        b = tuple(s == 1 for s in var.type.shape)
        bcast.append(b)
        if i == target:
            kinds.append("full")
        elif all(b) and isinstance(var, Constant):
            kinds.append("const")
            consts[i] = np.asarray(var.data)
        elif all(b):
            kinds.append("scalar")
        else:
            kinds.append("full")
    return kinds, consts, bcast


# Entry points with one signature for every kernel of a kind (arrays of shapes, data
# pointers and strides), for whole-graph programs (program.c) to call through pointers.
UNIFORM_ELEMWISE_CDEF = (
    "void tj_contig_u(int64_t, char **);\n"
    "void tj_contig_stream_u(int64_t, char **);\n"
    "void tj_strided_u(const int64_t *, char **, const int64_t *);\n"
    "void tj_strided_stream_u(const int64_t *, char **, const int64_t *);\n"
)


def _uniform_elemwise(n_ptrs: int, ndim: int) -> str:
    ptrs = ", ".join(f"p[{j}]" for j in range(n_ptrs))
    shape = "".join(f"n[{a}], " for a in range(ndim))
    strides = "".join(f", s[{i}]" for i in range(n_ptrs * ndim))
    return (
        f"void tj_contig_u(int64_t n, char **p) {{ tj_contig(n, {ptrs}); }}\n"
        f"void tj_contig_stream_u(int64_t n, char **p) {{ tj_contig_stream(n, {ptrs}); }}\n"
        "void tj_strided_u(const int64_t *n, char **p, const int64_t *s) "
        f"{{ (void)n; (void)s; tj_strided({shape}{ptrs}{strides}); }}\n"
        "void tj_strided_stream_u(const int64_t *n, char **p, const int64_t *s) "
        f"{{ (void)n; (void)s; tj_strided_stream({shape}{ptrs}{strides}); }}\n"
    )


def elemwise_factory(node: Apply, plan: ElemwisePlan | None = None) -> Run:
    kinds, bcast, source, cdef, _ = plan or elemwise_plan(node)
    ffi, lib = compiler.load(source, cdef, ("tj_contig", "tj_strided"), what=str(node.op))
    contig, strided = lib.tj_contig, lib.tj_strided
    from_buffer, cast = ffi.from_buffer, ffi.cast
    perform = node.op.perform
    var_idx = [i for i, k in enumerate(kinds) if k != "const"]
    full = [k for k, i in enumerate(var_idx) if kinds[i] == "full"]
    out_type = node.outputs[0].type
    out_dtypes = [v.type.numpy_dtype for v in node.outputs]
    ndim = out_type.ndim
    static = out_type.shape
    ones = tuple(1 for _ in range(ndim))
    # Per axis, the operands (positions among the variable inputs) that move along it.
    moving = [[k for k in full if not bcast[var_idx[k]][a]] for a in range(ndim)]
    checks = [(k, [a for a in range(ndim) if not bcast[var_idx[k]][a]]) for k in full]
    multi = isinstance(node.op, MultiOutputElemwise)
    target = None if multi or node.op.inplace is None else var_idx.index(node.op.inplace)
    # A MultiOutputElemwise's outputs written into inputs: output -> variable input
    into = {k: var_idx.index(i) for k, i in node.op.inplace} if multi else {}

    def outputs(output_storage: list, shape: tuple, vals: list) -> list[np.ndarray]:
        """The output arrays, stored in their cells: an input's buffer for one in
        place, else each cell's previous array where it fits."""
        made = []
        for k, (cell, dtype) in enumerate(zip(output_storage, out_dtypes)):
            out = vals[into[k]] if k in into else cell[0]
            if k not in into and not reusable(out, shape, dtype, vals):
                out = np.empty(shape, dtype)
            cell[0] = out
            made.append(out)
        return made

    destinations = set(into.values()) if multi else ({target} if target is not None else set())

    def ptr(a: np.ndarray):
        if a.flags.c_contiguous:
            return from_buffer(a)
        return cast("char *", a.ctypes.data)

    def run(inputs: list, output_storage: list) -> None:
        vals = [inputs[i] for i in var_idx]
        for t in destinations:
            dest = vals[t]
            for k, a in enumerate(vals):  # a partly overlapping input is read from a copy
                if k != t and a is not dest and np.may_share_memory(a, dest):
                    vals[k] = a.copy()
        if full:
            shape = vals[full[0]].shape
            fast = True
            for k in full:
                a = vals[k]
                if a.shape != shape or not a.flags.c_contiguous:
                    fast = False
                    break
        else:
            shape, fast = ones, True
        if fast:
            if target is not None:
                contig(vals[target].size, *[from_buffer(a) for a in vals])
                output_storage[0][0] = vals[target]
                return
            outs = outputs(output_storage, shape, vals)
            contig(outs[0].size, *[from_buffer(a) for a in vals + outs])
            return
        shape = list(static)
        for a in range(ndim):
            if shape[a] is None:
                shape[a] = vals[moving[a][0]].shape[a]
        for k, axes in checks:
            s = vals[k].shape
            for a in axes:
                if s[a] != shape[a]:  # let the reference kernel raise its error
                    perform(node, inputs, output_storage)
                    return
        shape = tuple(shape)
        if target is not None:
            ptrs = [ptr(a) for a in vals]
            strides = [st for a in vals for st in a.strides]
            strided(*shape, *ptrs, *strides)
            output_storage[0][0] = vals[target]
            return
        outs = outputs(output_storage, shape, vals)
        ptrs = [ptr(a) for a in vals + outs]  # (an output in place: any strides)
        strides = [st for a in vals + outs for st in a.strides]
        strided(*shape, *ptrs, *strides)

    return run


def moments_map_plan(node: Apply) -> ElemwisePlan:
    """The C kernel of a MomentsMap node (tensor/moments_map.py): an elementwise plan of
    its inputs (x, the divisor, the operands) with strided entries only."""
    kinds, consts, bcast = elemwise_operands(node.inputs)
    x = node.inputs[0]
    if kinds[0] != "full":
        raise Unsupported(f"{node.op}: a constant x of one element (Op.perform)")
    source, cdef = moments_map.moments_map_source(
        node.op.scalar_op,
        x.type.dtype,
        [v.type.dtype for v in node.inputs[2:]],
        kinds,
        bcast,
        consts,
        node.outputs[0].type.dtype,
        node.op.mean_by,
    )
    return ElemwisePlan(kinds, bcast, source, cdef, flat=False)


def moments_map_factory(node: Apply, plan: ElemwisePlan | None = None) -> Run:
    kinds, bcast, source, cdef, _ = plan or moments_map_plan(node)
    ffi, lib = compiler.load(source, cdef, ("tj_strided_u",), what=str(node.op))
    fn, new, cast = lib.tj_strided_u, ffi.new, ffi.cast
    perform = node.op.perform
    var_idx = [i for i, k in enumerate(kinds) if k != "const"]
    moving = [(i, [a for a, b in enumerate(bcast[i]) if not b]) for i in var_idx]
    out_dtype = node.outputs[0].type.numpy_dtype

    def run(inputs: list, output_storage: list) -> None:
        shape = inputs[0].shape
        for i, axes in moving:
            s = inputs[i].shape
            if len(s) != len(shape) or any(s[a] != shape[a] for a in axes):
                perform(node, inputs, output_storage)  # its error names the operand
                return
        vals = [inputs[i] for i in var_idx]
        out = output_storage[0][0]
        if not reusable(out, shape, out_dtype, vals):
            out = np.empty(shape, out_dtype)
        ptrs = [cast("char *", a.ctypes.data) for a in (*vals, out)]
        strides = [st for a in (*vals, out) for st in a.strides]
        fn(new("int64_t[]", list(shape)), new("char *[]", ptrs), new("int64_t[]", strides))
        output_storage[0][0] = out

    return run


# ---------------------------------------------------------------- Reduce
class ReducePlan(NamedTuple):
    kept: list[int]  # the axes not reduced
    bcast: list[tuple[bool, ...]]  # per pointer operand: the axes it broadcasts over
    operands: list[int]  # the inputs that are pointer operands (the others: constants)
    source: str
    cdef: str


def reduce_plan(node: Apply) -> ReducePlan:
    """What the C kernel of a Reduce, MappedReduce or ElemwiseReduce node is
    (Unsupported if none can be made)."""
    op = node.op
    if isinstance(op, ElemwiseReduce):
        mapped = op.mapped_type(node)
        ndim = mapped.ndim
        kinds, consts, bcast = elemwise_operands(node.inputs)
        dtypes = [v.type.dtype for v in node.inputs]
        function, body = element_function(
            codegen.C_DIALECT, op.scalar_op, dtypes, mapped.dtype, kinds, consts
        )
        operands = [i for i, k in enumerate(kinds) if k != "const"]
        if not operands:
            raise Unsupported(f"{op}: constants only (folded, or Op.perform)")
        order = [a for a in range(ndim) if a not in op.axis] + list(op.axis)
        reading = reduction.Reading(
            tuple((dtypes[i], reduction.permuted(bcast[i], order)) for i in operands),
            tuple(function),
            body,
            mapped.dtype,
        )
    else:
        ndim = node.inputs[0].type.ndim
        dtype = node.inputs[0].type.dtype
        mapped_c = _mapped_element(getattr(op, "map", None), dtype)  # MappedReduce's sqr/abs
        reading = reduction.identity_reading(dtype, ndim, mapped_c)
        bcast, operands = [(False,) * ndim], [0]
    kept = [a for a in range(ndim) if a not in op.axis]
    source, cdef = reduction.reduce_source(
        op.kind, reading, node.outputs[0].type.dtype, len(kept), len(op.axis)
    )
    return ReducePlan(kept, [bcast[i] for i in operands], operands, source, cdef)


def moments_plan(node: Apply) -> ReducePlan:
    """The C kernel of a Moments node (tensor/moments.py): x and the divisor (broadcast
    everywhere) are its pointer operands."""
    x = node.inputs[0]
    source = moments.moments_source(x.type.dtype, x.type.ndim - len(node.op.axis), node.op.mean_by)
    return _axis_last_plan(node, source, operands=2)


def max_exp_sum_plan(node: Apply) -> ReducePlan:
    """The C kernel of a MaxExpSum node (tensor/max_exp_sum.py): x its one pointer
    operand."""
    x = node.inputs[0]
    source = max_exp_sum.max_exp_sum_source(x.type.dtype, x.type.ndim - len(node.op.axis))
    return _axis_last_plan(node, source, operands=1)


def _axis_last_plan(node: Apply, source: tuple[str, str], operands: int) -> ReducePlan:
    """A reduction's plan for a two-statistics kernel (the reduced axis last): x, then
    ``operands - 1`` inputs of one element each (broadcast everywhere)."""
    ndim = node.inputs[0].type.ndim
    kept = [a for a in range(ndim) if a not in node.op.axis]
    bcast = [(False,) * ndim] + [(True,) * ndim] * (operands - 1)
    return ReducePlan(kept, bcast, list(range(operands)), *source)


def moments_factory(node: Apply, plan: ReducePlan | None = None) -> Run:
    return _two_statistics_factory(node, plan or moments_plan(node))


def max_exp_sum_factory(node: Apply, plan: ReducePlan | None = None) -> Run:
    return _two_statistics_factory(node, plan or max_exp_sum_plan(node))


def _two_statistics_factory(node: Apply, plan: ReducePlan) -> Run:
    """The run of a kernel giving two statistics of x's groups along one axis (Moments,
    MaxExpSum): ``tj_reduce(n..., x, the other inputs (one element each), out, out2,
    x's strides...)``, the reduced axis last; both outputs of x's dtype."""
    kept, _, _, source, cdef = plan
    ffi, lib = compiler.load(source, cdef, ("tj_reduce",), what=str(node.op))
    fn, from_buffer, cast = lib.tj_reduce, ffi.from_buffer, ffi.cast
    order = kept + list(node.op.axis)
    dtype = node.outputs[0].type.numpy_dtype
    perform = node.op.perform
    needs_elements = node.op.kind == "max"

    def run(inputs: list, output_storage: list) -> None:
        x, *scalars = inputs
        if needs_elements and x.shape[order[-1]] == 0:
            perform(node, inputs, output_storage)  # NumPy's error for an empty max
            return
        scalars = [np.ascontiguousarray(v, dtype=dtype) for v in scalars]
        shape = tuple(x.shape[a] for a in kept)
        outs = []
        for cell in output_storage:
            out = cell[0]
            if not reusable(out, shape, dtype, [x, *scalars, *outs]):
                out = np.empty(shape, dtype)
            outs.append(out)
        fn(*[x.shape[a] for a in order], cast("char *", x.ctypes.data),
           *[from_buffer(v) for v in scalars], *[from_buffer(o) for o in outs],
           *[x.strides[a] for a in order])  # fmt: skip
        for cell, out in zip(output_storage, outs, strict=True):
            cell[0] = out

    return run


def _mapped_element(map_name: str | None, dtype: str) -> str:
    """C of a MappedReduce's map (None: a plain Reduce) of the element ``x0``."""
    if map_name is None:
        return "x0"
    if map_name == "sqr":
        return "x0 * x0"
    if map_name == "abs" and dtype in ("float32", "float64"):
        return "fabsf(x0)" if dtype == "float32" else "fabs(x0)"  # abs(-0.0) is 0.0
    if map_name == "abs" and not dtype.startswith("u"):
        return "x0 < 0 ? -x0 : x0"
    raise Unsupported(f"reduction of {map_name}({dtype})")


def reduce_factory(node: Apply, plan: ReducePlan | None = None) -> Run:
    kept, bcast, operands, source, cdef = plan or reduce_plan(node)
    ffi, lib = compiler.load(source, cdef, ("tj_reduce",), what=str(node.op))
    fn = lib.tj_reduce
    from_buffer, cast = ffi.from_buffer, ffi.cast
    op = node.op
    perform = op.perform
    axis = list(op.axis)
    order = kept + axis
    out_dtype = node.outputs[0].type.numpy_dtype
    needs_elements = op.kind in ("max", "min")
    shape_of = op.input_check(node) if isinstance(op, ElemwiseReduce) else None

    def ptr(a: np.ndarray):
        return from_buffer(a) if a.flags.c_contiguous else cast("char *", a.ctypes.data)

    def run(inputs: list, output_storage: list) -> None:
        full = inputs[0].shape if shape_of is None else shape_of(inputs)
        if needs_elements and any(full[a] == 0 for a in axis):
            perform(node, inputs, output_storage)  # NumPy's error for an empty max/min
            return
        shape = tuple(full[a] for a in kept)
        out = output_storage[0][0]
        if not reusable(out, shape, out_dtype, inputs):
            out = np.empty(shape, out_dtype)
        values = [inputs[i] for i in operands]
        strides = [0 if b[a] else x.strides[a] for x, b in zip(values, bcast) for a in order]
        fn(*[full[a] for a in order], *[ptr(x) for x in values], from_buffer(out), *strides)
        output_storage[0][0] = out

    return run
