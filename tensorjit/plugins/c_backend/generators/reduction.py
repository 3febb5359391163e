"""C source of reductions: sum, prod, max, min, all, any of an element function of one or
more broadcasting operands (a plain Reduce reads one operand as it is; a MappedReduce
squares it or takes its absolute value; an ElemwiseReduce applies a fused Composite), so
the mapped values are never stored.

The loops run over the axes in the order kept ones first, then reduced ones; each
operand has its own byte strides in that order (0 along an axis it broadcasts over), and
the output is C-contiguous. Three loop shapes, chosen at run time by the strides:

- a *run*: the innermost reduced axis contiguous in every operand that moves along it
  (reduced axes contiguous with it are folded into it first, coalesce.py): 32
  independent accumulators (lanes) that the compiler vectorises (fewer are
  latency-bound), combined in a fixed order, so results do not depend on the CPU;
- *columns*: the last kept axis contiguous and the reduced ones not (a matrix's sum
  over axis 0): a block of the output's accumulators per reduced position, a vector
  loop;
- otherwise a strided walk, one element at a time.

max and min propagate NaN as NumPy does, in every lane (a branch-free select); a
contiguous run of them keeps its lanes with plain comparisons (the CPU's max/min
instructions) and a separate "NaN seen" flag per lane, and only a run that holds a NaN is
read again, for NumPy's answer (its first NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tensorjit.plugins.c_backend.build import parallel
from tensorjit.plugins.c_backend.generators.coalesce import merge_into_last
from tensorjit.plugins.c_backend.generators.codegen import (
    C_DIALECT,
    PREAMBLE,
    SIMD,
    Unsupported,
    convert,
    ctype,
    helper_sources,
    inline_mode,
)
from tensorjit.plugins.cstyle import reductions

REDUCE_KINDS = reductions.KINDS
LANES = 32  # accumulators of a contiguous run
SHORT_LANES = 8  # of its remainder (and of rows shorter than LANES)
COLUMN_BLOCK = 256  # output accumulators of the columns loop
# The lanes' tree starts from the lanes a run used: a run shorter than LANES touched only
# the first SHORT_LANES, and folding the others in (their start: 0, or max/min's acc)
# changes no value but costs a short row twice its time (a row of 10's max: 24 ns, 12).
FIRST_WIDTH = f"(n >= {LANES} ? {LANES // 2} : {SHORT_LANES // 2})"


@dataclass(frozen=True)
class Reading:
    """What a reduction reads per element: its pointer operands (dtype, and per loop axis
    whether the operand is statically broadcast there), and the C lines defining
    ``tj_f(x0, x1, ...)``, the element to reduce (of ``dtype``) from one element of each
    operand. ``body`` is the function's body, for the helpers it calls."""

    operands: tuple[tuple[str, tuple[bool, ...]], ...]
    function: tuple[str, ...]
    body: str
    dtype: str


def identity_reading(dtype: str, ndim: int, mapped: str = "x0") -> Reading:
    """One operand read as it is, or through ``mapped`` (a C expression of ``x0``)."""
    t = ctype(dtype)
    # Cast back: small integers promote to int, and NumPy's square of an int8 wraps.
    body = f"    return ({t})({mapped});"
    lines = (f"static inline {t} tj_f({t} x0) {{", body, "}")
    return Reading(((dtype, (False,) * ndim),), lines, body, dtype)


def accumulator_dtype(kind: str, in_dtype: str, out_dtype: str) -> str:
    """The shared rule (cstyle/reductions.py) for this CPU (it has doubles)."""
    if kind in reductions.EXTREMES and in_dtype != out_dtype:
        raise Unsupported(f"{kind} from {in_dtype} to {out_dtype}")
    return reductions.accumulator_dtype(kind, in_dtype, out_dtype, True, C_DIALECT.signed_wraps)


