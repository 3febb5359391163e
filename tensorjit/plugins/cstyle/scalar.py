"""The scalar-expression renderer: a scalar op (or a fused Composite) on C-like
expressions, in any dialect. Semantics follow NumPy: values are converted to the dtype
NumPy computes in, comparisons and ``switch`` give bools, integer division and modulo
round toward minus infinity (through the dialect's ``tj_floordiv_*``/``tj_mod_*``
helpers), maximum/minimum propagate NaN."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.plugins.cstyle.dialect import Dialect, Unsupported
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.scalar import Cast, ScalarOp

COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "neq": "!="}
BITWISE = {"and_": "&", "or_": "|", "xor": "^"}
# Names the renderer handles itself, whatever the dialect's math functions.
CORE_NAMES = (
    {"add", "sub", "mul", "true_div", "int_div", "mod", "pow", "neg", "abs", "sign", "sqr"}
    | {"maximum", "minimum", "floor", "ceil", "trunc", "switch", "invert", "clip"}
    | {"arctan2", "round_half_to_even", "round_half_away_from_zero"}
    | set(COMPARE)
    | set(BITWISE)
)


def supported_names(dialect: Dialect) -> set[str]:
    return CORE_NAMES | set(dialect.unary) | set(dialect.helpers) | set(dialect.double_only)


def _small_int(value: Any) -> bool:
    return value is not None and float(value).is_integer() and 0 <= float(value) <= 64


def scalar_expr(
    op: ScalarOp,
    args: Sequence[str],
    dtypes: Sequence[str],
    dialect: Dialect,
    values: dict | None = None,
) -> tuple[str, str]:
    """(expression, its dtype) for ``op`` applied to expressions of ``dtypes``;
    ``values`` maps the expressions of inlined constants to their values."""
    out = op.output_dtype(list(dtypes))
    t_out = dialect.type_name(out)
    for d in dtypes:
        dialect.type_name(d)
    cv = dialect.convert
    if isinstance(op, Cast):
        return cv(args[0], dtypes[0], out), out
    if type(op) is not ScalarOp or op.name not in supported_names(dialect):
        raise Unsupported(f"scalar op {op.name}")
    name = op.name
    if name in COMPARE:
        compute = np.result_type(*dtypes).name
        if {"int64", "uint64"} <= set(dtypes) or compute not in dialect.type_names:
            raise Unsupported(f"{name} of {dtypes}")
        a, b = (cv(x, d, compute) for x, d in zip(args, dtypes))
        return f"({a} {COMPARE[name]} {b})", "bool"
    if name == "switch":
        c = cv(args[0], dtypes[0], "bool")
        a, b = (cv(x, d, out) for x, d in zip(args[1:], dtypes[1:]))
        return f"({c} ? {a} : {b})", out
    kind = np.dtype(out).kind
    v = [cv(x, d, out) for x, d in zip(args, dtypes)]
    sfx = dialect.suffix(out)
    known = values or {}
    if name in ("add", "mul") and kind == "b":
        # NumPy's bool sum and product are "or" and "and": where bool is a byte (the
        # devices' uchar), True + True would store 2
        expr = f"({v[0]} {dict(add='||', mul='&&')[name]} {v[1]})"
    elif name in ("add", "sub", "mul"):
        expr = f"({v[0]} {dict(add='+', sub='-', mul='*')[name]} {v[1]})"
    elif name == "sqr":
        expr = f"({v[0]} * {v[0]})"
    elif name == "true_div" and kind == "f":
        expr = f"({v[0]} / {v[1]})"
    elif name in ("int_div", "mod"):
        fn = "floordiv" if name == "int_div" else "mod"
        if kind == "f":
            expr = f"tj_{fn}_{sfx}({v[0]}, {v[1]})"
        elif kind in "iu":
            expr = f"tj_{fn}_{kind}({v[0]}, {v[1]})"
        else:
            raise Unsupported(f"{name} of {dtypes}")
    elif name == "pow" and kind == "f" and dialect.powi and _small_int(known.get(args[1])):
        expr = dialect.powi(v[0], int(known[args[1]]), t_out)
    elif name == "pow" and kind == "f":
        expr = f"{dialect.math('pow', out)}({v[0]}, {v[1]})"
    elif name == "neg" and kind in "iuf":
        expr = f"(-{v[0]})"
    elif name == "abs":
        if kind == "f":
            expr = f"{dialect.math('fabs', out)}({v[0]})"
        elif kind == "i":
            expr = f"({v[0]} < 0 ? -{v[0]} : {v[0]})"
        else:
            expr = v[0]
    elif name == "sign" and kind in "iuf":
        x = v[0]
        if kind == "f":
            expr = f"({x} > 0 ? 1 : ({x} < 0 ? -1 : {x}))"
        elif kind == "i":
            expr = f"(({x} > 0) - ({x} < 0))"
        else:
            expr = f"({x} > 0)"
    elif name in dialect.unary and kind == "f":
        expr = f"{dialect.math(dialect.unary[name], out)}({v[0]})"
    elif name == "arctan2" and kind == "f":
        expr = f"{dialect.math('atan2', out)}({v[0]}, {v[1]})"
    elif name in ("floor", "ceil", "trunc", "round_half_to_even", "round_half_away_from_zero"):
        # Integers (and bools) keep their value and dtype, as numpy.round and np.trunc.
        if kind != "f":
            expr = v[0]
        elif name in dialect.helpers:
            expr = f"tj_{dialect.helpers[name]}_{sfx}({v[0]})"
        elif name == "round_half_away_from_zero":
            raise Unsupported(f"{name} in {dialect.name}")
        else:  # rint: half to even under the default rounding mode, as numpy.round
            expr = f"{dialect.math('rint' if name.startswith('round') else name, out)}({v[0]})"
    elif name in dialect.helpers and kind == "f":
        expr = f"tj_{dialect.helpers[name]}_{sfx}({v[0]})"
    elif name in dialect.double_only and kind == "f":
        expr = f"{dialect.double_only[name]}({v[0]})"
    elif name == "clip" and kind == "f":
        expr = f"tj_clip_{sfx}({v[0]}, {v[1]}, {v[2]})"
    elif name == "clip":  # integers and bools: no NaN; a bound wins a tie as for floats
        low = f"({v[0]} > {v[1]} ? {v[0]} : {v[1]})"
        expr = f"({low} < {v[2]} ? {low} : {v[2]})"
    elif name == "maximum":
        expr = f"(({v[0]} >= {v[1]} || {v[0]} != {v[0]}) ? {v[0]} : {v[1]})"
    elif name == "minimum":
        expr = f"(({v[0]} <= {v[1]} || {v[0]} != {v[0]}) ? {v[0]} : {v[1]})"
    elif name in BITWISE and kind in "iub":
        expr = f"({v[0]} {BITWISE[name]} {v[1]})"
    elif name == "invert" and kind in "iub":
        expr = f"(!{v[0]})" if kind == "b" else f"(~{v[0]})"
    else:
        raise Unsupported(f"{name} of {dtypes}")
    return f"(({t_out}){expr})", out


class Emitter:
    """Turns a scalar op (a Composite inlined step by step) into statements that each
    define one ``const`` value, in ``dialect``."""

    def __init__(self, dialect: Dialect, values: dict[str, object]) -> None:
        self.dialect = dialect
        self.lines: list[str] = []
        self.count = 0
        self.values = values

    def emit(self, op: ScalarOp, args: list[str], dtypes: list[str]) -> tuple[str, str]:
        if isinstance(op, Composite):
            return self.emit_outputs(op, args, dtypes)[0]
        expr, dtype = scalar_expr(op, args, dtypes, self.dialect, self.values)
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"    const {self.dialect.type_name(dtype)} {name} = {expr};")
        return name, dtype

    def emit_outputs(
        self, op: Composite, args: list[str], dtypes: list[str]
    ) -> list[tuple[str, str]]:
        """A Composite inlined step by step: (name, dtype) of each of its outputs."""
        values: list[tuple[str, str]] = []
        for step_op, refs in op.program:
            step_args = [(args[i], dtypes[i]) if k == "in" else values[i] for k, i in refs]
            values.append(self.emit(step_op, [a for a, _ in step_args], [d for _, d in step_args]))
        return [values[k] for k in op.outputs]
