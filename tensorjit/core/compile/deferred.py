"""Checks a kernel defers to later in the same call.

A device kernel that detects bad input (an index out of bounds) sets a flag on the
device; reading it at once would wait for the device after every such launch. Instead
the kernel defers the read: the VM runs pending checks before the first step that
overwrites a function input (a shared variable, a mutable argument), so bad input never
reaches them, and at the end of the call. A call that fails discards what is pending.
Checks are per thread (each thread's call runs its own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_local = threading.local()


def defer(check: Callable[[], None], reset: Callable[[], None] | None = None) -> None:
    """Run ``check`` (which raises on bad input) later in this call; ``reset`` runs
    instead if the call fails first (to clear what the check would have read)."""
    checks = getattr(_local, "checks", None)
    if checks is None:
        _local.checks = checks = []
    checks.append((check, reset))


def pending() -> bool:
    return bool(getattr(_local, "checks", None))


def run_pending() -> None:
    """Run (and forget) the pending checks; an error they raise is marked deferred (the
    step running when it is raised did not cause it)."""
    checks, _local.checks = _local.checks, None
    for k, (check, _) in enumerate(checks):
        try:
            check()
        except Exception as exc:
            _reset(checks[k + 1 :])
            exc.tensorjit_explained = True  # type: ignore[attr-defined]
            raise


def suspend() -> list | None:
    """Set aside the checks pending now (an enclosing call's, for a function called
    inside another's call), so that this call runs, or discards, only its own."""
    checks, _local.checks = getattr(_local, "checks", None), None
    return checks


def resume(saved: list | None) -> None:
    """Put back what ``suspend`` set aside, before any checks pending now."""
    if saved:
        _local.checks = saved + (getattr(_local, "checks", None) or [])


def discard() -> None:
    """Forget the pending checks of a call that failed, resetting what they would read."""
    checks, _local.checks = getattr(_local, "checks", None), None
    _reset(checks or [])


def _reset(checks: list) -> None:
    for _, reset in checks:
        if reset is not None:
            reset()
