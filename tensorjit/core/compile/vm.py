"""The virtual machine: runs one thunk per node in order and frees temporaries early."""

from __future__ import annotations

from collections.abc import Sequence

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.registries import Kernel


class VM:
    """Runs ``nodes`` (already scheduled) with their kernels over storage cells.

    ``storage`` maps every variable to a one-element list. Cells of inputs are filled by
    the caller; cells of intermediate results are cleared right after their last use
    (when ``allow_gc``), so peak memory follows the live set, not the graph size.
    """

    def __init__(
        self,
        nodes: Sequence[Apply],
        kernels: Sequence[Kernel],
        storage: dict[Variable, list],
        keep: set[Variable],
        allow_gc: bool = True,
    ):
        self.nodes = list(nodes)
        self.kernels = list(kernels)
        self.storage = storage
        last_use: dict[Variable, int] = {}
        for step, node in enumerate(self.nodes):
            for inp in node.inputs:
                last_use[inp] = step
        clear_after: list[list[list]] = [[] for _ in self.nodes]
        if allow_gc:
            for var, step in last_use.items():
                if var.owner is not None and var not in keep and not isinstance(var, Constant):
                    clear_after[step].append(storage[var])
            # Outputs nobody reads (e.g. an unused second output) are freed at once.
            for step, node in enumerate(self.nodes):
                for out in node.outputs:
                    if out not in last_use and out not in keep:
                        clear_after[step].append(storage[out])
        self._temporary_cells = [
            cell for var, cell in storage.items() if var.owner is not None and var not in keep
        ]
        self.steps = [
            (
                kernel.factory(node),
                [storage[i] for i in node.inputs],
                [storage[o] for o in node.outputs],
                clear_after[step],
            )
            for step, (node, kernel) in enumerate(zip(self.nodes, self.kernels))
        ]

    def __call__(self) -> None:
        step = -1
        try:
            for step, (run, in_cells, out_cells, to_clear) in enumerate(self.steps):  # noqa: B007
                run([cell[0] for cell in in_cells], out_cells)
                for cell in to_clear:
                    cell[0] = None
        except Exception as exc:
            for cell in self._temporary_cells:  # a failed call keeps no value alive
                cell[0] = None
            raise self._with_context(exc, step) from None

    def _with_context(self, exc: Exception, step: int) -> Exception:
        """The same kind of error, its message extended with the failing node's story."""
        node = self.nodes[step]
        _, in_cells, _, _ = self.steps[step]
        described = []
        for var, cell in zip(node.inputs, in_cells):
            value = cell[0]
            shape = getattr(value, "shape", None)
            dtype = getattr(value, "dtype", None)
            described.append(f"{var} (shape={shape}, dtype={dtype})")
        created = node.outputs[0].created_at or "unknown"
        note = (
            f"while computing {node.op} [kernel {self.kernels[step].name}], node created at "
            f"{created}\n  inputs: {', '.join(described)}"
        )
        try:
            new = type(exc)(f"{exc}\n{note}")
        except Exception:  # an exception type with an unusual constructor: keep it as is
            return exc
        new.__cause__ = exc.__cause__
        return new.with_traceback(exc.__traceback__)
