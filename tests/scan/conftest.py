"""Shared by the scan rewrite tests."""

import pytest

from tensorjit.core.hooks import registries
from tensorjit.scan import rewriting


@pytest.fixture
def scan_rewrites():
    """Register the scan rewrites unless a plugin already did; remove what we added."""
    db = registries().rewrites
    added = []
    if not any(name in db.entries for name, *_ in rewriting.REWRITES):
        rewriting.register(db)
        added = [name for name, *_ in rewriting.REWRITES]
    yield
    for name in added:
        del db.entries[name]
