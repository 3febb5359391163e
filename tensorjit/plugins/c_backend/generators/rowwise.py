"""C kernels for ops that work along one axis ("rows"): softmax, log_softmax,
argmax/argmin and the class selection of the cross-entropy (SelectClass and its gradient).

Each kernel moves its axis last (a NumPy view, no copy) and calls one generated C
function that loops over the other axes with byte strides and runs a row function on
each row. Operands either have the row axis (``row``) or hold one value per row
(``cell``: the class index, the selected value, the argmax).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.c_backend.build import compiler, parallel
from tensorjit.plugins.c_backend.generators.buffers import output_buffer
from tensorjit.plugins.c_backend.generators.codegen import (
    NORMAL_EXP_LO,
    PREAMBLE,
    SIMD,
    Unsupported,
    covered_by,
    ctype,
    helper_sources,
    inline_mode,
)
from tensorjit.plugins.cstyle import rows as row_semantics
from tensorjit.tensor.math import Argmax
from tensorjit.tensor.nnet.basic import (
    LogSoftmax,
    SelectClass,
    SelectClassGrad,
    Softmax,
    _check_indices_runtime,
)

Run = Callable[[list, list], None]
OPS = (Softmax, LogSoftmax, Argmax, SelectClass, SelectClassGrad)

# Row functions. ``X(j)``/``O(j)`` read/write element j of the row; ``n`` is its length.
# exp is codegen's branch-free tj_vexp (inlined). The exponentials run on an aligned
# buffer of ROW_CHUNK elements, the chunk's length rounded up to whole vectors (padded
# with zeros whose exponentials nobody reads): the row's stride and a short row's tail
# (a classifier's rows of 10) would otherwise keep gcc from vectorising them. The max and
# the sum run in LANES accumulators (one is latency-bound), combined in a fixed order.
ROW_CHUNK = 64
LANES = 8
_ROW_EXP = """
    {t} m = X(0);  /* (a NaN gives NaN sums, hence NaN rows, whatever m is) */
    int64_t j1 = 0;
    if (n >= {lanes}) {{
        {t} ml[{lanes}];
        for (int k = 0; k < {lanes}; k++) ml[k] = m;
        for (; j1 + {lanes} <= n; j1 += {lanes})
            {simd}for (int k = 0; k < {lanes}; k++) {{
                {t} v = X(j1 + k);
                ml[k] = v > ml[k] ? v : ml[k];
            }}
        for (int k = 0; k < {lanes}; k++) m = ml[k] > m ? ml[k] : m;
    }}
    for (; j1 < n; j1++) {{ {t} v = X(j1); m = v > m ? v : m; }}
    {acc} sl[{lanes}] = {{0}};
    for (int64_t j0 = 0; j0 < n; j0 += {chunk}) {{
        {t} e[{chunk}] __attribute__((aligned(32)));
        const int64_t len = n - j0 < {chunk} ? n - j0 : {chunk}, padded = (len + 7) & ~7;
        for (int64_t j = 0; j < len; j++) e[j] = X(j0 + j) - m;
        for (int64_t j = len; j < padded; j++) e[j] = 0;
{exp_padded}{keep}        for (int64_t j = len; j < padded; j++) e[j] = 0;
        for (int64_t j = 0; j < padded; j += {lanes})
            {simd}for (int k = 0; k < {lanes}; k++) sl[k] += e[j + k];
    }}
    for (int width = {lanes} / 2; width >= 1; width /= 2)
        for (int k = 0; k < width; k++) sl[k] = sl[2 * k] + sl[2 * k + 1];
    {acc} s = sl[0];
"""
_KEEP_EXP = "        for (int64_t j = 0; j < len; j++) O(j0 + j) = e[j];\n"
_SOFTMAX = (
    _ROW_EXP.replace("{keep}", _KEEP_EXP)
    + """
    {t} r = {scale};
    for (int64_t j = 0; j < n; j++) O(j) *= r;
"""
)
_LOG_SOFTMAX = (
    _ROW_EXP.replace("{keep}", "")
    + """
    {t} ls = {logged};
    for (int64_t j = 0; j < n; j++) O(j) = {log_value};
