"""The GEMM-only bound of a one-hidden-layer MLP's SGD step: the step's five matrix
products alone (x@w1, h@w2, h.T@gz, gz@w2.T, x.T@gh), through NumPy's BLAS (the one
tensorjit calls: see config ``blas``), into buffers kept between calls. Importing this
module does not import NumPy: callers set their thread limits first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def five_gemms(x: Any, w1: Any, w2: Any) -> Callable[[], None]:
    """A step running the five products for the minibatch ``x`` and weights ``w1``
    (inputs x hidden) and ``w2`` (hidden x outputs); gradients are random stand-ins."""
    import numpy as np

    dtype = x.dtype
    batch, hidden, outputs = x.shape[0], w1.shape[1], w2.shape[1]
    rng = np.random.default_rng(1)
    gz = rng.standard_normal((batch, outputs)).astype(dtype)
    gh = rng.standard_normal((batch, hidden)).astype(dtype)
    h = np.empty((batch, hidden), dtype)
    z = np.empty((batch, outputs), dtype)
    gw2 = np.empty((hidden, outputs), dtype)
    gh_out = np.empty((batch, hidden), dtype)
    gw1 = np.empty(w1.shape, dtype)

    def step() -> None:
        np.matmul(x, w1, out=h)
        np.matmul(h, w2, out=z)
        np.matmul(h.T, gz, out=gw2)
        np.matmul(gz, w2.T, out=gh_out)
        np.matmul(x.T, gh, out=gw1)

    return step
