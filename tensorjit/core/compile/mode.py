"""Modes: a named rewrite query plus a choice of backends."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tensorjit.core.config import config
from tensorjit.core.rewrites.db import RewriteQuery


@dataclass(frozen=True)
class Mode:
    """``query`` selects rewrites; ``backends`` (None: every available backend of
    ``config.device``, by priority) names the backends whose kernels may be used."""

    name: str
    query: RewriteQuery
    backends: tuple[str, ...] | None = None
    debug: bool = False  # DebugMode's checks (see core/compile/debugmode.py)

    def including(self, *tags: str) -> Mode:
        return replace(self, query=self.query.including(*tags))

    def excluding(self, *tags: str) -> Mode:
        return replace(self, query=self.query.excluding(*tags))

    def without(self, *rewrite_names: str) -> Mode:
        """This mode with the named rewrites turned off."""
        return replace(self, query=self.query.without(*rewrite_names))

    def with_backends(self, *names: str) -> Mode:
        return replace(self, backends=tuple(names))


FAST_RUN = Mode("FAST_RUN", RewriteQuery(include=frozenset({"fast_run"})))
FAST_COMPILE = Mode(
    "FAST_COMPILE", RewriteQuery(include=frozenset({"fast_compile"})), backends=("python",)
)
DEBUG_MODE = Mode("DebugMode", FAST_RUN.query, debug=True)
PREDEFINED = {"FAST_RUN": FAST_RUN, "FAST_COMPILE": FAST_COMPILE, "DebugMode": DEBUG_MODE}


def get_mode(mode: str | Mode | None) -> Mode:
    if mode is None:
        mode = config.mode
    if isinstance(mode, Mode):
        return mode
    try:
        return PREDEFINED[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}; known modes: {sorted(PREDEFINED)}") from None
