"""Runs the selected rewrites of each phase over a FunctionGraph, applying their
replacements through ``replace_all_validate`` and counting what was rejected."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tensorjit.core.graph.fgraph import FunctionGraph, InconsistencyError
from tensorjit.core.rewrites.basic import NodeRewriter, Replacements, normalize_replacements
from tensorjit.core.rewrites.db import PHASES, RewriteEntry

MAX_PASSES = 50


@dataclass
class RewriteStats:
    applied: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    rejected_by_plugin: Counter = field(default_factory=Counter)


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


def run_node_rewriters(
    fgraph: FunctionGraph, entries: list[RewriteEntry], stats: RewriteStats
) -> None:
    """Walk the graph repeatedly until no node rewriter changes anything."""
    for _ in range(MAX_PASSES):
        changed = False
        for node in fgraph.toposort():
            if node not in fgraph.apply_nodes:
                continue
            for entry in entries:
                rewriter = entry.rewriter
                assert isinstance(rewriter, NodeRewriter)
                if not rewriter.accepts(node):
                    continue
                result = rewriter.transform(fgraph, node)
                if not result:
                    continue
                pairs = normalize_replacements(node, result, entry.name)
                if apply_replacements(fgraph, pairs, entry, stats):
                    changed = True
                    break
        if not changed:
            return


def run_phases(
    fgraph: FunctionGraph, selected: dict[str, list[RewriteEntry]], stats: RewriteStats
) -> None:
    for phase in PHASES:
        entries = selected.get(phase, [])
        if not entries:
            continue
        # Graph rewriters run once each, in order; node rewriters share one fixed-point walk.
        node_entries = [e for e in entries if isinstance(e.rewriter, NodeRewriter)]
        for entry in entries:
            if isinstance(entry.rewriter, NodeRewriter):
                continue

            def apply(pairs, reason=None, plugin=None, _entry=entry):
                return apply_replacements(fgraph, list(pairs), _entry, stats, plugin)

            entry.rewriter.apply(fgraph, apply)
        if node_entries:
            run_node_rewriters(fgraph, node_entries, stats)
