"""``theano.sparse``: tensorjit's sparse plugin (scipy.sparse values)."""

from tensorjit.plugins.sparse import *  # noqa: F403
from tensorjit.plugins.sparse import __all__ as _names

#: Theano tested this before using sparse types; the plugin needs only scipy, a
#: dependency of tensorjit.
enable_sparse = True

__all__ = ["enable_sparse", *_names]
