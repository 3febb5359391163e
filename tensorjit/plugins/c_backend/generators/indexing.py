"""C kernels for indexing by one integer vector on the first axis: ``x[idx]`` (gather,
also what ``take(x, idx, axis=0)`` becomes) and ``inc_subtensor(x[idx], y)`` /
``set_subtensor(x[idx], y)`` (scatter; repeated indices accumulate as with
``numpy.add.at``, which is what makes the C loop worth having: embedding gradients).
Also two integer vectors on a matrix, ``x[rows, cols]`` and its increment: the
classification cost ``log(p)[arange(n), y]`` and its gradient (``pair_*`` below; the
whole-graph program has the same loops as steps, see program.c).

Rows are moved whole (``memcpy`` or an add loop over a contiguous row), so the kernels
work on C-contiguous operands; other layouts are made contiguous first. Every index is
checked before anything is written; an out-of-range index is reported by the reference
kernel (Op.perform), which raises NumPy's error with the op's context.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import compiler
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.plugins.c_backend.generators.codegen import Unsupported, covered_by, ctype
from tensorjit.plugins.cstyle import indexing as rules
from tensorjit.tensor.linalg import ExtractDiag
from tensorjit.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor

Run = Callable[[list, list], None]
OPS = (AdvancedSubtensor, AdvancedIncSubtensor, ExtractDiag)


def _with_rules(template: str) -> str:
    """``template`` with the shared index rules (cstyle/indexing.py) written in (they
    hold no braces but the ``{T}`` type field, filled with the template's own)."""
    rows = {
        "OUT_OF_RANGE_J": rules.index_out_of_range("j", "n_rows"),
        "WRAP_J": rules.wrap_index("j", "n_rows"),
        "OUT_OF_RANGE_I": rules.index_out_of_range("i", "rows"),
        "OUT_OF_RANGE_COL": rules.index_out_of_range("j", "cols"),
        "WRAP_I": rules.wrap_index("i", "rows"),
        "WRAP_COL": rules.wrap_index("j", "cols"),
        "ADD_ROW": rules.update("o[k]", "v[k]", "{T}", "", False),
        "ADD_PAIR": rules.update("out[i * so0 + j * so1]", "y[k * ys]", "{T}", "", False),
    }
    for name, text in rows.items():
        template = template.replace("{" + name + "}", text)
    return template


_SOURCE = _with_rules("""#include <stdint.h>
#include <string.h>

/* 0 if every index is in [-n_rows, n_rows), else 1 + the position of the first bad one */
static int64_t tj_check(int64_t n_idx, int64_t n_rows, const {I} *idx) {{
    for (int64_t i = 0; i < n_idx; i++) {{
        int64_t j = (int64_t)idx[i];
        if {OUT_OF_RANGE_J} return i + 1;
    }}
    return 0;
}}

int64_t tj_take(int64_t n_idx, int64_t n_rows, int64_t row, const char *x, const char *idx_,
                char *out) {{
    const {I} *idx = (const {I} *)idx_;
    int64_t bad = tj_check(n_idx, n_rows, idx);
    if (bad) return bad;
    const size_t bytes = (size_t)row * sizeof({T});
    for (int64_t i = 0; i < n_idx; i++) {{
        int64_t j = (int64_t)idx[i];
        {WRAP_J}
        memcpy(out + i * bytes, x + j * bytes, bytes);
    }}
    return 0;
}}

int64_t tj_scatter(int64_t n_idx, int64_t n_rows, int64_t row, char *out_, const char *idx_,
                   const char *y_, int set) {{
    const {I} *idx = (const {I} *)idx_;
    int64_t bad = tj_check(n_idx, n_rows, idx);
    if (bad) return bad;
    {T} *out = ({T} *)out_;
    const {T} *y = (const {T} *)y_;
    for (int64_t i = 0; i < n_idx; i++) {{
        int64_t j = (int64_t)idx[i];
        {WRAP_J}
        {T} *o = out + j * row;
        const {T} *v = y + i * row;
        if (set) memcpy(o, v, (size_t)row * sizeof({T}));
        else for (int64_t k = 0; k < row; k++) {ADD_ROW}
    }}
    return 0;
}}
""")
_CDEF = """
int64_t tj_take(int64_t, int64_t, int64_t, const char *, const char *, char *);
int64_t tj_scatter(int64_t, int64_t, int64_t, char *, const char *, const char *, int);
"""


# Two index vectors on a matrix. Element strides (in elements of T) address any layout;
# an index vector of length 1 broadcasts (step 0). Indices are int64 (converted first).
_PAIR_SOURCE = _with_rules("""#include <stdint.h>

/* 0 if every (r, c) is in range (negative ones count from the end), else 1 + the
   position of the first bad pair */
static int64_t tj_pair_check(int64_t n, int64_t rows, int64_t cols, const int64_t *r,
                             int64_t rs, const int64_t *c, int64_t cs) {{
    for (int64_t k = 0; k < n; k++) {{
        int64_t i = r[k * rs], j = c[k * cs];
        if ({OUT_OF_RANGE_I} || {OUT_OF_RANGE_COL}) return k + 1;
    }}
    return 0;
}}

int64_t tj_pair_take(int64_t n, int64_t rows, int64_t cols, const char *x_, int64_t sx0,
                     int64_t sx1, const char *r_, int64_t rs, const char *c_, int64_t cs,
                     char *out_) {{
    const int64_t *r = (const int64_t *)r_, *c = (const int64_t *)c_;
    int64_t bad = tj_pair_check(n, rows, cols, r, rs, c, cs);
    if (bad) return bad;
    const {T} *x = (const {T} *)x_;
    {T} *out = ({T} *)out_;
    for (int64_t k = 0; k < n; k++) {{
        int64_t i = r[k * rs], j = c[k * cs];
        {WRAP_I}
        {WRAP_COL}
        out[k] = x[i * sx0 + j * sx1];
    }}
    return 0;
}}

int64_t tj_pair_scatter(int64_t n, int64_t rows, int64_t cols, char *out_, int64_t so0,
                        int64_t so1, const char *r_, int64_t rs, const char *c_, int64_t cs,
                        const char *y_, int64_t ys, int set) {{
    const int64_t *r = (const int64_t *)r_, *c = (const int64_t *)c_;
    int64_t bad = tj_pair_check(n, rows, cols, r, rs, c, cs);
    if (bad) return bad;
    {T} *out = ({T} *)out_;
    const {T} *y = (const {T} *)y_;
    for (int64_t k = 0; k < n; k++) {{
        int64_t i = r[k * rs], j = c[k * cs];
        {WRAP_I}
        {WRAP_COL}
        if (set) out[i * so0 + j * so1] = y[k * ys];
        else {ADD_PAIR}
    }}
    return 0;
}}
""")
_PAIR_CDEF = """
int64_t tj_pair_take(int64_t, int64_t, int64_t, const char *, int64_t, int64_t,
                     const char *, int64_t, const char *, int64_t, char *);
int64_t tj_pair_scatter(int64_t, int64_t, int64_t, char *, int64_t, int64_t,
                        const char *, int64_t, const char *, int64_t, const char *,
                        int64_t, int);
"""


_DIAG_SOURCE = """#include <stdint.h>
void tj_diag(int64_t n, const char *x, int64_t step, char *out) {{
    {T} *o = ({T} *)out;
    for (int64_t i = 0; i < n; i++) o[i] = *(const {T} *)(x + i * step);
}}
"""
_DIAG_CDEF = "void tj_diag(int64_t, const char *, int64_t, char *);"


def pair_indexed(node: Apply) -> bool:
    """``x[rows, cols]`` (or its inc/set) on a matrix with two integer vectors."""
    op = node.op
    if not isinstance(op, AdvancedSubtensor | AdvancedIncSubtensor) or op.entries != ("a", "a"):
        return False
    x, *rest = node.inputs
    indices = rest[-2:]
    return x.type.ndim == 2 and all(
        i.type.ndim == 1 and i.type.dtype in ("int64", "int32") for i in indices
    )


PAIR_DTYPES = ("float64", "float32", "int64", "int32")


def _plan(node: Apply) -> tuple[str, str]:
    """(value dtype, index dtype); Unsupported unless one integer vector indexes axis 0
    (or two a matrix's axes: ``pair_indexed``)."""
    op = node.op
    if isinstance(op, ExtractDiag):
        if node.inputs[0].type.ndim != 2 or node.inputs[0].type.dtype not in _DIAG_DTYPES:
            raise Unsupported("the diagonal of a matrix of another rank or dtype")
        return node.inputs[0].type.dtype, ""
    if pair_indexed(node):
        x = node.inputs[0]
        if x.type.dtype not in PAIR_DTYPES:
            raise Unsupported(f"dtype {x.type.dtype}")
        if isinstance(op, AdvancedIncSubtensor) and node.inputs[1].type.dtype != x.type.dtype:
            raise Unsupported("a value of another dtype")
        if isinstance(op, AdvancedIncSubtensor) and node.inputs[1].type.ndim > 1:
            raise Unsupported("a value of more than one dimension")
        return x.type.dtype, "pair"
    if op.entries != ("a",):
        raise Unsupported(f"index entries {op.entries}")
    x = node.inputs[0]
    idx = node.inputs[-1]
    if x.type.ndim < 1 or idx.type.ndim != 1 or idx.type.dtype not in ("int64", "int32"):
        raise Unsupported("not one integer vector on the first axis")
    if isinstance(op, AdvancedIncSubtensor) and node.inputs[1].type.dtype != x.type.dtype:
        raise Unsupported("a value of another dtype")
    if x.type.dtype == "bool" or x.type.dtype not in ("float64", "float32", "int64", "int32"):
        raise Unsupported(f"dtype {x.type.dtype}")
    return x.type.dtype, idx.type.dtype


supported = covered_by(_plan)


_DIAG_DTYPES = ("float64", "float32", "int64", "int32", "int16", "int8", "uint8", "bool")


def source_of(node: Apply) -> str:
    dtype, idx_dtype = _plan(node)
    if isinstance(node.op, ExtractDiag):
        return _DIAG_SOURCE.format(T=ctype(dtype))
    if idx_dtype == "pair":
        return _PAIR_SOURCE.format(T=ctype(dtype))
    return _SOURCE.format(T=ctype(dtype), I=ctype(idx_dtype))


def _diagonal_factory(node: Apply) -> Run:
    """The diagonal of a matrix, copied (one strided walk: both axes step at once)."""
    ffi, lib = compiler.load(source_of(node), _DIAG_CDEF, ("tj_diag",), what=str(node.op))
    fn, cast, from_buffer = lib.tj_diag, ffi.cast, ffi.from_buffer
    op = node.op
    dtype = node.outputs[0].type.numpy_dtype

    def run(inputs: list, output_storage: list) -> None:
        x = inputs[0]
        if op.axis1 == 1:  # diagonal(x, k, 1, 0) is diagonal(x.T, k)
            x = x.T
        rows, cols = x.shape
        first_row, first_col = max(0, -op.offset), max(0, op.offset)
        n = max(0, min(rows - first_row, cols - first_col))
        out = np.empty(n, dtype)
        if n:
            start = first_row * x.strides[0] + first_col * x.strides[1]
            base = cast("char *", x.ctypes.data) + start
            fn(n, base, x.strides[0] + x.strides[1], from_buffer(out))
        output_storage[0][0] = out

    return run


def factory(node: Apply) -> Run:
    if isinstance(node.op, ExtractDiag):
        return _diagonal_factory(node)
    if pair_indexed(node):
        return _pair_factory(node)
    source = source_of(node)
    ffi, lib = compiler.load(source, _CDEF, ("tj_take", "tj_scatter"), what=str(node.op))
    from_buffer = ffi.from_buffer
    perform = node.op.perform
    out_type = node.outputs[0].type
    dtype = out_type.numpy_dtype
    contiguous = np.ascontiguousarray

    if isinstance(node.op, AdvancedSubtensor):
        take = lib.tj_take

        def run(inputs: list, output_storage: list) -> None:
            x, idx = inputs
            shape = (idx.shape[0], *x.shape[1:])
            out = output_buffer(output_storage[0][0], shape, dtype, inputs)
            if out.size == 0 or x.shape[0] == 0:
                perform(node, inputs, output_storage)  # nothing to move, or NumPy's error
                return
            x, idx = contiguous(x), contiguous(idx)
            row = out.size // shape[0]
            bad = take(
                idx.shape[0], x.shape[0], row, from_buffer(x), from_buffer(idx), from_buffer(out)
            )
            if bad:
                perform(node, inputs, output_storage)  # an index out of range: its error
                return
            output_storage[0][0] = out

        return run

    scatter = lib.tj_scatter
    op = node.op
    set_flag = 1 if op.set_instead_of_inc else 0
    value_shape = node.inputs[1].type.shape

    def run(inputs: list, output_storage: list) -> None:
        x, y, idx = inputs
        region = (idx.shape[0], *x.shape[1:])
        try:
            y_rows = np.broadcast_to(y, region)
        except ValueError:
            y_rows = None
        if (
            y_rows is None
            or rules.value_mismatch(y.shape, region, value_shape) is not None
            or x.shape[0] == 0
            or not x.flags.c_contiguous
        ):
            perform(node, inputs, output_storage)  # errors, empty and strided targets
            return
        idx = contiguous(idx)
        y_rows = contiguous(y_rows)
        if op.inplace:
            out = x
        else:
            out = output_buffer(output_storage[0][0], x.shape, dtype, inputs)
            out[...] = x
        if np.may_share_memory(y_rows, out):
            y_rows = y_rows.copy()  # the rows are read while the target is written
        row = x.size // x.shape[0]
        bad = scatter(
            idx.shape[0], x.shape[0], row, from_buffer(out), from_buffer(idx),
            from_buffer(y_rows), set_flag,
        )  # fmt: skip
        if bad:
            perform(node, inputs, output_storage)  # nothing was written: its error
            return
        output_storage[0][0] = out

    return run


def _pair_factory(node: Apply) -> Run:
    """``x[rows, cols]`` and its inc/set on a matrix of any layout. Index vectors of
    lengths n and 1 broadcast, negative indices count from the end; any other case
    (lengths that do not broadcast, an index out of range, a value that does not fit)
    is the reference kernel's, which raises NumPy's error with the op's context."""
    ffi, lib = compiler.load(
        source_of(node), _PAIR_CDEF, ("tj_pair_take", "tj_pair_scatter"), what=str(node.op)
    )
    from_buffer, cast = ffi.from_buffer, ffi.cast
    op = node.op
    perform = op.perform
    dtype = node.outputs[0].type.numpy_dtype
    item = dtype.itemsize

    def indices(r: np.ndarray, c: np.ndarray):
        n = rules.broadcast_length([len(r), len(c)])
        if n is None:
            return None
        r64 = np.ascontiguousarray(r, dtype=np.int64)
        c64 = np.ascontiguousarray(c, dtype=np.int64)
        return n, r64, int(len(r) == n), c64, int(len(c) == n)

    def address(a: np.ndarray) -> tuple:
        if any(st % item for st in a.strides):
            return None  # an unaligned view: the reference kernel
        return cast("char *", a.ctypes.data), a.strides[0] // item, a.strides[1] // item

    if isinstance(op, AdvancedSubtensor):
        take = lib.tj_pair_take

        def run(inputs: list, output_storage: list) -> None:
            x, r, c = inputs
            plan = indices(r, c)
            where = address(x) if plan is not None else None
            if where is None or 0 in x.shape:
                perform(node, inputs, output_storage)
                return
            n, r64, rs, c64, cs = plan
            out = output_buffer(output_storage[0][0], (n,), dtype, inputs)
            bad = take(n, x.shape[0], x.shape[1], *where, from_buffer(r64), rs,
                       from_buffer(c64), cs, from_buffer(out))  # fmt: skip
            if bad:
                perform(node, inputs, output_storage)  # an index out of range: its error
                return
            output_storage[0][0] = out

        return run

    scatter = lib.tj_pair_scatter
    set_flag = 1 if op.set_instead_of_inc else 0
    value_broadcasts = node.inputs[1].type.ndim == 0 or node.inputs[1].type.shape == (1,)

    def run(inputs: list, output_storage: list) -> None:
        x, y, r, c = inputs
        plan = indices(r, c)
        if plan is None or 0 in x.shape:
            perform(node, inputs, output_storage)
            return
        n, r64, rs, c64, cs = plan
        if y.ndim == 1 and len(y) == n:
            ys = 1
        elif y.size == 1 and (value_broadcasts or n == 1):
            ys = 0
        else:
            perform(node, inputs, output_storage)  # NumPy's broadcasting error
            return
        if op.inplace:
            out = x
        else:
            out = output_buffer(output_storage[0][0], x.shape, dtype, inputs)
            out[...] = x
        where = address(out)
        if where is None:
            perform(node, inputs, output_storage)
            return
        values = np.ascontiguousarray(y, dtype=dtype).reshape(-1)
        if np.may_share_memory(values, out):
            values = values.copy()  # read while the target is written
        bad = scatter(n, out.shape[0], out.shape[1], *where, from_buffer(r64), rs,
                      from_buffer(c64), cs, from_buffer(values), ys, set_flag)  # fmt: skip
        if bad:
            if not op.inplace:
                output_storage[0][0] = None
            perform(node, inputs, output_storage)  # nothing was written: its error
            return
        output_storage[0][0] = out

    return run


factory.kernel_name = "indexing"
