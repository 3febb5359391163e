"""C kernels for ops that build or rearrange whole arrays: alloc, second (fill), eye, tri,
arange, join (concatenate), one_hot, cumsum/cumprod and sort.

Every kernel writes a new C-contiguous output (the previous call's when it fits) and reads
its inputs in place through byte strides, so any layout (transposed, sliced, reversed,
broadcast with stride 0) works. Python does the shape arithmetic; the C functions check
alignment and return non-zero for what they do not handle. What is rare or an error (a
negative size, mismatched shapes, an out-of-range class index, unaligned data) runs
``Op.perform``, which gives NumPy's result or NumPy's error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import compiler
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.plugins.c_backend.generators.codegen import (
    PREAMBLE,
    Unsupported,
    convert,
    covered_by,
    ctype,
)
from tensorjit.plugins.cstyle import construct as rules
from tensorjit.tensor.allocation import ARange, Eye, Second, Tri
from tensorjit.tensor.extra_ops import CumOp, Sort
from tensorjit.tensor.math import Alloc
from tensorjit.tensor.nnet.basic import OneHot
from tensorjit.tensor.shape_ops import Join

Run = Callable[[list, list], None]
OPS = (Alloc, Second, Eye, Tri, ARange, Join, OneHot, CumOp, Sort)


# ---------------------------------------------------------------- source helpers
def _function(ret: str, name: str, params: list[tuple[str, str]], body: list[str]) -> tuple:
    """(C definition, cffi declaration) of one entry point; params are (type, name)."""
    sig = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{n}" for t, n in params) or "void"
    decl = ", ".join(t for t, _ in params) or "void"
    return f"{ret} {name}({sig}) {{\n" + "\n".join(body) + "\n}\n", f"{ret} {name}({decl});\n"


def _strided(ndim: int, names: str) -> list[tuple[str, str]]:
    """Lengths n0.., pointers, then the byte strides s<name><axis> of each operand."""
    params = [("int64_t", f"n{a}") for a in range(ndim)]
    params += [("char *", p) for p in names]
    return params + [("int64_t", f"s{p}{a}") for p in names for a in range(ndim)]


def _misaligned(name: str, ndim: int, t: str) -> str:
    """A statement returning 1 when operand ``name`` (its address or a stride) is not a
    multiple of its element size: NumPy allows that (a record's field), C loads do not."""
    bits = " | ".join([f"(uintptr_t){name}"] + [f"(uint64_t)s{name}{a}" for a in range(ndim)])
    return f"    if (({bits}) & (sizeof({t}) - 1)) return 1;"


def _nest(axes: list[int], names: str, body: list[str]) -> list[str]:
    """Loops over ``axes`` (outermost first) moving each operand's byte pointer; ``body``
    sees ``p<name>``, the address of the current element, and the indices ``i<axis>``."""
    lines = [f"    char *{p}_0 = {p};" for p in names]
    indent = "    "
    for depth, a in enumerate(axes):
        lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        lines += [f"{indent}char *{p}_{depth + 1} = {p}_{depth} + i{a} * s{p}{a};" for p in names]
    lines += [f"{indent}char *p{p} = {p}_{len(axes)};" for p in names]
    lines += [indent + line for line in body]
    for _ in axes:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return lines


def _module(*parts: tuple[str, str], header: str = "") -> tuple[str, str]:
    return PREAMBLE + header + "".join(p[0] for p in parts), "".join(p[1] for p in parts)


# ---------------------------------------------------------------- sources
def _copy_fn(ndim: int, src: str, dst: str) -> tuple[str, str]:
    """``tj_copy_<src>``: x (any strides, 0 to broadcast) converted into o (any strides)."""
    ts, td = ctype(src), ctype(dst)

    def conv(expr: str) -> str:
        return convert(expr, src, dst)

    body = [_misaligned("x", ndim, ts)]
    if ndim == 0:
        body.append(f"    *({td} *)o = {conv(f'*(const {ts} *)x')};")
    else:
        last = ndim - 1
        # The innermost axis is specialised: contiguous (vectorised), a fill, or strided.
        # (memcpy for the same dtype: glibc's is far faster than a loop built for any CPU)
        contiguous = (
            [f"    memcpy(po, px, (size_t)n * sizeof({td}));"]
            if src == dst
            else [
                f"    const {ts} *restrict a = (const {ts} *)px;",
                f"    {td} *restrict b = ({td} *)po;",
                f"    for (int64_t j = 0; j < n; j++) b[j] = {conv('a[j]')};",
            ]
        )
        row = [
            f"const int64_t n = n{last}, ss = sx{last}, ds = so{last};",
            f"if (ss == (int64_t)sizeof({ts}) && ds == (int64_t)sizeof({td})) {{",
            *contiguous,
            f"}} else if (ss == 0 && ds == (int64_t)sizeof({td})) {{",
            f"    const {td} v = {conv(f'*(const {ts} *)px')};",
            f"    {td} *restrict b = ({td} *)po;",
            "    for (int64_t j = 0; j < n; j++) b[j] = v;",
            "} else {",
            "    for (int64_t j = 0; j < n; j++)",
            f"        *({td} *)(po + j * ds) = {conv(f'*(const {ts} *)(px + j * ss)')};",
            "}",
        ]
        body += _nest(list(range(last)), "xo", row)
    body.append("    return 0;")
    return _function("int", f"tj_copy_{src}", _strided(ndim, "xo"), body)


def _copy_source(ndim: int, srcs: list[str], dst: str) -> tuple[str, str, tuple[str, ...]]:
    kinds = list(dict.fromkeys(srcs))  # one function per distinct input dtype
    fns = [_copy_fn(ndim, s, dst) for s in kinds]
    source, cdef = _module(*fns, header="#include <string.h>\n")
    return source, cdef, tuple(f"tj_copy_{s}" for s in kinds)


def _matrix_source(kind: str, dtype: str) -> tuple[str, str, tuple[str, ...]]:
    """``tj_eye``/``tj_tri(n, m, k, out)``: every cell by the shared rule (k clamped by
    the caller, so nothing overflows)."""
    t = ctype(dtype)
    cell = rules.matrix_cell(kind, "i", "j", "k")
    body = [
        f"    {t} *o = ({t} *)out;",
        "    for (int64_t i = 0; i < n; i++)",
        f"        for (int64_t j = 0; j < m; j++) o[i * m + j] = ({t})({cell});",
    ]
    params = [("int64_t", "n"), ("int64_t", "m"), ("int64_t", "k"), ("char *", "out")]
    source, cdef = _module(_function("void", f"tj_{kind}", params, body))
    return source, cdef, (f"tj_{kind}",)


def _arange_source(dtype: str) -> tuple[str, str, tuple[str, ...]]:
    """``tj_arange(n, first, second, out)``: NumPy's fill (the shared rule)."""
    t = ctype(dtype)
    element = rules.arange_element("i", "first", "second", t, np.dtype(dtype).kind == "f")
    body = [
        f"    {t} *o = ({t} *)out;",
        "    o[0] = first;",
        "    if (n > 1) o[1] = second;",
        "    for (int64_t i = 2; i < n; i++) {",
        *(f"        {line}" for line in element),
        "        o[i] = v_;",
        "    }",
    ]
    params = [("int64_t", "n"), (t, "first"), (t, "second"), ("char *", "out")]
    source, cdef = _module(_function("void", "tj_arange", params, body))
    return source, cdef, ("tj_arange",)


def _one_hot_source(ndim: int, index: str, dtype: str) -> tuple[str, str, tuple[str, ...]]:
    """``tj_one_hot``: 0, or 1 if y is unaligned or holds a bad class index (perform then
    raises its error); the output is C-contiguous."""
    ti, t = ctype(index), ctype(dtype)
    inner = [
        f"const {ti} v = *(const {ti} *)py;",
        f"if ({rules.class_out_of_range('v', 'n', index)}) return 1;",
        "for (int64_t j = 0; j < n; j++) o[j] = 0;",
        "o[v] = 1;",
        "o += n;",
    ]
    body = [_misaligned("y", ndim, ti), f"    {t} *o = ({t} *)out;"]
    body += [*_nest(list(range(ndim)), "y", inner), "    return 0;"]
    params = [("int64_t", f"n{a}") for a in range(ndim)] + [("int64_t", "n")]
    params += [("char *", "y"), ("char *", "out")] + [("int64_t", f"sy{a}") for a in range(ndim)]
    source, cdef = _module(_function("int", "tj_one_hot", params, body))
    return source, cdef, ("tj_one_hot",)


def _cum_source(ndim: int, axis: int, mode: str, src: str, dst: str) -> tuple:
    """``tj_cum``: out[i] = out[i - 1] OP x[i] along ``axis``, in the output dtype."""
    ts, td = ctype(src), ctype(dst)
    op = rules.CUMULATIVE[mode]
    x = convert(f"*(const {ts} *)px", src, dst)
    if axis == ndim - 1:  # a running value in a register along each row
        row = [
            f"{td} acc = {x};",
            f"*({td} *)po = acc;",
            f"for (int64_t j = 1; j < n{axis}; j++) {{",
            f"    acc = acc {op} {convert(f'*(const {ts} *)(px + j * sx{axis})', src, dst)};",
            f"    *({td} *)(po + j * so{axis}) = acc;",
            "}",
        ]
        body = _nest(list(range(axis)), "xo", row)
    else:  # natural order (cache friendly): each element adds to its predecessor's result
        inner = [
            f"{td} v = {x};",
            f"if (i{axis}) v = *(const {td} *)(po - so{axis}) {op} v;",
            f"*({td} *)po = v;",
        ]
        body = _nest(list(range(ndim)), "xo", inner)
    body = [_misaligned("x", ndim, ts), *body, "    return 0;"]
    source, cdef = _module(_function("int", "tj_cum", _strided(ndim, "xo"), body))
    return source, cdef, ("tj_cum",)


# Sorting works on unsigned keys that order like the values (floats: the sign bit flipped,
# or every bit for negatives; signed integers: the sign bit flipped): an LSD radix sort
# (one counting pass per byte, skipping bytes all keys share) for long rows, an
# introsort for short ones (median of three, Hoare partition, insertion sort for short
# ranges, heapsort past the depth limit: no quadratic worst case).
_SORT_HELPERS = """#include <stdlib.h>
#include <string.h>
typedef {k} tj_key;
#define TJ_SWAP(a, b) do {{ tj_key tmp_ = (a); (a) = (b); (b) = tmp_; }} while (0)
static inline tj_key tj_to_key({t} v) {{ {to_key} }}
static inline {t} tj_from_key(tj_key u) {{ {from_key} }}
static void tj_insertion(tj_key *a, int64_t n) {{
    for (int64_t i = 1; i < n; i++) {{
        tj_key v = a[i];
        int64_t j = i;
        while (j > 0 && v < a[j - 1]) {{ a[j] = a[j - 1]; j--; }}
        a[j] = v;
    }}
}}
static void tj_sift(tj_key *a, int64_t root, int64_t n) {{
    tj_key v = a[root];
    for (;;) {{
        int64_t c = 2 * root + 1;
        if (c >= n) break;
        if (c + 1 < n && a[c] < a[c + 1]) c++;
        if (!(v < a[c])) break;
        a[root] = a[c];
        root = c;
    }}
    a[root] = v;
}}
static void tj_heapsort(tj_key *a, int64_t n) {{
    for (int64_t i = n / 2 - 1; i >= 0; i--) tj_sift(a, i, n);
    for (int64_t i = n - 1; i > 0; i--) {{ TJ_SWAP(a[0], a[i]); tj_sift(a, 0, i); }}
}}
static void tj_introsort(tj_key *a, int64_t n, int depth) {{
    while (n > 16) {{
        if (depth-- == 0) {{ tj_heapsort(a, n); return; }}
        int64_t mid = n / 2, i = -1, j = n;
        /* a[0] <= a[mid] <= a[n - 1]: sentinels that keep both scans in range */
        if (a[mid] < a[0]) TJ_SWAP(a[mid], a[0]);
        if (a[n - 1] < a[mid]) {{
            TJ_SWAP(a[n - 1], a[mid]);
            if (a[mid] < a[0]) TJ_SWAP(a[mid], a[0]);
        }}
        const tj_key p = a[mid];
        for (;;) {{
            do i++; while (a[i] < p);
            do j--; while (p < a[j]);
            if (i >= j) break;
            TJ_SWAP(a[i], a[j]);
        }}
        /* [0, j] and [j + 1, n), both non-empty: recurse into the smaller one */
        if (j + 1 < n - j - 1) {{
            tj_introsort(a, j + 1, depth);
            a += j + 1;
            n -= j + 1;
        }} else {{
            tj_introsort(a + j + 1, n - j - 1, depth);
            n = j + 1;
        }}
    }}
    tj_insertion(a, n);
}}
static void tj_radix(tj_key *a, tj_key *tmp, int64_t n) {{
    int64_t count[{w}][256];
    tj_key *src = a, *dst = tmp;
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {{
        const tj_key k = a[i];
        for (int d = 0; d < {w}; d++) count[d][(k >> (8 * d)) & 255]++;
    }}
    for (int d = 0; d < {w}; d++) {{
        int64_t *c = count[d], sum = 0;
        if (c[(src[0] >> (8 * d)) & 255] == n) continue;  /* every key has this byte */
        for (int b = 0; b < 256; b++) {{ const int64_t t = c[b]; c[b] = sum; sum += t; }}
        for (int64_t i = 0; i < n; i++) {{
            const tj_key k = src[i];
            dst[c[(k >> (8 * d)) & 255]++] = k;
        }}
        tj_key *t = src;
        src = dst;
        dst = t;
    }}
    if (src != a) memcpy(a, src, (size_t)n * sizeof(tj_key));
}}
static void tj_sort_keys(tj_key *a, tj_key *tmp, int64_t n) {{
    if (n > {radix_from}) {{ tj_radix(a, tmp, n); return; }}
    int depth = 0;
    for (int64_t r = n; r > 1; r >>= 1) depth += 2;
    tj_introsort(a, n, depth);
}}
"""


def _key_functions(dtype: str) -> dict[str, str]:
    """The key type and the value <-> key conversions of ``dtype`` for _SORT_HELPERS."""
    kind, size = np.dtype(dtype).kind, np.dtype(dtype).itemsize
    bits = 8 * size
    k = f"uint{bits}_t"
    top = f"(({k})1 << {bits - 1})"
    if kind == "f":
        to_key = (
            f"{k} u; memcpy(&u, &v, sizeof u); "
            f"return u ^ (({k})(-(int{bits}_t)(u >> {bits - 1})) | {top});"
        )
        from_key = (
            f"u ^= ((u >> {bits - 1}) - 1) | {top}; "
            f"{ctype(dtype)} v; memcpy(&v, &u, sizeof v); return v;"
        )
    elif kind == "i":
        to_key = f"return ({k})(({k})v ^ {top});"
        from_key = f"return ({ctype(dtype)})({k})(u ^ {top});"
    else:  # unsigned and bool: the value is its key
        to_key = f"return ({k})v;"
        from_key = f"return ({ctype(dtype)})u;"
    # A radix pass costs about two passes over the row plus 256 counters: worth it past
    # a few hundred keys of 4 or 8 bytes, far earlier for 1 or 2 bytes.
    radix_from = 256 if size >= 4 else 64
    return {
        "k": k,
        "w": str(size),
        "to_key": to_key,
        "from_key": from_key,
        "radix_from": str(radix_from),
    }


def _sort_source(ndim: int, dtype: str, stable: bool) -> tuple[str, str, tuple[str, ...]]:
    """``tj_sort``: each row (the sorted axis last) becomes keys in a scratch buffer,
    sorted there and converted back into the output row; 1 if unaligned, -1 if out of
    memory."""
    t = ctype(dtype)
    names = _key_functions(dtype)
    outer = ndim - 1
    x = f"*(const {t} *)(px + j * sx{outer})"
    o = f"*({t} *)(po + j * so{outer})"
    if np.dtype(dtype).kind == "f":
        # NaNs go last, in their input order (NumPy's order); the rest is sorted.
        gather = [
            "int64_t m = 0;",
            "for (int64_t j = 0; j < n; j++) {",
            f"    const {t} v = {x};",
            "    if (v == v) keys[m++] = tj_to_key(v);",
            "}",
            "for (int64_t j = 0, k = m; k < n; j++) {",
            f"    const {t} v = {x};",
            f"    if (v != v) *({t} *)(po + k++ * so{outer}) = v;",
            "}",
        ]
    else:
        gather = [
            "const int64_t m = n;",
            f"for (int64_t j = 0; j < n; j++) keys[j] = tj_to_key({x});",
        ]
    row = [*gather, "tj_sort_keys(keys, keys + n, m);"]
    if stable and np.dtype(dtype).kind == "f":
        # A stable sort keeps -0.0 and 0.0 in their input order: rewrite the run of zeros
        # (the keys of -0.0 and 0.0 are consecutive).
        row += [
            f"const tj_key zero = tj_to_key(({t})-0.0);",
            "int64_t z = 0;",
            "while (z < m && keys[z] < zero) z++;",
            "if (z < m && keys[z] <= zero + 1) {",
            "    for (int64_t j = 0; j < n; j++) {",
            f"        const {t} v = {x};",
            "        if (v == 0) keys[z++] = tj_to_key(v);",
            "    }",
            "}",
        ]
    row += [f"for (int64_t j = 0; j < m; j++) {o} = tj_from_key(keys[j]);"]
    body = [
        _misaligned("x", ndim, t),
        f"    const int64_t n = n{outer};",
        "    tj_key *keys = (tj_key *)malloc(2 * (size_t)n * sizeof(tj_key));",
        "    if (!keys) return -1;",
        *_nest(list(range(outer)), "xo", row),
        "    free(keys);",
        "    return 0;",
    ]
    fn = _function("int", "tj_sort", _strided(ndim, "xo"), body)
    source, cdef = _module(fn, header=_SORT_HELPERS.format(t=t, **names))
    return source, cdef, ("tj_sort",)


# ---------------------------------------------------------------- plans
def _plan(node: Apply) -> tuple[str, str, tuple[str, ...]]:
    """(C source, cffi declarations, entry points) of ``node``'s kernel, or Unsupported."""
    op = node.op
    out = node.outputs[0].type
    if isinstance(op, Alloc | Second):
        return _copy_source(out.ndim, [out.dtype], out.dtype)
    if isinstance(op, Eye | Tri):
        return _matrix_source(type(op).__name__.lower(), op.dtype)
    if isinstance(op, ARange):
        kind = np.dtype(op.dtype).kind
        if kind not in "iuf":
            raise Unsupported(f"arange of dtype {op.dtype}")
        if kind != "f" and any(np.dtype(v.type.dtype).kind == "f" for v in node.inputs):
            raise Unsupported("arange of float bounds into integers")  # NumPy's casts: rare
        return _arange_source(op.dtype)
    if isinstance(op, Join):
        return _copy_source(out.ndim, [v.type.dtype for v in node.inputs], out.dtype)
    if isinstance(op, OneHot):
        return _one_hot_source(node.inputs[0].type.ndim, node.inputs[0].type.dtype, out.dtype)
    if isinstance(op, CumOp):
        x = node.inputs[0].type
        return _cum_source(x.ndim, op.axis, op.mode, x.dtype, out.dtype)
    if isinstance(op, Sort):
        return _sort_source(out.ndim, out.dtype, op.kind in rules.STABLE_SORTS)
    raise Unsupported(type(op).__name__)


supported = covered_by(_plan)


def source_of(node: Apply) -> tuple[str, str]:
    """(C source, cffi declarations) of ``node``'s kernel, for prebuilding."""
    source, cdef, _ = _plan(node)
    return source, cdef


# ---------------------------------------------------------------- run functions
def _pointer(ffi: Any, ndim: int) -> Callable[[Any], Any]:
    """A function giving the address of a non-empty array's first element."""
    from_buffer = ffi.from_buffer
    first = (slice(0, 1),) * ndim

    def ptr(a: Any) -> Any:
        # A one-element view is contiguous: far cheaper than a.ctypes.data.
        return from_buffer(a if a.flags.c_contiguous else a[first])

    return ptr


def _broadcast_run(node: Apply, ffi: Any, lib: Any) -> Run:
    """Alloc (value broadcast from the right into the given shape) and Second (b broadcast
    to a's shape, by perform's rule)."""
    op = node.op
    perform = op.perform
    out_type = node.outputs[0].type
    dtype, ndim = out_type.numpy_dtype, out_type.ndim
    fn = getattr(lib, f"tj_copy_{out_type.dtype}")
    from_buffer, memmove = ffi.from_buffer, ffi.memmove
    ptr = _pointer(ffi, node.inputs[0 if isinstance(op, Alloc) else 1].type.ndim)
    size = dtype.itemsize
    ones, zeros = (1,) * (ndim - 1), (0,) * (ndim - 1)
    is_alloc = isinstance(op, Alloc)
    a_bcast = tuple(s == 1 for s in node.inputs[0].type.shape)
    # Where the value may have length 1 to broadcast: anywhere for Alloc (NumPy's
    # assignment), only where its type says so for Second (perform's rule).
    v_bcast = (True,) * ndim if is_alloc else tuple(s == 1 for s in node.inputs[1].type.shape)

    def run(inputs: list, output_storage: list) -> None:
        if is_alloc:
            value = inputs[0]
            shape = tuple(int(s) for s in inputs[1:])
            if shape and min(shape) < 0:
                perform(node, inputs, output_storage)  # NumPy's negative-dimension error
                return
        else:
            a, value = inputs
            shape = tuple(m if ab else n for n, m, ab in zip(a.shape, value.shape, a_bcast))
            for n, m, ab in zip(a.shape, shape, a_bcast):
                if n != m and not (n == 1 and ab):
                    perform(node, inputs, output_storage)  # perform's mismatch error
                    return
        vshape, strides = value.shape, value.strides
        lead = ndim - len(vshape)
        if lead or vshape != shape:
            strides = [0] * lead
            for n, m, st, bb in zip(vshape, shape[lead:], value.strides, v_bcast):
                if n == m:
                    strides.append(st)
                elif n == 1 and bb:
                    strides.append(0)
                else:
                    perform(node, inputs, output_storage)  # NumPy's broadcasting error
                    return
        out = output_buffer(output_storage[0][0], shape, dtype, inputs)
        output_storage[0][0] = out
        if out.size == 0:
            return
        if ndim == 0:
            bad = fn(ptr(value), from_buffer(out))
        elif value.size == 1:  # a fill: one flat loop
            bad = fn(*ones, out.size, ptr(value), from_buffer(out), *zeros, 0, *zeros, size)
        elif vshape == shape and value.flags.c_contiguous:  # a contiguous copy
            memmove(from_buffer(out), value, out.nbytes)
            return
        else:
            bad = fn(*shape, ptr(value), from_buffer(out), *strides, *out.strides)
        if bad:
            perform(node, inputs, output_storage)  # unaligned data

    return run


def _join_run(node: Apply, ffi: Any, lib: Any) -> Run:
    op = node.op
    perform = op.perform
    axis = op.axis
    out_type = node.outputs[0].type
    dtype, ndim = out_type.numpy_dtype, out_type.ndim
    fns = [getattr(lib, f"tj_copy_{v.type.dtype}") for v in node.inputs]
    same = [v.type.dtype == out_type.dtype for v in node.inputs]
    ptr, from_buffer, memmove = _pointer(ffi, ndim), ffi.from_buffer, ffi.memmove
    size = dtype.itemsize
    pad, zpad = (1,) * (ndim - 2), (0,) * (ndim - 2)

    def copy_all(arrays: list, ax: int, out: np.ndarray) -> bool:
        """Copy ``arrays`` one after another along ``ax`` of the C-contiguous ``out``."""
        po, ost = from_buffer(out), out.strides
        outer = math.prod(out.shape[:ax])
        row = ost[ax - 1] if ax else 0
        step = ost[ax]
        offset = 0
        for x, fn, plain in zip(arrays, fns, same):
            k = x.shape[ax]
            if not k:
                continue
            if x.flags.c_contiguous and plain and outer == 1:
                memmove(po + offset, x, x.nbytes)  # one block of the output: memcpy
            elif ndim > 1 and x.flags.c_contiguous:
                # (outer, inner) blocks: each row of x is a contiguous run of the output's
                inner, item = x.size // outer, x.itemsize
                src = (*zpad, inner * item, item)
                if fn(*pad, outer, inner, from_buffer(x), po + offset, *src, *zpad, row, size):
                    return False
            elif fn(*x.shape, ptr(x), po + offset, *x.strides, *ost):
                return False
            offset += k * step
        return True

    def run(inputs: list, output_storage: list) -> None:
        shape = rules.join_shape([x.shape for x in inputs], axis)
        if shape is None:
            perform(node, inputs, output_storage)  # NumPy's error
            return
        prev = output_storage[0][0]
        if (
            ndim > 1
            and not inputs[0].flags.c_contiguous
            and all(x.flags.f_contiguous for x in inputs)
        ):
            # Fortran-ordered inputs give a Fortran-ordered output, as in NumPy: plain
            # copies instead of transposing ones. It is the C-ordered join of the x.T.
            if type(prev) is np.ndarray and all(prev is not x for x in inputs):
                prev = prev.T
            target = output_buffer(prev, shape[::-1], dtype, inputs)
            out, arrays, ax = target.T, [x.T for x in inputs], ndim - 1 - axis
        else:
            out = target = output_buffer(prev, shape, dtype, inputs)
            arrays, ax = inputs, axis
        output_storage[0][0] = out
        if out.size and not copy_all(arrays, ax, target):
            perform(node, inputs, output_storage)  # unaligned data

    return run


def _matrix_run(node: Apply, ffi: Any, lib: Any) -> Run:
    op = node.op
    perform = op.perform
    fn = getattr(lib, f"tj_{type(op).__name__.lower()}")
    dtype = node.outputs[0].type.numpy_dtype
    from_buffer = ffi.from_buffer
    kind = type(op).__name__.lower()

    def run(inputs: list, output_storage: list) -> None:
        n, m, k = int(inputs[0]), int(inputs[1]), int(inputs[2])
        clamped = rules.matrix_offset(kind, n, m, k)
        if clamped is None:
            perform(node, inputs, output_storage)  # NumPy's error
            return
        out = output_buffer(output_storage[0][0], (n, m), dtype, inputs)
        if n and m:
            fn(n, m, clamped, from_buffer(out))
        output_storage[0][0] = out

    return run


def _arange_run(node: Apply, ffi: Any, lib: Any) -> Run:
    op = node.op
    perform = op.perform
    fn = lib.tj_arange
    dtype = node.outputs[0].type.numpy_dtype
    from_buffer = ffi.from_buffer

    def run(inputs: list, output_storage: list) -> None:
        fill = rules.arange_fill(*(v.item() for v in inputs), dtype.name)
        if fill is None:
            perform(node, inputs, output_storage)  # NumPy's error
            return
        n, first, second = fill
        out = output_buffer(output_storage[0][0], (n,), dtype, inputs)
        if n:
            fn(n, first, second, from_buffer(out))
        output_storage[0][0] = out

    return run


def _one_hot_run(node: Apply, ffi: Any, lib: Any) -> Run:
    op = node.op
    perform = op.perform
    fn = lib.tj_one_hot
    dtype = node.outputs[0].type.numpy_dtype
    ptr, from_buffer = _pointer(ffi, node.inputs[0].type.ndim), ffi.from_buffer

    def run(inputs: list, output_storage: list) -> None:
        y, n = inputs[0], int(inputs[1])
        if n < 0:
            perform(node, inputs, output_storage)  # its IndexError (or NumPy's result)
            return
        out = output_buffer(output_storage[0][0], (*y.shape, n), dtype, inputs)
        if y.size:
            if n == 0 or fn(*y.shape, n, ptr(y), from_buffer(out), *y.strides):
                perform(node, inputs, output_storage)  # its IndexError names the index
                return
        output_storage[0][0] = out

    return run


def _axis_run(node: Apply, ffi: Any, lib: Any) -> Run:
    """CumOp (natural axis order) and Sort (the sorted axis moved last)."""
    op = node.op
    perform = op.perform
    fn = lib.tj_cum if isinstance(op, CumOp) else lib.tj_sort
    dtype = node.outputs[0].type.numpy_dtype
    ndim = node.outputs[0].type.ndim
    ptr, from_buffer = _pointer(ffi, ndim), ffi.from_buffer
    order = list(range(ndim))
    if isinstance(op, Sort):
        order = [a for a in order if a != op.axis] + [op.axis]

    def run(inputs: list, output_storage: list) -> None:
        x = inputs[0]
        out = output_buffer(output_storage[0][0], x.shape, dtype, inputs)
        if x.size:
            xs, xst, ost = x.shape, x.strides, out.strides
            args = [xs[a] for a in order] + [ptr(x), from_buffer(out)]
            args += [xst[a] for a in order] + [ost[a] for a in order]
            status = fn(*args)
            if status == -1:
                raise MemoryError(f"{op}: no memory for the scratch keys of a sort")
            if status:
                perform(node, inputs, output_storage)  # unaligned data
                return
        output_storage[0][0] = out

    return run


_RUNS = {
    Alloc: _broadcast_run,
    Second: _broadcast_run,
    Eye: _matrix_run,
    Tri: _matrix_run,
    ARange: _arange_run,
    Join: _join_run,
    OneHot: _one_hot_run,
    CumOp: _axis_run,
    Sort: _axis_run,
}


def factory(node: Apply) -> Run:
    """Compile (or load) ``node``'s kernel and return its ``run(inputs, output_storage)``."""
    source, cdef, symbols = _plan(node)
    ffi, lib = compiler.load(source, cdef, symbols, what=str(node.op))
    return _RUNS[type(node.op)](node, ffi, lib)


factory.kernel_name = "construct"
