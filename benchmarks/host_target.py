"""The shared device kernel families on the host target (c_backend/generators/host_target.py)
against what the C backend ran before for the same ops: ``Op.perform`` (NumPy).

- MRG31k3p uniform and normal draws (the C backend registers the family): the sample
  sizes of a dropout mask to a weight initialisation.
- argmax/argmin over axes the C row kernel does not take (the family is not
  registered for them: this says why).

Each line: the median of repeats, one thread (``config.threads=1``) unless ``--threads``.
Run: taskset -c 0 .venv-bench/bin/python benchmarks/host_target.py [--repeats 7]
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import numpy as np
from _timing import median_time

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators.host_target import HOST_TARGET
from tensorjit.plugins.device_kernels.reductions import specs as reduction_specs
from tensorjit.tensor.math import Argmax
from tensorjit.tensor.random import MRG_RandomStreams

PERFORM = tensorjit.FAST_RUN.with_backends("python")


def mrg_rows(repeats: int) -> list[tuple[str, float, float]]:
    rows = []
    for dist in ("uniform", "normal"):
        for n in (10**3, 10**5, 10**6):
            family = tensorjit.function([], getattr(MRG_RandomStreams(1), dist)((n,)))
            perform = tensorjit.function(
                [], getattr(MRG_RandomStreams(1), dist)((n,)), mode=PERFORM
            )
            names = {k.name for k in family.kernels.values()}
            assert "c:mrg31k3p" in names, names
            mine, before = median_time(family, repeats), median_time(perform, repeats)
            rows.append((f"MRG31k3p {dist} n={n:,}", mine, before))
    return rows


def _run_family(run: Any, value: np.ndarray) -> None:
    run([value], [[None]])


def _numpy_argmax(moved: np.ndarray, kept: int) -> None:
    moved.reshape(*moved.shape[:kept], -1).argmax(axis=-1)


def argmax_rows(repeats: int) -> list[tuple[str, float, float]]:
    """The family's argmax run directly on host arrays, against NumPy's."""
    (spec,) = [s for s in reduction_specs(HOST_TARGET) if s.op_classes == (Argmax,)]
    x = T.tensor3("x")
    value = np.random.default_rng(0).standard_normal((200, 100, 100))
    rows = []
    for axis in ((0, 1, 2), (1, 2), (0, 2)):
        node = T.argmax(x, axis=axis).owner
        run = spec.bind(node).factory(node)
        moved = np.moveaxis(value, axis, range(-len(axis), 0))
        kept = 3 - len(axis)
        family = partial(_run_family, run, value)
        numpy = partial(_numpy_argmax, moved, kept)
        mine, before = median_time(family, repeats), median_time(numpy, repeats)
        rows.append((f"argmax (200,100,100) axis={axis}", mine, before))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tensorjit.config.change_flags(threads=args.threads):
        rows = mrg_rows(args.repeats) + argmax_rows(args.repeats)
    print(f"threads={args.threads}")
    print(f"{'case':<40} {'host target ms':>15} {'before (NumPy) ms':>18} {'ratio':>7}")
    for name, mine, before in rows:
        print(f"{name:<40} {mine * 1e3:>15.3f} {before * 1e3:>18.3f} {before / mine:>7.2f}")


if __name__ == "__main__":
    main()
