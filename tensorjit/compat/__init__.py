"""Legacy-Theano compatibility: run Theano 1.0 programs unchanged on tensorjit.

::

    import tensorjit.compat
    tensorjit.compat.install()
    import theano
    import theano.tensor as T

``install()`` puts an import hook first on ``sys.meta_path`` so that ``theano`` and the
module paths Theano programs import (``theano.tensor.nnet``, ``theano.sandbox.rng_mrg``,
``theano.gof``, ...) resolve to tensorjit. What differs from Theano is documented in
``tensorjit.compat.tensor`` (dtype rules, signatures), ``.config`` (flags), ``.op``
(custom Ops) and ``.random``. A Theano module or name tensorjit does not provide raises
an ImportError / AttributeError naming it.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings

from tensorjit.compat._finder import TheanoFinder, installed_finder

__all__ = ["install", "is_installed", "uninstall"]


def is_installed() -> bool:
    return installed_finder() is not None


def install() -> None:
    """Make ``import theano`` resolve to tensorjit (idempotent).

    Raises RuntimeError if a real ``theano`` is already imported. Warns if one is
    installed (it is shadowed from now on in this process). Applies ``THEANO_FLAGS``.
    """
    if is_installed():
        return
    existing = sys.modules.get("theano")
    if existing is not None:
        raise RuntimeError(
            "tensorjit.compat.install(): a real 'theano' module is already imported "
            f"({getattr(existing, '__file__', existing)!r}); tensorjit will not replace it. "
            "Call install() before anything imports theano, in a process that should use "
            "tensorjit instead."
        )
    spec = importlib.util.find_spec("theano")
    if spec is not None:
        warnings.warn(
            f"tensorjit.compat.install(): an installed theano ({spec.origin}) is shadowed by "
            "tensorjit in this process",
            stacklevel=2,
        )
    from tensorjit.compat.config import apply_theano_flags

    apply_theano_flags()
    from tensorjit.tensor.variable import THEANO_TRUTH_RULE

    THEANO_TRUTH_RULE[0] = True
    sys.meta_path.insert(0, TheanoFinder())


def uninstall() -> None:
    """Remove the hook and forget the compat ``theano`` modules."""
    finder = installed_finder()
    if finder is not None:
        sys.meta_path.remove(finder)
    from tensorjit.tensor.variable import THEANO_TRUTH_RULE

    THEANO_TRUTH_RULE[0] = False
    for name in [n for n in sys.modules if n == "theano" or n.startswith("theano.")]:
        del sys.modules[name]
