"""Elementwise kernels in any dialect: the per-element function and the flat loop over
contiguous operands. The C backend adds its host-only entry points (streaming stores,
strided nested loops) around the same pieces."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from tensorjit.plugins.cstyle.dialect import Dialect
from tensorjit.plugins.cstyle.scalar import Emitter
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.scalar import ScalarOp

# An operand of a loop: (pointer name, dtype, kind, broadcast pattern); kind "scalar"
# holds one element for every index.
Operand = tuple[str, str, str, tuple[bool, ...]]


def element_function(
    dialect: Dialect,
    scalar_op: ScalarOp,
    in_dtypes: Sequence[str],
    out_dtype: str,
    kinds: Sequence[str],
    consts: dict[int, Any],
) -> tuple[list[str], str]:
    """The lines defining ``tj_f``, the value of one output element from one element
    of each variable input (constants are inlined), and the body alone (a dialect may
    add the helpers it calls)."""
    emitter, args, params = _element_emitter(dialect, in_dtypes, kinds, consts)
    result, dtype = emitter.emit(scalar_op, args, list(in_dtypes))
    t_out = dialect.type_name(out_dtype)
    body = "\n".join(emitter.lines)
    lines = [
        f"{dialect.function_qualifier} {t_out} tj_f({params}) {{",
        body,
        f"    return {dialect.convert(result, dtype, out_dtype)};",
        "}",
    ]
    return lines, body


def multi_element_function(
    dialect: Dialect,
    composite: Composite,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    kinds: Sequence[str],
    consts: dict[int, Any],
) -> tuple[list[str], str]:
    """As element_function, for a Composite with several outputs: ``tj_f`` returns a
    ``tj_fr`` whose fields ``r0, r1, ...`` are one element of each output (a struct the
    compiler keeps in registers once tj_f is inlined, so the loop still vectorises)."""
    emitter, args, params = _element_emitter(dialect, in_dtypes, kinds, consts)
    results = emitter.emit_outputs(composite, args, list(in_dtypes))
    body = "\n".join(emitter.lines)
    fields = " ".join(f"{dialect.type_name(dt)} r{k};" for k, dt in enumerate(out_dtypes))
    values = ", ".join(
        dialect.convert(name, dtype, dt) for (name, dtype), dt in zip(results, out_dtypes)
    )
    lines = [
        f"typedef struct {{ {fields} }} tj_fr;",
        f"{dialect.function_qualifier} tj_fr tj_f({params}) {{",
        body,
        f"    const tj_fr tj_result = {{ {values} }};",
        "    return tj_result;",
        "}",
    ]
    return lines, body


def _element_emitter(
    dialect: Dialect, in_dtypes: Sequence[str], kinds: Sequence[str], consts: dict[int, Any]
) -> tuple[Emitter, list[str], str]:
    """An emitter for an element function, its operands' names (constants as literals)
    and the function's parameter list (the variable operands)."""
    variable = [i for i, k in enumerate(kinds) if k != "const"]
    args = [
        dialect.literal(consts[i]) if kinds[i] == "const" else f"x{i}" for i in range(len(kinds))
    ]
    emitter = Emitter(dialect, {args[i]: consts[i].item() for i in consts})
    params = ", ".join(f"{dialect.type_name(in_dtypes[i])} x{i}" for i in variable) or "void"
    return emitter, args, params


def typed_operands(
    dialect: Dialect,
    ops: Sequence[Operand],
    out_ptr: str | Collection[str],
    single: set[str],
    restrict: bool,
    base: Callable[[str], str] = lambda name: name,
    indent: str = "    ",
) -> tuple[list[str], Callable[[str], dict[str, str]]]:
    """Declarations of the typed operand pointers of a loop over contiguous elements
    (operands in ``single`` hold one element, read once; each starts at ``base(name)``;
    ``out_ptr`` names the one written, or several), and a function giving each
    operand's load at an index."""
    written = {out_ptr} if isinstance(out_ptr, str) else set(out_ptr)
    g = dialect.global_qualifier and dialect.global_qualifier + " "
    setup = []
    for name, dt, *_ in ops:
        t, start = dialect.type_name(dt), base(name)
        if name in single and name not in written:
            setup.append(f"{indent}const {t} s_{name} = *(const {g}{t} *){start};")
        elif name in written:
            keyword = f"{dialect.restrict} " if restrict else ""
            setup.append(f"{indent}{g}{t} *{keyword}p_{name} = ({g}{t} *){start};")
        else:
            setup.append(f"{indent}const {g}{t} *p_{name} = (const {g}{t} *){start};")

    def load(index: str) -> dict[str, str]:
        return {
            name: f"s_{name}" if name in single and name not in written else f"p_{name}[{index}]"
            for name, *_ in ops
        }

    return setup, load


def contiguous_kernel(
    dialect: Dialect,
    name: str,
    ops: Sequence[Operand],
    out_ptr: str | Collection[str],
    restrict: bool,
    store: Callable[[dict[str, str], str], str],
) -> list[str]:
    """A kernel ``name(n, operand pointers...)`` computing ``n`` contiguous elements:
    the statement ``store(loads at i, "i")`` writes element i of each output, over the
    dialect's flat loop."""
    g = dialect.global_qualifier and dialect.global_qualifier + " "
    signature = ", ".join(f"{g}char *{op_name}" for op_name, *_ in ops)
    head = f"{dialect.kernel_qualifier} " if dialect.kernel_qualifier else ""
    scalars = {op_name for op_name, _, kind, _ in ops if kind == "scalar"}
    setup, load = typed_operands(dialect, ops, out_ptr, scalars, restrict)
    loop = dialect.flat_loop.format(i="i", n="n")
    return [
        f"{head}void {name}(int64_t n, {signature}) {{",
        *setup,
        f"    {loop} {store(load('i'), 'i')}",
        "}",
    ]
