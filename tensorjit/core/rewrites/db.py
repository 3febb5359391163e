"""The rewrite database: named rewriters in ordered phases, selected by tag queries.

Names and tags are separate namespaces. A mode is a query: include any of some tags,
require all of others, exclude some. This module alone defines the phase order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tensorjit.core.rewrites.basic import GraphRewriter, NodeRewriter

PHASES: tuple[str, ...] = (
    "canonicalize",  # merge/CSE, constant folding, algebraic normal forms
    "stabilize",  # numerically stable forms (log1p, softplus, ...)
    "specialize",  # faster forms (sqr, GEMM, views)
    "fusion",  # elementwise fusion
    "transfer",  # host <-> device placement
    "inplace",  # destructive variants, validated by the DestroyHandler
    "cleanup",  # final merge
)


@dataclass(frozen=True)
class RewriteEntry:
    name: str
    rewriter: NodeRewriter | GraphRewriter
    phase: str
    tags: frozenset[str]
    position: float
    plugin: str | None


@dataclass(frozen=True)
class RewriteQuery:
    """Selects entries by tags (include any, require all, exclude any); names are a
    separate namespace: ``exclude_names`` turns single rewrites off by name."""

    include: frozenset[str] = frozenset()
    require: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    exclude_names: frozenset[str] = frozenset()

    def including(self, *tags: str) -> RewriteQuery:
        return replace(self, include=self.include | set(tags))

    def requiring(self, *tags: str) -> RewriteQuery:
        return replace(self, require=self.require | set(tags))

    def excluding(self, *tags: str) -> RewriteQuery:
        return replace(self, exclude=self.exclude | set(tags))

    def without(self, *names: str) -> RewriteQuery:
        return replace(self, exclude_names=self.exclude_names | set(names))

    def matches(self, entry: RewriteEntry) -> bool:
        if entry.name in self.exclude_names:
            return False
        tags = entry.tags
        return bool(tags & self.include) and self.require <= tags and not (tags & self.exclude)


@dataclass
class RewriteDB:
    entries: dict[str, RewriteEntry] = field(default_factory=dict)

    def register(
        self,
        name: str,
        rewriter: NodeRewriter | GraphRewriter,
        phase: str,
        *tags: str,
        position: float = 0.0,
        plugin: str | None = None,
    ) -> None:
        """Add ``rewriter`` to ``phase``; it gets the tags given plus the phase name."""
        if phase not in PHASES:
            raise ValueError(f"rewrite {name!r}: unknown phase {phase!r}; phases are {PHASES}")
        if name in self.entries:
            raise ValueError(f"a rewrite named {name!r} is already registered")
        if not isinstance(rewriter, (NodeRewriter, GraphRewriter)):
            raise TypeError(f"rewrite {name!r}: {rewriter!r} is not a NodeRewriter/GraphRewriter")
        all_tags = frozenset(tags) | {phase}
        self.entries[name] = RewriteEntry(name, rewriter, phase, all_tags, position, plugin)

    def query(self, query: RewriteQuery) -> dict[str, list[RewriteEntry]]:
        """Selected entries per phase, in (position, name) order."""
        selected: dict[str, list[RewriteEntry]] = {p: [] for p in PHASES}
        for entry in self.entries.values():
            if query.matches(entry):
                selected[entry.phase].append(entry)
        for entries in selected.values():
            entries.sort(key=lambda e: (e.position, e.name))
        return selected