class _Writer:
    """Names and expressions shared by the loop generators of one kernel."""

    def __init__(
        self,
        kind: str,
        reading: Reading,
        out_dtype: str,
        n_kept: int,
        ndim: int,
        run: str = "tj_run",
        element: str = "tj_f",
    ):
        self.kind, self.reading, self.n_kept, self.ndim = kind, reading, n_kept, ndim
        self.run, self.element = run, element  # the C names of the run and element functions
        self.tin = ctype(reading.dtype)
        self.acc_dtype = accumulator_dtype(kind, reading.dtype, out_dtype)
        self.tacc, self.tout = ctype(self.acc_dtype), ctype(out_dtype)
        self.out_dtype = out_dtype
        self.names = [f"x{j}" for j in range(len(reading.operands))]
        self.types = [ctype(dt) for dt, _ in reading.operands]

    def shape_args(self) -> str:
        return "".join(f"int64_t n{a}, " for a in range(self.ndim))

    def pointer_args(self) -> str:
        return "".join(f"char *{x}, " for x in self.names)

    def stride_args(self) -> str:
        return "".join(f", int64_t st_{x}_{a}" for x in self.names for a in range(self.ndim))

    def call_args(self) -> str:
        shape = "".join(f"n{a}, " for a in range(self.ndim))
        strides = "".join(f", st_{x}_{a}" for x in self.names for a in range(self.ndim))
        return f"{shape}{''.join(f'{x}, ' for x in self.names)}out{strides}"

    def element_at(self, level: int, offset: str = "", ptr: str = "b") -> str:
        """The mapped element at pointers ``<ptr>_<x>_<level>`` (+ ``offset`` bytes, a
        format of the operand's name ``x``)."""
        loads = [
            f"*(const {t} *)({ptr}_{x}_{level}{offset.format(x=x)})"
            for x, t in zip(self.names, self.types)
        ]
        return f"{self.element}({', '.join(loads)})"

    def term(self, value: str) -> str:
        """An element as the accumulator combines it."""
        dtype = self.reading.dtype
        return reductions.term(self.kind, value, dtype, self.out_dtype, self.acc_dtype, convert)

    def combine(self, a: str, b: str) -> str:
        return "(" + reductions.combine(self.kind, self.acc_dtype, a, b) + ")"

    def store(self, acc: str = "acc") -> str:
        return convert(acc, self.acc_dtype, self.out_dtype)

    def start(self, first: str) -> str:
        """An accumulator's first value; ``first``: the group's first element (max and
        min start from it: they have no neutral element)."""
        return reductions.neutral(self.kind) or first


def reduce_source(
    kind: str, reading: Reading, out_dtype: str, n_kept: int, n_red: int
) -> tuple[str, str]:
    """(C source, cdef) of ``tj_reduce(n..., x0.., out, st_x0_0..)`` and of the uniform
    entry ``tj_reduce_u(n, pointers, out, strides)`` (strides operand-major)."""
    if kind not in REDUCE_KINDS:
        raise Unsupported(f"reduction {kind}")
    ndim = n_kept + n_red
    w = _Writer(kind, reading, out_dtype, n_kept, ndim)
    lines = [inline_mode(reading.body), PREAMBLE, parallel.DECLARATIONS]
    lines += [*helper_sources(reading.body), *reading.function]
    if n_red:
        lines += _run_function(w)
    if n_kept and n_red:
        lines += _columns_function(w)
    lines += _serial_function(w)
    part_kernel = "tj_reduce_serial"
    if n_kept == 0 and ndim and w.tacc != w.tout:
        # Parts of a full reduction keep the accumulator's type (a float32 sum adds in
        # double): the same kernel, storing acc unconverted; the wrapper converts once.
        part_kernel = "tj_reduce_acc"
        lines += _serial_function(w, name=part_kernel, store_acc=True)
    lines.append(_parallel_entry(w, part_kernel))
    lines.append(_uniform_entry(w))
    shape_decl = "".join("int64_t, " for _ in range(ndim))
    ptr_decl = "".join("char *, " for _ in w.names)
    stride_decl = "".join(", int64_t" for _ in w.names for _ in range(ndim))
    cdef = parallel.CDEF + f"void tj_reduce({shape_decl}{ptr_decl}char *{stride_decl});\n"
    cdef += "void tj_reduce_u(const int64_t *, char **, char *, const int64_t *);\n"
    return "\n".join(lines) + "\n", cdef


def run_source(kind: str, reading: Reading, out_dtype: str, run: str, element: str) -> list[str]:
    """C lines of ``static acc <run>(acc, n, p...)``, a reduction's contiguous run (below)
    on its own, for kernels that reduce one group several ways: ``reading`` has one axis
    (an operand broadcast along it is read once) and defines the element function
    ``element``."""
    ndim = len(reading.operands[0][1])
    return _run_function(_Writer(kind, reading, out_dtype, 0, ndim, run, element))


