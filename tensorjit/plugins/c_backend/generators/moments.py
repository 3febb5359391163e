"""C source of ``Moments`` (tensor/moments.py): per group of x along the reduced axis,
its sum and the sum of squared deviations from the mean that sum gives, x read once.

The loops run over the kept axes first, then the reduced one (each axis's byte stride of
x given; the divisor is one element); both outputs are C-contiguous, of x's dtype. A
group's sums of x - k and (x - k)^2 (k: 0, or for float64 its first element) are read in
one pass: a contiguous group in LANES lanes per sum, which the compiler vectorises and
which combine in a fixed tree (the result depends on n only, never on the CPU); when the
reduced axis is strided but the last kept one is contiguous (a matrix's columns, a
transposed matrix's rows), blocks of COLUMN_BLOCK groups side by side, a vector loop;
otherwise element by element. A group whose one-pass squares the subtraction amplifies
beyond ``moments.max_amplification``, or where anything is not finite, is read again
(from the cache) for the sum of (x - mean)^2 itself."""

from __future__ import annotations

from tensorjit.plugins.c_backend.build import parallel
from tensorjit.plugins.c_backend.generators import two_statistics
from tensorjit.plugins.c_backend.generators.codegen import PREAMBLE, SIMD, ctype
from tensorjit.tensor import moments

# Lanes per sum: two vector registers of AVX-512 doubles each, four chains of adds in
# all (a group's 32-lane tree, through the stack, cost more than the chains' latency).
LANES = 16
COLUMN_BLOCK = 128  # groups side by side in the columns loop
DBL_MAX = "1.79769313486231570e308"


def _limit(dtype: str) -> str:
    """C: the largest amplification kept for a group of n elements."""
    floor = repr(moments.MAX_AMPLIFICATION)
    if dtype == "float32":
        budget = repr(moments.FLOAT32_BUDGET)
        return f"fmax({floor}, {budget} / (double)(n > 1 ? n : 1))"
    return floor


def _shifted(dtype: str) -> bool:
    """Whether groups are summed about their first element: float64 (whose limit is 8:
    unshifted, any mean beyond 1.2 standard deviations from 0 would need the second
    pass; about an element, only a group whose first element lies that far from its
    mean). float32's limit leaves room for means a thousand deviations away, and its
    pass is bound by the conversions: no subtraction there."""
    return dtype == "float64"


