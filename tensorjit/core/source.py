"""Where in user code a graph object was created, for error messages."""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_source_location(skip: int = 2) -> str | None:
    """Return ``"file:line"`` of the first frame outside the tensorjit package.

    Cheap: walks frame objects without building a traceback.
    """
    try:
        frame = sys._getframe(skip)
    except ValueError:
        return None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None