def _run_function(w: _Writer) -> list[str]:
    """``tj_run(acc, n, p...)``: acc combined with a contiguous run of n elements along
    the last axis (operands broadcast there are read once), in LANES accumulators, then
    the remainder in the first SHORT_LANES of them (a classifier's rows of 10 or 16 stay
    vectorised). LANES is four vector registers of AVX-512 doubles: fewer leave the loop
    bound by the latency of the combine (an exp-sum row ran 1.7x slower with 8). The
    lanes' loops are marked for vectorisation: gcc would unroll them and then not find the
    vector form of max/min's selects on its own. The lanes combine in a fixed tree, so
    the result depends on n only, never on the CPU's vector width."""
    params, setup, element = _run_operands(w)
    if w.kind in BETTER:
        return _extreme_run_function(w, params, setup, element)
    lane_start = reductions.neutral(w.kind)
    tail = w.term(element.replace("K", "i"))
    lines = [
        f"static {w.tacc} {w.run}({w.tacc} acc, int64_t n, {', '.join(params)}) {{",
        *setup,
        f"    {w.tacc} lane[{LANES}];",
        f"    for (int k = 0; k < {LANES}; k++) lane[k] = {lane_start};",
        "    int64_t i = 0;",
    ]
    lines += _lane_rounds(
        f"            const {w.tacc} v = {w.term(element.replace('K', 'i + k'))};",
        f"            lane[k] = {w.combine('lane[k]', 'v')};",
    )
    lines += [
        # the upper half into the lower, halving the width each round: a fixed order on
        # every CPU, and contiguous halves, so the rounds are vector operations too (the
        # selects of max/min, as scalar branches, mispredict on every row)
        f"    if (n >= {SHORT_LANES}) {{",
        f"        for (int width = {FIRST_WIDTH}; width >= 1; width /= 2)",
        f"            {SIMD}for (int k = 0; k < width; k++)",
        f"                lane[k] = {w.combine('lane[k]', 'lane[k + width]')};",
        f"        acc = {w.combine('acc', 'lane[0]')};",
        "    }",
        f"    for (; i < n; i++) {{ const {w.tacc} v = {tail}; acc = {w.combine('acc', 'v')}; }}",
        "    return acc;",
        "}",
    ]
    return lines


def _lane_rounds(*body: str) -> list[str]:
    """The run's loops: rounds of LANES elements, then of SHORT_LANES, each running
    ``body`` (C lines reading element ``i + k`` into lane ``k``) on every lane."""
    lines = []
    for width in (LANES, SHORT_LANES):
        lines += [
            f"    for (; i + {width} <= n; i += {width})",
            f"        {SIMD}for (int k = 0; k < {width}; k++) {{",
            *body,
            "        }",
        ]
    return lines


def _run_operands(w: _Writer) -> tuple[list[str], list[str], str]:
    """tj_run's pointer parameters, the set-up reading operands broadcast along the run
    once, and the mapped element at index ``K`` (a placeholder)."""
    last = w.ndim - 1
    params, setup, loads = [], [], []
    for j, t in enumerate(w.types):
        params.append(f"const {t} *restrict p{j}")
        if w.reading.operands[j][1][last]:
            setup.append(f"    const {t} s{j} = *p{j};")
            loads.append(f"s{j}")
        else:
            loads.append(f"p{j}[K]")
    return params, setup, f"{w.element}({', '.join(loads)})"


# max/min of a run: when v replaces the kept value a (false for a NaN on either side:
# that is the x86 max/min instructions' rule, so gcc emits them, no blend)
BETTER = {"max": "{v} > {a}", "min": "{v} < {a}"}


