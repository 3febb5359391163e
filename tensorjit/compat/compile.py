"""``theano.function``, ``theano.Mode``, ``theano.Param`` and ``theano.grad`` with Theano's
signatures, on top of tensorjit's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorjit.compat.config import MODE_NAMES
from tensorjit.core.compile import FAST_COMPILE, FAST_RUN
from tensorjit.core.compile import Mode as _TJMode
from tensorjit.core.compile import function as _function
from tensorjit.core.compile.mode import get_mode as _get_mode
from tensorjit.core.memory import In, Out
from tensorjit.gradient import grad as _grad

__all__ = ["Mode", "Param", "function", "get_default_mode", "get_mode", "grad"]


def get_mode(mode: Any) -> _TJMode:
    """A tensorjit Mode for a Theano mode (a name, a Mode, or None for the default)."""
    if isinstance(mode, str):
        if mode not in MODE_NAMES:
            raise ValueError(
                f"theano mode {mode!r} is not supported by tensorjit yet "
                f"(supported: {sorted(MODE_NAMES)})"
            )
        mode = MODE_NAMES[mode]
    return _get_mode(mode)


def get_default_mode() -> _TJMode:
    return get_mode(None)


_OPTIMIZERS = {
    None: FAST_RUN,
    "default": FAST_RUN,
    "fast_run": FAST_RUN,
    "merge": FAST_COMPILE,
    "fast_compile": FAST_COMPILE,
    "None": FAST_COMPILE,
    "o4": FAST_RUN,
}


class _ModeFactory(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _TJMode)

    def __call__(cls, linker: Any = None, optimizer: Any = "default") -> _TJMode:
        if optimizer not in _OPTIMIZERS:
            raise ValueError(
                f"theano Mode(optimizer={optimizer!r}) is not supported by tensorjit yet"
            )
        mode = _OPTIMIZERS[optimizer]
        if linker == "py":
            mode = mode.with_backends("python")
        elif linker not in (None, "cvm", "vm", "c", "c|py", "cvm_nogc", "vm_nogc", "c|py_nogc"):
            raise ValueError(f"theano Mode(linker={linker!r}) is not supported by tensorjit yet")
        return mode


class Mode(metaclass=_ModeFactory):
    """``theano.Mode(linker, optimizer)`` builds a tensorjit Mode (``optimizer``:
    'fast_run'/'default' or 'fast_compile'/'None'; ``linker='py'``: Python kernels only).
    ``isinstance(m, theano.Mode)`` accepts tensorjit Modes."""


def Param(variable: Any, default: Any = None, name: str | None = None, **kwargs: Any) -> In:
    """Theano's deprecated ``Param(variable, default=...)``: an ``In`` with a value."""
    return In(variable, name=name, value=default, **kwargs)


def function(
    inputs: Sequence[Any],
    outputs: Any = None,
    mode: Any = None,
    updates: Any = None,
    givens: Any = None,
    no_default_updates: bool = False,
    accept_inplace: bool = False,
    name: str | None = None,
    rebuild_strict: bool = True,
    allow_input_downcast: bool | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
) -> Any:
    """``theano.function``; ``profile=True`` records a run-time profile
    (``f.profile.summary()``). With ``accept_inplace``, an input that a hand-built
    inplace op destroys is mutable, as in Theano (its graph set-up protected only the
    inputs nothing destroys): ``add_inplace(x, y)`` writes into the caller's x."""
    inputs = list(inputs)
    if accept_inplace:
        inputs = _destroyed_inputs_mutable(inputs, outputs, updates)
    return _function(
        inputs,
        outputs,
        updates=updates,
        givens=givens,
        mode=get_mode(mode),
        name=name,
        on_unused_input=on_unused_input,
        allow_input_downcast=allow_input_downcast,
        accept_inplace=accept_inplace,
        no_default_updates=no_default_updates,
        rebuild_strict=rebuild_strict,
        profile=None if profile is None else bool(profile),
    )


def _destroyed_inputs_mutable(inputs: list, outputs: Any, updates: Any) -> list:
    """``inputs`` with each plain variable that a node of the graph destroys directly
    given as ``In(var, mutable=True)``; an explicit ``In`` keeps its own setting."""
    from tensorjit.core.graph.basic import Variable
    from tensorjit.core.graph.traversal import toposort

    targets = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    targets = [t.variable if isinstance(t, Out) else t for t in targets if t is not None]
    if isinstance(updates, dict):
        targets += list(updates.values())
    elif updates:
        targets += [value for _, value in updates]
    targets = [t for t in targets if isinstance(t, Variable)]
    plain = {id(v): v for v in inputs if isinstance(v, Variable)}
    destroyed: set[int] = set()
    for node in toposort(targets, list(plain.values())):
        for indices in node.op.destroy_map.values():
            destroyed.update(id(node.inputs[i]) for i in indices if id(node.inputs[i]) in plain)
    return [In(v, mutable=True) if id(v) in destroyed else v for v in inputs]


def grad(
    cost: Any,
    wrt: Any,
    consider_constant: Any = None,
    disconnected_inputs: str = "raise",
    add_names: bool = True,
    known_grads: Any = None,
    return_disconnected: str = "zero",
    null_gradients: str = "raise",
) -> Any:
    """``theano.grad`` (``add_names`` is accepted and ignored;
    ``return_disconnected='Disconnected'`` gives None)."""
    if return_disconnected == "Disconnected":
        return_disconnected = "None"
    return _grad(
        cost,
        wrt,
        consider_constant=consider_constant,
        known_grads=known_grads,
        disconnected_inputs=disconnected_inputs,
        return_disconnected=return_disconnected,
        null_gradients=null_gradients,
    )