def _group_functions(t: str, limit: str, shifted: bool, mean_by: str) -> list[str]:
    """``tj_sums`` (a group's sums of x - k and (x - k)^2: k its first element or 0 for
    the one pass, see _shifted; the mean for the second), ``tj_finish`` (the total,
    the mean as the graph divides, the squares, branch-free so that the columns' loop
    over groups vectorises) and ``tj_group``."""
    shift = f"tj_shift(n > 0 ? (double)*(const {t} *)x : 0.0)" if shifted else "0.0"
    return [
        # The shift: an element of at most 2^900 (half an ulp of the largest double), so
        # x - k overflows nowhere the plain sum would not; inf, NaN or larger: none.
        "static inline double tj_shift(double v) { return fabs(v) <= 0x1p900 ? v : 0.0; }",
        "",
        "static inline __attribute__((always_inline)) void",
        "tj_sums(const char *x, int64_t n, int64_t st, double k, double *s1, double *s2) {",
        "    double a = 0.0, b = 0.0;",
        "    int64_t i = 0;",
        f"    if (st == (int64_t)sizeof({t})) {{",
        f"        const {t} *q = (const {t} *)x;",
        f"        double la[{LANES}], lb[{LANES}];",
        f"        for (int j = 0; j < {LANES}; j++) la[j] = lb[j] = 0.0;",
        f"        for (; i + {LANES} <= n; i += {LANES})",
        f"            {SIMD}for (int j = 0; j < {LANES}; j++) {{",
        "                const double v = (double)q[i + j] - k;",
        "                la[j] += v;",
        "                lb[j] += v * v;",
        "            }",
        # the upper half into the lower: a fixed order on every CPU
        f"        for (int w = {LANES // 2}; w >= 1; w /= 2)",
        f"            {SIMD}for (int j = 0; j < w; j++) {{",
        "                la[j] += la[j + w];",
        "                lb[j] += lb[j + w];",
        "            }",
        "        a = la[0];",
        "        b = lb[0];",
        "    }",
        "    for (; i < n; i++) {",
        f"        const double v = (double)*(const {t} *)(x + i * st) - k;",
        "        a += v;",
        "        b += v * v;",
        "    }",
        "    *s1 = a;",
        "    *s2 = b;",
        "}",
        "",
        "/* A group's outputs from its sums (with none: 0 and 0, after a second pass over",
        "   nothing); 1 when it must be read again about *m, for the squares. */",
        "static inline __attribute__((always_inline)) int",
        f"tj_finish(int64_t n, double k, double s1, double s2, {t} divisor, {t} *total,",
        f"          {t} *squares, double *m) {{",
        f"    const {t} sum = ({t})(k * (double)n + s1);",
        f"    const {t} mean = sum {'/' if mean_by == 'div' else '*'} divisor;"
        " /* (the graph's own division, or product) */",
        "    const double md = (double)mean, c = md - k;",
        "    const double q = s2 - c * (2.0 * s1 - (double)n * c);",
        "    const double terms = s2 + fabs(c) * (2.0 * fabs(s1) + (double)n * fabs(c));",
        "    *total = sum;",
        f"    *squares = ({t})q;",
        "    *m = md;",
        f"    return !(terms <= {DBL_MAX} && terms <= ({limit}) * q); /* (NaN: again) */",
        "}",
        "",
        f"static void tj_group(const char *x, int64_t n, int64_t st, {t} divisor,",
        f"                     {t} *total, {t} *squares) {{",
        "    double s1, s2, m;",
        f"    const double k = {shift};",
        "    tj_sums(x, n, st, k, &s1, &s2);",
        "    if (tj_finish(n, k, s1, s2, divisor, total, squares, &m)) {",
        "        tj_sums(x, n, st, m, &s1, &s2);",
        f"        *squares = ({t})s2;",
        "    }",
        "}",
    ]


def group_source(dtype: str, mean_by: str) -> list[str]:
    """C lines of ``tj_group(x, n, st, divisor, total, squares)``: one group's outputs
    (the functions a Moments kernel calls per group; a MomentsMap kernel per row), the
    mean the total divided by the divisor or, ``mean_by="mul"``, times it."""
    return _group_functions(ctype(dtype), _limit(dtype), _shifted(dtype), mean_by)


def _columns_function(t: str, n_kept: int, shifted: bool) -> list[str]:
    """``tj_columns``: groups side by side along the contiguous last kept axis (length
    nk, its groups' outputs contiguous), the reduced axis strided (a matrix's columns, a
    transposed matrix's rows): COLUMN_BLOCK groups' sums at a time, a vector loop over
    the block per reduced position; groups to read again, in a second such loop."""
    column_shift = f"tj_shift((double)((const {t} *)first)[j])" if shifted else "0.0"
    return [
        f"static void tj_columns(int64_t nk, int64_t n, const char *x, int64_t st, {t} divisor,",
        f"                       {t} *total, {t} *squares) {{",
        f"    double a[{COLUMN_BLOCK}], b[{COLUMN_BLOCK}], m[{COLUMN_BLOCK}], k[{COLUMN_BLOCK}];",
        f"    int again[{COLUMN_BLOCK}];",
        f"    for (int64_t j0 = 0; j0 < nk; j0 += {COLUMN_BLOCK}) {{",
        f"        const int64_t len = nk - j0 < {COLUMN_BLOCK} ? nk - j0 : {COLUMN_BLOCK};",
        f"        const char *first = x + j0 * (int64_t)sizeof({t});",
        "        for (int64_t j = 0; j < len; j++) {",
        "            a[j] = b[j] = 0.0;",
        f"            k[j] = n > 0 ? {column_shift} : 0.0;",
        "        }",
        "        for (int64_t i = 0; i < n; i++) {",
        f"            const {t} *q = (const {t} *)(first + i * st);",
        f"            {SIMD}for (int64_t j = 0; j < len; j++) {{",
        "                const double v = (double)q[j] - k[j];",
        "                a[j] += v;",
        "                b[j] += v * v;",
        "            }",
        "        }",
        "        int any = 0;",
        f"        {SIMD}for (int64_t j = 0; j < len; j++) {{",
        "            again[j] = tj_finish(n, k[j], a[j], b[j], divisor, &total[j0 + j],",
        "                                 &squares[j0 + j], &m[j]);",
        "            any |= again[j];",
        "        }",
        "        if (!any)",
        "            continue;",
        "        for (int64_t j = 0; j < len; j++) b[j] = 0.0;",
        "        for (int64_t i = 0; i < n; i++) {",
        f"            const {t} *q = (const {t} *)(first + i * st);",
        f"            {SIMD}for (int64_t j = 0; j < len; j++) {{",
        "                const double d = (double)q[j] - m[j];",
        "                b[j] += d * d;",
        "            }",
        "        }",
        "        for (int64_t j = 0; j < len; j++)",
        f"            if (again[j]) squares[j0 + j] = ({t})b[j];",
        "    }",
        "}",
    ] if n_kept else []  # fmt: skip


