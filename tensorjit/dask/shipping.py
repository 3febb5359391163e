"""Compiled functions that travel to Dask workers and compile there once.

A :class:`Shipped` function pickles as a content token plus the function's own pickle
(graph, mode, input defaults, shared values). A worker unpickling it looks the token up
first: the function compiled for an earlier task is reused, so a graph is rewritten and
linked once per worker process, not once per task (its kernels come from the worker's
compile cache either way).
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections import OrderedDict
from typing import Any

from tensorjit.core.compile.function import Function

#: Functions unpickled in this process, by token; bounded so a long-lived worker that sees
#: many graphs does not keep them all.
_LOADED: OrderedDict[str, Function] = OrderedDict()
_LOADED_LIMIT = 64
_LOADED_LOCK = threading.Lock()


class Shipped:
    """A compiled function made ready for Dask tasks: call it like the function."""

    __slots__ = ("function", "token", "_payload")

    def __init__(self, function: Function):
        if not isinstance(function, Function):
            raise TypeError(
                f"expected a compiled tensorjit Function, got {type(function).__name__}"
            )
        self.function = function
        self._payload = pickle.dumps(function, protocol=pickle.HIGHEST_PROTOCOL)
        self.token = hashlib.sha256(self._payload).hexdigest()

    @property
    def nbytes(self) -> int:
        """Size of what a task carries for this function."""
        return len(self._payload)

    def __call__(self, *args: Any) -> Any:
        return self.function(*args)

    def __reduce__(self) -> tuple:
        return (_load_shipped, (self.token, self._payload))

    def __dask_tokenize__(self) -> str:
        return self.token

    def __repr__(self) -> str:
        return f"Shipped({self.function.name or 'function'}, token={self.token[:12]})"


def _load_shipped(token: str, payload: bytes) -> Shipped:
    with _LOADED_LOCK:
        function = _LOADED.get(token)
        if function is not None:
            _LOADED.move_to_end(token)
    if function is None:
        function = pickle.loads(payload)  # compiles, with kernels from the compile cache
        with _LOADED_LOCK:
            _LOADED[token] = function
            while len(_LOADED) > _LOADED_LIMIT:
                _LOADED.popitem(last=False)
    shipped = Shipped.__new__(Shipped)
    shipped.function, shipped.token, shipped._payload = function, token, payload
    return shipped


def loaded_count() -> int:
    """How many distinct functions this process has compiled from shipped pickles."""
    with _LOADED_LOCK:
        return len(_LOADED)


def ship(function: Function | Shipped) -> Shipped:
    """``function`` ready for Dask tasks (idempotent)."""
    return function if isinstance(function, Shipped) else Shipped(function)
