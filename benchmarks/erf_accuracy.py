"""The float32 erf and erfc of the C backend (c_backend/generators/vector_erf.py) against SciPy's
double precision values rounded to float32: the largest error in ulps and how many
results are not the correctly rounded one, over every ``--step``-th float32 in
[0, 11] and their negatives (--step 1: every float32 there, about 2.2e9 values).

Run: .venv/bin/python benchmarks/erf_accuracy.py [--step 16]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.special

import tensorjit
import tensorjit.tensor as T

CHUNK = 1 << 22


def _ordered(values: np.ndarray) -> np.ndarray:
    """float32 bit patterns as integers in the floats' order (ulp distances subtract)."""
    bits = values.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=16)
    args = parser.parse_args()
    top = int(np.float32(11).view(np.int32))
    x = T.vector("x", dtype="float32")
    for name in ("erf", "erfc"):
        f = tensorjit.function([x], getattr(T, name)(x))
        reference = getattr(scipy.special, name)
        worst, off, count = 0, 0, 0
        for start in range(0, top, CHUNK * args.step):
            bits = np.arange(start, min(start + CHUNK * args.step, top), args.step, np.int32)
            values = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
            want = reference(values.astype(np.float64)).astype(np.float32)
            distance = np.abs(_ordered(f(values)) - _ordered(want))
            worst = max(worst, int(distance.max()))
            off += int(np.count_nonzero(distance))
            count += values.size
        print(f"{name}: {count} values, largest error {worst} ulp, "
              f"{off} ({100 * off / count:.4f}%) not correctly rounded")  # fmt: skip


if __name__ == "__main__":
    main()
