"""The step kinds of whole-graph programs, declared once for both sides.

Each ``StepKind`` names the C function that runs it in ``program.c`` and says whether
the runner can check its failure conditions before the call's first in-place write
(``checked_by``, the all-or-nothing calls of core/compile/commit.py) and whether it may
run while a group of row-blocked calls is pending (``passes_row_group``,
row_blocks.c). From this table come the Python ``StepKind`` numbers, the C enum and
program.c's dispatch (``c_declarations``, ``c_dispatch``): adding a kind is a line here,
its C function and its builder in program.py. A plugin's own C kernel joins programs
as a *native* step (native.py), without a kind of its own.

``Step`` is one step as program.c's ``make`` reads it: by field name, so a builder
names what it sets and leaves the rest at their defaults.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

ANY_OBJECT = -1  # the typenum of a value no C step reads (a generator state, a sparse matrix)


@dataclass(frozen=True)
class KindSpec:
    """How program.c runs one step kind (C expressions over p, g, s, v)."""

    run: str  # the call running the step: TJ_DONE, TJ_DECLINED, TJ_BAD_CLASS or TJ_ERROR
    checked_by: str | None = None  # 1 when the step would decline on the values now
    passes_row_group: str | None = None  # 1 when the step may run with calls pending


_HANDS = "(p, g, s, v)"
_STEP = "(s, v)"

# The order fixes the numbers (1, 2, ...): program.c's cached build follows this table.
_KINDS: dict[str, KindSpec] = {
    "ELEMWISE": KindSpec(f"tj_elemwise{_HANDS}", "tj_broadcast_shape(s, v, s->ndim, shape)", "1"),
    # Not checked ahead: a max or min of nothing fails after its shapes passed.
    "REDUCE": KindSpec(f"tj_reduce{_HANDS}", passes_row_group="1"),
    "DIMSHUFFLE": KindSpec(f"tj_dimshuffle{_STEP}", passes_row_group="1"),
    "SUBTENSOR": KindSpec(f"tj_subtensor{_STEP}"),
    "DOT": KindSpec(f"tj_dot{_STEP}", "tj_dot_misfit(s, v)"),
    "GEMM": KindSpec(f"tj_gemm_ger{_STEP}", "tj_gemm_ger_misfit(s, v)"),
    "GER": KindSpec(f"tj_gemm_ger{_STEP}", "tj_gemm_ger_misfit(s, v)"),
    "ROWWISE": KindSpec(f"tj_rowwise{_STEP}"),
    "ALLOC": KindSpec(f"tj_alloc{_STEP}"),
    "SHAPE": KindSpec(f"tj_shape{_STEP}", passes_row_group="1"),
    "ARANGE": KindSpec(f"tj_arange{_STEP}"),
    "PAIR_TAKE": KindSpec(f"tj_pair_take{_STEP}"),
    "PAIR_SCATTER": KindSpec(f"tj_pair_scatter{_STEP}"),
    "PYTHON": KindSpec(f"tj_python{_STEP}"),
    "PENALISED": KindSpec(f"tj_penalised{_STEP}", "tj_gemm_ger_misfit(s, v)"),
    "INC_SUBTENSOR": KindSpec(f"tj_inc_subtensor{_STEP}"),
    # Copies a non-contiguous input: only a view of a C-contiguous one passes.
    "RESHAPE": KindSpec(
        f"tj_reshape{_STEP}",
        passes_row_group="PyArray_IS_C_CONTIGUOUS((PyArrayObject *)v[s->ops[0]])",
    ),
    "MAKE_VECTOR": KindSpec(f"tj_make_vector{_STEP}"),
    "NATIVE": KindSpec("tj_native(p, s, v)"),
}

StepKind = enum.IntEnum("StepKind", list(_KINDS), module=__name__)
StepKind.__doc__ = "The step kinds of program.c, numbered from 1 in declaration order."


def checked_kinds() -> frozenset[StepKind]:
    """Kinds whose failure conditions the runner checks ahead (commit.py's prechecks)."""
    return frozenset(StepKind[name] for name, spec in _KINDS.items() if spec.checked_by)


def c_declarations() -> str:
    """The C enum of the step kinds (program.c's ``step_kinds.h``)."""
    entries = ", ".join(f"TJ_{kind.name} = {int(kind)}" for kind in StepKind)
    return (
        f"/* Generated from steps.py. */\nenum {{ {entries} }};\n"
        f"#define TJ_N_KINDS {len(StepKind)}\n"
    )


def c_dispatch() -> str:
    """program.c's ``step_dispatch.h``: running a step, checking it ahead, and whether
    it may run inside a row group, one ``switch`` each from the table."""

    def switch(pick: Callable[[KindSpec], str | None], default: str) -> str:
        cases = [
            f"    case TJ_{name}: return {pick(spec)};"
            for name, spec in _KINDS.items()
            if pick(spec) is not None
        ]
        return "\n".join(["    switch (s->kind) {", *cases, f"    default: {default}", "    }"])

    return "\n".join(
        [
            "/* Generated from steps.py. */",
            "static int tj_run_step(const tj_program *p, tj_row_group *g, const tj_step *s,",
            "                       PyObject **v)",
            "{",
            switch(lambda spec: spec.run, "break;"),
            '    PyErr_Format(PyExc_ValueError, "unknown step kind %d", s->kind);',
            "    return TJ_ERROR;",
            "}",
            "",
            "/* 1 when a step would decline on the values it reads now (checked kinds). */",
            "static int tj_check(const tj_step *s, PyObject **v)",
            "{",
            "    int64_t shape[TJ_MAXDIM];",
            "    (void)shape;",
            switch(lambda spec: spec.checked_by, "return 0;"),
            "}",
            "",
            "/* 1 when a step may run while row-blocked calls are pending: it records calls,",
            "   or touches no elements; any other step first runs the group. */",
            "static int tj_row_passes(const tj_step *s, PyObject **v)",
            "{",
            "    (void)v;",
            switch(lambda spec: spec.passes_row_group, "return 0;"),
            "}",
            "",
        ]
    )


def _slots() -> list[int]:
    return []


@dataclass
class Step:
    """One program step as program.c's ``make`` reads it (``tj_step``'s fields; what
    each means for each kind is written there)."""

    kind: StepKind
    out: int  # the output slot (a Python or native step: its first output's)
    typenum: int = ANY_OBJECT  # the output's NumPy type number
    ndim: int = 0
    ops: list[int] = field(default_factory=_slots)  # operand slots
    fns: list[int] = field(default_factory=_slots)  # kernel addresses
    bcast: list[int] = field(default_factory=_slots)  # per operand: broadcast axes' bits
    full: list[int] = field(default_factory=_slots)
    target: int = -1  # the operand updated in place
    dims: list[int] = field(default_factory=_slots)  # static output lengths, -1 unknown
    axes: list[int] = field(default_factory=_slots)
    n_kept: int = 0
    dropped: list[int] = field(default_factory=_slots)
    needs_elements: int = 0
    destroys: int = 0  # 1 when it overwrites a value the call did not create
    free: list[int] = field(default_factory=_slots)  # slots dead after the step
    #: Python steps: ``thunk(inputs, cells)``, the node's own kernel
    thunk: Callable[[list, list], None] | None = None
    #: Python and native steps: every output as (slot, typenum or ANY_OBJECT, ndim)
    outs: list[tuple[int, int, int]] = field(default_factory=list)
    #: an elementwise step with several outputs: per output, the operand whose buffer
    #: it is written into, or -1 (empty: none in place)
    targets: list[int] = field(default_factory=_slots)
    #: C steps: (run the node's own kernel on its input values, their slots)
    fallback: tuple[Callable[[list], list], list[int]] | None = None
