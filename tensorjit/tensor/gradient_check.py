"""``verify_grad``: compare a symbolic gradient with finite differences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorjit.core.compile.function import function
from tensorjit.core.gradient import grad
from tensorjit.tensor.type import TensorType


class GradientError(AssertionError):
    """The symbolic and numerical gradients disagree."""


def verify_grad(
    fun: Callable[..., Any],
    pt: Sequence[Any],
    n_tests: int = 2,
    rng: np.random.Generator | None = None,
    eps: float | None = None,
    abs_tol: float | None = None,
    rel_tol: float | None = None,
    mode: Any = None,
) -> None:
    """Check ``grad`` of ``fun`` at the point ``pt`` (a list of arrays) numerically.

    The (possibly non-scalar) output is projected on a random direction to make a scalar
    cost; its symbolic gradient is compared with central finite differences. Raises
    GradientError naming the input and the worst element if they disagree.
    """
    rng = rng or np.random.default_rng(42)
    values = [np.array(p, copy=True) for p in pt]
    for i, v in enumerate(values):
        if v.dtype.kind != "f":
            raise TypeError(f"verify_grad: point {i} must be a float array, got dtype {v.dtype}")
    low_precision = any(v.dtype in (np.float16, np.float32) for v in values)
    eps = eps or (1e-3 if low_precision else 1e-6)
    abs_tol = abs_tol if abs_tol is not None else (3e-2 if low_precision else 1e-5)
    rel_tol = rel_tol if rel_tol is not None else (3e-2 if low_precision else 1e-5)

    inputs = [
        TensorType(v.dtype, tuple(1 if s == 1 else None for s in v.shape)).make_variable(f"pt{i}")
        for i, v in enumerate(values)
    ]
    out = fun(*inputs)
    out_shape = function(inputs, out.shape, mode=mode, on_unused_input="ignore")(*values)
    for _ in range(n_tests):
        direction = rng.uniform(0.5, 1.5, size=tuple(out_shape)) * rng.choice(
            [-1, 1], size=tuple(out_shape)
        )
        cost = (out * direction.astype(out.dtype)).sum()
        grads = grad(cost, inputs, disconnected_inputs="ignore")
        cost_fn = function(inputs, cost, mode=mode, on_unused_input="ignore")
        grad_fn = function(inputs, grads, mode=mode, on_unused_input="ignore")
        symbolic = grad_fn(*values)
        for i, v in enumerate(values):
            numeric = np.zeros(v.shape, dtype=np.float64)
            for idx in np.ndindex(*v.shape):
                orig = v[idx]
                v[idx] = orig + eps
                plus = float(cost_fn(*values))
                v[idx] = orig - eps
                minus = float(cost_fn(*values))
                v[idx] = orig
                numeric[idx] = (plus - minus) / (2 * eps)
            err = np.abs(symbolic[i] - numeric)
            bound = abs_tol + rel_tol * np.abs(numeric)
            if np.any(err > bound):
                worst = np.unravel_index(np.argmax(err - bound), err.shape) if err.ndim else ()
                raise GradientError(
                    f"verify_grad: gradient w.r.t. input {i} (shape {v.shape}) is wrong at "
                    f"{worst}: symbolic {np.asarray(symbolic[i])[worst]!r}, numeric "
                    f"{numeric[worst]!r} (abs_tol={abs_tol}, rel_tol={rel_tol})"
                )
