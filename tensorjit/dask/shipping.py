"""Compiled functions that travel to Dask workers and compile there once.

A :class:`Shipped` function pickles as a content token plus the function's own pickle
(graph, mode, input defaults, and the shared variables' values *when it was shipped*). A
process unpickling it looks the token up first: the function compiled for an earlier task
is reused, so a graph is rewritten and linked once per worker process, not once per task
(its kernels come from the worker's compile cache either way). Calls run that compiled
copy everywhere, in this process too, so a shipped function sees the same snapshot of
its shared values whichever scheduler runs it.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections import OrderedDict
from typing import Any

from tensorjit.core.compile.function import Function

#: Functions compiled from shipped pickles in this process, by token; bounded so a
#: long-lived worker that sees many graphs does not keep them all.
_LOADED: OrderedDict[str, Function] = OrderedDict()
_LOADED_LIMIT = 64
_LOADED_LOCK = threading.Lock()
_COMPILING: dict[str, threading.Lock] = {}  # one lock per token being compiled
_COMPILES = [0]  # how many times this process compiled a shipped function


class Shipped:
    """A compiled function made ready for Dask tasks: call it like the function.
    ``original`` is the function it was made from."""

    __slots__ = ("original", "token", "_payload")

    def __init__(self, function: Function):
        if not isinstance(function, Function):
            name = type(function).__name__
            raise TypeError(f"expected a compiled tensorjit Function, got {name}")
        self.original = function
        self._payload = pickle.dumps(function, protocol=pickle.HIGHEST_PROTOCOL)
        self.token = hashlib.sha256(self._payload).hexdigest()

    @property
    def function(self) -> Function:
        """The compiled copy calls run (compiled on first use in each process)."""
        return _compiled(self.token, self._payload)

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
        return f"Shipped({self.original.name or 'function'}, token={self.token[:12]})"


def _compiled(token: str, payload: bytes) -> Function:
    with _LOADED_LOCK:
        function = _LOADED.get(token)
        if function is not None:
            _LOADED.move_to_end(token)
            return function
        lock = _COMPILING.setdefault(token, threading.Lock())
    with lock:  # threads of one worker wanting the same function wait for one compile
        with _LOADED_LOCK:
            function = _LOADED.get(token)
        if function is None:
            function = pickle.loads(payload)  # compiles, kernels from the compile cache
            with _LOADED_LOCK:
                _COMPILES[0] += 1
                _LOADED[token] = function
                _COMPILING.pop(token, None)
                while len(_LOADED) > _LOADED_LIMIT:
                    _LOADED.popitem(last=False)
    return function


def _load_shipped(token: str, payload: bytes) -> Shipped:
    shipped = Shipped.__new__(Shipped)
    shipped.original = _compiled(token, payload)
    shipped.token, shipped._payload = token, payload
    return shipped


def loaded_count() -> int:
    """How many distinct shipped functions this process holds compiled."""
    with _LOADED_LOCK:
        return len(_LOADED)


def compile_count() -> int:
    """How many times this process compiled a shipped function (a cache miss)."""
    return _COMPILES[0]


def ship(function: Function | Shipped) -> Shipped:
    """``function`` ready for Dask tasks (idempotent); its shared values are read now."""
    return function if isinstance(function, Shipped) else Shipped(function)