"""
)
# Rows of stride 1 (the common layout) run a row's exponentials, their stores and their
# sum in one vector loop instead of through the chunk buffer: the row's maximum and
# minimum first (in UNIT_LANES lanes), and when the minimum minus the maximum is at least
# NORMAL_EXP_LO, the vectors' exponentials take tj_vexp_normal (else tj_vexp; NaN: NaN
# rows as above); a tail shorter than a vector runs padded in a buffer, through tj_vexp
# (the same values). The sum in UNIT_LANES lanes, combined in a fixed tree. (A softmax
# of 4000 rows of 1000 in a C harness: 1.66 ms through the chunks, 1.51-1.55 fused.)
UNIT_LANES = 16
UNIT_MIN_ROW = 128  # rows at least this long (shorter ones: the chunks, faster there)
# The vectors' loop of _UNIT_EXP (twice: one per exponential form), EXP the one it calls.
_UNIT_LOOP = """        for (; j + {unit} <= n; j += {unit})
            {simd}for (int k = 0; k < {unit}; k++) {{
                const {t} e = EXP(X(j + k) - m);
{keep_unit}                sl[k] += e;
            }}
"""
_UNIT_EXP_FRAME = """
    {t} m = X(0), lo = m;
    {{
        {t} ml[{unit}], mn[{unit}];
        for (int k = 0; k < {unit}; k++) ml[k] = mn[k] = m;
        int64_t j = 0;
        for (; j + {unit} <= n; j += {unit})
            {simd}for (int k = 0; k < {unit}; k++) {{
                {t} v = X(j + k);
                ml[k] = v > ml[k] ? v : ml[k];
                mn[k] = v < mn[k] ? v : mn[k];
            }}
        for (int k = 0; k < {unit}; k++) {{
            m = ml[k] > m ? ml[k] : m;
            lo = mn[k] < lo ? mn[k] : lo;
        }}
        for (; j < n; j++) {{ {t} v = X(j); m = v > m ? v : m; lo = v < lo ? v : lo; }}
    }}
    {acc} sl[{unit}] = {{0}};
    int64_t j = 0;
    if (lo - m >= {normal_lo})
{normal_loop}    else
{general_loop}    if (j < n) {{
        {t} e[{unit}] __attribute__((aligned(64)));
        const int64_t len = n - j;
        for (int k = 0; k < {unit}; k++) e[k] = 0;
        for (int64_t k = 0; k < len; k++) e[k] = X(j + k) - m;
        {simd}for (int k = 0; k < {unit}; k++) e[k] = tj_vexp_{s}(e[k]);
        for (int64_t k = 0; k < len; k++) {{
{keep_tail}            sl[k] += e[k];
        }}
    }}
    for (int width = {unit} / 2; width >= 1; width /= 2)
        for (int k = 0; k < width; k++) sl[k] += sl[k + width];
    {acc} s = sl[0];
"""
_UNIT_EXP = _UNIT_EXP_FRAME.replace(
    "{normal_loop}", _UNIT_LOOP.replace("EXP", "tj_vexp_normal_{s}")
).replace("{general_loop}", _UNIT_LOOP.replace("EXP", "tj_vexp_{s}"))
_UNIT_SOFTMAX = (
    _UNIT_EXP.replace("{keep_unit}", "                O(j + k) = e;\n").replace(
        "{keep_tail}", "            O(j + k) = e[k];\n"
    )
    + """
    {t} r = {scale};
    for (int64_t j = 0; j < n; j++) O(j) *= r;
"""
)
_UNIT_LOG_SOFTMAX = (
    _UNIT_EXP.replace("{keep_unit}", "").replace("{keep_tail}", "")
    + """
    {t} ls = {logged};
    for (int64_t j = 0; j < n; j++) O(j) = {log_value};
