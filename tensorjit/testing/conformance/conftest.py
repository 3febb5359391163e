"""The suite's own set-up, wherever it runs: each test starts from random states seeded
by its own id (NumPy's and Python's global generators, and the generators a module keeps
at module level), so results do not depend on which tests ran before it."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _conformance_seeded_random_state(request: Any) -> Iterator[None]:
    seed = zlib.crc32(request.node.nodeid.split("::", 1)[-1].encode())
    np.random.seed(seed % 2**32)
    random.seed(seed)
    module = getattr(request.node, "module", None)
    for value in vars(module).values() if module is not None else ():
        if isinstance(value, np.random.Generator):
            value.bit_generator.state = type(value.bit_generator)(seed).state
        elif isinstance(value, np.random.RandomState):
            value.seed(seed % 2**32)
    yield
