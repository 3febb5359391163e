"""``theano.tensor.opt``: registering a Theano-era local optimizer into tensorjit's
rewrite database, where every compiled function's rewrite phases find it.

``register_canonicalize(lopt)``, ``register_stabilize``, ``register_specialize`` put
``lopt`` (a ``theano.gof.opt.LocalOptimizer`` or a tensorjit ``NodeRewriter``) into the
phase of that name, tagged ``fast_run`` (and any tags given), so FAST_RUN uses it; as in
Theano, they may be used as decorators and return the optimizer.
"""

from tensorjit.compat._theano_rewrites import register_in_phase


def register_canonicalize(lopt=None, *tags, **kwargs):
    return register_in_phase("canonicalize", lopt, tags, kwargs)


def register_stabilize(lopt=None, *tags, **kwargs):
    return register_in_phase("stabilize", lopt, tags, kwargs)


def register_specialize(lopt=None, *tags, **kwargs):
    return register_in_phase("specialize", lopt, tags, kwargs)


def register_uncanonicalize(lopt=None, *tags, **kwargs):
    """Theano ran these after specialization; tensorjit's closest phase is specialize."""
    return register_in_phase("specialize", lopt, tags, kwargs)


# Theano kept its run-time check in this module; tensorjit's lives in tensor/checks.py.
from tensorjit.tensor.checks import Assert  # noqa: E402

assert_op = Assert("Theano Assert failed!")
