"""``theano.tests.unittest_tools``: the helpers Theano-era test code uses."""

from unittest import SkipTest  # noqa: F401

import numpy as np

from tensorjit.gradient import verify_grad as _verify_grad

_SEED = 12345


def fetch_seed(pseed=None) -> int:
    """The seed of the test random number generators (``pseed`` when given)."""
    return _SEED if pseed is None else int(pseed)


def seed_rng(pseed=None) -> int:
    """Seed NumPy's global generator as Theano's tests did; returns the seed."""
    seed = fetch_seed(pseed)
    np.random.seed(seed)
    return seed


def verify_grad(op, pt, n_tests=2, rng=None, **kwargs):
    """``theano.gradient.verify_grad`` with the test seed as the default generator."""
    if rng is None:
        seed_rng()
        rng = np.random
    return _verify_grad(op, pt, n_tests=n_tests, rng=rng, **kwargs)


def assertFailure_fast(f):
    """Theano marked tests that fail under its fast cycle detection; tensorjit's
    DestroyHandler always detects cycles exactly, so such a test runs as is."""
    return f


def assert_allclose(expected, value, rtol=None, atol=None):
    np.testing.assert_allclose(value, expected, rtol=rtol or 1e-7, atol=atol or 0)
