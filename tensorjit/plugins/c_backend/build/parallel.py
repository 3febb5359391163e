"""Kernels that split their work across the process's worker threads (thread_pool.c).

A generated kernel ``name(params)`` whose first loop runs over a length parameter is
wrapped: the loop's body stays in ``name_serial`` and ``name`` either calls it once (too
little work, one thread) or hands ``tj_parallel`` a part function that calls it on a range
of that loop, each pointer moved by its byte step times the range's start. Parts write
disjoint outputs; a full reduction writes one value per part into its own cell and the
wrapper combines the cells in part order.

Every kernel library declares ``tj_parallel`` (``DECLARATIONS``); the loader
(threads.attach) points it at the pool's entry. Until then, or where the pool is not
built, kernels run serially.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The pool's entry, as every kernel library sees it (NULL: run serially).
DECLARATIONS = """typedef void (*tj_task_fn)(void *, int64_t, int64_t, int);
int (*tj_parallel)(tj_task_fn, void *, int64_t, int64_t, int64_t) = 0;
#define TJ_MAX_PARTS 256 /* thread_pool.c's TJ_MAX_THREADS: no call has more parts */
"""
CDEF = "extern int (*tj_parallel)(void *, void *, int64_t, int64_t, int64_t);\n"

# Elements a part gets at least: a part costs the pool ~1-3 us to hand out (a worker
# that sleeps: ~10-50 us to wake), an element of a memory-bound loop ~0.3-1 ns; and a
# worker that took a part spins ~20 us after it, on a core the BLAS's own workers may
# want for the product that follows. With grains 4x smaller, the tutorial MLP's 20x500
# tanh/softmax steps split and its float32 step took 0.57 ms instead of 0.46 (2 cores).
CHEAP_GRAIN = 32768
# Loops with exp/log/tanh/erf... per element: ~5-20 ns an element.
COSTLY_GRAIN = 8192
# Whole cache lines per part (the streaming stores write aligned lines; parts of
# adjacent elements would also share lines).
LINE_ITEMS = 64


@dataclass(frozen=True)
class Combine:
    """A full reduction split over parts: each part runs ``kernel`` (same parameters as
    the serial one), which stores one ``ctype`` value (the accumulator's type) at
    ``out``; ``expr`` combines ``a`` (earlier parts) with ``b`` (the next), and
    ``store`` (a C expression of ``acc``) is what the wrapper writes at ``out``, of
    type ``out_ctype``."""

    out: str
    ctype: str
    expr: str
    kernel: str
    out_ctype: str
    store: str = "acc"


def split_outer(
    name: str,
    params: Sequence[tuple[str, str]],
    split: str,
    steps: dict[str, str],
    per_item: str,
    grain: int,
    align: int = 1,
    combine: Combine | None = None,
    status: bool = False,
) -> str:
    """C of ``name(params)`` splitting the range of length parameter ``split`` over the
    pool and calling ``name_serial`` (the caller emits it) on each part.

    ``steps[p]``: a C expression (of the parameters) for the bytes pointer ``p`` moves per
    item of ``split``; ``per_item``: elements of work per item (the parts get at least
    ``grain`` elements each); ``align``: part boundaries are multiples of it. With
    ``status``, the kernel returns an int (0: done) and the wrapper returns a part's
    non-zero one."""
    names = [n for _, n in params]
    types = dict((n, t) for t, n in params)
    fields = [f"    {t} {n};" for t, n in params]
    fields += [f"    int64_t step_{p};" for p in steps]
    if status:  # initialised to 0 after the steps, so before the cells
        fields.append("    int status;")
    if combine is not None:
        fields.append(f"    {combine.ctype} cells[TJ_MAX_PARTS];")

    def moved(n: str) -> str:
        if n == split:
            return "hi - lo"
        if combine is not None and n == combine.out:
            return "(char *)&a->cells[part]"
        if n in steps:
            return f"({types[n]})((char *)a->{n} + lo * a->step_{n})"
        return f"a->{n}"

    call_part = ", ".join(moved(n) for n in names)
    init = ", ".join(names + [f"({e})" for e in steps.values()] + (["0"] if status else []))
    serial = f"{name}_serial" if combine is None else combine.kernel
    run_part = f"{serial}({call_part});"
    if status:
        run_part = (
            f"int code = {serial}({call_part});\n"
            "    if (code) __atomic_store_n(&a->status, code, __ATOMIC_RELAXED);"
        )
    ret = "int" if status else "void"
    lines = [
        "typedef struct {\n" + "\n".join(fields) + f"\n}} {name}_args;",
        f"static void {name}_part(void *c, int64_t lo, int64_t hi, int part) {{",
        f"    {name}_args *a = ({name}_args *)c;",
        "    (void)part;",
        f"    {run_part}",
        "}",
        f"{ret} {name}({', '.join(f'{t} {n}' for t, n in params)}) {{",
        f"    const int64_t per_item = {per_item};",
        f"    if (tj_parallel && {split} > 1 && per_item > 0"
        f" && {split} >= 2 * (({grain} + per_item - 1) / per_item)) {{",
        f"        {name}_args args = {{{init}}};",
        f"        int parts = tj_parallel({name}_part, &args, {split},"
        f" ({grain} + per_item - 1) / per_item, {align});",
    ]
    if combine is not None:
        lines += [
            f"        {combine.ctype} acc = args.cells[0];",
            "        for (int k = 1; k < parts; k++) {",
            f"            {combine.ctype} a = acc, b = args.cells[k];",
            f"            acc = {combine.expr};",
            "        }",
            f"        *({combine.out_ctype} *){combine.out} = {combine.store};",
        ]
    else:
        lines.append("        (void)parts;")
    lines += [
        "        return args.status;" if status else "        return;",
        "    }",
        f"    {'return ' if status else ''}{name}_serial({', '.join(names)});",
        "}",
    ]
    return "\n".join(lines) + "\n"


COSTLY_NAMES = ("vexp", "vlog", "vtanh", "vexpm1", "vlog1p", "erf", "pow", "sin", "cos", "psi")


def grain_for(body: str) -> int:
    """The grain of an elementwise body: smaller when it calls transcendental helpers."""
    return COSTLY_GRAIN if any(n in body for n in COSTLY_NAMES) else CHEAP_GRAIN