def moments_source(dtype: str, n_kept: int, mean_by: str = "div") -> tuple[str, str]:
    """(C source, cdef) of ``tj_reduce(n..., x, divisor, out, out2, st...)``: the reduced
    axis last, ``out`` the totals, ``out2`` the squares; and of the uniform entry
    ``tj_reduce_u(n, pointers, out, strides)`` of whole-graph programs (pointers: x, the
    divisor, then out2; strides: x's, then the divisor's, unread)."""
    if dtype not in moments.INPUT_DTYPES:
        raise ValueError(f"moments of {dtype}")
    t, ndim = ctype(dtype), n_kept + 1
    last = ndim - 1
    shifted = _shifted(dtype)
    lines = [PREAMBLE, parallel.DECLARATIONS, *group_source(dtype, mean_by), ""]
    lines += _columns_function(t, n_kept, shifted)
    lines.append(two_statistics.serial_signature(ndim, ("x", "div")))
    lines += [
        f"    {t} *pt = ({t} *)out, *ps = ({t} *)out2;",
        f"    const {t} divisor = *({t} *)div;",
        "    int64_t o = 0;",
    ]
    if n_kept:
        k = n_kept - 1
        lines += [
            # a transposed matrix's rows: its groups side by side
            f"    const int columns = st_{last} != (int64_t)sizeof({t}) && "
            f"st_{k} == (int64_t)sizeof({t}) && n{k} > 1;",
        ]
    indent = "    "
    pointer = "x"
    for a in range(n_kept):
        if a == n_kept - 1:
            # (inside the outer kept axes' loops: the next of them; else the whole call)
            step_on = [f"{indent}    o += n{a};", f"{indent}    continue;"]
            lines += [
                f"{indent}if (columns) {{",
                f"{indent}    tj_columns(n{a}, n{last}, {pointer}, st_{last}, divisor,",
                f"{indent}               pt + o, ps + o);",
                *(step_on if n_kept > 1 else [f"{indent}    return;"]),
                f"{indent}}}",
            ]
        lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        lines.append(f"{indent}const char *x{a + 1} = {pointer} + i{a} * st_{a};")
        pointer = f"x{a + 1}"
    lines += [
        f"{indent}tj_group({pointer}, n{last}, st_{last}, divisor, &pt[o], &ps[o]);",
        f"{indent}o++;",
    ]
    for _ in range(n_kept):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    lines.append("}")
    entry_lines, cdef = two_statistics.entries(t, n_kept, ("x", "div"), 2 * parallel.CHEAP_GRAIN)
    lines += entry_lines
    return "\n".join(lines) + "\n", cdef
