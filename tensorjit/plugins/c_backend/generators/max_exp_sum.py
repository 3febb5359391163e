"""C source of ``MaxExpSum`` (tensor/max_exp_sum.py): per group of x along the reduced
axis, its maximum m and the sum of exp(x - m), the group read from memory once.

The loops run over the kept axes first, then the reduced one (each axis's byte stride of
x given); both outputs are C-contiguous, of x's dtype. A contiguous group runs through
the reductions' own run functions (reduction.run_source, range_run_source: the same
lanes, tree and conversions as the max and the sum the graph would run, so the same
numbers): its maximum and minimum in one pass, then the sum of the shifted
exponentials, read again from the cache (a group shorter than SHORT_GROUP: its maximum
alone, then the sum through tj_vexp). When the minimum's shifted value lies where e^x is
a normal number (codegen.NORMAL_EXP_LO; the common case), every exponential of the group
takes tj_vexp_normal, which gives tj_vexp's values without its clamps and second
scaling; else (denormal results, -inf, NaN) tj_vexp itself. Groups run in blocks: the
block's ranges, then its sums. A strided group (a transposed matrix's rows) is copied
CHUNK elements at a time into a buffer and run from there.
"""

from __future__ import annotations

from tensorjit.plugins.c_backend.build import parallel
from tensorjit.plugins.c_backend.generators import reduction, two_statistics
from tensorjit.plugins.c_backend.generators.codegen import (
    NORMAL_EXP_LO,
    PREAMBLE,
    convert,
    ctype,
    helper_sources,
)
from tensorjit.tensor import max_exp_sum

CHUNK = 256  # elements of a strided group copied at a time (a buffer on the stack)
# Shorter groups take the maximum alone and tj_vexp: for them (a classifier's classes,
# attention over 64 tokens) the minimum's lanes and tree cost more than the second
# exponential form saves.
SHORT_GROUP = 128
BLOCK = 8  # groups whose ranges are found before their sums
BLOCK_BYTES = 262144  # at most this much of them (a quarter of a 1 MiB L2)


def _runs(dtype: str) -> tuple[list[str], str]:
    """The element functions and the runs (the range: max and min in one pass; the max
    alone; the shifted exponentials' sum in both forms) of a group; the sum's
    accumulator type."""
    t, s = ctype(dtype), "d" if dtype == "float64" else "f"
    shifted = ((dtype, (False,)), (dtype, (True,)))  # (x, the maximum: read once)
    exp, normal = f"tj_vexp_{s}", f"tj_vexp_normal_{s}"
    lines = [
        f"static inline {t} tj_same({t} x0) {{ return x0; }}",
        # x0 - x1 rounded to the dtype first, as the graph's Composite{sub,exp} does
        f"static inline {t} tj_exp_shifted({t} x0, {t} x1) {{ return {exp}(x0 - x1); }}",
        f"static inline {t} tj_exp_normal({t} x0, {t} x1) {{ return {normal}(x0 - x1); }}",
    ]
    lines += reduction.range_run_source(dtype, "tj_run_range", "tj_same")
    for kind, reading, run, element in (
        ("max", ((dtype, (False,)),), "tj_run_max", "tj_same"),
        ("sum", shifted, "tj_run_exp", "tj_exp_shifted"),
        ("sum", shifted, "tj_run_exp_normal", "tj_exp_normal"),
    ):
        lines += reduction.run_source(kind, reduction.Reading(reading, (), "", dtype), dtype, run,
                                      element)  # fmt: skip
    return [*helper_sources(f"{exp}( {normal}("), *lines], reduction.accumulator_dtype(
        "sum", dtype, dtype
    )


