"""The compile cache's lock and directory lookup against filelock and platformdirs.

Medians of 5 rounds of 2,000 acquire/release (20,000 lookups) in a temporary directory.

Run: .venv/bin/pip install filelock platformdirs && .venv/bin/python benchmarks/cache_locks.py
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable

import filelock
import platformdirs

from tensorjit.core import config as config_module
from tensorjit.plugins.c_backend.build import compiler


def per_call_us(fn: Callable[[], object], calls: int, rounds: int = 5) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    directory = tempfile.mkdtemp()
    ours_path = os.path.join(directory, "ours.lock")
    reused = filelock.FileLock(os.path.join(directory, "reused.lock"))
    fresh_path = os.path.join(directory, "fresh.lock")

    def ours() -> None:
        with compiler._key_lock(ours_path) as acquired:
            assert acquired

    def filelock_reused() -> None:
        with reused:
            pass

    def filelock_fresh() -> None:
        with filelock.FileLock(fresh_path):
            pass

    for name, fn in [
        ("tensorjit _key_lock (fcntl)", ours),
        ("filelock.FileLock (reused)", filelock_reused),
        ("filelock.FileLock (new each time)", filelock_fresh),
    ]:
        print(f"{name:36s} {per_call_us(fn, 2000):7.2f} us per acquire+release")
    for name, fn in [
        ("tensorjit _default_compiledir", config_module._default_compiledir),
        ("platformdirs.user_cache_dir", lambda: platformdirs.user_cache_dir("tensorjit")),
    ]:
        print(f"{name:36s} {per_call_us(fn, 20000):7.2f} us per call")


if __name__ == "__main__":
    main()
