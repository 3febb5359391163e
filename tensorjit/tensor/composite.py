"""Composite: several scalar ops fused into one, so one Elemwise node (one loop in a
compiled backend, one VM step here) computes a whole elementwise subgraph. A composite
with several outputs (``outputs``: the steps whose values leave it) serves a
MultiOutputElemwise node: one loop writing each of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.tensor.scalar import ScalarOp

# A program is a tuple of steps (scalar_op, args); an arg is ("in", i) for input i of the
# composite or ("step", j) for the result of step j. The last step is the output.
# Below this many elements, reusing a working buffer costs more than it saves.
REUSE_THRESHOLD = 4096

Program = tuple[tuple[ScalarOp, tuple[tuple[str, int], ...]], ...]


class Composite(ScalarOp):
    """A scalar function built from other scalar ops; equal if the programs are equal."""

    def __init__(
        self,
        program: Program,
        nin: int,
        out_dtype: str,
        outputs: tuple[int, ...] | None = None,
        out_dtypes: tuple[str, ...] | None = None,
    ):
        """``outputs``/``out_dtypes``: the steps whose values are outputs and their
        dtypes (default: the last step, of ``out_dtype``)."""
        self.program = program
        self.outputs = (len(program) - 1,) if outputs is None else tuple(outputs)
        self.out_dtypes = (out_dtype,) if out_dtypes is None else tuple(out_dtypes)
        if len(self.out_dtypes) != len(self.outputs):
            raise ValueError("a Composite needs one dtype per output")
        self.out_dtype = self.out_dtypes[0]
        self.nout = len(self.outputs)
        names = ",".join(op.name for op, _ in program)
        if self.nout > 1:
            names += f"->{self.nout}"
        super().__init__(f"Composite{{{names}}}", nin, self._evaluate)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Composite
            and self.program == other.program  # type: ignore[attr-defined]
            and self.nin == other.nin  # type: ignore[attr-defined]
            and self.outputs == other.outputs  # type: ignore[attr-defined]
            and self.out_dtypes == other.out_dtypes  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((Composite, self.program, self.nin, self.outputs))

    def output_dtype(self, dtypes: Sequence[str]) -> str:
        return self.out_dtype

    def _evaluate(self, *inputs: Any, out: np.ndarray | None = None) -> Any:
        """Run the program (the output's value; a tuple of them with several). For large
        arrays, steps write into working buffers whose previous value is no longer read
        (``out`` first, then intermediates adopted as buffers): a chain then needs no
        temporary at all, any program only a few."""
        results: list[Any] = []
        last_use = self._last_use
        reuse = getattr(out, "size", 0) >= REUSE_THRESHOLD or any(
            getattr(v, "size", 0) >= REUSE_THRESHOLD for v in inputs
        )
        # Working buffers and who lives in each: ("in", i) for input i (inplace), a step,
        # or None (free).
        buffers: list[list[Any]] = []
        if out is not None:
            owner = next((("in", i) for i, v in enumerate(inputs) if v is out), None)
            buffers.append([out, owner])
        for j, (op, args) in enumerate(self.program):
            values = [inputs[i] if kind == "in" else results[i] for kind, i in args]
            if reuse and isinstance(op.impl, np.ufunc):
                # A buffer must have the step's own shape and dtype (an int8 or bool
                # intermediate must not be computed in a float buffer).
                shape = np.broadcast_shapes(*(np.shape(v) for v in values))
                dtype = np.dtype(op.output_dtype([np.asarray(v).dtype.name for v in values]))
                slot = next(
                    (
                        b
                        for b in buffers
                        if b[0].shape == shape
                        and b[0].dtype == dtype
                        and (b[1] is None or self._last_read(b[1]) <= j)
                    ),
                    None,
                )
                if slot is not None:
                    results.append(op.impl(*values, out=slot[0], casting="unsafe"))
                    slot[1] = ("step", j)
                    continue
            result = op.impl(*values)
            results.append(result)
            if reuse and isinstance(result, np.ndarray) and result.size >= REUSE_THRESHOLD:
                buffers.append([result, ("step", j)])  # adopt it as a working buffer
            for kind, i in args:  # drop intermediates as soon as they are no longer read
                if kind == "step" and last_use[i] == j:
                    results[i] = None
        if self.nout > 1:
            return tuple(results[k] for k in self.outputs)
        return results[-1]

    def _last_read(self, owner: tuple[str, int]) -> int:
        kind, i = owner
        if kind == "in":
            return self._input_last_use[i]
        return self._last_use[i]

    @property
    def _input_last_use(self) -> list[int]:
        cached = self.__dict__.get("_input_last_use_cache")
        if cached is None:
            cached = [-1] * self.nin
            for j, (_, args) in enumerate(self.program):
                for kind, i in args:
                    if kind == "in":
                        cached[i] = j
            self.__dict__["_input_last_use_cache"] = cached
        return cached

    @property
    def _last_use(self) -> list[int]:
        cached = self.__dict__.get("_last_use_cache")
        if cached is None:
            cached = [len(self.program)] * len(self.program)
            for j, (_, args) in enumerate(self.program):
                for kind, i in args:
                    if kind == "step":
                        cached[i] = j
            for k in self.outputs:  # outputs live to the end: no step overwrites them
                cached[k] = len(self.program)
            self.__dict__["_last_use_cache"] = cached
        return cached

    def output_cones(self) -> list[tuple[frozenset[int], frozenset[int]]]:
        """Per output, (the inputs its value reads, the steps it takes), transitively."""
        cones: list[tuple[frozenset[int], frozenset[int]]] = []
        for j, (_, args) in enumerate(self.program):
            ins = {i for kind, i in args if kind == "in"}
            steps = {j}
            for kind, i in args:
                if kind == "step":
                    ins |= cones[i][0]
                    steps |= cones[i][1]
            cones.append((frozenset(ins), frozenset(steps)))
        return [cones[k] for k in self.outputs]

    def impl_into(self, inputs: Sequence[Any], out: np.ndarray) -> np.ndarray:
        result = self._evaluate(*inputs, out=out)
        if result is not out:
            out[...] = result
        return out

    def grad(self, inputs, outputs, gz):
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError(
            "Composite ops appear after rewriting; differentiate the original graph"
        )
