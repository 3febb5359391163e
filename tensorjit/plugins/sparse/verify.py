"""``verify_grad_sparse``: check structured gradients numerically.

Like ``tensorjit.verify_grad``, but points may be scipy.sparse matrices: the gradient
w.r.t. a sparse point is structured, so each *stored* value is perturbed and compared
with the symbolic gradient at that position; the symbolic gradient must also keep the
point's pattern (no entry outside it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tensorjit.tensor as T
from tensorjit.core.compile.function import function
from tensorjit.core.gradient import grad
from tensorjit.plugins.sparse import basic
from tensorjit.plugins.sparse.type import SparseType, is_sparse_value


class SparseGradientError(AssertionError):
    """The symbolic and numerical (structured) gradients disagree."""


def _positions(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of each stored value of a csr/csc matrix, in ``x.data`` order."""
    major = np.repeat(np.arange(len(x.indptr) - 1), np.diff(x.indptr))
    return (major, x.indices) if x.format == "csr" else (x.indices, major)


def verify_grad_sparse(
    fun: Callable[..., Any],
    pt: Sequence[Any],
    n_tests: int = 2,
    rng: np.random.Generator | None = None,
    eps: float | None = None,
    abs_tol: float | None = None,
    rel_tol: float | None = None,
    mode: Any = None,
) -> None:
    """Check ``grad`` of ``fun`` at ``pt`` (dense arrays and/or csr/csc matrices)."""
    rng = rng or np.random.default_rng(42)
    values: list[Any] = []
    inputs = []
    for i, p in enumerate(pt):
        if is_sparse_value(p):
            v = p.copy() if p.format in ("csr", "csc") else p.tocsr()
            inputs.append(SparseType(v.format, v.dtype).make_variable(f"pt{i}"))
        else:
            v = np.array(p, copy=True)
            static = tuple(1 if s == 1 else None for s in v.shape)
            inputs.append(T.TensorType(v.dtype, static).make_variable(f"pt{i}"))
        if v.dtype.kind != "f":
            raise TypeError(f"verify_grad_sparse: point {i} must be float, got {v.dtype}")
        values.append(v)
    low = any(v.dtype == np.float32 for v in values)
    eps = eps or (1e-3 if low else 1e-6)
    abs_tol = abs_tol if abs_tol is not None else (3e-2 if low else 1e-5)
    rel_tol = rel_tol if rel_tol is not None else (3e-2 if low else 1e-5)

    out = fun(*inputs)
    out_value = function(inputs, out, mode=mode, on_unused_input="ignore")(*values)
    for _ in range(n_tests):
        direction = rng.uniform(0.5, 1.5, size=out_value.shape) * rng.choice(
            [-1, 1], size=out_value.shape
        )
        direction = direction.astype(out.type.dtype)
        if isinstance(out.type, SparseType):
            cost = basic.sum(basic.mul(out, direction))
        else:
            cost = T.sum(out * direction)
        grads = grad(cost, inputs, disconnected_inputs="ignore")
        cost_fn = function(inputs, cost, mode=mode, on_unused_input="ignore")
        symbolic = function(inputs, grads, mode=mode, on_unused_input="ignore")(*values)
        for i, v in enumerate(values):
            if is_sparse_value(v):
                _check_sparse(i, v, symbolic[i], values, cost_fn, eps, abs_tol, rel_tol)
            else:
                _check_dense(i, v, symbolic[i], values, cost_fn, eps, abs_tol, rel_tol)


def _compare(i, what, symbolic, numeric, abs_tol, rel_tol):
    err = np.abs(symbolic - numeric)
    bound = abs_tol + rel_tol * np.abs(numeric)
    if np.any(err > bound):
        k = int(np.argmax(err - bound))
        raise SparseGradientError(
            f"verify_grad_sparse: gradient w.r.t. input {i} is wrong at {what(k)}: symbolic "
            f"{symbolic.flat[k]!r}, numeric {numeric.flat[k]!r} "
            f"(abs_tol={abs_tol}, rel_tol={rel_tol})"
        )


def _check_sparse(i, v, sym, values, cost_fn, eps, abs_tol, rel_tol):
    if not is_sparse_value(sym):
        raise SparseGradientError(f"input {i}: the gradient of a sparse input is not sparse")
    rows, cols = _positions(v)
    pattern = {(int(r), int(c)) for r, c in zip(rows, cols)}
    sc = sym.tocoo()
    outside = [
        (int(r), int(c))
        for r, c, d in zip(sc.row, sc.col, sc.data)
        if d != 0 and (int(r), int(c)) not in pattern
    ]
    if outside:
        raise SparseGradientError(
            f"input {i}: the structured gradient has entries outside the input's pattern, "
            f"e.g. at {outside[0]}"
        )
    sym_vals = np.zeros(len(rows)) if len(rows) == 0 else np.asarray(sym.tocsr()[rows, cols])
    sym_vals = np.asarray(sym_vals, dtype=np.float64).ravel()
    numeric = np.zeros(len(rows))
    for k in range(len(rows)):
        orig = v.data[k]
        v.data[k] = orig + eps
        plus = float(cost_fn(*values))
        v.data[k] = orig - eps
        minus = float(cost_fn(*values))
        v.data[k] = orig
        numeric[k] = (plus - minus) / (2 * eps)
    _compare(
        i,
        lambda k: f"stored value {k} (row {rows[k]}, col {cols[k]})",
        sym_vals,
        numeric,
        abs_tol,
        rel_tol,
    )


def _check_dense(i, v, sym, values, cost_fn, eps, abs_tol, rel_tol):
    numeric = np.zeros(v.shape)
    for idx in np.ndindex(*v.shape):
        orig = v[idx]
        v[idx] = orig + eps
        plus = float(cost_fn(*values))
        v[idx] = orig - eps
        minus = float(cost_fn(*values))
        v[idx] = orig
        numeric[idx] = (plus - minus) / (2 * eps)
    sym = np.asarray(sym, dtype=np.float64).reshape(v.shape)
    _compare(i, lambda k: f"index {np.unravel_index(k, v.shape)}", sym, numeric, abs_tol, rel_tol)
