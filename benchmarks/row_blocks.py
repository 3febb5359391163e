"""Row-blocked programs (c_backend/whole_graph/row_blocks.c) against the same steps run
over all rows: a layer norm and a logsumexp written out, float32, at an L3-resident and a
beyond-cache size, on ``--threads`` threads. Both functions are compiled in one process
(``row_block_bytes`` auto, and 0) and timed alternately; their values are asserted equal.

Run: taskset -c 0,1 .venv/bin/python benchmarks/row_blocks.py --threads 2 [--rounds 2]
"""

from __future__ import annotations

import argparse
from typing import Any

from _competitors import limit_threads, threads_from_argv

limit_threads(threads_from_argv(default=2))  # (the process gets that many cores)

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402
from tensorjit.core.config import config  # noqa: E402

SIZES = ((4096, 1024), (16384, 2048))


def layer_norm() -> tuple[list, Any]:
    x, g, b = (
        T.matrix("x", dtype="float32"),
        T.vector("g", dtype="float32"),
        T.vector("b", dtype="float32"),
    )
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=1, keepdims=True)
    return [x, g, b], d / T.sqrt(var + 1e-5) * g + b


def logsumexp_total() -> tuple[list, Any]:
    x = T.matrix("x", dtype="float32")
    m = x.max(axis=1, keepdims=True)
    lse = m + T.log(T.exp(x - m).sum(axis=1, keepdims=True))
    return [x], (x - lse).sum()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{args.threads} threads; ms per call, medians of 21 (blocks auto / none)")
    for rows, cols in SIZES:
        x = rng.standard_normal((rows, cols)).astype("float32")
        g, b = (rng.standard_normal(cols).astype("float32") for _ in range(2))
        for name, build, values in (
            ("layer norm", layer_norm, (x, g, b)),
            ("logsumexp", logsumexp_total, (x,)),
        ):
            inputs, output = build()
            with config.change_flags(threads=args.threads):
                fns = {}
                for label, blocks in (("blocks", "auto"), ("none", 0)):
                    with config.change_flags(row_block_bytes=blocks):
                        fns[label] = tensorjit.function(inputs, output)
                np.testing.assert_array_equal(fns["blocks"](*values), fns["none"](*values))
                for _ in range(args.rounds):
                    times = {
                        label: median_time(lambda f=f, v=values: f(*v), 21) * 1e3
                        for label, f in fns.items()
                    }
                    print(
                        f"  {name:<10} {rows}x{cols}: blocks {times['blocks']:.2f}"
                        f"  none {times['none']:.2f}"
                    )


if __name__ == "__main__":
    main()
