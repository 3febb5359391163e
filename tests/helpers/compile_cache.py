"""The test run's own compile cache, and the check that the user's cache is untouched.

Every process of the run (this one, and the subprocesses and Dask workers it starts,
which inherit the environment) compiles into one cache for tests: ``XDG_CACHE_HOME``
points at it and ``compiledir`` entries are dropped from ``TENSORJIT_FLAGS``. It lives
outside the checkout (``~/.cache/tensorjit-tests``, or ``TENSORJIT_TEST_CACHE``) so
repeated runs reuse what earlier runs compiled.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ENTRY_NAMES = ("compiledir", "cache_dir")


def _flag_entries() -> list[str]:
    from tensorjit.core.config import split_flags  # tensorjit's own parsing (quotes)

    return [e for e in split_flags(os.environ.get("TENSORJIT_FLAGS", "")) if e.strip()]


def user_cache_dir() -> Path:
    """Where the user's compiled code goes, as tensorjit would choose it."""
    for entry in _flag_entries():
        name, _, value = entry.partition("=")
        if name.strip() in _ENTRY_NAMES:
            return Path(value.strip().strip("'\"")).expanduser()
    from tensorjit.core.config import _default_compiledir  # reads the environment now

    return Path(_default_compiledir())


def cache_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (a ``.meta``
    file's time only records the entry's last load, by any process: left out)."""
    state: dict[str, tuple[int, int]] = {}
    if not root.is_dir():
        return state
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                info = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                continue
            mtime = 0 if name.endswith(".meta") else info.st_mtime_ns
            state[os.path.relpath(path, root)] = (info.st_size, mtime)
    return state


def use_test_cache() -> Path:
    """Point this process and its children at the tests' cache; returns its directory."""
    root = Path(
        os.environ.get("TENSORJIT_TEST_CACHE") or Path.home() / ".cache" / "tensorjit-tests"
    )
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ["XDG_CACHE_HOME"] = str(root)
    kept = [e for e in _flag_entries() if e.partition("=")[0].strip() not in _ENTRY_NAMES]
    if kept:
        os.environ["TENSORJIT_FLAGS"] = ",".join(kept)
    else:
        os.environ.pop("TENSORJIT_FLAGS", None)
    compiledir = root / "tensorjit"
    if "tensorjit.core.config" in sys.modules:  # imported already: move it too
        from tensorjit.core.config import config

        config.compiledir = str(compiledir)
    return compiledir


def describe_changes(before: dict, after: dict, limit: int = 10) -> list[str]:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    lines = [f"added {p}" for p in added] + [f"removed {p}" for p in removed]
    lines += [f"changed {p}" for p in changed]
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])
