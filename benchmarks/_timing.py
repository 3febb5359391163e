"""Timing shared by the benchmarks (run as scripts, so they import this by name)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(
    step: Callable[[], object], repeats: int, budget: float = 0.2, inner: int | None = None
) -> float:
    """Median over ``repeats`` samples of the mean time of ``step``; each sample runs
    ``step`` ``inner`` times, or, by default, as many times as fit in about ``budget``
    seconds (at least once)."""
    step()  # warm-up (compilation caches, allocator, BLAS threads, output buffers)
    if inner is None:
        start = time.perf_counter()
        step()
        once = max(time.perf_counter() - start, 1e-7)
        inner = max(1, int(budget / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            step()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)
