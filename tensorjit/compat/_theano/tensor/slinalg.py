"""``theano.tensor.slinalg``."""

from tensorjit.tensor.linalg import cholesky, solve, solve_triangular  # noqa: F401
