"""A row's maximum and the sum of its exponentials shifted by it in one pass
(``MaxExpSum``, rewriting/max_exp_sum.py) against the same graphs with the rewrite
excluded, on the graphs it serves: a logsumexp summed (the workloads' graph, float32 and
float64), a log-softmax written out (4096 x 1024 float32, and rows of 64 as a transformer
block's attention scores, 16 x 64 x 64), and a cross-entropy from logits written out
(one-hot labels, 4096 x 1000 float32). How they are compared: _one_pass.py.

Run: taskset -c 1 .venv/bin/python benchmarks/max_exp_sum.py [--threads 1] [--rounds 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _competitors import limit_threads, threads_from_argv

limit_threads(threads_from_argv(default=1))  # (the process gets that many cores)

import numpy as np  # noqa: E402
from _one_pass import compare  # noqa: E402

REWRITE = "local_max_and_shifted_exp_sum"


def logsumexp(lib: Any, x: Any) -> Any:
    top = lib.max(x, axis=-1, keepdims=True)
    return top + lib.log(lib.sum(lib.exp(x - top), axis=-1, keepdims=True))


def logsumexp_total(lib: Any, x: Any) -> Any:
    return lib.sum(x - logsumexp(lib, x))


def log_softmax(lib: Any, x: Any) -> Any:
    return x - logsumexp(lib, x)


def cross_entropy(lib: Any, x: Any, one_hot: Any) -> Any:
    return lib.mean(lib.sum(one_hot * (logsumexp(lib, x) - x), axis=-1))


def cases(rng: np.random.Generator) -> list[tuple[str, Callable, list[np.ndarray]]]:
    def floats(shape: tuple, dtype: str) -> np.ndarray:
        return (rng.standard_normal(shape) * 3).astype(dtype)

    labels = np.eye(1000, dtype="float32")[rng.integers(0, 1000, 4096)]
    return [
        ("logsumexp total 4000x1000 f32", logsumexp_total, [floats((4000, 1000), "float32")]),
        ("logsumexp total 4000x1000 f64", logsumexp_total, [floats((4000, 1000), "float64")]),
        ("log-softmax 4096x1024 f32", log_softmax, [floats((4096, 1024), "float32")]),
        ("log-softmax 16x64x64 f32", log_softmax, [floats((16, 64, 64), "float32")]),
        ("cross-entropy 4096x1000 f32", cross_entropy, [floats((4096, 1000), "float32"), labels]),
    ]


def main() -> None:
    # (a sum of 4M terms: float32's rounding there is ~1e-7 of the terms' magnitude)
    tolerances = {"float32": 2e-5, "float64": 1e-11}
    compare(REWRITE, cases(np.random.default_rng(0)), tolerances)


if __name__ == "__main__":
    main()
