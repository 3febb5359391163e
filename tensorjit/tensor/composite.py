"""Composite: several scalar ops fused into one, so one Elemwise node (one loop in a
compiled backend, one VM step here) computes a whole elementwise subgraph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.tensor.scalar import ScalarOp

# A program is a tuple of steps (scalar_op, args); an arg is ("in", i) for input i of the
# composite or ("step", j) for the result of step j. The last step is the output.
Program = tuple[tuple[ScalarOp, tuple[tuple[str, int], ...]], ...]


class Composite(ScalarOp):
    """A scalar function built from other scalar ops; equal if the programs are equal."""

    def __init__(self, program: Program, nin: int, out_dtype: str):
        self.program = program
        self.out_dtype = out_dtype
        names = ",".join(op.name for op, _ in program)
        super().__init__(f"Composite{{{names}}}", nin, self._evaluate)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Composite
            and self.program == other.program  # type: ignore[attr-defined]
            and self.nin == other.nin  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((Composite, self.program, self.nin))

    def output_dtype(self, dtypes: Sequence[str]) -> str:
        return self.out_dtype

    def _evaluate(self, *inputs: Any) -> Any:
        results: list[Any] = []
        last_use = self._last_use
        for j, (op, args) in enumerate(self.program):
            values = [inputs[i] if kind == "in" else results[i] for kind, i in args]
            results.append(op.impl(*values))
            for kind, i in args:  # drop intermediates as soon as they are no longer read
                if kind == "step" and last_use[i] == j:
                    results[i] = None
        return results[-1]

    @property
    def _last_use(self) -> list[int]:
        cached = self.__dict__.get("_last_use_cache")
        if cached is None:
            cached = [len(self.program)] * len(self.program)
            for j, (_, args) in enumerate(self.program):
                for kind, i in args:
                    if kind == "step":
                        cached[i] = j
            cached[-1] = len(self.program)
            self.__dict__["_last_use_cache"] = cached
        return cached

    def impl_into(self, inputs: Sequence[Any], out: np.ndarray) -> np.ndarray:
        out[...] = self._evaluate(*inputs)
        return out

    def grad(self, inputs, outputs, gz):
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError(
            "Composite ops appear after rewriting; differentiate the original graph"
        )
