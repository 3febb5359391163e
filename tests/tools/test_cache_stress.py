"""The compile-cache fault/stress tool runs (small): workers racing for the same
entries, some killed, cache files damaged between rounds, and every worker that was
not killed computes right."""

from __future__ import annotations

from helpers.c_backend import NEEDS_C

from tensorjit.tools import cache_stress


@NEEDS_C
def test_racing_killed_and_damaged_compiles_lose_nothing(capsys):
    status = cache_stress.main(["--workers", "3", "--rounds", "2", "--kernels", "3"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert " 0 failed (" in out and "every kernel correct at the end: True" in out
    assert "truncated" in out and "swapped" in out  # the cache was damaged