def _extreme_run_function(
    w: _Writer, params: list[str], setup: list[str], element: str, kinds: tuple[str, ...] = ()
) -> list[str]:
    """tj_run for max/min: the lanes compare plainly and a NaN only sets its lane's flag;
    if any was seen (and acc is not NaN already), the run is read again for its first
    NaN, which NumPy returns. acc NaN (an earlier NaN) stays: no comparison replaces it.

    With several ``kinds`` (max and min: a group's range), one pass keeps each in its own
    lanes, the same lanes, tree and rule as alone, and the function stores them through
    ``acc<i>`` pointers (each an accumulator in, its extreme out; a NaN's as alone)."""
    t = w.tacc
    kinds = kinds or (w.kind,)
    several = len(kinds) > 1
    lanes = [f"lane{i}" for i in range(len(kinds))] if several else ["lane"]
    accs = [f"a{i}" for i in range(len(kinds))] if several else ["acc"]

    def keep(kind: str, a: str, v: str) -> str:
        return f"{a} = ({BETTER[kind].format(v=v, a=a)}) ? {v} : {a};"

    def keep_all(a: str, v: str) -> list[str]:
        return [keep(kind, a.format(lane=lane, acc=acc), v.format(lane=lane))
                for kind, lane, acc in zip(kinds, lanes, accs)]  # fmt: skip

    # (integers have no NaN: no flags, and no "v != v" for the compiler to warn about)
    floating = w.acc_dtype.startswith(("float", "complex"))
    flag = "        nan_seen[k] |= v != v;" if floating else None
    if several:
        pointers = ", ".join(f"{t} *acc{i}" for i in range(len(kinds)))
        lines = [
            f"static void {w.run}({pointers}, int64_t n, {', '.join(params)}) {{",
            *[f"    {t} {a} = *acc{i};" for i, a in enumerate(accs)],
        ]
    else:
        lines = [f"static {t} {w.run}({t} acc, int64_t n, {', '.join(params)}) {{"]
    lines += [
        *setup,
        *[f"    {t} {lane}[{LANES}];" for lane in lanes],
        f"    int nan_seen[{LANES}];",
        f"    for (int k = 0; k < {LANES}; k++) {{",
        *[f"        {lane}[k] = {a};" for lane, a in zip(lanes, accs)],
        "        nan_seen[k] = 0;",
        "    }",
        "    int64_t i = 0;",
    ]
    lines += _lane_rounds(
        f"            const {t} v = {element.replace('K', 'i + k')};",
        *([f"    {flag}"] if flag else []),
        *[f"            {line}" for line in keep_all("{lane}[k]", "v")],
    )
    lines += [
        "    int seen = 0;",
        f"    for (int k = 0; k < {LANES}; k++) seen |= nan_seen[k];",
        f"    if (n >= {SHORT_LANES}) {{",
        f"        for (int width = {FIRST_WIDTH}; width >= 1; width /= 2)",
        f"            {SIMD}for (int k = 0; k < width; k++) {{",
        *[f"                {line}" for line in keep_all("{lane}[k]", "{lane}[k + width]")],
        "            }",
        *[f"        {line}" for line in keep_all("{acc}", "{lane}[0]")],
        "    }",
        "    for (; i < n; i++) {",
        f"        const {t} v = {element.replace('K', 'i')};",
        *(["        seen |= v != v;"] if floating else []),
        *[f"        {line}" for line in keep_all("{acc}", "v")],
        "    }",
    ]
    if floating:
        found = [*(f"{a} = v;" for a in accs), "break;"] if several else ["return v;"]
        lines += [
            f"    if (seen && {accs[0]} == {accs[0]})",
            "        for (i = 0; i < n; i++) {",
            f"            const {t} v = {element.replace('K', 'i')};",
            f"            if (v != v) {{ {' '.join(found)} }}",
            "        }",
        ]
    lines.append("    (void)seen;")
    if several:
        lines += [f"    *acc{i} = {a};" for i, a in enumerate(accs)] + ["}"]
    else:
        lines += ["    return acc;", "}"]
    return lines


def range_run_source(dtype: str, run: str, element: str) -> list[str]:
    """C lines of ``static void <run>(T *top, T *bottom, int64_t n, const T *p0)``: the
    maximum and the minimum of a contiguous run of ``element(p0[i])`` (defined by the
    caller) in one pass, each as a max's or min's run alone gives it; with a NaN, both
    take the max's NaN (its first), so both accumulators must come in NaN or not alike."""
    reading = Reading(((dtype, (False,)),), (), "", dtype)
    w = _Writer("max", reading, dtype, 0, 1, run, element)
    params, setup, loaded = _run_operands(w)
    return _extreme_run_function(w, params, setup, loaded, ("max", "min"))


