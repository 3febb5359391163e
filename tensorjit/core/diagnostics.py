"""tensorjit's warning classes and its logger.

Every warning tensorjit itself issues is a ``TensorjitWarning`` (those about the
environment: a backend that can not run, an unusable compile cache, are also
``RuntimeWarning``s), so ``warnings.filterwarnings("ignore", category=TensorjitWarning)``
silences them all. Progress messages (compiles, plugin loads, cache pruning) go to the
``tensorjit`` logger at DEBUG/INFO level: ``logging.getLogger("tensorjit")``.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("tensorjit")


class TensorjitWarning(UserWarning):
    """Base class of the warnings tensorjit issues."""


class TensorjitRuntimeWarning(TensorjitWarning, RuntimeWarning):
    """A warning about the environment (a backend, a compiler, the compile cache)."""
