"""The compile cache stays under config.cache_max_bytes: least recently used entries go
first, entries in use are kept, and lock files left without an entry are removed."""

from __future__ import annotations

import fcntl
import io
import os
import time

import numpy as np
from helpers.c_backend import NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.__main__ import cache
from tensorjit.plugins import disk_cache
from tensorjit.plugins.c_backend.build import compiler

pytestmark = NEEDS_C


def _entry_sizes(directory):
    return {key: size for key, (_, size, _) in disk_cache._entries(directory).items()}


def _compile_three(tmp_path):
    x = T.vector("x")
    with tensorjit.config.change_flags(compiledir=str(tmp_path)):
        compiler.clear_memory_cache()
        for k, op in enumerate((T.exp, T.tanh, T.log1p)):
            tensorjit.function([x], op(x) * (k + 2))(np.ones(3))
            time.sleep(0.02)  # distinct last-use times
        return compiler.cache_dir()


def test_prune_evicts_the_least_recently_used_first(tmp_path):
    directory = _compile_three(tmp_path)
    entries = disk_cache._entries(directory)
    assert len(entries) >= 3
    oldest_first = sorted(entries, key=lambda key: entries[key][0])
    newest = oldest_first[-1]
    os.utime(os.path.join(directory, f"{oldest_first[0]}.meta"))  # the oldest is used again
    keep = entries[oldest_first[0]][1] + entries[newest][1]
    removed, freed, kept = disk_cache.prune(directory, keep)
    left = _entry_sizes(directory)
    assert oldest_first[0] in left and newest in left
    assert kept <= keep and removed == len(entries) - 2 and freed > 0


def test_an_entry_in_use_is_kept_and_dead_locks_go(tmp_path):
    directory = _compile_three(tmp_path)
    keys = sorted(disk_cache._entries(directory))
    busy = keys[0]
    dead = "f" * 64
    open(os.path.join(directory, f"{dead}.lock"), "w").close()
    fd = os.open(os.path.join(directory, f"{busy}.lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        disk_cache.prune(directory, 0)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert set(_entry_sizes(directory)) == {busy}
    assert not os.path.exists(os.path.join(directory, f"{dead}.lock"))


def test_the_limit_applies_when_entries_are_added_and_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.setattr(compiler, "PRUNE_EVERY", 1)  # check the limit at every new entry
    with tensorjit.config.change_flags(cache_max_bytes=1):
        directory = _compile_three(tmp_path)
    # Each new entry evicted the older ones; it stays itself (built under its lock).
    assert len(_entry_sizes(directory)) == 1
    with tensorjit.config.change_flags(compiledir=str(tmp_path)):
        out = io.StringIO()
        cache("prune", out=out, max_bytes=1)
    assert "least recently used entries" in out.getvalue()
    assert _entry_sizes(directory) == {}


def test_prune_without_a_limit_removes_nothing_and_refuses_bad_sizes(tmp_path, capsys):
    import pytest

    from tensorjit.__main__ import main

    directory = _compile_three(tmp_path)
    before = _entry_sizes(directory)
    with tensorjit.config.change_flags(compiledir=str(tmp_path), cache_max_bytes=0):
        out = io.StringIO()
        cache("prune", out=out)
    assert "nothing to prune" in out.getvalue() and _entry_sizes(directory) == before
    with pytest.raises(SystemExit):
        main(["cache", "prune", "--max-bytes", "-5"])
    assert "expected a number of bytes > 0" in capsys.readouterr().err