def _open_loops(w: _Writer, lines: list[str], axes: range, ptr: str, indent: str) -> str:
    """Appends nested loops over ``axes``, each moving every operand's pointer
    <ptr>_<x>_<a+1> = <ptr>_<x>_<a> + i<a> * st_<x>_<a>; returns the innermost indent."""
    for a in axes:
        lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        for x in w.names:
            lines.append(f"{indent}char *{ptr}_{x}_{a + 1} = {ptr}_{x}_{a} + i{a} * st_{x}_{a};")
    return indent


def _close_loops(lines: list[str], count: int, indent: str) -> str:
    for _ in range(count):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return indent


def _contiguous_check(w: _Writer, axis: int) -> str:
    """C: every operand that moves along ``axis`` is contiguous there."""
    moving = [
        f"st_{x}_{axis} == sizeof({t})"
        for x, t, (_, bcast) in zip(w.names, w.types, w.reading.operands)
        if not bcast[axis]
    ]
    return " && ".join(moving) or "1"


def _columns_function(w: _Writer) -> list[str]:
    """``tj_reduce_columns``: the loop order when the last kept axis is contiguous and
    the reduced ones are not: each reduced position combines a contiguous block of the
    last kept axis into COLUMN_BLOCK accumulators (a vector loop), instead of one strided
    walk per output element. Same order of operations per output element."""
    last, chunk, ndim = w.n_kept - 1, COLUMN_BLOCK, w.ndim
    lines = [
        f"static void tj_reduce_columns({w.shape_args()}{w.pointer_args()}char *out"
        f"{w.stride_args()}) {{",
        f"    {w.tout} *po = ({w.tout} *)out;",
        f"    {w.tacc} accs[{chunk}];",
        "    int64_t o = 0;",
        *[f"    char *b_{x}_0 = {x};" for x in w.names],
    ]
    indent = _open_loops(w, lines, range(last), "b", "    ")
    lines += [
        f"{indent}for (int64_t j0 = 0; j0 < n{last}; j0 += {chunk}) {{",
        f"{indent}    const int64_t len = n{last} - j0 < {chunk} ? n{last} - j0 : {chunk};",
    ]
    for x in w.names:
        lines.append(f"{indent}    char *c_{x}_{w.n_kept} = b_{x}_{last} + j0 * st_{x}_{last};")
    first = w.term(w.element_at(w.n_kept, " + j * st_{x}_" + str(last), "c"))
    lines.append(f"{indent}    for (int64_t j = 0; j < len; j++) accs[j] = {w.start(first)};")
    inner = _open_loops(w, lines, range(w.n_kept, ndim), "c", indent + "    ")
    element = w.term(w.element_at(ndim, " + j * st_{x}_" + str(last), "c"))
    lines += [
        f"{inner}for (int64_t j = 0; j < len; j++) {{",
        f"{inner}    const {w.tacc} v = {element};",
        f"{inner}    accs[j] = {w.combine('accs[j]', 'v')};",
        f"{inner}}}",
    ]
    _close_loops(lines, ndim - w.n_kept, inner)
    lines += [
        f"{indent}    for (int64_t j = 0; j < len; j++) po[o + j0 + j] = {w.store('accs[j]')};",
        f"{indent}}}",
        f"{indent}o += n{last};",
    ]
    _close_loops(lines, last, indent)
    lines.append("}")
    return lines