"""
)
# The exponentials of a chunk of values x - max <= 0 (or NaN): when none is below
# NORMAL_EXP_LO (whose exponential is a normal number, as is every larger one's), they take
# tj_vexp_normal, tj_vexp's value in one scaling and without clamps (half the work);
# otherwise tj_vexp (denormal results, -inf).
_EXP_CHUNK = """{indent}int below = 0;
{indent}_Pragma("omp simd reduction(|:below)")
{indent}for (int64_t j = 0; j < {count}; j++) below |= {array}[j] < {normal_lo};
{indent}if (below)
{indent}    for (int64_t j = 0; j < {count}; j++) {array}[j] = tj_vexp_{s}({array}[j]);
{indent}else
{indent}    for (int64_t j = 0; j < {count}; j++) {array}[j] = tj_vexp_normal_{s}({array}[j]);
"""


def _exp_chunk(indent: str, array: str, count: str, s: str) -> str:
    return _EXP_CHUNK.format(
        indent=indent, array=array, count=count, s=s, normal_lo=NORMAL_EXP_LO[s]
    )


# Short rows (a classifier's 10 classes) in blocks of BLOCK_ROWS rows: ``XB(l, j)`` /
# ``OB(l, j)`` are element j of the block's row l. The rows are copied transposed into
# ``e`` (e[j * L + l]), so each step below is one vector operation across the rows; a
# row at a time, the max, exp and sum chains of 10 elements each waited on the last.
# The sums run over j in the same order as the row functions' (the same values).
BLOCK_ROWS = 8
SHORT_ROW = 32
_BLOCK_EXP = """
    enum {{ L = {block_rows} }};
    {t} e[{short} * L] __attribute__((aligned(32))), m[L];
    {acc} s[L];
    for (int l = 0; l < L; l++)
        for (int64_t j = 0; j < n; j++) e[j * L + l] = XB(l, j);
    for (int l = 0; l < L; l++) {{ m[l] = e[l]; s[l] = 0; }}
    for (int64_t j = 1; j < n; j++)
        for (int l = 0; l < L; l++) m[l] = e[j * L + l] > m[l] ? e[j * L + l] : m[l];
    for (int64_t j = 0; j < n; j++)
        for (int l = 0; l < L; l++) e[j * L + l] -= m[l];
{exp_block}    for (int64_t j = 0; j < n; j++)
        for (int l = 0; l < L; l++) s[l] += e[j * L + l];
"""
_BLOCK_SOFTMAX = (
    _BLOCK_EXP
    + """
    {t} r[L];
    for (int l = 0; l < L; l++) r[l] = {block_scale};
    for (int l = 0; l < rows; l++)
        for (int64_t j = 0; j < n; j++) OB(l, j) = e[j * L + l] * r[l];
"""
)
_BLOCK_LOG_SOFTMAX = (
    _BLOCK_EXP
    + """
    {t} ls[L];
    for (int l = 0; l < rows; l++) ls[l] = {block_logged};
    for (int l = 0; l < rows; l++)
        for (int64_t j = 0; j < n; j++) OB(l, j) = {block_log_value};
"""
)
# NumPy's argmax: the first maximum, and the first NaN if there is one.
_ARG = """
    int64_t best = 0;
    {t} m = X(0);
    if (m == m) {{
        for (int64_t j = 1; j < n; j++) {{
            {t} v = X(j);
            if (v != v) {{ best = j; break; }}
            if (v {cmp} m) {{ m = v; best = j; }}
        }}
    }}
    C(out) = best;
"""
_SELECT = "    C(out) = X(C(y));\n"
_SELECT_GRAD = """
    for (int64_t j = 0; j < n; j++) O(j) = 0;
    O(C(y)) = ({t})C(g);
