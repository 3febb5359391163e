"""The suite's own set-up, wherever it runs: each test starts from random states seeded
by its own id (tensorjit.testing.seeding), so results do not depend on which tests ran
before it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tensorjit.testing.seeding import reseed


@pytest.fixture(autouse=True)
def _conformance_seeded_random_state(request: Any) -> Iterator[None]:
    # the id without its path: the same seeds wherever the package is installed
    reseed(request.node.nodeid.split("::", 1)[-1], getattr(request.node, "module", None))
    yield
