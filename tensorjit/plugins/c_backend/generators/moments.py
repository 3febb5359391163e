"""C source of ``Moments`` (tensor/moments.py): per group of x along the reduced axis,
the sum and the sum of squared deviations from the mean, both in double, x read once.

The loops run over the kept axes first, then the reduced one (each axis's byte stride
of x given); both outputs are C-contiguous. A group's sums of x and x^2 are read in one
pass: a contiguous group in LANES lanes per sum, which the compiler vectorises and which
combine in a fixed tree (the result depends on n only, never on the CPU), a strided one
element by element. A group whose m2 = s2 - s1^2 / n the subtraction amplifies beyond
``moments.max_amplification`` (or that is not finite) is read again, from the cache,
about its mean.
"""

from __future__ import annotations

from tensorjit.plugins.c_backend.build import parallel
from tensorjit.plugins.c_backend.generators.codegen import PREAMBLE, SIMD, ctype
from tensorjit.tensor import moments

# Lanes per sum: two vector registers of AVX-512 doubles each, four chains of adds in
# all (a group's 32-lane tree, through the stack, cost more than the chains' latency).
LANES = 16


def _limit(dtype: str) -> str:
    """C: the largest s2 / m2 kept for a group of n elements (moments.max_amplification)."""
    floor = repr(moments.MAX_AMPLIFICATION)
    if dtype == "float32":
        budget = repr(moments.FLOAT32_BUDGET)
        return f"fmax({floor}, {budget} / (double)(n > 1 ? n : 1))"
    return floor


def _group_functions(t: str, limit: str) -> list[str]:
    """``tj_sums`` (the sums of x - k and (x - k)^2, inlined: with k = 0 the subtraction
    goes) and ``tj_group`` (one group's sum and m2)."""
    return [
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
        "                const double d = (double)q[i + j] - k;",
        "                la[j] += d;",
        "                lb[j] += d * d;",
        "            }",
        # the upper half into the lower: a fixed order on every CPU
        f"        for (int w = {LANES // 2}; w >= 1; w /= 2)",
        f"            {SIMD}for (int j = 0; j < w; j++) {{",
        "                la[j] += la[j + w];",
        "                lb[j] += lb[j + w];",
        "            }",
        "        a = la[0];",
        "        b = lb[0];",
        "        for (; i < n; i++) {",
        "            const double d = (double)q[i] - k;",
        "            a += d;",
        "            b += d * d;",
        "        }",
        "    } else {",
        "        for (; i < n; i++) {",
        f"            const double d = (double)*(const {t} *)(x + i * st) - k;",
        "            a += d;",
        "            b += d * d;",
        "        }",
        "    }",
        "    *s1 = a;",
        "    *s2 = b;",
        "}",
        "",
        "static void tj_group(const char *x, int64_t n, int64_t st, double *sum, double *m2) {",
        "    if (n == 0) {",
        "        *sum = 0.0;",
        "        *m2 = 0.0;",
        "        return;",
        "    }",
        "    double s1, s2;",
        "    tj_sums(x, n, st, 0.0, &s1, &s2);",
        "    *sum = s1;",
        "    const double dev = s2 - s1 * (s1 / (double)n);",
        f"    if (s2 <= ({limit}) * dev) {{ /* (false for NaN) */",
        "        *m2 = dev;",
        "        return;",
        "    }",
        # amplified, or inf/NaN seen: the group again (from the cache), about its mean
        "    double c1, c2;",
        "    tj_sums(x, n, st, s1 / (double)n, &c1, &c2);",
        "    *m2 = c2 > 1.79769313486231570e308 ? c2 : c2 - c1 * (c1 / (double)n);",
        "}",
    ]


def moments_source(dtype: str, n_kept: int) -> tuple[str, str]:
    """(C source, cdef) of ``tj_reduce(n..., x, out, out2, st...)``: the reduced axis
    last, ``out`` the sums, ``out2`` the m2s; and of the uniform entry
    ``tj_reduce_u(n, pointers, out, strides)`` of whole-graph programs (pointers: x,
    then out2)."""
    if dtype not in moments.INPUT_DTYPES:
        raise ValueError(f"moments of {dtype}")
    t, ndim = ctype(dtype), n_kept + 1
    last = ndim - 1
    shape = "".join(f"int64_t n{a}, " for a in range(ndim))
    strides = "".join(f", int64_t st_{a}" for a in range(ndim))
    lines = [PREAMBLE, parallel.DECLARATIONS, *_group_functions(t, _limit(dtype)), ""]
    lines.append(f"static void tj_reduce_serial({shape}char *x, char *out, char *out2{strides}) {{")
    lines += ["    double *ps = (double *)out, *pm = (double *)out2;", "    int64_t o = 0;"]
    indent = "    "
    pointer = "x"
    for a in range(n_kept):
        lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        lines.append(f"{indent}const char *x{a + 1} = {pointer} + i{a} * st_{a};")
        pointer = f"x{a + 1}"
    lines += [f"{indent}tj_group({pointer}, n{last}, st_{last}, &ps[o], &pm[o]);", f"{indent}o++;"]
    for _ in range(n_kept):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    lines.append("}")
    params = [("int64_t", f"n{a}") for a in range(ndim)]
    params += [("char *", "x"), ("char *", "out"), ("char *", "out2")]
    params += [("int64_t", f"st_{a}") for a in range(ndim)]
    names = ", ".join(n for _, n in params)
    if n_kept:
        row_bytes = " * ".join(["(int64_t)sizeof(double)"] + [f"n{a}" for a in range(1, n_kept)])
        per_item = " * ".join(f"n{a}" for a in range(1, ndim))
        steps = {"x": "st_0", "out": row_bytes, "out2": row_bytes}
        lines.append(
            parallel.split_outer(
                "tj_reduce", params, "n0", steps, per_item, 2 * parallel.CHEAP_GRAIN
            )
        )
    else:
        typed = ", ".join(f"{t_} {n}" for t_, n in params)
        lines.append(f"void tj_reduce({typed}) {{ tj_reduce_serial({names}); }}")
    lengths, strides_of_x = [f"n[{a}]" for a in range(ndim)], [f"s[{a}]" for a in range(ndim)]
    call = ", ".join([*lengths, "p[0]", "out", "p[1]", *strides_of_x])
    lines.append(
        "void tj_reduce_u(const int64_t *n, char **p, char *out, const int64_t *s) "
        f"{{ tj_reduce({call}); }}"
    )
    shape_decl = "int64_t, " * ndim
    stride_decl = ", int64_t" * ndim
    cdef = parallel.CDEF + f"void tj_reduce({shape_decl}char *, char *, char *{stride_decl});\n"
    cdef += "void tj_reduce_u(const int64_t *, char **, char *, const int64_t *);\n"
    return "\n".join(lines) + "\n", cdef
