"""Runs the selected rewrites of each phase over a FunctionGraph, applying their
replacements through ``replace_all_validate`` and counting what was applied, rejected
and how long each phase took."""

from __future__ import annotations

import time
import warnings
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from tensorjit.core.diagnostics import TensorjitRuntimeWarning
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.fgraph import Feature, FunctionGraph, InconsistencyError
from tensorjit.core.rewrites.basic import NodeRewriter, Replacements, normalize_replacements
from tensorjit.core.rewrites.db import PHASES, RewriteEntry

# An equilibrium run gives up (with a warning) after this many node visits per node of
# the graph it started from: a rewrite that keeps undoing another would loop forever.
MAX_VISITS_PER_NODE = 50


class EquilibriumBoundWarning(TensorjitRuntimeWarning):
    """Node rewriters did not reach a fixed point within the bound."""


@dataclass
class RewriteStats:
    applied: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    rejected_by_plugin: Counter = field(default_factory=Counter)
    phase_seconds: dict = field(default_factory=dict)

    def report(self) -> str:
        """A readable summary: rewrites that fired (and were vetoed), time per phase."""
        lines = ["rewrites applied:"]
        lines += [f"  {n:<32} {c}" for n, c in self.applied.most_common()] or ["  none"]
        if self.rejected:
            lines.append("rewrites rejected (vetoed and rolled back):")
            lines += [f"  {n:<32} {c}" for n, c in self.rejected.most_common()]
        lines.append("seconds per phase:")
        lines += [f"  {p:<32} {s:.4f}" for p, s in self.phase_seconds.items()]
        return "\n".join(lines)


def apply_replacements(
    fgraph: FunctionGraph,
    pairs: Replacements,
    entry: RewriteEntry,
    stats: RewriteStats,
    plugin: str | None = None,
) -> bool:
    """Apply a rewrite's replacements as one validated transaction; count a veto against
    ``plugin`` (default: the plugin that registered the rewrite)."""
    if not pairs:
        return False
    try:
        fgraph.replace_all_validate(pairs, reason=entry.name)
    except InconsistencyError:
        stats.rejected[entry.name] += 1
        stats.rejected_by_plugin[plugin or entry.plugin or "core"] += 1
        return False
    stats.applied[entry.name] += 1
    return True


class _Touched(Feature):
    """Collects nodes that a substitution imported or whose inputs changed."""

    def __init__(self) -> None:
        self.nodes: list[Apply] = []

    def on_import(self, fgraph, node, reason) -> None:
        self.nodes.append(node)

    def on_change_input(self, fgraph, node, i, old, new, reason) -> None:
        if isinstance(node, Apply):
            self.nodes.append(node)


def _tracks(rewriter: Any, op_class: type) -> bool:
    """Whether a node rewriter wants nodes of ``op_class`` (``tracks`` None: all)."""
    tracks = getattr(rewriter, "tracks", None)
    return tracks is None or issubclass(op_class, tracks)


def _dispatch_table(entries: list[RewriteEntry]):
    """op class -> the node rewriters tracking it (in entry order), built lazily."""
    cache: dict[type, list[RewriteEntry]] = {}

    def lookup(op_class: type) -> list[RewriteEntry]:
        found = cache.get(op_class)
        if found is None:
            found = cache[op_class] = [e for e in entries if _tracks(e.rewriter, op_class)]
        return found

    return lookup


def run_node_rewriters(
    fgraph: FunctionGraph, entries: list[RewriteEntry], stats: RewriteStats
) -> None:
    """Apply node rewriters until none changes anything (an equilibrium).

    A worklist, not repeated sweeps: only nodes a substitution created or touched are
    looked at again, so the work grows with the changes, not with passes x graph size.
    """
    for entry in entries:
        assert isinstance(entry.rewriter, NodeRewriter), entry
    rewriters_for = _dispatch_table(entries)
    touched = _Touched()
    fgraph.attach_feature(touched)
    try:
        queue = deque(fgraph.toposort())
        budget = MAX_VISITS_PER_NODE * (len(queue) + 10)
        while queue:
            budget -= 1
            if budget < 0:
                warnings.warn(
                    f"rewriting did not reach a fixed point within {MAX_VISITS_PER_NODE} "
                    f"visits per node; rewrites applied so far: {dict(stats.applied)}",
                    EquilibriumBoundWarning,
                    stacklevel=2,
                )
                return
            node = queue.popleft()
            if node not in fgraph.apply_nodes:
                continue
            for entry in rewriters_for(type(node.op)):
                result = entry.rewriter.transform(fgraph, node)
                if not result:
                    continue
                pairs = normalize_replacements(node, result, entry.name)
                touched.nodes.clear()
                if apply_replacements(fgraph, pairs, entry, stats):
                    queue.extend(n for n in touched.nodes if n in fgraph.apply_nodes)
                    break
    finally:
        fgraph.remove_feature(touched)


def run_phases(
    fgraph: FunctionGraph, selected: dict[str, list[RewriteEntry]], stats: RewriteStats
) -> None:
    for phase in PHASES:
        entries = selected.get(phase, [])
        if not entries:
            continue
        start = time.perf_counter()
        # Graph rewriters run once each, in order; node rewriters share one equilibrium.
        node_entries = [e for e in entries if isinstance(e.rewriter, NodeRewriter)]
        for entry in entries:
            if isinstance(entry.rewriter, NodeRewriter):
                continue

            def apply(pairs, reason=None, plugin=None, _entry=entry):
                return apply_replacements(fgraph, list(pairs), _entry, stats, plugin)

            entry.rewriter.apply(fgraph, apply)
        if node_entries:
            run_node_rewriters(fgraph, node_entries, stats)
        stats.phase_seconds[phase] = time.perf_counter() - start
