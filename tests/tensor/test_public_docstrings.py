"""Every public function and class of tensorjit.tensor says what it does."""

from __future__ import annotations

import inspect

import tensorjit.tensor as T


def test_every_public_name_has_a_docstring():
    names = getattr(T, "__all__", None) or [n for n in dir(T) if not n.startswith("_")]
    missing = [
        name
        for name in names
        if (inspect.isfunction(getattr(T, name, None)) or inspect.isclass(getattr(T, name, None)))
        and not (getattr(T, name).__doc__ or "").strip()
    ]
    assert missing == []
