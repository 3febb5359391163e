"""Memory of the memory model: peak temporaries and per-call allocations.

Run: .venv/bin/python benchmarks/memory.py
NumPy reports its allocations to tracemalloc, so the figures below are exact bytes
allocated by array data during a call (after a warm-up call), not estimates.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

import tensorjit
import tensorjit.tensor as T


def peak_during(fn, *args) -> tuple[int, int]:
    """(peak bytes above the baseline, bytes still allocated after) during ``fn(*args)``."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    result = fn(*args)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak - base, current - base


def chain(n_ops: int, mode=None, borrow: bool = False, out_borrow: bool = False):
    x = T.vector("x")
    y = x
    for i in range(n_ops):
        y = T.tanh(y) if i % 2 else y * 1.0001 + 0.5
    return tensorjit.function(
        [tensorjit.In(x, borrow=borrow)], tensorjit.Out(y, borrow=out_borrow), mode=mode
    )


def main() -> None:
    size = 10**7
    vec = size * 8
    print(
        f"chain of 20 elementwise ops on a {size:.0e}-element float64 vector "
        f"({vec / 2**20:.0f} MiB per vector); peak allocation during a call, in vectors:"
    )
    cases = [
        ("no inplace pass", tensorjit.FAST_RUN.excluding("inplace"), False, False),
        ("FAST_RUN", None, False, False),
        ("FAST_RUN, In(borrow)", None, True, False),
        ("FAST_RUN, In(borrow), Out(borrow)", None, True, True),
    ]
    for label, mode, borrow, out_borrow in cases:
        f = chain(20, mode, borrow, out_borrow)
        x = np.random.default_rng(0).standard_normal(size)
        # First call: nothing pooled yet, so the peak is the live set of temporaries.
        cold, _ = peak_during(f, x.copy() if borrow else x)
        # Later calls reuse pooled buffers (the pool fills during the second call): what a
        # call in the steady state allocates anew.
        f(x.copy() if borrow else x)
        warm, _ = peak_during(f, x.copy() if borrow else x)
        pooled = sum(b.nbytes for bufs in f.vm.pool.values() for b in bufs)
        # The peak includes the returned output (1 vector unless it lives in the input).
        print(
            f"  {label:<34} first call: peak {cold / vec:4.2f} vectors incl. the output; "
            f"later calls allocate {warm / vec:4.2f}, {pooled / vec:4.2f} kept pooled"
        )

    n = 2000
    print(
        f"\nSGD step on a {n}x{n} shared float64 weight matrix "
        f"({n * n * 8 / 2**20:.0f} MiB), minibatch 100:"
    )
    rng = np.random.default_rng(0)
    w = tensorjit.shared(rng.standard_normal((n, n)) * 0.01, name="w")
    x = T.matrix("x")
    cost = T.tanh(T.dot(x, w)).sum()
    step = tensorjit.function([x], cost, updates={w: w - 0.01 * tensorjit.grad(cost, w)})
    batch = rng.standard_normal((100, n))
    step(batch)
    step(batch)  # warm-up: buffers reach their steady state
    buffer = w.get_value(borrow=True)
    peak, _ = peak_during(step, batch)
    same = w.get_value(borrow=True) is buffer
    print(
        f"  peak allocation during a call: {peak / (n * n * 8):.3f} weight-sized buffers "
        f"({peak / 2**20:.2f} MiB); w updated in its own buffer: {same}"
    )


if __name__ == "__main__":
    main()
