"""Fixtures of the C backend's tests (the shared constants are in helpers/c_backend.py)."""

from __future__ import annotations

import pytest

import tensorjit


@pytest.fixture(scope="module")
def module_compile_cache(tmp_path_factory):
    """A compile cache of the module's own: kernels built once are reused by its later
    tests, and nothing is written to the user's cache."""
    with tensorjit.config.change_flags(compiledir=str(tmp_path_factory.mktemp("c_cache"))):
        yield
