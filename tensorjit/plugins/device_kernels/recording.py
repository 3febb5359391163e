"""One kernel's device work, recorded as it runs: what a launch plan replays.

A device runtime reports each allocation (``empty``) and each launch it makes to the
recording active on the calling thread, if any; the launch plan (launch_plan.py) turns
a node's recording into launches it can repeat with other buffers. Nothing is recorded
outside ``recording()``, and recording costs a thread-local lookup per launch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tensorjit.core.compile import deferred

_ACTIVE = threading.local()


@dataclass(frozen=True)
class Launch:
    """A launch as the runtime made it: ``runtime.enqueue(kernel, geometry, args)``
    repeats it (``geometry`` is the runtime's own: global and local sizes for OpenCL,
    blocks and threads for CUDA)."""

    kernel: Any
    geometry: tuple
    args: tuple


@dataclass
class Recording:
    """The arrays a kernel allocated and the launches it made, in order; the arrays it
    keeps from call to call and hands its launches (an error flag); the checks it
    deferred (core/compile/deferred.py), as ``(check, reset)``."""

    allocations: list[Any] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    kept: list[Any] = field(default_factory=list)
    checks: list[tuple[Any, Any]] = field(default_factory=list)


def active() -> Recording | None:
    """The recording of this thread, while one is open."""
    return getattr(_ACTIVE, "recording", None)


@contextmanager
def recording() -> Iterator[Recording]:
    """Record this thread's device work until the block ends."""
    previous = active()
    _ACTIVE.recording = record = Recording()
    try:
        yield record
    finally:
        _ACTIVE.recording = previous


def note_launch(kernel: Any, geometry: tuple, args: tuple) -> None:
    """Called by a runtime for each launch it enqueues."""
    record = getattr(_ACTIVE, "recording", None)
    if record is not None:
        record.launches.append(Launch(kernel, geometry, args))


def note_allocation(value: Any) -> None:
    """Called by a runtime for each array its ``empty`` makes."""
    record = getattr(_ACTIVE, "recording", None)
    if record is not None:
        record.allocations.append(value)


def note_kept(value: Any) -> None:
    """Called by a kernel for an array of its own that it hands its launches every call
    (a replay hands them the same array)."""
    record = getattr(_ACTIVE, "recording", None)
    if record is not None and all(value is not kept for kept in record.kept):
        record.kept.append(value)


def defer(check: Callable[[], None], reset: Callable[[], None]) -> None:
    """Defer ``check`` in this call (core/compile/deferred.py), and note it in the
    recording, if one is open: a replay defers it again."""
    deferred.defer(check, reset)
    record = getattr(_ACTIVE, "recording", None)
    if record is not None:
        record.checks.append((check, reset))
