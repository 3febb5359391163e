"""Launch plans: a device function's calls replayed from one recorded run.

A function on a device runs node by node, and each node's kernel spends Python time
planning its launches: checking shapes, choosing a kernel, allocating, packing
arguments. For the same input shapes that work gives the same launches every call, so
a device backend offers, as its whole-graph program, a ``LaunchPlanProgram``:

- **Record.** The first call with a new *signature* (the shapes, byte strides, dtypes
  and buffer sharing of the device inputs that kernels read) runs the function through
  a VM whose ``launches_only`` kernels (KernelSpec) are recorded (recording.py): the
  arrays each allocated, the launches it made, the arrays of its own it handed them (an
  error flag) and the checks it deferred.
- **Plan.** Each recorded launch's buffer arguments are traced back to a *root*: a
  value the call has anyway (an input, a constant, a Python step's output) or one of
  the recorded allocations, with the byte offset from the root's start. Allocations no
  value outside the replayed kernels ever sees become the plan's own temporaries,
  allocated once; the others (outputs, values a Python step reads) are allocated each
  call. Nodes that are not ``launches_only``, read a value on the host
  (``Op.host_inputs``) or run on another backend stay *Python steps*: their kernels
  run as in the VM.
- **Replay.** Later calls with the signature enqueue the recorded launches with this
  call's buffers and offsets (no per-node Python) and defer the recorded checks again,
  run the Python steps between them,
  and make array headers only for outputs and what Python steps read. A Python step's
  output that a replayed kernel reads is guarded (shape, strides, dtype); when a guard
  fails or a Python step raises, the call is recorded again from the start, which is
  safe because the plan only exists if every guard and every Python step that can fail
  comes before the first step overwriting an input (a shared variable updated in
  place), and no node has side effects (``Op.has_side_effects``: it would run twice).
  A replay runs and discards only its own deferred checks (core/compile/deferred.py),
  not those of a call it runs inside.

The signature also holds the settings kernels read when they run
(``config.device_schedule``, the runtime's work per item).

The same values reach the same kernels in the same order as in the VM, so results are
bit-identical to it; ``config.device_launch_plans`` turns plans off. This module is the
program (signatures, recording, the calls); launch_replay.py builds a plan from a
recorded call and replays it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from tensorjit.core.compile.vm import VM
from tensorjit.core.config import config
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.registries import GraphPlan, Kernel
from tensorjit.plugins.device_kernels.arrays import StridedDeviceArrays
from tensorjit.plugins.device_kernels.launch_replay import NodeRun, Replay, Unplannable
from tensorjit.plugins.device_kernels.recording import recording
from tensorjit.plugins.device_kernels.target import Target

#: signatures whose plans a function keeps (the oldest is dropped beyond)
MAX_PLANS = 8
#: recordings of one signature after which its calls stop recording (guards that keep
#: failing: a Python step's output shape changes from call to call)
MAX_RECORDINGS = 4


def replayable(target: Target, node: Apply, kernel: Kernel) -> bool:
    """Whether ``node``'s kernel may be recorded and replayed on ``target``: a
    ``launches_only`` kernel of its backend whose host-read inputs are constants."""
    spec = kernel.spec
    if spec is None or not spec.launches_only or kernel.backend != target.backend:
        return False
    return all(isinstance(node.inputs[i], Constant) for i in node.op.host_inputs(node))


def launch_plan_program(target: Target, plan: GraphPlan) -> LaunchPlanProgram | None:
    """``Backend.whole_graph`` of a device backend: a launch-plan program when plans are
    on and some node's kernel on ``target`` is replayable, else None."""
    if not config.device_launch_plans:
        return None
    if any(node.op.has_side_effects for node in plan.nodes):
        return None  # (a call recorded again would run it twice)
    if not any(replayable(target, n, k) for n, k in zip(plan.nodes, plan.kernels)):
        return None
    return LaunchPlanProgram(target, plan)


