"""The virtual machine: runs one kernel per node in order, frees temporaries early and
reuses their buffers.

Storage is a dict variable -> one-element list ("cell"). A kernel may find a buffer in
an output cell and is free to compute into it (the Op.perform contract); the VM puts one
there when a temporary of the shape and dtype that node produced last time is free.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tensorjit.core.compile import deferred
from tensorjit.core.compile.commit import commit_plan, restore_value, save_value
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.memory.aliasing import alias_roots, buffer_source
from tensorjit.core.memory.destroy_handler import destroyed_inputs
from tensorjit.core.registries import Kernel

Cell = list  # a one-element list holding a value (or None)


class Step(NamedTuple):
    """One node's work in the VM's loop: ``run(input values, output cells)``, then the
    cells to empty, the cells whose buffers go to the pool, and the output cells offered
    a pooled buffer (with the slot of the buffer key they expect)."""

    run: Callable[[list, list], None]
    in_cells: list[Cell]
    out_cells: list[Cell]
    to_clear: list[Cell]
    to_pool: list[Cell]
    offers: list[tuple[Cell, int]]


def buffer_key(value: Any) -> tuple | None:
    """What a reusable buffer must match: its class, dtype and shape."""
    try:
        return (type(value), value.dtype, value.shape)
    except AttributeError:
        return None


def _nothing(inputs: list, output_storage: list) -> None:
    """A step whose node runs inside a segment's program."""


def _after_deferred_checks(run: Any) -> Any:
    """``run``, after the checks kernels deferred (see core/compile/deferred.py)."""

    def guarded(inputs: list, output_storage: list) -> None:
        if deferred.pending():
            deferred.run_pending()
        run(inputs, output_storage)

    return guarded


