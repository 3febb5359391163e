"""The machine's cache sizes (Linux's sysfs) and the thresholds the C backend derives
from them: from which size an output is written with streaming stores, and how much
cache one block of rows may fill when a program runs steps block by block.

Each is read when a kernel or function is generated, with the thread count of that
moment.
"""

from __future__ import annotations

import functools
import pathlib

from tensorjit.core.config import config
from tensorjit.plugins.c_backend.build import threads


def stream_min_bytes() -> int:
    """Config ``stream_min_bytes`` in bytes: by default, outputs of steps touching at
    least half the last-level cache stream past it (see streaming.c); with two threads
    or more, the whole cache (cached stores then pay off longer: benchmarks/RESULTS.md has
    the times at 24 and 48 MB).
    Read when a function is compiled, with the thread count of that moment."""
    chosen = config.stream_min_bytes
    if chosen != "auto":
        return chosen
    return last_level_cache_bytes() // 2 * min(threads.thread_count(), 2)


def row_block_bytes() -> int:
    """Config ``row_block_bytes`` in bytes: by default half of one core's L2 cache, see
    row_blocks.c (with several threads, each takes a range of blocks)."""
    chosen = config.row_block_bytes
    if chosen != "auto":
        return chosen
    return cache_bytes(level=2) // 2


def row_group_min_bytes() -> int:
    """The bytes a call must touch to start a group of row-blocked calls: two blocks on
    one thread; with more threads, the last-level cache (blocks then cost more kernel
    calls and a hand-over to the pool, and pay only where the rows do not stay in the
    cache: a logsumexp of 16 MiB ran 10% slower on two threads, a layer norm of 128 MiB
    1.6x faster, benchmarks/RESULTS.md). Read when a function is compiled."""
    if threads.thread_count() == 1 or config.row_block_bytes != "auto":
        return 2 * row_block_bytes()
    return last_level_cache_bytes()


def last_level_cache_bytes(cpu: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The size of this CPU's largest cache, from Linux's sysfs (32 MiB if unknown:
    sysconf's figure is the host's in some virtual machines)."""
    return cache_bytes(cpu=cpu)


@functools.cache
def cache_bytes(level: int | None = None, cpu: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The size of this CPU's largest cache of ``level`` (any level: None), from Linux's
    sysfs; if unknown 32 MiB for the last level, else 512 KiB."""
    sizes = []
    for index in pathlib.Path(cpu).glob("index*"):
        try:
            text = (index / "size").read_text().strip()
            found = int((index / "level").read_text())
        except (OSError, ValueError):
            continue
        if level is not None and found != level:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if text[:-1].isdigit() and text[-1] in units:
            sizes.append(int(text[:-1]) * units[text[-1]])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes, default=32 << 20 if level is None else 512 << 10)
