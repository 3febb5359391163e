"""Whole-graph programs: one compiled callable running every node of a function.

A backend that can compile a whole graph (``Backend.whole_graph``) receives a
``GraphPlan`` and returns a *program*: ``program(values) -> list | None``. ``values``
holds one value per explicit input, in order, as given by the caller (not filtered);
shared variables are read from their storage cells at each call. The program returns
the value of every graph output (user outputs, then updates), or None, before computing
anything with side effects, when it can not run these values (an argument that is not
exactly an ndarray of the input's type, a shape error): the caller then takes the
general path, whose filters and per-node kernels give the usual conversions and errors.
A program whose ``takes_unfiltered`` is false (an input of a type it can not check
itself, such as a sparse matrix) is only given values already filtered by their types.

A program may also offer ``loop(n_steps, sequences, taps, carries, non_sequences, n_mit,
n_nit)``, running the step loop of a scan whose step function it is (the contract is in
tensorjit/scan/op.py and the C backend's program.c); it returns None where the caller's
own loop must run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorjit.core.registries import Backend, GraphPlan, Program

__all__ = ["GraphPlan", "Program", "ProgramVM", "whole_graph_program"]


def whole_graph_program(plan: GraphPlan, backends: Sequence[Backend]) -> Program | None:
    """The first program a backend (best first) offers for ``plan``, or None."""
    if not plan.nodes:
        return None
    for backend in backends:
        if backend.whole_graph is not None:
            program = backend.whole_graph(plan)
            if program is not None:
                return program
    return None


class ProgramVM:
    """Runs a program over the function's storage cells; when the program declines the
    values, the per-node VM runs them instead."""

    def __init__(self, program: Program, vm: Any, input_cells: list[list], output_cells: list):
        self.program = program
        self.vm = vm
        self._input_cells = input_cells
        self._output_cells = output_cells

    @property
    def storage(self) -> dict:
        return self.vm.storage

    @property
    def pool(self) -> dict:
        return self.vm.pool

    def free(self) -> None:
        self.vm.free()
        free_program = getattr(self.program, "free", None)
        if free_program is not None:  # (a launch plan's temporaries)
            free_program()

    def __call__(self) -> None:
        values = self.program([cell[0] for cell in self._input_cells])
        if values is None:
            self.vm()
            return
        for cell, value in zip(self._output_cells, values):
            cell[0] = value