def _serial_function(
    w: _Writer, name: str = "tj_reduce_serial", store_acc: bool = False
) -> list[str]:
    """The reduction on one thread (``store_acc``: a part of a full reduction, storing
    the accumulator unconverted)."""
    n_kept, ndim = w.n_kept, w.ndim
    tstore = w.tacc if store_acc else w.tout
    store = "acc" if store_acc else w.store()
    lines = [
        f"static void {name}({w.shape_args()}{w.pointer_args()}char *out{w.stride_args()}) {{",
        f"    {tstore} *po = ({tstore} *)out;",
        "    int64_t o = 0;",
        *[f"    char *b_{x}_0 = {x};" for x in w.names],
    ]
    if ndim > n_kept:  # reduced axes after the kept ones (never axis 0: the parallel split)
        operands = list(zip(w.names, (b for _, b in w.reading.operands)))
        lines += merge_into_last(operands, max(n_kept, 1), ndim - 1)
    if n_kept and ndim > n_kept and not store_acc:
        k = n_kept - 1
        columns = f"{_contiguous_check(w, k)} && n{k} > 1 && !({_contiguous_check(w, ndim - 1)})"
        lines += [
            f"    if ({columns}) {{",
            f"        tj_reduce_columns({w.call_args()});",
            "        return;",
            "    }",
        ]
    if n_kept == ndim:  # nothing reduced: one element per output
        indent = _open_loops(w, lines, range(ndim), "b", "    ")
        element = convert(w.term(w.element_at(ndim)), w.acc_dtype, w.out_dtype)
        lines.append(f"{indent}po[o++] = {element};")
        _close_loops(lines, ndim, indent)
        lines.append("}")
        return lines
    last = ndim - 1
    indent = _open_loops(w, lines, range(n_kept), "b", "    ")
    lines.append(f"{indent}{w.tacc} acc = {w.start(w.term(w.element_at(n_kept)))};")
    inner = _open_loops(w, lines, range(n_kept, last), "b", indent)
    run_args = ", ".join(f"(const {t} *)b_{x}_{last}" for x, t in zip(w.names, w.types))
    lines += [
        f"{inner}if ({_contiguous_check(w, last)}) {{",
        f"{inner}    acc = {w.run}(acc, n{last}, {run_args});",
        f"{inner}}} else {{",
        f"{inner}    for (int64_t i{last} = 0; i{last} < n{last}; i{last}++) {{",
        f"{inner}        const {w.tacc} v = "
        f"{w.term(w.element_at(last, ' + i' + str(last) + ' * st_{x}_' + str(last)))};",
        f"{inner}        acc = {w.combine('acc', 'v')};",
        f"{inner}    }}",
        f"{inner}}}",
    ]
    _close_loops(lines, last - n_kept, inner)
    lines.append(f"{indent}po[o++] = {store};")
    _close_loops(lines, n_kept, indent)
    lines.append("}")
    return lines


def _parallel_entry(w: _Writer, part_kernel: str) -> str:
    """``tj_reduce`` over the pool: parts of the first kept axis (disjoint outputs), or,
    reducing everything, of the first axis with one accumulator per part
    (``part_kernel`` stores it), combined in order and converted once."""
    ndim = w.ndim
    params = [("int64_t", f"n{a}") for a in range(ndim)]
    params += [("char *", x) for x in w.names] + [("char *", "out")]
    params += [("int64_t", f"st_{x}_{a}") for x in w.names for a in range(ndim)]
    if ndim == 0:
        return (
            f"void tj_reduce({w.pointer_args()}char *out) "
            f"{{ tj_reduce_serial({''.join(f'{x}, ' for x in w.names)}out); }}"
        )
    per_item = " * ".join(f"n{a}" for a in range(1, ndim)) or "1"
    steps = {x: f"st_{x}_0" for x in w.names}
    combine = None
    if w.n_kept:
        steps["out"] = " * ".join([f"sizeof({w.tout})"] + [f"n{a}" for a in range(1, w.n_kept)])
    else:
        combine = parallel.Combine(
            "out", w.tacc, reductions.combine(w.kind, w.acc_dtype), part_kernel, w.tout, w.store()
        )
    return parallel.split_outer(
        "tj_reduce", params, "n0", steps, per_item, 2 * parallel.CHEAP_GRAIN, combine=combine
    )


def _uniform_entry(w: _Writer) -> str:
    """``tj_reduce_u``: one signature for every reduction, for whole-graph programs."""
    shape = "".join(f"n[{a}], " for a in range(w.ndim))
    ptrs = "".join(f"p[{j}], " for j in range(len(w.names)))
    strides = "".join(f", s[{i}]" for i in range(len(w.names) * w.ndim))
    return (
        "void tj_reduce_u(const int64_t *n, char **p, char *out, const int64_t *s) "
        f"{{ (void)n; (void)s; tj_reduce({shape}{ptrs}out{strides}); }}"
    )


def permuted(bcast: Sequence[bool], order: Sequence[int]) -> tuple[bool, ...]:
    """A broadcast pattern in the loop's axis order."""
    return tuple(bcast[a] for a in order)