# ---------------------------------------------------------------- the program
class LaunchPlanProgram:
    """A device function's whole-graph program (see the module docstring)."""

    takes_unfiltered = False  # the call path filters the arguments first
    runs_python = 1  # recording runs update shared values through the VM's cells

    def __init__(self, target: Target, plan: GraphPlan):
        self.target = target
        self.graph = plan
        self.arrays = cast(StridedDeviceArrays, target.arrays)
        self.replayable = [replayable(target, n, k) for n, k in zip(plan.nodes, plan.kernels)]
        storage: dict[Variable, list] = {}
        for var, cell in plan.shared:
            storage[var] = cell
        every = [v for node in plan.nodes for v in (*node.inputs, *node.outputs)]
        for var in (*every, *plan.inputs, *plan.outputs):
            if var not in storage:
                storage[var] = [var.stored_value()] if isinstance(var, Constant) else [None]
        self.storage = storage
        self._input_cells = [storage[v] for v in plan.inputs]
        self._output_cells = [storage[v] for v in plan.outputs]
        shared = {var for var, _ in plan.shared}
        self._scratch_cells = [
            cell
            for var, cell in storage.items()
            if var not in shared and not isinstance(var, Constant)
        ]
        kernels = [
            replace(kernel, factory=self._recorded(kernel.factory, k))
            if self.replayable[k]
            else kernel
            for k, kernel in enumerate(plan.kernels)
        ]
        outputs = set(plan.outputs)
        self.vm = VM(plan.nodes, kernels, storage, keep=outputs, allow_gc=False)
        self._runs: dict[int, NodeRun] | None = None
        # The signature's values: every input, explicit or shared. (A host input's
        # shape also decides the shapes of what Python steps hand the kernels.)
        self._entries: list[tuple[int, list | None]] = [  # (input position | -1, cell)
            *((k, None) for k in range(len(plan.inputs))),
            *((-1, cell) for _, cell in plan.shared),
        ]
        self.plans: OrderedDict[tuple, Replay | None] = OrderedDict()
        self.recordings: dict[tuple, int] = {}
        self.replays = 0  # calls replayed (tests and benchmarks read it)
        self.lock = threading.RLock()

    # ------------------------------------------------------------ calls
    def __call__(self, values: Sequence[Any]) -> list[Any] | None:
        with self.lock:
            signature = self._signature(values)
            replay = self.plans.get(signature)
            if replay is not None:
                outputs = replay.run(values)
                if outputs is not None:
                    self.replays += 1
                    return outputs
                if self.recordings.get(signature, 0) >= MAX_RECORDINGS:
                    self.plans[signature] = None  # its guards keep failing: the VM's calls
            return self._record(values, signature)

    def _signature(self, values: Sequence[Any]) -> tuple:
        """Each input's shape, strides and dtype, and which device inputs share a
        buffer (a kernel may copy an operand that overlaps its output)."""
        address, is_value = self.arrays.buffer_address, self.arrays.is_value
        seen: dict[int | None, int] = {}
        # (what the kernels read at run time to choose their launches)
        parts: list[Any] = [config.device_schedule, self.target.runtime().work_per_item]
        for k, (position, cell) in enumerate(self._entries):
            value = values[position] if cell is None else cell[0]
            if is_value(value):
                parts.append(
                    (value.shape, value.strides, value.dtype, seen.setdefault(address(value), k))
                )
            elif type(value) is np.ndarray:
                parts.append((value.shape, value.strides, value.dtype))
            else:
                parts.append(type(value))
        return tuple(parts)

    def _record(self, values: Sequence[Any], signature: tuple) -> list[Any]:
        """Run the call through the VM, recording the replayable nodes; keep a plan of
        it while the signature has not been recorded too often."""
        count = self.recordings.get(signature, 0)
        record = count < MAX_RECORDINGS and len(self.graph.nodes) > 0
        for cell, value in zip(self._input_cells, values):
            cell[0] = value
        self._runs = {} if record else None
        try:
            self.vm()
            outputs = [cell[0] for cell in self._output_cells]
            runs = self._runs
        finally:
            self._runs = None
            for cell in self._scratch_cells:
                cell[0] = None
        if runs is not None:
            self.recordings[signature] = count + 1
            try:
                replay: Replay | None = Replay.build(self, values, runs, outputs)
            except Unplannable:
                replay = None
                self.recordings[signature] = MAX_RECORDINGS  # the same next time
            if len(self.recordings) > 8 * MAX_PLANS:
                self.recordings.clear()
            self.plans[signature] = replay
            self.plans.move_to_end(signature)
            while len(self.plans) > MAX_PLANS:
                self.plans.popitem(last=False)
        return outputs

    def _recorded(self, factory: Callable, index: int) -> Callable:
        """``factory`` whose runs are recorded while the program records."""

        def make(node: Apply) -> Callable[[list, list], None]:
            run = factory(node)

            def run_recorded(inputs: list, output_storage: list) -> None:
                runs = self._runs
                if runs is None:
                    run(inputs, output_storage)
                    return
                for cell in output_storage:
                    cell[0] = None  # allocated while recorded, not a buffer of earlier calls
                with recording() as record:
                    run(inputs, output_storage)
                runs[index] = NodeRun(list(inputs), [c[0] for c in output_storage], record)

            return run_recorded

        return make

    def free(self) -> None:
        """Drop the plans and their temporaries (they are recorded again on demand)."""
        with self.lock:
            self.plans.clear()
            self.recordings.clear()
