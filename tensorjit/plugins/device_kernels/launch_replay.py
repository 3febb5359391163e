"""A recorded call as a plan, and its replay (launch_plan.py says what and why).

``Replay.build`` turns one recorded call (``NodeRun`` per replayable node) into launch
templates over *roots* (the buffers a call has: inputs, constants, Python steps' outputs,
allocations), Python steps between them, guards and the plan's own temporaries;
``Replay.run`` repeats it with another call's values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tensorjit.core.compile import deferred
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.memory.aliasing import alias_roots
from tensorjit.core.memory.destroy_handler import destroyed_inputs
from tensorjit.core.registries import GraphPlan
from tensorjit.plugins.device_kernels.arrays import StridedDeviceArrays, byte_offset
from tensorjit.plugins.device_kernels.recording import Recording
from tensorjit.plugins.device_kernels.target import ReplayingRuntime

if TYPE_CHECKING:
    from tensorjit.plugins.device_kernels.launch_plan import LaunchPlanProgram

I64 = np.int64


# ---------------------------------------------------------------- what a recording gives
@dataclass
class NodeRun:
    """A replayable node as it ran while recorded."""

    inputs: list[Any]
    outputs: list[Any]
    recording: Recording


@dataclass
class Root:
    """A buffer the replayed launches use: a value the call has (``var``: an input, a
    constant, a Python step's output) or a recorded allocation (``shape``/``dtype``;
    ``fixed`` is the plan's own array when no value outside the plan sees it)."""

    var: Variable | None
    offset: int  # its start in its buffer, as recorded (byte offsets are relative)
    address: int | None
    shape: tuple[int, ...] = ()
    dtype: Any = None
    recorded: Any = None  # the recorded allocation
    fixed: Any = None
    kept: bool = False  # an array the kernel keeps between calls (``fixed`` is it)


@dataclass(frozen=True)
class Where:
    """A value computed by replayed launches: ``root``'s buffer at ``delta`` bytes from
    the root's start, with this shape, byte strides and dtype."""

    root: int
    delta: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: Any


@dataclass
class LaunchTemplate:
    kernel: Any
    geometry: tuple
    args: list[Any]
    buffers: list[tuple[int, int]]  # (argument position, root)
    offsets: list[tuple[int, int, int]]  # (argument position, root, delta)


class Launches(list):
    """A run of replayed nodes' launch templates, and the checks those nodes defer
    (``checks``: ``(check, reset)`` in node order; deferred after the launches, since a
    deferred check runs later in the call anyway)."""

    checks: list[tuple[Any, Any]]

    def __init__(self) -> None:
        super().__init__()
        self.checks = []


@dataclass
class PythonStep:
    index: int  # the node's position in the function
    run: Callable[[list, list], None]
    #: per input: ("value", root) | ("where", Where) | ("const", value)
    sources: list[tuple[str, Any]]
    #: per output: the root it becomes (or None when nothing reads it as a root)
    roots: list[int | None]
    guards: list[tuple[int, tuple]]  # (root, expected description) per guarded output


class Unplannable(Exception):
    """The recording can not become a plan (the function keeps recording/VM calls)."""


def describe(arrays: StridedDeviceArrays, value: Any) -> tuple | None:
    """What a replayed kernel assumed of a value: None when it is not a device array of
    the kind, else (shape, strides, dtype)."""
    if not arrays.is_value(value):
        return None
    return (value.shape, value.strides, value.dtype)


# ---------------------------------------------------------------- a plan
@dataclass
class Replay:
    """One signature's plan: launch templates and Python steps, in the graph's order."""

    program: LaunchPlanProgram
    roots: list[Root]
    steps: list[Launches | PythonStep]
    #: (root, input position | -1, cell, whether its buffer is an argument)
    entries: list[tuple[int, int, list | None, bool]]
    fresh: list[int]  # allocation roots made each call
    outputs: list[tuple[str, Any]]  # per output, as PythonStep.sources
    first_commit: int  # steps before it may decline (len(steps) when none overwrites)
    #: the arrays the same every call (the plan's temporaries, kernels' kept arrays,
    #: device constants): (root, array, its buffer argument, its offset)
    fixed: list[tuple[int, Any, Any, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rt = cast(ReplayingRuntime, self.program.target.runtime())
        for root, r in enumerate(self.roots):
            if r.fixed is not None:
                buf, off = rt.buffer_args(r.fixed)
                self.fixed.append((root, r.fixed, buf, int(off)))

    @staticmethod
    def build(
        program: LaunchPlanProgram, values: Sequence[Any], runs: dict[int, NodeRun], outputs: list
    ) -> Replay:
        return _Builder(program, values, runs, outputs).build()

    def run(self, values: Sequence[Any]) -> list[Any] | None:
        """The outputs of a call with ``values``, or None (nothing overwritten) where a
        guard failed or a Python step raised: the call must be recorded."""
        program = self.program
        rt = cast(ReplayingRuntime, program.target.runtime())
        arrays = program.arrays
        n = len(self.roots)
        held: list[Any] = [None] * n  # each root's array (value or allocation)
        bufs: list[Any] = [None] * n
        offs: list[int] = [0] * n
        for root, position, cell, is_buffer in self.entries:
            value = values[position] if cell is None else cell[0]
            held[root] = value
            if is_buffer:
                bufs[root], off = rt.buffer_args(value)
                offs[root] = int(off)
        roots = self.roots
        for root in self.fresh:
            r = roots[root]
            held[root] = value = rt.empty(r.shape, r.dtype)
            bufs[root], off = rt.buffer_args(value)
            offs[root] = int(off)
        for root, value, buf, off in self.fixed:
            held[root], bufs[root], offs[root] = value, buf, off
        enqueue = rt.enqueue
        s = 0
        outer = deferred.suspend()  # a call this one runs inside keeps its own checks
        try:
            for s, step in enumerate(self.steps):  # noqa: B007
                if s == self.first_commit and deferred.pending():
                    try:
                        deferred.run_pending()
                    except Exception:
                        deferred.discard()
                        return None  # nothing overwritten yet: the VM raises it
                if type(step) is Launches:
                    for launch in step:
                        args = launch.args.copy()
                        for position, root in launch.buffers:
                            args[position] = bufs[root]
                        for position, root, delta in launch.offsets:
                            args[position] = I64(offs[root] + delta)
                        enqueue(launch.kernel, launch.geometry, args)
                    for check, reset in step.checks:
                        deferred.defer(check, reset)
                    continue
                step = cast(PythonStep, step)
                inputs = [self._value(source, held, arrays) for source in step.sources]
                cells: list[list] = [[None] for _ in step.roots]
                step.run(inputs, cells)
                for out_root, cell in zip(step.roots, cells):
                    if out_root is not None:
                        held[out_root] = value = cell[0]
                        if roots[out_root].address is not None:
                            bufs[out_root], off = rt.buffer_args(value)
                            offs[out_root] = int(off)
                for root, expected in step.guards:
                    if describe(arrays, held[root]) != expected:
                        deferred.discard()
                        return None
            if deferred.pending():
                deferred.run_pending()
        except Exception:
            deferred.discard()
            if s < self.first_commit:
                return None  # recorded again: the VM raises the error with its context
            raise
        finally:
            deferred.resume(outer)
        return [self._value(source, held, arrays) for source in self.outputs]

    @staticmethod
    def _value(source: tuple[str, Any], held: list, arrays: StridedDeviceArrays) -> Any:
        kind, what = source
        if kind == "value":
            return held[what]
        if kind == "const":
            return what
        where = cast(Where, what)
        base = held[where.root]
        if where.delta == 0 and base.shape == where.shape and base.strides == where.strides:
            return base
        return arrays.view(base, where.shape, where.strides, byte_offset(base) + where.delta)


class _Builder:
    """Turns one recorded call into a ``Replay`` (see the module docstring)."""

    def __init__(
        self,
        program: LaunchPlanProgram,
        values: Sequence[Any],
        runs: dict[int, NodeRun],
        outputs: list,
    ):
        self.program = program
        self.values = values
        self.runs = runs
        self.recorded_outputs = outputs
        self.arrays = program.arrays
        self.rt = cast(ReplayingRuntime, program.target.runtime())
        self.roots: list[Root] = []
        self.value_root: dict[Variable, int] = {}
        self.where: dict[Variable, Where] = {}
        self.python_reads: set[int] = set()  # allocation roots a Python step or output reads

    def value_root_of(self, var: Variable, value: Any) -> int:
        root = self.value_root.get(var)
        if root is None:
            address = self.arrays.buffer_address(value) if self.arrays.is_value(value) else None
            offset = byte_offset(value) if address is not None else 0
            root = len(self.roots)
            self.roots.append(Root(var, offset, address))
            self.value_root[var] = root
        return root

    def build(self) -> Replay:
        graph = self.program.graph
        nodes, replayable = graph.nodes, self.program.replayable
        first_commit = _first_commit(nodes, graph)
        steps: list[Launches | PythonStep] = []
        step_of_node: list[int] = []
        pending: dict[Variable, list[tuple[PythonStep, int]]] = {}  # Python outputs -> users
        guarded_after_commit = False
        for k, node in enumerate(nodes):
            run = self.runs.get(k) if replayable[k] else None
            templates = self._templates(node, run) if run is not None else None
            if templates is not None:
                # (the node overwriting an input starts a run of its own: the checks
                # deferred before it must run before its launches)
                if not steps or type(steps[-1]) is not Launches or k == first_commit:
                    steps.append(Launches())
                launches = cast(Launches, steps[-1])
                launches.extend(templates)
                assert run is not None
                launches.checks.extend(run.recording.checks)
                # a replayed node reading a Python step's output guards it
                for var, value in zip(node.inputs, run.inputs):
                    for source, j in pending.pop(var, []):
                        guarded = source.roots[j]
                        described = describe(self.arrays, value)
                        assert guarded is not None and described is not None
                        source.guards.append((guarded, described))
                        if source.index >= first_commit:
                            guarded_after_commit = True
                step_of_node.append(len(steps) - 1)
                continue
            kernel = graph.kernels[k]
            # (as commit_plan: an op that never raises, a transfer, may follow a commit)
            if k >= first_commit and node.op.may_raise and not kernel.cannot_fail(node):
                raise Unplannable(f"{node.op} may fail after an input is overwritten")
            step = PythonStep(
                k,
                kernel.factory(node),
                [self._source(var) for var in node.inputs],
                [None] * len(node.outputs),
                [],
            )
            for j, out in enumerate(node.outputs):
                # its value becomes a root for whatever reads it later
                step.roots[j] = self._python_output_root(out)
                pending.setdefault(out, []).append((step, j))
            steps.append(step)
            step_of_node.append(len(steps) - 1)
        if guarded_after_commit:
            raise Unplannable("a guarded value is computed after an input is overwritten")
        outputs = [self._source(var) for var in graph.outputs]
        commit_step = step_of_node[first_commit] if first_commit < len(nodes) else len(steps)
        return self._finish(steps, outputs, commit_step)

    # ------------------------------------------------------------ pieces
    def _python_output_root(self, var: Variable) -> int:
        root = len(self.roots)
        self.roots.append(Root(var, 0, None))
        self.value_root[var] = root
        return root

    def _source(self, var: Variable) -> tuple[str, Any]:
        where = self.where.get(var)
        if where is not None:
            if self.roots[where.root].var is None:
                self.python_reads.add(where.root)
            return ("where", where)
        if isinstance(var, Constant):
            return ("const", var.stored_value())
        root = self.value_root.get(var)
        if root is None:
            root = self._entry_root(var)
        return ("value", root)

    def _entry_root(self, var: Variable) -> int:
        """The root of a graph input (explicit or shared) or constant."""
        graph = self.program.graph
        root = len(self.roots)
        self.roots.append(Root(var, 0, None))
        self.value_root[var] = root
        if var in graph.inputs:
            value = self.values[graph.inputs.index(var)]
        else:
            value = self.program.storage[var][0]
        self._note_address(root, value)
        return root

    def _note_address(self, root: int, value: Any) -> None:
        if self.arrays.is_value(value):
            r = self.roots[root]
            r.address = self.arrays.buffer_address(value)
            r.offset = byte_offset(value)
            r.dtype = value.dtype

    def _templates(self, node: Apply, run: NodeRun) -> list[LaunchTemplate] | None:
        """The node's launches as templates over roots, its outputs as ``Where``s; None
        when a buffer can not be traced (the node stays a Python step)."""
        arrays, rt = self.arrays, self.rt
        candidates: dict[int, set[int]] = {}  # address -> roots
        for var, value in zip(node.inputs, run.inputs):
            where = self.where.get(var)
            if where is not None:
                root = where.root
            elif not arrays.is_value(value):
                continue  # a host input (a constant shape): no buffer
            elif var in self.value_root:
                root = self.value_root[var]
                self._note_address(root, value)
            elif var.owner is None:
                root = self._entry_root(var)
            else:
                return None  # (every earlier node's outputs are roots or Wheres)
            address = self.roots[root].address
            if address is not None:
                candidates.setdefault(address, set()).add(root)
        new_roots: list[Root] = []
        for value in run.recording.allocations:
            address = arrays.buffer_address(value)
            new_roots.append(
                Root(None, byte_offset(value), address, value.shape, value.dtype, value)
            )
            if address is not None:
                candidates.setdefault(address, set()).add(len(self.roots) + len(new_roots) - 1)
        for value in run.recording.kept:  # (an error flag: the same array every call)
            mine = [r for r in new_roots if r.recorded is value]
            if mine:
                mine[0].kept = True  # (allocated on this first use)
                continue
            address = arrays.buffer_address(value)
            if address is None:
                return None
            kept = Root(None, byte_offset(value), address, value.shape, value.dtype, value)
            kept.kept = True
            new_roots.append(kept)
            candidates.setdefault(address, set()).add(len(self.roots) + len(new_roots) - 1)

        def traced(address: int | None) -> int | None:
            if address is None:
                return None  # (an empty array has no buffer)
            found = candidates.get(address)
            return next(iter(found)) if found is not None and len(found) == 1 else None

        templates = []
        all_roots = [*self.roots, *new_roots]
        for launch in run.recording.launches:
            args = list(launch.args)
            buffers: list[tuple[int, int]] = []
            offsets: list[tuple[int, int, int]] = []
            for position, arg in enumerate(args):
                address = rt.buffer_arg_address(arg)
                if address is None:
                    continue  # (not a buffer)
                found = traced(address)
                if found is None:
                    return None  # a buffer of nothing the node was given or allocated
                root = found
                buffers.append((position, root))
                args[position] = None  # (replaced each call: the recorded one is let go)
                # ``buffer_args`` passes a byte offset after the buffer; a buffer alone
                # (a kernel's own scratch, e.g. the OpenCL GEMM's packs) is used from
                # its start
                nxt = args[position + 1] if position + 1 < len(args) else None
                if type(nxt) is I64:
                    offsets.append((position + 1, root, int(nxt) - all_roots[root].offset))
            templates.append(LaunchTemplate(launch.kernel, launch.geometry, args, buffers, offsets))
        wheres = []
        for value in run.outputs:
            if not arrays.is_value(value):
                return None
            out_root = traced(arrays.buffer_address(value))
            if out_root is None or all_roots[out_root].dtype != value.dtype:
                return None  # (a view has its base's dtype)
            delta = byte_offset(value) - all_roots[out_root].offset
            wheres.append(Where(out_root, delta, value.shape, value.strides, value.dtype))
        self.roots.extend(new_roots)
        for var, where in zip(node.outputs, wheres):
            self.where[var] = where
        return templates

    def _finish(
        self, steps: list[Launches | PythonStep], outputs: list, commit_step: int
    ) -> Replay:
        graph = self.program.graph
        entries: list[tuple[int, int, list | None, bool]] = []
        fresh: list[int] = []
        position = {var: k for k, var in enumerate(graph.inputs)}
        own = []
        for root, r in enumerate(self.roots):
            if r.var is None and r.kept:
                r.fixed = r.recorded  # the kernel's own array, the same every call
            elif r.var is None:  # an allocation
                if root in self.python_reads:
                    fresh.append(root)
                else:
                    own.append(root)
            elif r.var.owner is None and not isinstance(r.var, Constant):
                is_buffer = r.address is not None
                if r.var in position:
                    entries.append((root, position[r.var], None, is_buffer))
                else:
                    entries.append((root, -1, self.program.storage[r.var], is_buffer))
            elif isinstance(r.var, Constant) and r.address is not None:
                r.fixed = self.program.storage[r.var][0]  # (a device constant)
        _share_temporaries(self.roots, own, steps)
        for r in self.roots:
            r.recorded = None
        return Replay(self.program, self.roots, steps, entries, fresh, outputs, commit_step)


def _share_temporaries(
    roots: list[Root], own: list[int], steps: list[Launches | PythonStep]
) -> None:
    """Give the plan's own temporaries (``own``: allocations only its launches use)
    their arrays, one array serving temporaries of equal size whose launches do not
    overlap (between the first and the last launch using each), as the VM's pool
    does."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    launches = [launch for step in steps if isinstance(step, Launches) for launch in step]
    for k, launch in enumerate(launches):
        for _, root in launch.buffers:
            first.setdefault(root, k)
            last[root] = k
    free: dict[int, list[tuple[int, Any]]] = {}  # bytes -> (free after launch, array)
    for root in sorted((r for r in own if r in first), key=first.__getitem__):
        r = roots[root]
        size = int(np.prod(r.shape, dtype=np.int64)) * np.dtype(r.dtype).itemsize
        candidates = free.setdefault(size, [])
        reuse = next((c for c in candidates if c[0] < first[root]), None)
        if reuse is not None:
            candidates.remove(reuse)
            r.fixed = reuse[1]
        else:
            r.fixed = r.recorded
        candidates.append((last[root], r.fixed))


def _first_commit(nodes: list[Apply], graph: GraphPlan) -> int:
    """The first node overwriting (in place) a buffer of a graph input, or len(nodes)."""
    roots = alias_roots(nodes)
    for k, node in enumerate(nodes):
        for i in destroyed_inputs(node):
            root = roots.get(node.inputs[i], node.inputs[i])
            if root.owner is None and not isinstance(root, Constant):
                return k
    return len(nodes)
