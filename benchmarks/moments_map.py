"""A map over x reading its rows' Moments as one node (``MomentsMap``,
rewriting/moments_map.py) against the same graphs with that rewrite excluded (Moments,
then the map, in row blocks): layer norms (4096 x 1024 float32 and float64, the
transformer block's 16 x 64 x 128) and a row standardisation in float64
(_one_pass.py: how they are compared).

Run: taskset -c 1 .venv/bin/python benchmarks/moments_map.py [--threads 1] [--rounds 2]
"""

from __future__ import annotations

from collections.abc import Callable

# isort: off
from moments import layer_norm, standardise  # (first: it limits the threads before NumPy)
import numpy as np  # noqa: E402
from _one_pass import compare  # noqa: E402

# isort: on

REWRITE = "local_moments_map"


def cases(rng: np.random.Generator) -> list[tuple[str, Callable, list[np.ndarray]]]:
    def floats(shape: tuple, dtype: str) -> np.ndarray:
        return (rng.standard_normal(shape) * 2 + 1).astype(dtype)

    def layer_norm_case(shape: tuple, dtype: str) -> tuple:
        name = f"layer norm {'x'.join(map(str, shape))} {dtype[0]}{dtype[-2:]}"
        values = [floats(shape, dtype), floats(shape[-1:], dtype), floats(shape[-1:], dtype)]
        return name, layer_norm, values

    return [
        layer_norm_case((4096, 1024), "float32"),
        layer_norm_case((4096, 1024), "float64"),
        layer_norm_case((16, 64, 128), "float32"),
        ("standardise 2048x1024 f64", standardise, [floats((2048, 1024), "float64")]),
    ]


def main() -> None:
    tolerances = {"float32": 1e-5, "float64": 1e-12}
    compare(REWRITE, cases(np.random.default_rng(0)), tolerances, ("one node", "apart"))


if __name__ == "__main__":
    main()
