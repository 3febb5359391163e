"""The small core of tensorjit: graphs, rewrites, memory model, compilation, hooks.

Nothing in here imports from ``tensorjit.tensor`` or ``tensorjit.plugins``.
"""
