"""Graph rewriting: rewriter kinds, the phased database, merge and constant folding."""

from tensorjit.core.rewrites.basic import GraphRewriter, NodeRewriter, node_rewriter
from tensorjit.core.rewrites.db import PHASES, RewriteDB, RewriteQuery

__all__ = ["PHASES", "GraphRewriter", "NodeRewriter", "RewriteDB", "RewriteQuery", "node_rewriter"]
