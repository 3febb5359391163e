"""C source of ``MomentsMap`` (tensor/moments_map.py): per row of x (its last axis), the
row's Moments, then the map's outputs along the row, while the row is in the cache.

The kernel has the strided elementwise entries of whole-graph programs,
``tj_strided_u(n, pointers, strides)`` and ``tj_strided_stream_u`` (the output's whole
cache lines stored non-temporally): the pointers are the node's variable inputs (x, the
divisor unless it is a constant, the operands) and then the output, the strides each
pointer's along every axis (read only where its type does not broadcast). There is no
flat entry: the rows' length is the last axis's. Rows are cut over the pool.

Rows run in blocks (see BLOCK_BYTES): each row's ``tj_group`` (generators/moments.py: the
row's total and squares, the numbers a Moments kernel gives for it), then each row's loop
calling the map's ``tj_f`` with both statistics, each operand's element (an operand
broadcast along the row: its one value) and x's; a vector loop when every pointer moving
along the row moves by one element. Streamed rows are written in whole aligned lines
(``tj_stream_line_whole``), so the stores of one block drain while the next block's sums
run (the point: written out, the statistics of all rows come before any output, and a
pass storing to memory runs alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorjit.plugins.c_backend.build import parallel
from tensorjit.plugins.c_backend.generators import codegen, moments
from tensorjit.plugins.c_backend.generators.codegen import SIMD, ctype
from tensorjit.plugins.cstyle.elementwise import element_function

# A block of rows has its statistics computed before its outputs: rows of at most this many
# bytes together (at least one row, at most MAX_BLOCK_ROWS), so that the short rows' chains
# of latency (sums, their tree, the column arithmetic) overlap, while a long row's
# streamed outputs still alternate with the next row's sums.
BLOCK_BYTES = 8192
MAX_BLOCK_ROWS = 64

CDEF = (
    "void tj_strided_u(const int64_t *, char **, const int64_t *);\n"
    "void tj_strided_stream_u(const int64_t *, char **, const int64_t *);\n"
)


def moments_map_source(
    scalar_op: Any,
    dtype: str,
    operand_dtypes: Sequence[str],
    kinds: Sequence[str],
    bcast: Sequence[tuple[bool, ...]],
    consts: dict[int, Any],
    out_dtype: str,
    mean_by: str = "div",
) -> tuple[str, str]:
    """(C source, cdef) of a MomentsMap kernel for x of C type ``dtype``. ``kinds``,
    ``bcast`` and ``consts`` describe the node's inputs (x, divisor, operands...) as
    kernels.elemwise_operands does: "const" ones are inlined; ``mean_by``: Moments'."""
    t, tout = ctype(dtype), ctype(out_dtype)
    ndim = len(bcast[0])
    last = ndim - 1
    # tj_f's inputs: the two statistics, then the operands (node inputs 2...)
    f_kinds = ["full", "full", *kinds[2:]]
    f_consts = {i: v for i, v in consts.items() if i >= 2}
    f_dtypes = [dtype, dtype, *operand_dtypes]
    function, body = element_function(
        codegen.C_DIALECT, scalar_op, f_dtypes, out_dtype, f_kinds, f_consts
    )
    pointers = [i for i, k in enumerate(kinds) if k != "const"]  # node inputs read by pointer
    n_ptrs = len(pointers) + 1
    out_index = len(pointers)

    def stride(ptr: int, axis: int) -> str:
        return f"s[{ptr * ndim + axis}]"

    # per pointer: the axes it moves along (its type does not broadcast there)
    moving = [[a for a in range(ndim) if not bcast[i][a]] for i in pointers]
    moving.append(list(range(ndim)))  # the output
    along = [p for p in range(n_ptrs) if last in moving[p]]  # pointers moving along a row
    x_ptr = pointers.index(0)
    if 1 in pointers:
        divisor = f"*(const {t} *)p[{pointers.index(1)}]"
    else:
        divisor = f"({t}){codegen.C_DIALECT.literal(consts[1])}"

    def typed(i: int) -> str:
        return ctype(operand_dtypes[i - 2])

    # the operands read along a row (x's operand copies too, not x's own pointer, which
    # tj_group reads through its stride); the vector loop's condition: each of them and
    # the output moves by one element there
    read_along = [p for p in along if p != out_index and pointers[p] != 0]
    sizes = [(p, typed(pointers[p])) for p in read_along] + [(out_index, tout)]
    unit = " && ".join(f"{stride(p, last)} == (int64_t)sizeof({c})" for p, c in sizes)

    # tj_f's arguments at element k of the row (contiguous or strided form)
    def arguments(contiguous: bool) -> str:
        args = ["total", "squares"]
        for i in range(2, len(kinds)):
            if kinds[i] == "const":
                continue
            ptr = pointers.index(i)
            if ptr not in along:
                args.append(f"v{ptr}")
            elif contiguous:
                args.append(f"q{ptr}[k]")
            else:
                args.append(f"*(const {typed(i)} *)(b{ptr} + k * {stride(ptr, last)})")
        return ", ".join(args)

    lines = [codegen.inline_mode(body), codegen.PREAMBLE, parallel.DECLARATIONS]
    lines += [codegen.STREAM_STORES, *codegen.helper_sources(body), *function]
    lines += moments.group_source(dtype, mean_by)
    lines += [
        "",
        "static void tj_rows(const int64_t *n, char **p, const int64_t *s, int64_t lo,",
        "                    int64_t hi, int stream) {",
        f"    const int64_t len = n[{last}];",
        f"    const {t} divisor = {divisor};",
        f"    const int unit = {unit};",
        f"    int64_t block = {BLOCK_BYTES} / (len > 0 ? len * (int64_t)sizeof({t}) : 1);",
        f"    block = block < 1 ? 1 : block > {MAX_BLOCK_ROWS} ? {MAX_BLOCK_ROWS} : block;",
        # the leading axes' index of row lo (an odometer from there: no division per row)
        f"    int64_t ix[{max(last, 1)}], rest = lo;",
        "    if (lo >= hi) return; /* (no rows: a leading length may be 0) */",
        f"    for (int a = {last - 1}; a >= 0; a--) ix[a] = rest % n[a], rest /= n[a];",
        "    for (int64_t r0 = lo; r0 < hi; r0 += block) {",
        "        const int64_t rows = hi - r0 < block ? hi - r0 : block;",
        f"        char *bases[{MAX_BLOCK_ROWS}][{n_ptrs}];",
        f"        {t} totals[{MAX_BLOCK_ROWS}], squares_of[{MAX_BLOCK_ROWS}];",
        "        for (int64_t j = 0; j < rows; j++) {",
        *[
            f"            char *b{p} = p[{p}]"
            + "".join(f" + ix[{a}] * {stride(p, a)}" for a in range(last) if a in moving[p])
            + ";"
            for p in range(n_ptrs)
        ],
        f"            for (int a = {last - 1}; a >= 0 && ++ix[a] == n[a]; a--) ix[a] = 0;",
    ]
    lines += [
        *[f"            bases[j][{p}] = b{p};" for p in range(n_ptrs)],
        f"            tj_group(b{x_ptr}, len, {stride(x_ptr, last)}, divisor, &totals[j],",
        "                     &squares_of[j]);",
        "        }",
        "        for (int64_t j = 0; j < rows; j++) {",
        f"        const {t} total = totals[j], squares = squares_of[j];",
        *[f"        char *b{p} = bases[j][{p}];" for p in range(n_ptrs)],
    ]
    for i in range(2, len(kinds)):
        if kinds[i] != "const" and pointers.index(i) not in along:
            ptr = pointers.index(i)
            lines.append(f"        const {typed(i)} v{ptr} = *(const {typed(i)} *)b{ptr};")
    lines += [
        "        if (unit) {",
        *[
            f"            const {typed(pointers[p])} *q{p} = (const {typed(pointers[p])} *)b{p};"
            for p in read_along
        ],
        f"            {tout} *o = ({tout} *)b{out_index};",
        "            int64_t k = 0;",
        "            if (stream) {",
        f"                enum {{ LINE = TJ_LINE_BYTES / sizeof({tout}) }};",
        "                int64_t head = (LINE - ((uintptr_t)o & (TJ_LINE_BYTES - 1)) /"
        f" sizeof({tout})) % LINE;",
        "                head = head < len ? head : len;",
        f"                {SIMD}for (k = 0; k < head; k++) o[k] = tj_f({arguments(True)});",
        "                for (k = head; k + LINE <= len; k += LINE) {",
        f"                    {tout} line[LINE];",
        "                    {",
        "                        const int64_t k0 = k;",
        f"                        {SIMD}for (int64_t j = 0; j < LINE; j++) {{",
        "                            const int64_t k = k0 + j;",
        f"                            line[j] = tj_f({arguments(True)});",
        "                        }",
        "                    }",
        "                    tj_stream_line_whole(o + k, line);",
        "                }",
        "            }",
        f"            {SIMD}for (int64_t j = k; j < len; j++) {{",
        "                const int64_t k = j;",
        f"                o[k] = tj_f({arguments(True)});",
        "            }",
        "        } else {",
        "            for (int64_t k = 0; k < len; k++)",
        f"                *({tout} *)(b{out_index} + k * {stride(out_index, last)}) ="
        f" tj_f({arguments(False)});",
        "        }",
        "        }",
        "    }",
        "    if (stream) tj_stream_fence();",
        "}",
        "",
        "typedef struct { const int64_t *n; char **p; const int64_t *s; int stream; } tj_rows_job;",
        "",
        "static void tj_rows_part(void *c, int64_t lo, int64_t hi, int part) {",
        "    const tj_rows_job *job = (const tj_rows_job *)c;",
        "    (void)part;",
        "    tj_rows(job->n, job->p, job->s, lo, hi, job->stream);",
        "}",
        "",
        "static void tj_run(const int64_t *n, char **p, const int64_t *s, int stream) {",
        "    int64_t rows = 1;",
        f"    for (int a = 0; a < {last}; a++) rows *= n[a];",
        f"    const int64_t per_row = n[{last}] > 0 ? n[{last}] : 1;",
        f"    const int64_t grain = ({parallel.COSTLY_GRAIN} + per_row - 1) / per_row;",
        "    if (tj_parallel && rows >= 2 * grain) {",
        "        tj_rows_job job = {n, p, s, stream};",
        "        tj_parallel(tj_rows_part, &job, rows, grain, 1);",
        "        return;",
        "    }",
        "    tj_rows(n, p, s, 0, rows, stream);",
        "}",
        "",
        "void tj_strided_u(const int64_t *n, char **p, const int64_t *s) { tj_run(n, p, s, 0); }",
        "void tj_strided_stream_u(const int64_t *n, char **p, const int64_t *s) {",
        "    tj_run(n, p, s, 1);",
        "}",
    ]
    return "\n".join(lines) + "\n", parallel.CDEF + CDEF
