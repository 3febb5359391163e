"""A row's sum and squared deviations in one pass (``Moments``, rewriting/moments.py)
against the same graphs with the rewrite excluded, on the graphs it serves: a layer norm
(4096 x 1024 float32, and the transformer block's 16 x 64 x 128), row standardisation
``(x - mean) / std`` in float64, ``var`` along rows in float32, and a column (feature,
batch norm) standardisation in float32 (_one_pass.py: how they are compared).

Run: taskset -c 1 .venv/bin/python benchmarks/moments.py [--threads 1] [--rounds 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _competitors import limit_threads, threads_from_argv

limit_threads(threads_from_argv(default=1))  # (the process gets that many cores)

import numpy as np  # noqa: E402
from _one_pass import compare  # noqa: E402

REWRITE = "local_sum_and_squared_deviations"
EPS = 1e-5


def layer_norm(lib: Any, x: Any, g: Any, b: Any) -> Any:
    mean = lib.mean(x, axis=-1, keepdims=True)
    d = x - mean
    return d / lib.sqrt(lib.mean(d * d, axis=-1, keepdims=True) + EPS) * g + b


def standardise(lib: Any, x: Any) -> Any:
    return (x - lib.mean(x, axis=-1, keepdims=True)) / lib.std(x, axis=-1, keepdims=True)


def row_variance(lib: Any, x: Any) -> Any:
    return lib.var(x, axis=-1)


def standardise_columns(lib: Any, x: Any) -> Any:
    """A feature standardisation (a batch norm's statistics): over axis 0."""
    mean = lib.mean(x, axis=0, keepdims=True)
    return (x - mean) / lib.sqrt(lib.var(x, axis=0, keepdims=True) + EPS)


def cases(rng: np.random.Generator) -> list[tuple[str, Callable, list[np.ndarray]]]:
    def floats(shape: tuple, dtype: str) -> np.ndarray:
        return (rng.standard_normal(shape) * 2 + 1).astype(dtype)

    return [
        ("layer norm 4096x1024 f32", layer_norm, [floats((4096, 1024), "float32"),
                                                  floats((1024,), "float32"),
                                                  floats((1024,), "float32")]),
        ("layer norm 16x64x128 f32", layer_norm, [floats((16, 64, 128), "float32"),
                                                  floats((128,), "float32"),
                                                  floats((128,), "float32")]),
        ("standardise 2048x1024 f64", standardise, [floats((2048, 1024), "float64")]),
        ("var rows 8192x512 f32", row_variance, [floats((8192, 512), "float32")]),
        ("standardise cols 8192x512 f32", standardise_columns,
         [floats((8192, 512), "float32")]),
    ]  # fmt: skip


def main() -> None:
    tolerances = {"float32": 1e-5, "float64": 1e-12}
    compare(REWRITE, cases(np.random.default_rng(0)), tolerances)


if __name__ == "__main__":
    main()
