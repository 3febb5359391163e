"""What a softmax or log-softmax row computes, decided once for every backend's row
kernels: the host's vectorised rows (c_backend/generators/rowwise.py) and the devices'
work-item and work-group rows (device_kernels/rowwise.py) each render their own loops
(their schedule), and take these choices from here:

- the row's maximum is subtracted first; the sum of the exponentials is accumulated in
  double precision where the target has it (``accumulator_dtype``);
- softmax scales each exponential by the reciprocal of the sum, computed once per row in
  the accumulator's precision and rounded to the output type (``softmax_scale``);
- log-softmax is ``(x - max) - log(sum)``, the logarithm taken in the accumulator's
  precision, in NumPy's order: exact near the maximum (``log_softmax_value``).
"""

from __future__ import annotations


def accumulator_dtype(out_dtype: str, has_fp64: bool) -> str:
    """The dtype the sum of a row's exponentials is accumulated in."""
    return "float64" if has_fp64 else out_dtype


def softmax_scale(total: str, out_type: str) -> str:
    """C: the factor every exponential of the row is multiplied by (``total``: the sum)."""
    return f"({out_type})(1 / {total})"


def log_total(total: str, out_type: str) -> str:
    """C: the logarithm of the row's sum, in the output type."""
    return f"({out_type})log({total})"


def log_softmax_value(x: str, row_max: str, logged: str) -> str:
    """C: the log-softmax of element ``x`` (``logged``: ``log_total``'s value)."""
    return f"({x} - {row_max}) - {logged}"