def _group_functions(dtype: str, acc_dtype: str) -> list[str]:
    """``tj_range`` (a group's maximum, and its minimum when it is long enough to use it)
    and ``tj_sum`` (its sum of shifted exponentials; n >= 1: the caller checks). A
    strided group runs chunk by chunk through a buffer, a contiguous one as one chunk."""
    t, tacc = ctype(dtype), ctype(acc_dtype)
    s = "d" if dtype == "float64" else "f"
    total = convert("acc", acc_dtype, dtype)
    return [
        f"static inline const {t} *tj_chunk(const char *x, int64_t i0, int64_t len, int64_t st,",
        f"                                  {t} *buffer) {{",
        f"    if (st == (int64_t)sizeof({t}))",
        f"        return (const {t} *)x + i0;",
        f"    for (int64_t i = 0; i < len; i++) buffer[i] = *(const {t} *)(x + (i0 + i) * st);",
        "    return buffer;",
        "}",
        "",
        f"static void tj_range(const char *x, int64_t n, int64_t st, {t} *top, {t} *bottom) {{",
        f"    const int64_t chunk = st == (int64_t)sizeof({t}) ? n : {CHUNK};",
        f"    {t} buffer[{CHUNK}];",
        f"    {t} m = *(const {t} *)x, lo = m;",
        "    for (int64_t i0 = 0; i0 < n; i0 += chunk) {",
        "        const int64_t len = n - i0 < chunk ? n - i0 : chunk;",
        f"        const {t} *q = tj_chunk(x, i0, len, st, buffer);",
        f"        if (n >= {SHORT_GROUP})",
        "            tj_run_range(&m, &lo, len, q);",
        "        else",
        "            m = tj_run_max(m, len, q);",
        "    }",
        "    *top = m;",
        f"    *bottom = n >= {SHORT_GROUP} ? lo : -INFINITY;",
        "}",
        "",
        f"static {t} tj_sum(const char *x, int64_t n, int64_t st, {t} m, {t} lo) {{",
        f"    const int64_t chunk = st == (int64_t)sizeof({t}) ? n : {CHUNK};",
        f"    {t} buffer[{CHUNK}];",
        # (NaN anywhere, or an infinite m: the comparison fails, tj_vexp)
        f"    const int normal = lo - m >= {NORMAL_EXP_LO[s]};",
        f"    {tacc} acc = 0;",
        "    for (int64_t i0 = 0; i0 < n; i0 += chunk) {",
        "        const int64_t len = n - i0 < chunk ? n - i0 : chunk;",
        f"        const {t} *q = tj_chunk(x, i0, len, st, buffer);",
        "        acc = normal ? tj_run_exp_normal(acc, len, q, &m) : tj_run_exp(acc, len, q, &m);",
        "    }",
        f"    return {total};",
        "}",
    ]  # fmt: skip


def max_exp_sum_source(dtype: str, n_kept: int) -> tuple[str, str]:
    """(C source, cdef) of ``tj_reduce(n..., x, out, out2, st...)``: the reduced axis
    last, ``out`` the maxima, ``out2`` the sums; and of the uniform entry
    ``tj_reduce_u(n, pointers, out, strides)`` of whole-graph programs (pointers: x, then
    out2; strides: x's)."""
    if dtype not in max_exp_sum.INPUT_DTYPES:
        raise ValueError(f"max_exp_sum of {dtype}")
    t, ndim = ctype(dtype), n_kept + 1
    last = ndim - 1
    runs, acc_dtype = _runs(dtype)
    lines = [PREAMBLE, parallel.DECLARATIONS, *runs, *_group_functions(dtype, acc_dtype)]
    lines += [
        two_statistics.serial_signature(ndim, ("x",)),
        f"    {t} *top = ({t} *)out, *total = ({t} *)out2;",
        "    int64_t o = 0;",
        f"    if (n{last} == 0) return; /* (the caller raises NumPy's error) */",
    ]
    # Groups in blocks of BLOCK along the last kept axis: the block's ranges first, then
    # its sums, so that a group's sum does not wait for its own maximum's last steps (a
    # row of 64: 12% of its time), fewer groups when they are long.
    indent, pointer = "    ", "x"
    for a in range(n_kept - 1):
        lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        lines.append(f"{indent}const char *x{a + 1} = {pointer} + i{a} * st_{a};")
        pointer = f"x{a + 1}"
    if n_kept:
        k = n_kept - 1
        groups, step = f"n{k}", f"st_{k}"
    else:
        groups, step = "1", "0"
    lines += [
        # (at most BLOCK_BYTES of groups: their second reading stays in the cache)
        f"{indent}const int64_t block_bytes = n{last} * (int64_t)sizeof({t}),",
        f"{indent}              block = block_bytes * {BLOCK} <= {BLOCK_BYTES} ? {BLOCK}"
        f" : block_bytes * 2 <= {BLOCK_BYTES} ? {BLOCK_BYTES} / block_bytes : 1;",
        f"{indent}for (int64_t b = 0; b < {groups}; b += block) {{",
        f"{indent}    const int64_t len = {groups} - b < block ? {groups} - b : block;",
        f"{indent}    {t} lo[{BLOCK}];",
        f"{indent}    for (int64_t g = 0; g < len; g++)",
        f"{indent}        tj_range({pointer} + (b + g) * {step}, n{last}, st_{last}, &top[o + g],"
        " &lo[g]);",
        f"{indent}    for (int64_t g = 0; g < len; g++)",
        f"{indent}        total[o + g] = tj_sum({pointer} + (b + g) * {step}, n{last}, st_{last},"
        " top[o + g], lo[g]);",
        f"{indent}    o += len;",
        f"{indent}}}",
    ]
    for _ in range(n_kept - 1):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    lines.append("}")
    entry_lines, cdef = two_statistics.entries(t, n_kept, ("x",), parallel.CHEAP_GRAIN)
    lines += entry_lines
    return "\n".join(lines) + "\n", cdef
