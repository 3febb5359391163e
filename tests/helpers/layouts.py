"""The same matrix in the memory layouts kernels must handle."""

from __future__ import annotations

import numpy as np


def matrix_layouts(base: np.ndarray, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """The top-left ``shape`` block of ``base`` (at least twice as large both ways):
    C-contiguous, Fortran-ordered, every other row and column of ``base``, and reversed
    along both axes. Every layout holds the same values except "strided" (other
    elements of base), the same for every call with the same base."""
    contiguous = np.ascontiguousarray(base[: shape[0], : shape[1]])
    return {
        "contiguous": contiguous,
        "fortran": np.asfortranarray(contiguous),
        "strided": base[::2, ::2][: shape[0], : shape[1]],
        "reversed": contiguous[::-1, ::-1],
    }
