"""The sparse op family (CSR/CSC on scipy.sparse), a plugin.

Its entry point (``sparse = "tensorjit.plugins.sparse.plugin"``) registers the types,
the shared constructor, the ops and the rewrites. The public API is ``tensorjit.sparse``.
"""

from __future__ import annotations

import os

PLUGIN_NAME = "sparse"


class SparsePluginDisabledError(ImportError):
    """The sparse plugin is blocked or was not loaded, so its API can not be used."""


_enabled = False


def require_plugin() -> None:
    """Raise SparsePluginDisabledError unless the sparse plugin is registered (checked
    lazily at use time, then remembered)."""
    global _enabled
    if _enabled:
        return
    from tensorjit.core.hooks import DISABLE_AUTOLOAD_ENV, get_plugin_system

    system = get_plugin_system()
    if PLUGIN_NAME in system.plugin_names():
        _enabled = True
        return
    if PLUGIN_NAME in system.blocked:
        why = "it is listed in plugins_blocklist (TENSORJIT_FLAGS=plugins_blocklist=...)"
    elif os.environ.get(DISABLE_AUTOLOAD_ENV, "") not in ("", "0"):
        why = f"{DISABLE_AUTOLOAD_ENV}={os.environ[DISABLE_AUTOLOAD_ENV]} turned off plugin loading"
    else:
        why = "its entry point was not loaded (is tensorjit installed?)"
    raise SparsePluginDisabledError(
        f"the tensorjit sparse plugin is disabled: {why}. Remove it from the block list, or "
        "register it by hand: tensorjit.core.hooks.register_plugin("
        "tensorjit.plugins.sparse.plugin, 'sparse')"
    )


from tensorjit.plugins.sparse.basic import *  # noqa: E402,F403
from tensorjit.plugins.sparse.basic import __all__ as _basic_all  # noqa: E402
from tensorjit.plugins.sparse.type import (  # noqa: E402
    SparseConstant,
    SparseSharedVariable,
    SparseType,
    SparseVariable,
    as_sparse_variable,
    csc_matrix,
    csr_matrix,
    matrix,
)
from tensorjit.plugins.sparse.verify import verify_grad_sparse  # noqa: E402

__all__ = [
    "PLUGIN_NAME",
    "SparseConstant",
    "SparsePluginDisabledError",
    "SparseSharedVariable",
    "SparseType",
    "SparseVariable",
    "as_sparse_variable",
    "csc_matrix",
    "csr_matrix",
    "matrix",
    "require_plugin",
    "verify_grad_sparse",
    *_basic_all,
]
