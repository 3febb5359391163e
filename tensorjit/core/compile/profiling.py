"""Per-function profiles: compile phases, and at run time per node, per op class and per
program (``function(..., profile=True)`` or ``config.profile``).

Timing wraps what really runs: each VM step's kernel, and each whole-graph or segment
program as one unit (a program runs its nodes as one compiled loop, so its nodes have no
time of their own; ``config.whole_graph=False`` times every node). Functions compiled
without profiling carry a ``ProfileStats`` too, with the compile facts only: no timer is
added to their calls.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import IO, Any

from tensorjit.core.rewrites.runner import RewriteStats


@dataclass
class NodeRecord:
    """One node of the schedule: what ran it and, when it ran alone, for how long."""

    step: int
    node: str
    op_class: str
    kernel: str
    backend: str
    program: str | None = None  # the program it ran inside, if any
    seconds: float = 0.0
    calls: int = 0


@dataclass
class ProgramRecord:
    """A compiled program that runs several nodes as one unit."""

    label: str
    nodes: int
    seconds: float = 0.0
    calls: int = 0  # invocations (a call the fast path declined may invoke it twice)
    declined: int = 0  # invocations that declined the values (the VM ran them, or retried)


class ProfileStats:
    """What a function's compile and calls cost. ``report()`` gives it as text, sorted
    by time; ``applied`` / ``rejected`` are the rewrite counters (``RewriteStats``)."""

    def __init__(self, name: str | None, rewrites: RewriteStats, enabled: bool):
        self.name = name
        self.rewrites = rewrites
        self.enabled = enabled
        self.compile_seconds: dict[str, float] = {}
        self.calls = 0
        self.call_seconds = 0.0
        self.nodes: list[NodeRecord] = []
        self.programs: list[ProgramRecord] = []
        self._segments: dict[int, ProgramRecord] = {}  # first step -> its segment's record
        self._in_segment: set[int] = set()  # steps a segment program runs

    # Theano's and the rewrite tests' view of ``f.profile``.
    @property
    def applied(self) -> Any:
        return self.rewrites.applied

    @property
    def rejected(self) -> Any:
        return self.rewrites.rejected

    @property
    def rejected_by_plugin(self) -> Any:
        return self.rewrites.rejected_by_plugin

    @property
    def phase_seconds(self) -> dict:
        return self.rewrites.phase_seconds

    # ------------------------------------------------------------------ recording
    def describe_schedule(self, order: list, kernels: list, segments: list, whole: bool) -> None:
        """Record the schedule: each node's op class and kernel, and which program (the
        whole graph, or a segment) runs it."""
        inside: dict[int, str] = {}
        if whole:
            self.programs.append(ProgramRecord("whole-graph program", len(order)))
            inside = dict.fromkeys(range(len(order)), "whole-graph program")
        for i, seg in enumerate(segments):
            label = f"segment program {i} (steps {seg.start}-{seg.stop - 1})"
            record = ProgramRecord(label, seg.stop - seg.start)
            self.programs.append(record)
            self._segments[seg.start] = record
            self._in_segment.update(range(seg.start, seg.stop))
            inside.update(dict.fromkeys(range(seg.start, seg.stop), label))
        for step, (node, kernel) in enumerate(zip(order, kernels)):
            self.nodes.append(
                NodeRecord(
                    step, str(node), type(node.op).__name__, kernel.name, kernel.backend,
                    inside.get(step),
                )
            )  # fmt: skip

    def timed_step(self, step: int, run: Any, program: ProgramRecord | None = None) -> Any:
        """``run`` (a VM step) with its time added to node ``step`` (or to ``program``
        when the step runs a segment program)."""
        record: Any = program if program is not None else self.nodes[step]
        clock = time.perf_counter

        def timed(inputs: list, output_storage: list) -> None:
            started = clock()
            try:
                run(inputs, output_storage)
            finally:
                record.seconds += clock() - started
                record.calls += 1

        return timed

    def timed_program(self, program: Any) -> Any:
        """A whole-graph ``program`` (values in, values out or None) with its time
        recorded; a None (declined) is counted, and the VM's steps time themselves."""
        record = self.programs[0]
        clock = time.perf_counter

        def timed(values: Any) -> Any:
            started = clock()
            out = program(values)
            record.seconds += clock() - started
            record.calls += 1
            if out is None:
                record.declined += 1
            return out

        timed.loop = getattr(program, "loop", None)  # type: ignore[attr-defined]
        return timed

    def instrument(self, vm: Any) -> None:
        """Wrap ``vm``'s steps with timers (segment programs, recorded by
        ``describe_schedule``, time as one unit)."""
        steps = list(vm.steps)
        for k, step in enumerate(steps):
            if k in self._in_segment and k not in self._segments:
                continue  # runs inside its segment's program (a no-op step)
            steps[k] = step._replace(run=self.timed_step(k, step.run, self._segments.get(k)))
        vm.steps = steps

    # ------------------------------------------------------------------ reporting
    def by_op_class(self) -> list[tuple[str, float, int, int]]:
        """(op class, seconds, calls, nodes) of nodes timed alone, most time first."""
        totals: dict[str, list] = defaultdict(lambda: [0.0, 0, 0])
        for rec in self.nodes:
            if rec.program is None or rec.calls:
                entry = totals[rec.op_class]
                entry[0] += rec.seconds
                entry[1] += rec.calls
                entry[2] += 1
        rows = [(name, s, c, n) for name, (s, c, n) in totals.items()]
        return sorted(rows, key=lambda row: -row[1])

    def report(self, file: IO[str] | None = None, limit: int = 20) -> str:
        """The profile as text (also written to ``file`` if given)."""
        lines = [f"Function profile: {self.name or '<unnamed>'}"]
        compile_total = sum(self.compile_seconds.values())
        phases = ", ".join(f"{k} {v:.3f} s" for k, v in self.compile_seconds.items())
        lines.append(f"  compile: {compile_total:.3f} s ({phases})")
        lines += ["    " + line for line in self.rewrites.report().splitlines()]
        if not self.enabled:
            lines.append("  run times not recorded: compile with profile=True (or config.profile)")
            text = "\n".join(lines)
            if file is not None:
                print(text, file=file)
            return text
        timed = sum(r.seconds for r in self.nodes if r.program is None or r.calls)
        timed += sum(p.seconds for p in self.programs)
        per_call = self.call_seconds / self.calls * 1e3 if self.calls else 0.0
        share = timed / self.call_seconds * 100 if self.call_seconds else 0.0
        lines.append(
            f"  calls: {self.calls}, {self.call_seconds:.4f} s in the function "
            f"({per_call:.4f} ms per call), {timed:.4f} s ({share:.1f}%) in kernels and programs"
        )
        if self.programs:
            lines.append("  Programs (run several nodes as one compiled unit):")
            lines.append("    <% time>   <seconds>  <calls>  <declined>  <nodes>  <program>")
            for p in sorted(self.programs, key=lambda p: -p.seconds):
                lines.append(
                    f"    {_pct(p.seconds, timed)}  {p.seconds:>9.4f}  {p.calls:>7}  "
                    f"{p.declined:>10}  {p.nodes:>7}  {p.label}"
                )
        classes = self.by_op_class()
        if classes:
            lines.append("  Op classes (nodes run one by one):")
            lines.append("    <% time>   <seconds>  <calls>  <nodes>  <class>")
            for name, seconds, calls, n in classes[:limit]:
                lines.append(
                    f"    {_pct(seconds, timed)}  {seconds:>9.4f}  {calls:>7}  {n:>7}  {name}"
                )
        lines.append("  Nodes (most time first):")
        lines.append("    <% time>   <seconds>  <calls>  <kernel>            <step> <node>")
        ranked = sorted(self.nodes, key=lambda r: (r.program is not None, -r.seconds))
        for rec in ranked[:limit]:
            if rec.program is None or rec.calls:  # ran alone (also: a program declined)
                timing = f"{_pct(rec.seconds, timed)}  {rec.seconds:>9.4f}  {rec.calls:>7}"
                where = f"  [in {rec.program}; alone when it declined]" if rec.program else ""
            else:  # no time of its own
                timing = f"{'-':>7}  {'-':>9}  {'-':>7}"
                where = f"  [in {rec.program}]"
            lines.append(f"    {timing}  {rec.kernel:<18} {rec.step:>6} {rec.node}{where}")
        if len(ranked) > limit:
            lines.append(f"    ... {len(ranked) - limit} more nodes")
        if any(rec.program for rec in self.nodes):
            lines.append(
                "  Nodes inside a program run as one compiled loop; compile with "
                "config.whole_graph=False to time each node."
            )
        text = "\n".join(lines)
        if file is not None:
            print(text, file=file)
        return text

    def summary(self, file: IO[str] | None = None) -> None:
        """Theano's name: print the report (to stderr by default)."""
        self.report(file=file or sys.stderr)


def _pct(part: float, whole: float) -> str:
    return f"{part / whole * 100:6.1f}%" if whole else "     -%"
