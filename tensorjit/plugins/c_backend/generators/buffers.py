"""Output buffers of C kernels: reuse the previous call's output when the result fits."""

from __future__ import annotations

from typing import Any

import numpy as np


def reusable(buf: Any, shape: tuple, dtype: np.dtype, inputs: list) -> bool:
    """Whether ``buf`` (the node's previous output) can take a C-contiguous result of
    ``shape``/``dtype``: ours to overwrite, and not one of this call's inputs."""
    return (
        type(buf) is np.ndarray
        and buf.shape == shape
        and buf.dtype == dtype
        and buf.flags.c_contiguous
        and buf.flags.writeable
        and not any(buf is x for x in inputs)
    )


def output_buffer(buf: Any, shape: tuple, dtype: np.dtype, inputs: list) -> np.ndarray:
    """``buf`` if it is reusable, else a new C-contiguous array."""
    return buf if reusable(buf, shape, dtype, inputs) else np.empty(shape, dtype)