class VM:
    """Runs ``nodes`` (already scheduled) with their kernels over storage cells.

    With ``allow_gc``, a variable's cell is cleared right after its last use, and once
    nothing living in a temporary buffer is used any more (the buffer's root and all its
    views), the buffer goes to a pool from which later nodes, in this call or the next,
    get output buffers of the same shape and dtype. Buffers of graph inputs, constants
    and outputs never enter the pool. ``free()`` empties it.
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
        self.pool: dict[tuple | None, list[Any]] = {}
        self._guards: dict[int, tuple[list, int, int, int]] = {}
        self._wanted: Counter = Counter()  # buffer kind -> how many nodes produce one
        self.allow_gc = allow_gc
        last_use: dict[Variable, int] = {}
        for step, node in enumerate(self.nodes):
            for inp in node.inputs:
                last_use[inp] = step
            for out in node.outputs:
                last_use.setdefault(out, step)  # an output nobody reads dies at once
        # Buffers: a root and everything aliasing it die together.
        roots = alias_roots(self.nodes)

        def alias_root(var: Variable) -> Variable:
            return roots.get(var, var)

        class_end: dict[Variable, int] = {}
        kept_roots = {alias_root(v) for v in keep}
        for var, step in last_use.items():
            root = alias_root(var)
            class_end[root] = max(class_end.get(root, -1), step)
        clear_after: list[list[list]] = [[] for _ in self.nodes]
        pool_after: list[list[list]] = [[] for _ in self.nodes]
        if allow_gc:
            for var, step in last_use.items():
                if var.owner is None or var in keep or isinstance(var, Constant):
                    continue
                root = alias_root(var)
                if var is root and root not in kept_roots:
                    pool_after[class_end[root]].append(storage[var])
                else:
                    clear_after[step].append(storage[var])
        self._temporary_cells = [
            cell for var, cell in storage.items() if var.owner is not None and var not in keep
        ]
        # Without GC, cells keep their values for the kernels to reuse next call, except
        # those whose buffer left the function (as an output or update, maybe via views).
        self._leaving_cells = (
            []
            if allow_gc
            else [
                storage[var]
                for var in last_use
                if var.owner is not None and var not in keep and alias_root(var) in kept_roots
            ]
        )
        # Fresh (non-aliasing) outputs of temporaries are offered pooled buffers.
        self._expected: list[tuple | None] = []
        offers: list[list[tuple[list, int]]] = []
        for node in self.nodes:
            node_offers = []
            if allow_gc:
                for j, out in enumerate(node.outputs):
                    fresh = buffer_source(node, j) is None
                    if fresh and out not in keep and out.owner is not None:
                        node_offers.append((storage[out], len(self._expected)))
                        self._expected.append(None)
            offers.append(node_offers)
        # Steps overwriting a function input first run the checks kernels deferred.
        inputs = {v for v in storage if v.owner is None and not isinstance(v, Constant)}
        guarded = [
            any(alias_root(node.inputs[i]) in inputs for i in destroyed_inputs(node))
            for node in self.nodes
        ]
        self._plain_steps = [
            Step(
                _after_deferred_checks(kernel.factory(node))
                if guarded[step]
                else kernel.factory(node),
                [storage[i] for i in node.inputs],
                [storage[o] for o in node.outputs],
                clear_after[step],
                pool_after[step],
                offers[step],
            )
            for step, (node, kernel) in enumerate(zip(self.nodes, self.kernels))
        ]
        self._saved: list[tuple[list, Any]] = []  # this call's snapshots (commit.py)
        self.segment_nodes = 0  # nodes run inside segment programs (set_segments)
        self.segments: list[Any] = []
        self._guard_commits(lambda node: node.op.input_check(node) is not None)

    def _guard_commits(self, can_precheck: Any) -> None:
        """Wrap the steps for all-or-nothing calls (core/compile/commit.py): the first
        commit runs the prechecks first; a commit that must be undoable saves its input."""
        kernel_of = dict(zip(self.nodes, self.kernels))
        plan = commit_plan(self.nodes, can_precheck, lambda node: kernel_of[node].cannot_fail(node))
        steps = list(self._plain_steps)
        for k, roots in plan.snapshots.items():
            steps[k] = steps[k]._replace(run=self._saving(steps[k].run, roots))
        if plan.prechecks:
            stand_in = plan.stand_ins
            checks = [
                (
                    j,
                    self.nodes[j].op.input_check(self.nodes[j]),
                    [self.storage[stand_in.get(v, v)] for v in self.nodes[j].inputs],
                )
                for j in plan.prechecks
            ]
            first = steps[plan.first]
            steps[plan.first] = first._replace(run=self._prechecking(first.run, checks))
        self.steps: list[Step] = steps

    def _saving(self, run: Any, roots: tuple[Variable, ...]) -> Any:
        cells, saved = [(root, self.storage[root]) for root in roots], self._saved

        def saving(inputs: list, output_storage: list) -> None:
            saved.extend((cell, save_value(root, cell[0])) for root, cell in cells)
            run(inputs, output_storage)

        return saving

    def _prechecking(self, run: Any, checks: list) -> Any:
        def prechecked(inputs: list, output_storage: list) -> None:
            for step, check, cells in checks:
                values = [cell[0] for cell in cells]  # stand-ins included
                try:
                    check(values)
                except Exception as exc:
                    raise self._explained(exc, step, values) from None
            run(inputs, output_storage)

        return prechecked

    def _undo(self) -> None:
        """Put back what this call's commits overwrote (the call failed)."""
        for cell, saved in reversed(self._saved):
            restore_value(cell, saved)
        self._saved.clear()

    def set_segments(self, segments: Sequence[Any]) -> None:
        """Run each segment's steps as its one program (core/compile/segments.py): the
        first step calls it, the others only free what they freed before. A program that
        declines the values runs the segment's kernels one by one instead."""
        steps = list(self.steps)
        for segment in segments:
            span = range(segment.start, segment.stop)
            own = [(k, steps[k].run, steps[k].in_cells, steps[k].out_cells) for k in span]
            runner = self._segment_runner(segment, own)
            for k in span:
                # no pooled buffer is offered to a node that runs inside
                run = runner if k == segment.start else _nothing
                steps[k] = steps[k]._replace(run=run, offers=[])
        self.steps = steps
        self.segments = list(segments)
        self.segment_nodes = sum(seg.stop - seg.start for seg in segments)

    def _segment_runner(self, segment: Any, own: list) -> Any:
        program = segment.program
        in_cells = [self.storage[v] for v in segment.inputs]
        out_cells = [self.storage[v] for v in segment.outputs]

        def run(inputs: list, output_storage: list) -> None:
            try:
                values = program([cell[0] for cell in in_cells])
            except Exception as exc:
                exc.tensorjit_explained = True  # type: ignore[attr-defined]  # names its node
                raise
            if values is None:
                for k, kernel, node_in, node_out in own:
                    try:
                        kernel([cell[0] for cell in node_in], node_out)
                    except Exception as exc:
                        raise self._explained(exc, k) from None
                return
            for cell, value in zip(out_cells, values):
                cell[0] = value

        return run

    def set_lazy_blocks(self, guards: dict[int, tuple[list, int, int, int]]) -> None:
        """Enable lazy evaluation: ``guards[g] = (cond_cell, true_end, false_start,
        resume)``: at step g, if ``cond_cell[0]`` is true run steps g..true_end-1 then
        continue at ``resume``; otherwise continue at ``false_start``."""
        self._guards = guards
        # A branch not taken must not be checked: lazy calls only save and restore.
        self._guard_commits(lambda node: False)

    def __call__(self) -> None:
        if self._guards:
            self._run_lazy()
            return
        step = -1
        pool = self.pool
        wanted = self._wanted
        expected = self._expected
        changed = False
        try:
            for step, (run, in_cells, out_cells, to_clear, to_pool, offers) in enumerate(  # noqa: B007
                self.steps
            ):
                if not offers:
                    run([cell[0] for cell in in_cells], out_cells)
                else:
                    offered = None
                    if pool:
                        for cell, slot in offers:
                            buffers = pool.get(expected[slot])
                            if buffers and cell[0] is None:
                                buf = buffers.pop()
                                cell[0] = buf
                                offered = offered or []
                                offered.append((cell, buf))
                    run([cell[0] for cell in in_cells], out_cells)
                    for cell, slot in offers:  # remember what each node produces
                        key = buffer_key(cell[0])
                        if key != expected[slot]:
                            expected[slot] = key
                            changed = True
                    if offered:
                        for cell, buf in offered:
                            if cell[0] is not buf:  # the kernel did not use it
                                self._keep_for_reuse(buf, pool, wanted)
                for cell in to_clear:
                    cell[0] = None
                for cell in to_pool:
                    value = cell[0]
                    cell[0] = None
                    if wanted:
                        self._keep_for_reuse(value, pool, wanted)
            if deferred.pending():
                deferred.run_pending()
        except Exception as exc:
            deferred.discard()
            if self._saved:
                self._undo()
            error = exc if getattr(exc, "tensorjit_explained", False) else None
            error = error or self._with_context(exc, step)
            for cell in self._temporary_cells:  # a failed call keeps no value alive
                cell[0] = None
            raise error from None
        if self._saved:
            self._saved.clear()
        for cell in self._leaving_cells:
            cell[0] = None
        if changed:
            # Next call, keep as many free buffers of each kind as nodes produced now.
            self._wanted = Counter(k for k in expected if k is not None)
            for key in [k for k in pool if k not in self._wanted]:
                del pool[key]  # shapes no node produces any more

    def _run_lazy(self) -> None:
        try:
            self._run_lazy_steps()
            if deferred.pending():
                deferred.run_pending()
        except Exception:
            if self._saved:
                self._undo()
            raise
        finally:
            deferred.discard()
            self._saved.clear()

    def _run_lazy_steps(self) -> None:
        """The same loop with jumps over the steps of branches not taken (no buffer
        pooling here: branches change what runs from call to call)."""
        steps, guards = self.steps, self._guards
        jump_at: dict[int, int] = {}
        step = 0
        try:
            while step < len(steps):
                guard = guards.get(step)
                if guard is not None:
                    cond_cell, true_end, false_start, resume = guard
                    if bool(cond_cell[0]):
                        jump_at[true_end] = resume
                    elif false_start != step:
                        step = false_start
                        continue
                target = jump_at.pop(step, None)
                if target is not None:
                    step = target
                    continue
                run, in_cells, out_cells, to_clear, to_pool, _ = steps[step]
                run([cell[0] for cell in in_cells], out_cells)
                for cell in to_clear:
                    cell[0] = None
                for cell in to_pool:
                    cell[0] = None
                step += 1
        except Exception as exc:
            error = exc if getattr(exc, "tensorjit_explained", False) else None
            error = error or self._with_context(exc, step)
            for cell in self._temporary_cells:
                cell[0] = None
            raise error from None
        for cell in self._temporary_cells:  # skipped steps did not clear their inputs
            cell[0] = None

    @staticmethod
    def _keep_for_reuse(buf: Any, pool: dict, wanted: Counter) -> None:
        """Pool a dead temporary if some node will want one like it; else let it go."""
        key = buffer_key(buf)
        if key is not None:
            buffers = pool.setdefault(key, [])
            if len(buffers) < wanted.get(key, 0):
                buffers.append(buf)

    def free(self) -> None:
        """Release pooled buffers (they are reallocated on demand)."""
        self.pool.clear()

    def _explained(self, exc: Exception, step: int, values: list | None = None) -> Exception:
        """``explained`` for step ``step``, with its input ``values`` (default: its cells')."""
        if values is None:
            values = [cell[0] for cell in self.steps[step][1]]
        return explained(exc, self.nodes[step], self.kernels[step].name, values)

    def _with_context(self, exc: Exception, step: int) -> Exception:
        """The same kind of error, its message extended with the failing node's story."""
        values = [cell[0] for cell in self.steps[step][1]]
        return with_node_context(exc, self.nodes[step], self.kernels[step].name, values)


def explained(exc: Exception, node: Apply, kernel_name: str, values: list) -> Exception:
    """``with_node_context``, marked so that no other node's story is added on the way up."""
    error = with_node_context(exc, node, kernel_name, values)
    error.tensorjit_explained = True  # type: ignore[attr-defined]
    return error


def with_node_context(exc: Exception, node: Apply, kernel_name: str, values: list) -> Exception:
    """The same kind of error as ``exc``, its message extended with the story of the node
    whose kernel raised it: the op, the kernel, where the node was created and the
    shapes and dtypes of the input ``values``."""
    described = []
    for var, value in zip(node.inputs, values):
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", None)
        described.append(f"{var} (shape={shape}, dtype={dtype})")
    created = node.outputs[0].created_at or "unknown"
    note = (
        f"while computing {node.op} [kernel {kernel_name}], node created at "
        f"{created}\n  inputs: {', '.join(described)}"
    )
    try:
        new = type(exc)(f"{exc}\n{note}")
    except Exception:  # an exception type with an unusual constructor: keep it as is
        return exc
    new.__cause__ = exc.__cause__
    return new.with_traceback(exc.__traceback__)
