"""Where in user code a graph object was created, for error messages."""

from __future__ import annotations

import os
import sys
from types import FrameType

# With the separator: a sibling such as ``tensorjit_foo.py`` is not tensorjit's code.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: Code that is library code, not the user's: tensorjit, and the packages of plugins
#: loaded by entry point (so a plugin op's variables point at the user's line, not the
#: plugin's make_node).
_LIBRARY_PREFIXES: tuple[str, ...] = (_PACKAGE_DIR,)
#: Inside the package but written as a user writes: the conformance suite's tests build
#: graphs whose errors should point at the test's line.
_USER_CODE_IN_PACKAGE = os.path.join(_PACKAGE_DIR, "testing", "conformance") + os.sep


def add_library_code(path: str) -> None:
    """Treat ``path`` (a package directory or a module file) as library code."""
    global _LIBRARY_PREFIXES
    path = os.path.abspath(path)
    if os.path.isdir(path):
        path = path.rstrip(os.sep) + os.sep
    if path not in _LIBRARY_PREFIXES:
        _LIBRARY_PREFIXES = (*_LIBRARY_PREFIXES, path)


def user_source_location(skip: int = 2) -> str | None:
    """Return ``"file:line"`` of the first frame outside tensorjit and plugin packages.

    Cheap: walks frame objects without building a traceback.
    """
    try:
        frame: FrameType | None = sys._getframe(skip)
    except ValueError:
        return None
    prefixes = _LIBRARY_PREFIXES
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(prefixes) or filename.startswith(_USER_CODE_IN_PACKAGE):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None
