"""The compile cache's lock and directory lookup against filelock and platformdirs.

Run: .venv/bin/pip install filelock platformdirs && .venv/bin/python benchmarks/cache_locks.py
"""

import os
import statistics
import tempfile
import time

import filelock
import platformdirs

from tensorjit.core import config as cfgmod
from tensorjit.plugins.c_backend import compiler

d = tempfile.mkdtemp()
p = os.path.join(d, "k.lock")


def ours():
    with compiler._key_lock(p) as ok:
        assert ok


fl = filelock.FileLock(p + "2")


def theirs():
    with fl:
        pass


def theirs_new():
    with filelock.FileLock(p + "3"):
        pass


for name, fn in [
    ("tensorjit _key_lock (fcntl)", ours),
    ("filelock.FileLock (reused)", theirs),
    ("filelock.FileLock (new each time)", theirs_new),
]:
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(2000):
            fn()
        runs.append((time.perf_counter() - t) / 2000 * 1e6)
    print(f"{name:36s} {statistics.median(runs):6.2f} us per acquire+release")
for name, fn in [
    ("tensorjit _default_compiledir", cfgmod._default_compiledir),
    ("platformdirs.user_cache_dir", lambda: platformdirs.user_cache_dir("tensorjit")),
]:
    t = time.perf_counter()
    for _ in range(20000):
        fn()
    print(f"{name:36s} {(time.perf_counter() - t) / 20000 * 1e6:6.2f} us per call")
