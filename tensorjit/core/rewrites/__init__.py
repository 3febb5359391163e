"""Graph rewriting: rewriter kinds, the phased database, merge and constant folding."""

from tensorjit.core.rewrites.basic import (
    GraphRewriter,
    NodeRewriter,
    SequenceRewriter,
    node_rewriter,
)
from tensorjit.core.rewrites.db import PHASES, RewriteDB, RewriteQuery
from tensorjit.core.rewrites.patterns import PatternRewriter

__all__ = [
    "PHASES",
    "GraphRewriter",
    "NodeRewriter",
    "PatternRewriter",
    "RewriteDB",
    "RewriteQuery",
    "SequenceRewriter",
    "node_rewriter",
]
