"""``theano.tensor.nlinalg``."""

from tensorjit.tensor.linalg import (  # noqa: F401
    det,
    diag,
    eigh,
    inv,
    matrix_inverse,
    pinv,
    qr,
    svd,
    trace,
)
from tensorjit.tensor.linalg import diag as alloc_diag  # noqa: F401
from tensorjit.tensor.linalg import diagonal as extract_diag  # noqa: F401
