"""``scan``: Theano's symbolic loop, built on the ``Scan`` op."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Constant, Variable
from tensorjit.core.graph.traversal import clone_replace, graph_inputs
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.scan.op import Scan


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _placeholder(type_, name: str | None) -> Variable:
    return type_.make_variable(name)


def _is_updates(x: Any) -> bool:
    if isinstance(x, Mapping):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], SharedVariable) for p in x
        )
    return False


def _split_return(ret: Any) -> tuple[list, list]:
    """fn may return outputs, an updates dict, or (outputs, updates) in either order."""
    if ret is None:
        return [], []
    if _is_updates(ret):
        return [], list(dict(ret).items()) if isinstance(ret, Mapping) else list(ret)
    if isinstance(ret, tuple) and len(ret) == 2:
        a, b = ret
        if _is_updates(b) and not isinstance(b, Variable):
            return _as_list(a), list(b.items()) if isinstance(b, Mapping) else list(b)
        if _is_updates(a) and not isinstance(a, Variable):
            return _as_list(b), list(a.items()) if isinstance(a, Mapping) else list(a)
    return _as_list(ret), []


def scan(
    fn: Callable[..., Any],
    sequences: Any = None,
    outputs_info: Any = None,
    non_sequences: Any = None,
    n_steps: Any = None,
    truncate_gradient: int = -1,
    go_backwards: bool = False,
    strict: bool = False,
    name: str | None = None,
) -> tuple[Any, OrderedDict]:
    """Apply ``fn`` repeatedly, Theano style; returns ``(outputs, updates)``.

    - ``sequences``: variables (or ``dict(input=x, taps=[...])``) iterated over their
      leading axis; a tap ``k`` gives ``fn`` the entry ``k`` steps ahead (negative: behind).
    - ``outputs_info``: per output, its initial value (``fn`` gets the previous value),
      ``dict(initial=x0, taps=[-2, -1])`` (``x0`` then has ``-min(taps)`` leading rows,
      ``fn`` gets each tap in the order given), or ``None`` (no recurrence).
    - ``non_sequences``: values passed unchanged to every step (after the above).
    - ``n_steps``: number of steps (int or symbolic); with sequences, the smallest of it
      and the sequences' lengths.
    - Shared variables ``fn`` uses become inputs of the loop; updates ``fn`` returns (and
      ``default_update``s of shared variables it uses, e.g. random streams) are carried
      from step to step; the final values come back in ``updates`` for ``function``.
    - ``go_backwards``: iterate over the sequences from the end (outputs stay in the
      order they were computed).
    - ``truncate_gradient``: backpropagate only through the last that many steps (-1: all).
    - ``strict``: every non-constant value ``fn`` uses must be passed explicitly.

    One output is returned as a variable, several as a list.
    """
    import tensorjit.tensor as T
    from tensorjit.tensor.variable import as_tensor_variable

    label = name or "scan"
    # ---------------------------------------------------------------- sequences
    seq_outer: list[Variable] = []  # one per (sequence, tap)
    seq_inner: list[Variable] = []
    fn_args: list[Variable] = []
    lengths: list[Variable] = []
    for j, entry in enumerate(_as_list(sequences)):
        if isinstance(entry, Mapping):
            x = entry.get("input")
            taps = list(entry.get("taps", [0]) or [0])
        else:
            x, taps = entry, [0]
        x = as_tensor_variable(x)
        if x.type.ndim < 1:
            raise TypeError(f"{label}: sequence {j} {x.describe()} has no axis to iterate over")
        if go_backwards:
            x = x[::-1]
        lo, hi = min(min(taps), 0), max(max(taps), 0)
        length = x.shape[0] - (hi - lo) if hi != lo else x.shape[0]
        lengths.append(length)
        step_type = T.TensorType(x.type.dtype, x.type.shape[1:])
        for tap in taps:
            start = tap - lo
            stop = hi - tap
            sliced = x[start : x.shape[0] - stop] if stop else x[start:]
            seq_outer.append(sliced)
            v = _placeholder(step_type, f"{x.name or f'seq{j}'}[t{tap:+d}]")
            seq_inner.append(v)
            fn_args.append(v)

    if n_steps is not None:
        n_var = as_tensor_variable(n_steps)
        if n_var.type.ndim != 0 or n_var.type.numpy_dtype.kind not in "iu":
            raise TypeError(f"{label}: n_steps must be an integer scalar, got {n_var.describe()}")
        lengths.append(T.cast(n_var, "int64"))
    if not lengths:
        raise ValueError(f"{label}: give sequences or n_steps")
    n = T.cast(lengths[0], "int64")
    for other in lengths[1:]:
        n = T.minimum(n, T.cast(other, "int64"))

    # ---------------------------------------------------------------- outputs_info
    infos = _as_list(outputs_info) if outputs_info is not None else None
    mit_specs: list[tuple[int, Variable, list[int], dict[int, Variable]]] = []
    out_kinds: list[Any] = []  # per fn output: ("mit", index) or ("nit",)
    for i, info in enumerate(infos or []):
        if isinstance(info, Mapping) and info.get("initial") is None:
            out_kinds.append(("nit",))
            continue
        if info is None:
            out_kinds.append(("nit",))
            continue
        if isinstance(info, Mapping):
            init = as_tensor_variable(info["initial"])
            taps = list(info.get("taps", [-1]) or [-1])
        else:
            init, taps = as_tensor_variable(info), [-1]
        if any(t >= 0 for t in taps):
            raise ValueError(f"{label}: output {i} taps must be negative, got {taps}")
        lag = -min(taps)
        if taps == [-1]:
            outer_init = T.expand_dims(init, 0)
            row_type = init.type
        else:
            if init.type.ndim < 1:
                raise TypeError(
                    f"{label}: output {i} with taps {taps} needs an initial value with "
                    f"{lag} leading rows, got {init.describe()}"
                )
            outer_init = init[:lag]
            row_type = T.TensorType(init.type.dtype, init.type.shape[1:])
        by_tap = {}
        for tap in sorted(set(taps)):
            by_tap[tap] = _placeholder(row_type, f"out{i}[t{tap}]")
        fn_args.extend(by_tap[t] for t in taps)
        out_kinds.append(("mit", len(mit_specs)))
        mit_specs.append((i, outer_init, sorted(set(taps)), by_tap))

    # ---------------------------------------------------------------- non_sequences
    explicit_nonseq_outer: list[Variable] = []
    explicit_nonseq_inner: list[Variable] = []
    for w in _as_list(non_sequences):
        if isinstance(w, SharedVariable):
            fn_args.append(w)  # collected below with the other shared variables
            continue
        w = as_tensor_variable(w) if not isinstance(w, Variable) else w
        if isinstance(w, Constant):
            fn_args.append(w)
            continue
        v = _placeholder(w.type, w.name)
        explicit_nonseq_outer.append(w)
        explicit_nonseq_inner.append(v)
        fn_args.append(v)
    explicit_shared = {w for w in _as_list(non_sequences) if isinstance(w, SharedVariable)}

    # ---------------------------------------------------------------- call fn
    raw_outs, raw_updates = _split_return(fn(*fn_args))
    outs = [as_tensor_variable(o) for o in raw_outs]
    if infos is None:
        out_kinds = [("nit",)] * len(outs)
    elif len(infos) != len(outs):
        raise ValueError(
            f"{label}: fn returned {len(outs)} outputs but outputs_info has {len(infos)} entries"
        )
    updates: list[tuple[SharedVariable, Variable]] = []
    for shared, expr in raw_updates:
        if not isinstance(shared, SharedVariable):
            raise TypeError(f"{label}: fn's updates must be keyed by shared variables")
        updates.append((shared, shared.type.filter_variable(expr)))
    # default_update of shared variables fn reads (random streams), Theano's convention
    updated = {s for s, _ in updates}
    while True:
        added = False
        for var in graph_inputs(outs + [u for _, u in updates]):
            default = getattr(var, "default_update", None)
            if isinstance(var, SharedVariable) and default is not None and var not in updated:
                updates.append((var, var.type.filter_variable(default)))
                updated.add(var)
                added = True
        if not added:
            break

    # Cast mit outputs to the dtype of their initial value where that is safe.
    for k, kind in enumerate(out_kinds):
        if kind[0] != "mit":
            continue
        _, _, _, by_tap = mit_specs[kind[1]]
        row = next(iter(by_tap.values()))
        o = outs[k]
        if o.type.ndim != row.type.ndim:
            raise TypeError(
                f"{label}: output {k} has {o.type.ndim} dimensions, but its initial value "
                f"gives rows of {row.type.ndim} ({row.type})"
            )
        if o.type.dtype != row.type.dtype:
            if np.can_cast(o.type.dtype, row.type.dtype, "same_kind"):
                outs[k] = T.cast(o, row.type.dtype)
            else:
                raise TypeError(
                    f"{label}: output {k} has dtype {o.type.dtype}, but its initial value "
                    f"has dtype {row.type.dtype}; cast one of them"
                )

    # ---------------------------------------------------------------- free variables
    ours = set(seq_inner) | set(explicit_nonseq_inner)
    for _, _, _, by_tap in mit_specs:
        ours.update(by_tap.values())
    carry_outer: list[SharedVariable] = []
    carry_inner: list[Variable] = []
    carry_new: list[Variable] = []
    implicit_outer: list[Variable] = []
    implicit_inner: list[Variable] = []
    replace: dict[Variable, Variable] = {}
    for shared, expr in updates:
        v = shared.clone()
        carry_outer.append(shared)
        carry_inner.append(v)
        carry_new.append(expr)
        replace[shared] = v
    for var in graph_inputs(outs + carry_new):
        if var in ours or var in replace or isinstance(var, Constant):
            continue
        if strict and not (isinstance(var, SharedVariable) and var in explicit_shared):
            raise ValueError(
                f"{label}: strict=True but fn uses {var.describe()}, which is not passed in "
                "sequences, outputs_info or non_sequences"
            )
        v = var.clone()
        implicit_outer.append(var)
        implicit_inner.append(v)
        replace[var] = v
    all_inner_outs = outs + carry_new
    if replace and all_inner_outs:
        all_inner_outs, _ = clone_replace(all_inner_outs, replace)
    outs, carry_new = all_inner_outs[: len(outs)], all_inner_outs[len(outs) :]

    # ---------------------------------------------------------------- build the op
    mit_out_idx = [k for k, kind in enumerate(out_kinds) if kind[0] == "mit"]
    nit_out_idx = [k for k, kind in enumerate(out_kinds) if kind[0] == "nit"]
    inner_inputs = list(seq_inner)
    for _, _, taps, by_tap in mit_specs:
        inner_inputs.extend(by_tap[t] for t in taps)
    inner_inputs += carry_inner + explicit_nonseq_inner + implicit_inner
    inner_outputs = [outs[k] for k in mit_out_idx] + [outs[k] for k in nit_out_idx] + carry_new
    op = Scan(
        inner_inputs,
        inner_outputs,
        len(seq_inner),
        [taps for _, _, taps, _ in mit_specs],
        len(nit_out_idx),
        len(carry_inner),
        len(explicit_nonseq_inner) + len(implicit_inner),
        truncate_gradient,
        name,
    )
    if not inner_outputs:
        return [], OrderedDict()
    results = op(
        n,
        *seq_outer,
        *(init for _, init, _, _ in mit_specs),
        *carry_outer,
        *explicit_nonseq_outer,
        *implicit_outer,
    )
    if isinstance(results, Variable):
        results = [results]
    per_output: list[Variable] = [None] * len(outs)  # type: ignore[list-item]
    for h, k in enumerate(mit_out_idx):
        lag = op.lags[h]
        per_output[k] = results[h][lag:]
    for j, k in enumerate(nit_out_idx):
        per_output[k] = results[len(mit_out_idx) + j]
    for var, k in zip(per_output, range(len(outs))):
        if var.name is None and name:
            var.name = f"{name}.out{k}" if len(outs) > 1 else name
    finals = results[len(mit_out_idx) + len(nit_out_idx) :]
    new_updates = OrderedDict(zip(carry_outer, finals))
    if len(per_output) == 1:
        return per_output[0], new_updates
    return per_output, new_updates
