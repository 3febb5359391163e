"""How a compiled function's call runs: one path, filter -> run -> commit.

- **filter**: the arguments into the inputs' types. A whole-graph program filters its
  array arguments itself (natively) and declines, returning None, what it can not take;
  Python scalars are then filtered here and offered to it again. Whatever it still
  declines, and every call of a function without a plain program (borrowed inputs,
  DebugMode's checks, outputs by name), is filtered into the storage cells by the
  memory plan. Internal callers (a loop's steps: ``trusted``) pass values already of
  the inputs' types and skip filtering.
- **run**: the whole-graph program on the values, or the VM (per node, or in program
  segments) in the function's storage cells.
- **commit**: the updates stored, the outputs copied where the memory plan says (not
  for trusted callers, which copy what they keep), a single output unpacked.

Calls of a function with updates run whole under the lock: two calls must not both read
a weight (a random stream's state) before either stores the next one. The cells are
shared by every call, so the per-node path always holds it. With profiling enabled,
each call is timed as a whole around all of this.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.compile.profiling import ProfileStats
from tensorjit.core.graph.type import PYTHON_SCALARS
from tensorjit.core.memory.plan import MemoryPlan


class CallPath:
    """The calls of one compiled function (see the module docstring)."""

    def __init__(
        self,
        memory: MemoryPlan,
        vm: Any,
        program: Any,
        checker: Any,
        profile: ProfileStats,
        unpack_single: bool,
    ):
        self.memory = memory
        self.vm = vm
        self.checker = checker
        self.profile = profile
        self.unpack_single = unpack_single
        self.n_inputs = len(memory.input_cells)
        self.lock = threading.RLock()
        #: the whole-graph program, if the function has one
        self.program = program
        #: the program when calls may go to it with the user's arguments as given (the
        #: memory plan is plain: no borrowed inputs, nothing to check around it; the
        #: program checks every argument itself)
        self.direct = (
            program
            if checker is None and memory.plain and getattr(program, "takes_unfiltered", True)
            else None
        )
        #: whole calls under the lock (see the module docstring)
        self.locked = memory.has_updates
        #: a program with Python steps that update shared values on the per-node path:
        #: trusted calls take the cells' way, under the lock
        self.serial = bool(memory.has_updates and getattr(program, "runs_python", 0))

    def use_program(self, program: Any) -> None:
        """Run ``program`` (the profiler's timed one) where the program ran."""
        if self.direct is not None:
            self.direct = program
        self.program = program

    def call_by_name(self) -> None:
        """Outputs come back by name (a dict is built from the list): the per-node path."""
        self.direct = None

    # ---------------------------------------------------------------- the user's calls
    def timed(self, args: tuple, kwargs: dict, trust_input: bool) -> Any:
        """``run``, timed as a whole into the profile (functions compiled with
        ``profile=True`` call this instead)."""
        started = time.perf_counter()
        try:
            return self.run(args, kwargs, trust_input)
        finally:
            self.profile.calls += 1
            self.profile.call_seconds += time.perf_counter() - started

    def run(self, args: tuple, kwargs: dict, trust_input: bool) -> Any:
        """A user's call: the outputs as the function returns them."""
        memory = self.memory
        if memory.destroyed_shared_cells:
            memory.copy_read_only_destroyed()
        program = self.direct
        given = not kwargs and len(args) == self.n_inputs
        if program is not None and given:
            if self.locked:
                with self.lock:
                    outputs, args = self._on_program(program, args)
            else:
                outputs, args = self._on_program(program, args)
            if outputs is not None:
                return outputs
        if trust_input and self.checker is None and given:
            outputs = self.trusted(args)
        else:
            outputs = self._on_cells(args, kwargs)
        return outputs[0] if self.unpack_single else outputs

    def _on_program(self, program: Any, args: tuple) -> tuple[Any, tuple]:
        """(the committed outputs, or None where the program declined the arguments;
        the arguments for the cells' path, with any scalars already filtered: they are
        not filtered, nor warned about, twice)."""
        values = program(args)
        if values is None:  # e.g. a Python int for a minibatch index (the tutorials')
            filtered = self._scalars_filtered(args)
            if filtered is not None:
                args, values = filtered, program(filtered)
        if values is None:
            return None, args
        if self.memory.has_updates:
            values = self.memory.store_updates(values)
        return (values[0] if self.unpack_single else values), args

    def _scalars_filtered(self, args: tuple) -> tuple | None:
        """``args`` with their Python and NumPy scalars filtered into arrays (a program
        takes arrays only); None when no argument is a scalar or one does not convert
        (the cells' path words the error)."""
        filtered, scalars = list(args), 0
        plain = self.memory.plain_filters
        if plain is None:
            return None  # (only functions without borrowed inputs take this path)
        try:
            for k, value in enumerate(args):
                if type(value) in PYTHON_SCALARS or isinstance(value, np.generic):
                    filter_value, strict, allow_downcast = plain[k]
                    filtered[k] = filter_value(value, strict, allow_downcast)
                    scalars += 1
        except (TypeError, ValueError):
            return None
        return tuple(filtered) if scalars else None

    def _on_cells(self, args: tuple, kwargs: dict) -> list[Any]:
        """Filter into the storage cells, run the VM there, commit (one call at a time:
        the cells are the function's)."""
        memory, checker = self.memory, self.checker
        with self.lock:
            try:
                memory.load_arguments(args, kwargs)
                if memory.borrowed_output_cells:
                    memory.release_borrowed_buffers([c[0] for c in memory.input_cells])
                if checker is not None:
                    snapshot = [v.type.copy_value(c[0]) for v, c in memory.all_input_cells]
                self.vm()
                if checker is not None:
                    checker.check(snapshot)
                values = [cell[0] for cell in memory.output_cells]
            finally:
                memory.clear()
            return memory.store_updates(memory.copy_outputs(values))

    # ---------------------------------------------------------------- internal callers
    def trusted(self, values: Sequence[Any], returned: Sequence[int] | None = None) -> list[Any]:
        """A call whose ``values`` are already of the inputs' types, one per input (see
        ``Function.call_trusted``): no filtering, the outputs not copied."""
        memory = self.memory
        if memory.destroyed_shared_cells:
            memory.copy_read_only_destroyed()
        program = self.program  # its outputs are new arrays: no borrowed buffer to spare
        if program is not None and not self.serial:
            results = program(values)
            if results is not None:  # without updates: exactly the outputs
                return memory.store_updates(results) if memory.has_updates else results
        with self.lock:
            memory.set_trusted_arguments(values)
            if memory.borrowed_output_cells:
                memory.release_borrowed_buffers(
                    values if returned is None else [values[i] for i in returned]
                )
            try:
                self.vm()
                results = [cell[0] for cell in memory.output_cells]
            finally:
                memory.clear()
            return memory.store_updates(results)

    def loop(self) -> Any:
        """The ``loop`` of the whole-graph program (core/compile/program.py) when there
        is one and the function updates nothing; else None."""
        if self.program is None or self.memory.updated_shared or self.checker is not None:
            return None
        return getattr(self.program, "loop", None)