"""


def _source(
    ndim: int,
    operands: list[tuple[str, str, bool]],
    body: str,
    block: str | None = None,
    unit_body: str | None = None,
) -> tuple[str, str]:
    """``tj_rows(outer shape..., n, ptrs..., strides...)`` running ``body`` on each row.

    ``operands`` are (name, dtype, has_row_axis); row operands get ``ndim`` strides (the
    row axis last), cell operands ``ndim - 1``. ``block`` (row operands only): the code
    for BLOCK_ROWS rows of at most SHORT_ROW elements along the last outer axis at once;
    ``unit_body``: the body for rows of UNIT_MIN_ROW or more elements whose operands all
    have stride 1 (default: ``body``)."""
    outer = ndim - 1
    params = [("int64_t", f"n{a}") for a in range(outer)] + [("int64_t", "n")]
    params += [("char *", name) for name, _, _ in operands]
    for name, _, row in operands:
        params += [("int64_t", f"s_{name}_{a}") for a in range(outer + row)]
    args = [f"{t} {n}" for t, n in params]
    code = body + (block or "") + (unit_body or "")
    lines = [inline_mode(code), PREAMBLE, parallel.DECLARATIONS, *helper_sources(code)]
    lines.append(f"static void tj_rows_serial({', '.join(args)}) {{")
    for name, _, _ in operands:
        lines.append(f"    char *b_{name}_0 = {name};")
    indent = "    "
    for a in range(outer):
        if a == outer - 1 and block is not None:
            lines += _block_loop(indent, a, operands, block)
            lines.append(f"{indent}for (; i{a} < n{a}; i{a}++) {{")
        else:
            lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        for name, _, _ in operands:
            lines.append(f"{indent}char *b_{name}_{a + 1} = b_{name}_{a} + i{a} * s_{name}_{a};")
    for name, dtype, row in operands:
        t = ctype(dtype)
        if row:
            lines.append(f"{indent}{t} *r_{name} = ({t} *)b_{name}_{outer};")
            lines.append(f"{indent}const int64_t d_{name} = s_{name}_{outer} / sizeof({t});")
        else:
            lines.append(f"{indent}{t} *c_{name} = ({t} *)b_{name}_{outer};")
    # Rows of stride 1 get the body again with constant strides, so that gcc vectorises
    # its loops over the row (it does not version them for a unit stride on its own).
    rows = [name for name, _, row in operands if row]
    if rows:
        unit = " && ".join(f"d_{name} == 1" for name in rows)
        lines.append(f"{indent}if ({unit}) {{")
        lines.append(indent + "    " + " ".join(f"const int64_t d_{name} = 1;" for name in rows))
        if unit_body is None:
            lines.append(body)
        else:  # (shorter rows: the chunks; a 40-element row took 1.7x longer fused)
            lines += [f"{indent}if (n >= {UNIT_MIN_ROW}) {{", unit_body, f"{indent}}} else {{",
                      body, f"{indent}}}"]  # fmt: skip
        lines.append(f"{indent}}} else {{")
        lines.append(body)
        lines.append(f"{indent}}}")
    else:
        lines += [f"{indent}{{", body, f"{indent}}}"]
    for _ in range(outer):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    lines.append("}")
    lines.append(_parallel_rows(params, operands, outer, parallel.grain_for(body)))
    defines = (
        "#define X(j) r_x[(j) * d_x]\n#define O(j) r_out[(j) * d_out]\n#define C(v) (*c_##v)\n"
        "#define XB(l, j) q_x[l][(j) * d_x]\n#define OB(l, j) q_out[l][(j) * d_out]\n"
    )
    n_args = len(args)
    n_strides = n_args - outer - 1 - len(operands)
    cdef = parallel.CDEF
    cdef += f"void tj_rows({', '.join(['int64_t'] * (outer + 1) + ['char *'] * len(operands))}"
    cdef += "".join(", int64_t" for _ in range(n_strides)) + ");\n"
    # One signature for every row kernel, for whole-graph programs (program.c): the
    # shape (outer lengths, then the row length), the pointers, the strides in order.
    shape = ", ".join(f"n[{a}]" for a in range(outer + 1))
    ptrs = "".join(f", p[{j}]" for j in range(len(operands)))
    strides = "".join(f", s[{j}]" for j in range(n_strides))
    lines.append(
        "void tj_rows_u(const int64_t *n, char **p, const int64_t *s) "
        f"{{ (void)s; tj_rows({shape}{ptrs}{strides}); }}"
    )
    cdef += UNIFORM_CDEF
    return defines + "\n".join(lines) + "\n", cdef


def _block_loop(
    indent: str, a: int, operands: list[tuple[str, str, bool]], block: str
) -> list[str]:
    """The loop over blocks of rows along outer axis ``a`` when rows are short and there
    are at least half a block of them (the last block's missing rows read its first row
    again, and write nothing); the row loop that follows does the rest, from ``i{a}`` on:
    nothing, or every row."""
    lines = [
        f"{indent}int64_t i{a} = 0;",
        f"{indent}if (n <= {SHORT_ROW} && n{a} >= {BLOCK_ROWS // 2})",
        f"{indent}for (; i{a} < n{a}; i{a} += {BLOCK_ROWS}) {{",
    ]
    inner = indent + "    "
    left = f"n{a} - i{a}"
    lines.append(f"{inner}const int rows = {left} < {BLOCK_ROWS} ? {left} : {BLOCK_ROWS};")
    for name, dtype, row in operands:
        assert row, "blocks of rows read row operands only"
        t = ctype(dtype)
        lines.append(f"{inner}{t} *q_{name}[{BLOCK_ROWS}];")
        lines.append(f"{inner}for (int l = 0; l < {BLOCK_ROWS}; l++)")
        row_l = f"(i{a} + (l < rows ? l : 0))"
        lines.append(f"{inner}    q_{name}[l] = ({t} *)(b_{name}_{a} + {row_l} * s_{name}_{a});")
        lines.append(f"{inner}const int64_t d_{name} = s_{name}_{a + 1} / sizeof({t});")
    lines += [f"{inner}{{", block, f"{inner}}}", f"{indent}}}"]
    return lines


def _parallel_rows(params: list[tuple[str, str]], operands: list, outer: int, grain: int) -> str:
    """``tj_rows`` over the pool: parts of the first outer axis (each row is one part's)."""
    if outer == 0:
        signature = ", ".join(f"{t} {n}" for t, n in params)
        names = ", ".join(n for _, n in params)
        return f"void tj_rows({signature}) {{ tj_rows_serial({names}); }}"
    steps = {name: f"s_{name}_0" for name, _, _ in operands}
    per_item = " * ".join([f"n{a}" for a in range(1, outer)] + ["n"])
    return parallel.split_outer("tj_rows", params, "n0", steps, per_item, grain)


UNIFORM_CDEF = "void tj_rows_u(const int64_t *, char **, const int64_t *);\n"


def _float_names(dtype: str) -> dict[str, str]:
    if dtype not in ("float32", "float64"):
        raise Unsupported(f"dtype {dtype}")
    s = "f" if dtype == "float32" else "d"
    t = ctype(dtype)
    # the row semantics every backend shares (cstyle/rows.py); the host has doubles
    acc = ctype(row_semantics.accumulator_dtype(dtype, has_fp64=True))
    return {
        "t": t,
        "scale": row_semantics.softmax_scale("s", t),
        "logged": row_semantics.log_total("s", t),
        "log_value": row_semantics.log_softmax_value("X(j)", "m", "ls"),
        "block_scale": row_semantics.softmax_scale("s[l]", t),
        "block_logged": row_semantics.log_total("s[l]", t),
        "block_log_value": row_semantics.log_softmax_value("XB(l, j)", "m[l]", "ls[l]"),
        "s": s,
        "exp_padded": _exp_chunk(" " * 8, "e", "padded", s),
        "exp_block": _exp_chunk(" " * 4, "e", "n * L", s),
        "acc": acc,
        "chunk": str(ROW_CHUNK),
        "lanes": str(LANES),
        "simd": SIMD,
        "block_rows": str(BLOCK_ROWS),
        "short": str(SHORT_ROW),
        "unit": str(UNIT_LANES),
        "normal_lo": NORMAL_EXP_LO[s],
    }


def _plan(
    node: Apply,
) -> tuple[int, list[tuple[str, str, bool]], str, int, str | None, str | None]:
    """(axis, operands, body, ndim, block body or None, unit-stride body or None) of
    ``node``'s kernel; Unsupported if there is none."""
    op = node.op
    x = node.inputs[0]
    ndim = x.type.ndim
    if ndim == 0:
        raise Unsupported("0-d input")
    out_dtype = node.outputs[0].type.dtype
    if isinstance(op, Softmax | LogSoftmax):
        if len(op.axis) != 1 or x.type.dtype != out_dtype:
            raise Unsupported("several axes or a cast")
        names = _float_names(out_dtype)
        soft = isinstance(op, Softmax)
        body = (_SOFTMAX if soft else _LOG_SOFTMAX).format(**names)
        block = (_BLOCK_SOFTMAX if soft else _BLOCK_LOG_SOFTMAX).format(**names)
        unit = (_UNIT_SOFTMAX if soft else _UNIT_LOG_SOFTMAX).format(**names)
        operands = [("x", out_dtype, True), ("out", out_dtype, True)]
        return op.axis[0], operands, body, ndim, block if ndim > 1 else None, unit
    if isinstance(op, Argmax):
        if op.axis is None and ndim != 1 or isinstance(op.axis, tuple):
            raise Unsupported("argmax over several axes")
        dtype = x.type.dtype
        if dtype not in ("float32", "float64", "int64", "int32"):
            raise Unsupported(f"dtype {dtype}")
        cmp = ">" if op.kind == "argmax" else "<"
        body = _ARG.format(t=ctype(dtype), cmp=cmp)
        axis = 0 if op.axis is None else op.axis
        return axis, [("x", dtype, True), ("out", "int64", False)], body, ndim, None, None
    ydt = node.inputs[-1].type.dtype
    if ydt not in ("int64", "int32"):
        raise Unsupported(f"class index dtype {ydt}")
    if isinstance(op, SelectClass):
        ctype(out_dtype)
        operands = [("x", x.type.dtype, True), ("y", ydt, False), ("out", out_dtype, False)]
        return ndim - 1, operands, _SELECT, ndim, None, None
    if isinstance(op, SelectClassGrad):
        names = _float_names(out_dtype)
        gdt = node.inputs[1].type.dtype
        ctype(gdt)
        operands = [("g", gdt, False), ("y", ydt, False), ("out", out_dtype, True)]
        return ndim - 1, operands, _SELECT_GRAD.format(**names), ndim, None, None
    raise Unsupported(type(op).__name__)


supported = covered_by(_plan)


def source_of(node: Apply) -> tuple[str, str]:
    _, operands, body, ndim, block, unit = _plan(node)
    return _source(ndim, operands, body, block, unit)


def kernel_inputs(node: Apply) -> list[int]:
    """Which of ``node``'s inputs its kernel reads, in the kernel's operand order (the
    scores ``x`` of SelectClassGrad only give the output's shape)."""
    if isinstance(node.op, SelectClassGrad):
        return [1, 2]
    if isinstance(node.op, SelectClass):
        return [0, 1]
    return [0]


def checks_class_indices(node: Apply) -> bool:
    """Whether ``node``'s kernel reads class indices (its operand 1) that must be checked
    against the row length first."""
    return isinstance(node.op, SelectClass | SelectClassGrad)


def program_plan(node: Apply) -> tuple[int, list[bool], bool, str, str]:
    """For whole-graph programs: (axis, which kernel operands have the row axis, the
    output last; whether operand 1 holds class indices; C source; cdef)."""
    axis, operands, body, ndim, block, unit = _plan(node)
    source, cdef = _source(ndim, operands, body, block, unit)
    return axis, [row for _, _, row in operands], checks_class_indices(node), source, cdef


def factory(node: Apply) -> Run:
    axis, operands, body, ndim, block, unit = _plan(node)
    source, cdef = _source(ndim, operands, body, block, unit)
    ffi, lib = compiler.load(source, cdef, ("tj_rows",), what=str(node.op))
    fn, cast = lib.tj_rows, ffi.cast
    op = node.op
    perform = op.perform
    out_dtype = node.outputs[0].type.numpy_dtype
    name = type(op).__name__
    checks_indices = checks_class_indices(node)
    row_out = operands[-1][2]
    read = kernel_inputs(node)

    def arrays(inputs: list) -> list:
        return [inputs[i] for i in read]

    def run(inputs: list, output_storage: list) -> None:
        x = inputs[0]
        n = x.shape[axis]
        if x.size == 0 or n == 0:
            perform(node, inputs, output_storage)  # empty rows: NumPy's result or error
            return
        if checks_indices:
            _check_indices_runtime(x, inputs[-1], name)
        out_shape = x.shape if row_out else x.shape[:axis] + x.shape[axis + 1 :]
        out = output_buffer(output_storage[0][0], out_shape, out_dtype, inputs)
        views = []
        for a, (_, _, row) in zip([*arrays(inputs), out], operands):
            views.append(np.moveaxis(a, axis, -1) if row else a)
        if any(s % v.itemsize for v in views for s in v.strides):
            perform(node, inputs, output_storage)  # unaligned strides (a record's field)
            return
        outer = x.shape[:axis] + x.shape[axis + 1 :]
        ptrs = [cast("char *", v.ctypes.data) for v in views]
        strides = [s for v in views for s in v.strides]
        fn(*outer, n, *ptrs, *strides)
        output_storage[0][0] = out

    return run


factory.kernel_name = "rowwise"
