"""Per-call overhead: a compiled ``x + 1`` on a 1-element float64 vector.

Calls per second and microseconds per call (median of repeats, same run) for tensorjit
(C backend, default mode, and ``trust_input`` where the function has such an attribute),
PyTensor (default mode and mode="CVM", each with and without ``f.trust_input = True``),
JAX (jax.jit on a device array, result waited for) and plain NumPy ``x + 1`` as the
floor. A competitor that is not installed is reported as such. Then the tutorials' call,
``train(index)`` (a minibatch sliced from a shared data set by the index, one shared
update), with the index as a Python int, a NumPy int64 and a 0-d array.

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/call_overhead.py
     [--threads 1] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import warnings

from _competitors import CpuWitness, limit_threads, setup_pytensor_blas, threads_from_argv

limit_threads(threads_from_argv())  # before NumPy loads OpenBLAS
PYTENSOR_BLAS = setup_pytensor_blas()  # same PyTensor configuration as mlp_sgd.py

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/XLA threads")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per timing sample")
    parser.add_argument("--quick", action="store_true", help="3 repeats of 0.05 s")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.budget = 3, 0.05
    witness = CpuWitness()
    x = np.ones(1)
    expected = x + 1
    rows: list[tuple[str, float | str]] = []

    def timed(name: str, call) -> None:
        np.testing.assert_allclose(np.asarray(call()), expected)
        rows.append((name, median_time(call, args.repeats, args.budget)))

    timed("numpy x + 1", lambda: x + 1)

    import tensorjit
    import tensorjit.tensor as T

    xs = T.vector("x")
    modes = [("tensorjit C", tensorjit.FAST_RUN.with_backends("c", "python"))]
    for name, mode in modes + [("tensorjit default", None)]:
        f = tensorjit.function([xs], xs + 1, **({} if mode is None else {"mode": mode}))
        timed(name, lambda f=f: f(x))
        if hasattr(f, "trust_input"):
            f.trust_input = True
            timed(f"{name}, trust_input", lambda f=f: f(x))
        elif name == "tensorjit C":
            rows.append((f"{name}, trust_input", "no trust_input attribute"))
        if name == "tensorjit C" and hasattr(f, "call_trusted"):
            # Internal fast path for loops: no argument checks, outputs not copied.
            timed(f"{name}, call_trusted()", lambda f=f: f.call_trusted([x])[0])
    tutorial_rows(rows, tensorjit, T, args)

    try:
        import pytensor
        import pytensor.tensor as pt
    except ImportError as exc:
        rows.append(("pytensor", f"not installed ({exc})"))
    else:
        px = pt.dvector("x")
        for name, mode in [("pytensor default", None), ("pytensor CVM", "CVM")]:
            for trust in (False, True):
                label = f"{name}, trust_input" if trust else name
                try:
                    f = pytensor.function([px], px + 1, mode=mode)
                except Exception as exc:  # e.g. the default mode needs numba
                    rows.append((label, f"unavailable ({type(exc).__name__}: {exc})"[:160]))
                    continue
                f.trust_input = trust
                timed(label, lambda f=f: f(x))

    try:
        import jax
    except ImportError as exc:
        rows.append(("jax", f"not installed ({exc})"))
    else:
        jax.config.update("jax_enable_x64", True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jf = jax.jit(lambda v: v + 1)
            jx = jax.numpy.asarray(x)
            timed(f"jax {jax.__version__} jit", lambda: jf(jx).block_until_ready())
            timed(f"jax {jax.__version__} jit, NumPy arg", lambda: jf(x).block_until_ready())

    floor = rows[0][1]
    assert isinstance(floor, float)
    print(
        f"compiled x + 1 on a 1-element float64 vector; Python {sys.version.split()[0]}, "
        f"NumPy {np.__version__}; median of {args.repeats} samples of ~{args.budget} s"
    )
    print(f"  {'implementation':<34}{'us/call':>9}{'calls/s':>12}{'x numpy':>9}")
    for name, value in rows:
        if isinstance(value, str):
            print(f"  {name:<34}{value}")
        else:
            print(f"  {name:<34}{value * 1e6:>9.2f}{1 / value:>12.0f}{value / floor:>9.1f}")
    print(witness.report())


def tutorial_rows(rows: list, tensorjit, T, args) -> None:
    """The tutorials' call, ``train(index)``: a step slicing a minibatch of a shared data
    set by its index argument and updating a shared weight, called with the index as a
    Python int (as the tutorials do), a NumPy int64 and a 0-d int64 array."""
    data = tensorjit.shared(np.ones((100, 3)), name="data")
    w = tensorjit.shared(np.zeros(3), name="w")
    index = T.lscalar("index")
    cost = (data[index * 2 : (index + 1) * 2] * w).sum()
    train = tensorjit.function([index], cost, updates=[(w, w + 0.5)])
    arguments = [("Python int", 3), ("np.int64", np.int64(3)), ("0-d array", np.asarray(3))]
    for label, value in arguments:
        seconds = median_time(lambda v=value: train(v), args.repeats, args.budget)
        rows.append((f"tensorjit train(index), {label}", seconds))


if __name__ == "__main__":
    main()
