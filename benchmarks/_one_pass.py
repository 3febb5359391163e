"""The comparison shared by the one-pass statistics benchmarks (moments.py,
max_exp_sum.py, moments_map.py): each graph compiled with its rewrite and with it
excluded, in one process, timed alternately (medians of 15), with NumPy's time and a copy
of x, new and into a buffer (the memory bound's stand-in: every graph there reads x and
writes an array of x's size or less) in the same run; values checked against NumPy in
float64 first."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import median_time

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config

Case = tuple[str, Callable[..., Any], list[np.ndarray]]


def compare(
    rewrite: str,
    cases: list[Case],
    tolerances: dict[str, float],
    labels: tuple[str, str] = ("one pass", "two passes"),
) -> None:
    """Runs the comparison for ``--threads`` and ``--rounds`` from the command line;
    ``tolerances``: per dtype name, the relative and absolute difference allowed;
    ``labels``: of the graph with the rewrite and without it."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{args.threads} thread(s); ms per call, medians of 15 ({labels[0]} / {labels[1]})")
    for name, graph, values in cases:
        inputs = [T.tensor(dtype=v.dtype.name, shape=(None,) * v.ndim) for v in values]
        output = graph(T, *inputs)
        with config.change_flags(threads=args.threads):
            one = tensorjit.function(inputs, output)
            with config.change_flags(excluded_rewrites=rewrite):
                two = tensorjit.function(inputs, output)
        want = graph(np, *[v.astype(np.float64) for v in values])
        tol = tolerances[values[0].dtype.name]
        for f in (one, two):
            np.testing.assert_allclose(f(*values), want, rtol=tol, atol=tol)
        buffer = np.empty_like(values[0])
        timed = {
            labels[0]: lambda one=one, v=values: one(*v),
            labels[1]: lambda two=two, v=values: two(*v),
            "numpy": lambda graph=graph, v=values: graph(np, *v),
            "copy of x": lambda v=values: v[0].copy(),
            # (into a buffer: the bound without the new array's page faults)
            "copyto": lambda v=values, out=buffer: np.copyto(out, v[0]),
        }
        for _ in range(args.rounds):
            times = {label: median_time(step, 15) * 1e3 for label, step in timed.items()}
            print(f"  {name:<30} " + "  ".join(f"{k} {t:.3f}" for k, t in times.items()))
