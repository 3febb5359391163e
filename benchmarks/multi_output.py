"""Elementwise groups joined into one multi-output node (``MultiOutputElemwise``,
rewriting/multi_output_fusion.py) against the same graphs with that rewrite excluded
(each group its own node, the shared values stored and read back), on the classes of
graphs it serves:

- a formula with several results from shared intermediates: Black-Scholes call and put
  prices of 10^6 options (float32 and float64);
- optimiser updates, each result a shared variable updated in place: Adam (moment,
  second moment, parameter from one gradient) and SGD with momentum, 10^6 and 4 * 10^6
  float32 parameters;
- a value and its gradient: GELU and its derivative (erf and exp of the same x), 4096 x
  1024 float32.

One process, the two functions timed alternately (medians of 15), NumPy's time beside;
values checked against NumPy first. Cores: run it under taskset.

``--device opencl`` (or ``cuda``): the optimiser updates on that device, the gradient a
shared variable there too, so a call is the update's launches alone (one for the joined
node, one per group apart).

Run: taskset -c 1 .venv/bin/python benchmarks/multi_output.py [--threads 1] [--rounds 2]
     [--device opencl]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

# isort: off
from special_functions import options  # (first: it limits the threads before NumPy)
import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402
from launch_plans import DriverClock  # noqa: E402
from scipy import special  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402
from tensorjit.core.config import config  # noqa: E402

# isort: on

REWRITE = "multi_output_fusion"


def option_case(dtype: str, rng: np.random.Generator) -> tuple:
    n = 1_000_000
    bounds = ((50, 150), (50, 150), (0.1, 3), (0.05, 0.6))
    values = [rng.uniform(lo, hi, n).astype(dtype) for lo, hi in bounds]
    inputs = [T.vector(name, dtype=dtype) for name in "sktv"]

    def build() -> Callable:
        return tensorjit.function(inputs, list(options(T, T.erf, *inputs, dtype)))

    def numpy() -> Any:
        return options(np, special.erf, *values, dtype)

    return f"options 10^6 {dtype}", build, values, numpy


def gelu_case(rng: np.random.Generator) -> tuple:
    x = T.matrix("x", dtype="float32")
    half, root_half = np.float32(0.5), np.float32(1 / np.sqrt(2))
    value = x * half * (1 + T.erf(x * root_half))
    slope = tensorjit.grad(value.sum(), x)
    values = [rng.standard_normal((4096, 1024)).astype("float32")]

    def build() -> Callable:
        return tensorjit.function([x], [value, slope])

    def numpy() -> Any:
        (a,) = values
        cdf = half * (1 + special.erf(a * root_half))
        return a * cdf, cdf + a * np.exp(-0.5 * a * a) * np.float32(1 / np.sqrt(2 * np.pi))

    return "gelu and slope 4096x1024 f32", build, values, numpy


def _gradient(n: int, rng: np.random.Generator, device: str) -> tuple[Any, list, list]:
    """(the gradient variable, the function's inputs, their values): an input on the
    host, a shared variable on a device (no copy in the call)."""
    value = rng.standard_normal(n).astype("float32")
    if device == "cpu":
        g = T.vector("g", dtype="float32")
        return g, [g], [value]
    return tensorjit.shared(value, name="g", target=device), [], []


def adam_case(n: int, rng: np.random.Generator, device: str = "cpu") -> tuple:
    start = rng.standard_normal(n).astype("float32")
    p, m, v = (tensorjit.shared(a.copy(), target=device) for a in (start, start * 0, start * 0))
    g, inputs, values = _gradient(n, rng, device)
    m_new = 0.9 * m + 0.1 * g
    v_new = 0.999 * v + 0.001 * g * g
    p_new = p - 0.001 * m_new / (T.sqrt(v_new) + 1e-8)
    state = [start.copy(), start * 0, start * 0]
    grad_value = g.get_value() if not values else values[0]

    def build() -> Callable:
        return tensorjit.function(inputs, [], updates=[(m, m_new), (v, v_new), (p, p_new)])

    def numpy() -> None:
        w, mm, vv = state
        grad = grad_value
        mm *= 0.9
        mm += 0.1 * grad
        vv *= 0.999
        vv += 0.001 * grad * grad
        w -= 0.001 * mm / (np.sqrt(vv) + 1e-8)

    return f"adam {n:.0e} f32", build, values, numpy


def momentum_case(n: int, rng: np.random.Generator, device: str = "cpu") -> tuple:
    w = tensorjit.shared(rng.standard_normal(n).astype("float32"), target=device)
    velocity = tensorjit.shared(np.zeros(n, "float32"), target=device)
    g, inputs, values = _gradient(n, rng, device)
    v_new = 0.9 * velocity - 0.01 * g
    state = [w.get_value(), np.zeros(n, "float32")]
    grad_value = g.get_value() if not values else values[0]

    def build() -> Callable:
        return tensorjit.function(inputs, [], updates=[(velocity, v_new), (w, w + v_new)])

    def numpy() -> None:
        ww, vv = state
        vv *= 0.9
        vv -= 0.01 * grad_value
        ww += vv

    return f"momentum {n:.0e} f32", build, values, numpy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu, or the optimisers on a device")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = []
    if args.device == "cpu":
        cases += [option_case("float32", rng), option_case("float64", rng), gelu_case(rng)]
    cases += [adam_case(n, rng, args.device) for n in (10**6, 4 * 10**6)]
    cases += [momentum_case(n, rng, args.device) for n in (10**6, 4 * 10**6)]
    print(
        f"{args.device}, {args.threads} thread(s); ms per call, medians of 15 "
        "(one node / apart / numpy)"
    )
    clock = None if args.device == "cpu" else DriverClock(args.device)

    def finish() -> None:  # (a device's launches complete before the clock stops)
        if clock is not None:
            clock.finish()

    for name, build, values, numpy in cases:
        with config.change_flags(threads=args.threads, device=args.device):
            one = build()
            with config.change_flags(excluded_rewrites=REWRITE):
                apart = build()
        want = numpy()
        if want is not None:  # (a formula: same values as NumPy's)
            for f in (one, apart):
                for got, w in zip(f(*values), want, strict=True):
                    scale = np.abs(w).max()
                    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6 * scale)
        timed = {
            "one node": lambda f=one, v=values: (f(*v), finish()),
            "apart": lambda f=apart, v=values: (f(*v), finish()),
            "numpy": numpy,
        }
        if clock is not None:
            for label, f in (("one node", one), ("apart", apart)):
                clock.launches = 0
                f(*values)
                print(f"  {name:<30} {label}: {clock.launches} launches a call")
        for _ in range(args.rounds):
            times = {label: median_time(step, 15) * 1e3 for label, step in timed.items()}
            print(f"  {name:<30} " + "  ".join(f"{k} {t:.3f}" for k, t in times.items()))


if __name__ == "__main__":
    main()
