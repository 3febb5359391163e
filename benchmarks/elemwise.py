"""Elementwise formulae of the Theano paper's Figure 7, on one thread or several.

For each formula, size (10^3..10^7) and dtype: NumPy, numexpr, tensorjit on its Python
kernels (tj-py) and with the C backend (tj-c), PyTensor's C backend (pt-c,
mode="CVM") and Numba backend (pt-numba, mode="NUMBA"), JAX (jax.jit on inputs already
on the device, result waited for) and a memory-bandwidth bound: a copy moving as many
bytes as the formula must (read each input it uses, write one output). Times are
medians of samples taken round-robin (one sample of each implementation per round).
Every implementation's result is checked against NumPy's (values and dtype) first; a
competitor that is not installed or fails shows as n/a with the reason under the table.

The last columns read off the issue's targets (tj-c time / other time, lower is better):
c/rival against the fastest of pt-c, pt-numba and jax (target <= 1), c/ne against
numexpr (<= 0.67), c/np against NumPy (<= 0.33, multi-op formulae only) and c/copy
against the bound (<= 1.5); "targets" lists the ones missed at 10^6 elements and above.
--quick times 10^3 and 10^6 elements only, with 3 repeats.

--threads N gives every implementation N threads and N cores (tensorjit: config
threads=N); the copy bound is then N threads each copying a share, tj-c1 is tensorjit's
same function on one thread, and c/c1 reads off the target of >= 1.6x that speed (<= 0.63).

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/elemwise.py
     [--sizes 3,4,5,6,7] [--dtypes float64,float32] [--threads 1] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import os
import statistics
import sys
import tempfile
import time
import warnings

from _competitors import (
    CpuWitness,
    limit_threads,
    setup_pytensor_blas,
    thread_report,
    threads_from_argv,
)

limit_threads(threads_from_argv())  # before NumPy loads OpenBLAS and before JAX starts XLA
# Elementwise graphs use no BLAS, but the same PyTensor flags as the other benchmarks
# keep PyTensor's compile cache shared with them (the flags are part of its cache keys).
PYTENSOR_BLAS = setup_pytensor_blas()

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402

FORMULAE = [
    ("a**2 + b**2 + 2*a*b", lambda a, b: a**2 + b**2 + 2 * a * b),
    ("2*a + 3*b", lambda a, b: 2 * a + 3 * b),
    ("a+1", lambda a, b: a + 1),
    ("2*a + b**10", lambda a, b: 2 * a + b**10),
]
SINGLE_OP = {"a+1"}  # the "3x faster than NumPy" target is for multi-op formulae only
TIMED = ["numpy", "numexpr", "tj-py", "tj-c", "pt-c", "pt-numba", "jax", "copy"]
RIVALS = ["pt-c", "pt-numba", "jax"]
TARGET_FROM = 10**6  # the targets are for 10^6 and 10^7 elements


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:150]


# Each implementation is compiled once per (formula, dtype) into a "binder": given the
# NumPy inputs of one size, it returns a step that computes the formula and returns a
# finished result. A string in its place says why the implementation is unavailable.
def plain(fn):
    return lambda a, b: functools.partial(fn, a, b)


def numexpr_binders(text: str, threads: int) -> dict[str, object]:
    try:
        import numexpr
    except ImportError as exc:
        return {"numexpr": f"not installed ({exc})"}
    numexpr.set_num_threads(threads)
    return {"numexpr": lambda a, b: functools.partial(numexpr.evaluate, text, {"a": a, "b": b})}


def tensorjit_binders(formula, dtype: str) -> dict[str, object]:
    a, b = T.tensor(dtype, shape=(None,), name="a"), T.tensor(dtype, shape=(None,), name="b")
    modes = {
        "tj-py": tensorjit.FAST_RUN.with_backends("python"),
        "tj-c": tensorjit.FAST_RUN.with_backends("c", "python"),
    }
    return {
        name: plain(tensorjit.function([a, b], formula(a, b), mode=m, on_unused_input="ignore"))
        for name, m in modes.items()
    }


def pytensor_binders(formula, dtype: str) -> dict[str, object]:
    try:
        import pytensor
        import pytensor.tensor as pt
    except ImportError as exc:
        return {name: f"not installed ({exc})" for name in ("pt-c", "pt-numba")}
    a, b = pt.vector("a", dtype=dtype), pt.vector("b", dtype=dtype)
    out: dict[str, object] = {}
    for name, mode in [("pt-c", "CVM"), ("pt-numba", "NUMBA")]:
        try:
            fn = pytensor.function([a, b], formula(a, b), mode=mode, on_unused_input="ignore")
        except Exception as exc:  # e.g. no C compiler, or numba missing
            out[name] = f"compile failed ({reason(exc)})"
        else:
            out[name] = plain(fn)
    return out


def jax_binders(formula) -> dict[str, object]:
    try:
        import jax
    except ImportError as exc:
        return {"jax": f"not installed ({exc})"}
    jax.config.update("jax_enable_x64", True)  # float64 inputs stay float64
    fn = jax.jit(formula)

    def bind(a, b):
        # Inputs go to the device once, outside the timing; each step waits for its result.
        da, db = jax.device_put(a), jax.device_put(b)
        return lambda: fn(da, db).block_until_ready()

    return {"jax": bind}


def copy_step(text: str, a, threads: int):
    """A copy moving the formula's bytes: reading k inputs and writing one output is
    (k + 1) * n element transfers, as is copying (k + 1) * n / 2 elements. The
    destination is kept across calls, so this is the floor without allocation. With
    several threads, each copies its share (NumPy's copy releases the GIL): the bound
    for that many threads."""
    k = 2 if "b" in text else 1
    src = np.resize(a, (k + 1) * a.size // 2)
    dst = np.empty_like(src)
    if threads == 1:
        return functools.partial(np.copyto, dst, src)
    (first, *others) = zip(np.array_split(dst, threads), np.array_split(src, threads))
    pool = _copy_pool(threads)

    def copy() -> None:
        futures = [pool.submit(np.copyto, d, s) for d, s in others]
        np.copyto(*first)
        for future in futures:
            future.result()

    return copy


@functools.cache
def _copy_pool(threads: int):
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(threads - 1)


def one_thread(binder):
    """tj-c (``binder``, compiled with config threads=1) run with the worker pool held
    to one thread (the same-run baseline). The pool is set directly, a C call: changing the
    config also sets the BLAS's threads, which costs ~10 us, as much as a 10^5 step."""
    from tensorjit.plugins.c_backend.build import threads

    def bind(a, b):
        step = binder(a, b)
        pool = threads._load_pool()
        if pool is None:
            return step
        set_threads, count = pool[1].tj_pool_set_threads, threads.thread_count()

        def run():
            set_threads(1)
            try:
                return step()
            finally:
                set_threads(count)

        return run

    return bind


def ratio(times: dict[str, float], other: str | None) -> float | None:
    if other is None or other not in times:
        return None
    return times["tj-c"] / times[other]


def run_row(text, formula, binders, dtype, n, args, rng, notes) -> str:
    a = rng.uniform(0.5, 1.0, n).astype(dtype)
    b = rng.uniform(0.5, 1.0, n).astype(dtype)
    expected = formula(a, b)
    rtol = 100 * np.finfo(dtype).eps  # a few rounding steps, e.g. b**10 by multiplications
    steps, cells = {}, {}
    for name in TIMED:
        if name == "copy":
            continue
        binder = binders[name]
        try:
            if isinstance(binder, str):
                raise RuntimeError(binder)
            step = binder(a, b)
            got = step()
            if np.asarray(got).dtype != expected.dtype:
                raise TypeError(f"result dtype {np.asarray(got).dtype}, NumPy's {expected.dtype}")
            np.testing.assert_allclose(np.asarray(got), expected, rtol=rtol, atol=0)
        except Exception as exc:
            if name.startswith("tj"):
                raise  # a wrong answer from tensorjit itself is a bug, not a missing rival
            note = str(exc) if isinstance(binder, str) else reason(exc)
            note = f"{name}: {note}"
            if note not in notes:
                notes.append(note)
            cells[name] = f"n/a[{notes.index(note) + 1}]"
        else:
            steps[name] = step
    steps["copy"] = copy_step(text, a, args.threads)

    # Round-robin samples, so a slow spell of the shared machine hits every column alike.
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            samples[name].append(median_time(step, 1, args.budget))
    times = {name: statistics.median(values) for name, values in samples.items()}

    line = f"  {n:>9}"
    for name in TIMED:
        line += f"{times[name] * 1e6:>10.1f}" if name in times else f"{cells[name]:>10}"
    rivals = [r for r in RIVALS if r in times]
    best = min(rivals, key=times.__getitem__) if rivals else None
    checks = [  # (label, tj-c / other, target)
        ("rival", ratio(times, best), 1.0),
        ("ne", ratio(times, "numexpr"), 1 / 1.5),
        ("np", ratio(times, "numpy"), 1 / 3 if text not in SINGLE_OP else None),
        ("copy", ratio(times, "copy"), 1.5),
    ]
    if "tj-c1" in times:  # two threads: >= 1.6x the one-thread speed where bandwidth allows
        checks.append(("c1", ratio(times, "tj-c1"), 1 / 1.6))
    line += f"{best or 'n/a':>10}"
    line += "".join(f"{'-' if r is None else f'{r:.2f}':>8}" for _, r, _ in checks)
    if n >= TARGET_FROM:
        missed = [lab for lab, r, tgt in checks if r is not None and tgt is not None and r > tgt]
        line += "  " + (f"missed {','.join(missed)}" if missed else "ok")
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3,4,5,6,7", help="exponents of 10")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/XLA threads")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=0.02, help="seconds per timing sample")
    parser.add_argument("--quick", action="store_true", help="sizes 10^3, 10^6; 3 repeats")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.repeats, args.budget = "3,6", 3, 0.01
    sizes = [10 ** int(e) for e in args.sizes.split(",")]
    dtypes = [d.strip() for d in args.dtypes.split(",")]
    witness = CpuWitness()
    print(
        f"Python {sys.version.split()[0]}, NumPy {np.__version__}; --threads {args.threads}; "
        f"median of {args.repeats} round-robin samples of ~{args.budget} s"
    )
    print(", ".join(f"{d} {version(d)}" for d in ("numexpr", "pytensor", "numba", "jax", "jaxlib")))
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}")
    print("times in microseconds; ratios are tj-c time / the other's (lower: tj-c faster)")
    tensorjit.config.threads = args.threads  # the C backend's kernels (and its BLAS)
    if args.threads > 1:
        TIMED.insert(TIMED.index("tj-c") + 1, "tj-c1")
    header = f"  {'n':>9}" + "".join(f"{name:>10}" for name in TIMED + ["rival"])
    ratios = ["c/rival", "c/ne", "c/np", "c/copy"] + (["c/c1"] if args.threads > 1 else [])
    header += "".join(f"{name:>8}" for name in ratios)
    header += "  targets"
    notes: list[str] = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as cache, tensorjit.config.change_flags(compiledir=cache):
        for dtype in dtypes:
            for text, formula in FORMULAE:
                start = time.perf_counter()
                binders = {"numpy": plain(formula)}
                binders.update(numexpr_binders(text, args.threads))
                binders.update(tensorjit_binders(formula, dtype))
                if args.threads > 1:
                    with tensorjit.config.change_flags(threads=1):
                        binders["tj-c1"] = one_thread(tensorjit_binders(formula, dtype)["tj-c"])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # PyTensor's and JAX's set-up chatter
                    binders.update(pytensor_binders(formula, dtype))
                    binders.update(jax_binders(formula))
                compiled = time.perf_counter() - start
                print(f"\n{text}  {dtype}  (all compiled in {compiled:.1f} s)")
                print(header)
                for n in sizes:
                    print(run_row(text, formula, binders, dtype, n, args, rng, notes), flush=True)
    print()
    for i, note in enumerate(notes, 1):
        print(f"[{i}] {note}")
    print(f"thread pools: {thread_report()}")
    print(witness.report())


if __name__ == "__main__":
    main()
