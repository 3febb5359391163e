"""The small core of tensorjit: graphs, rewrites, memory model, compilation, hooks.

Nothing in here imports from ``tensorjit.tensor`` or ``tensorjit.plugins``.
"""

# The layers above install what the layers below use without importing them (the
# layering of docs/architecture.md): the plugin system gives devices and memory their
# registries, compilation gives Variable.eval its compiler. Importing any part of the
# core runs this first.
from tensorjit.core import compile as _compile  # noqa: E402, F401
from tensorjit.core import hooks as _hooks  # noqa: E402, F401
