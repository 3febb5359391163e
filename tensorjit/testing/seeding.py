"""Per-test random states: a test's data do not depend on which tests ran before it."""

from __future__ import annotations

import random
import zlib
from types import ModuleType

import numpy as np


def seed_of(name: str) -> int:
    """A seed of the test's own (from its id), the same in every run."""
    return zlib.crc32(name.encode())


def reseed(name: str, module: ModuleType | None) -> None:
    """Re-seed NumPy's and Python's global generators, and the generators ``module``
    keeps at module level (``RNG = np.random.default_rng(0)``), from test ``name``."""
    seed = seed_of(name)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    for value in vars(module).values() if module is not None else ():
        if isinstance(value, np.random.Generator):
            value.bit_generator.state = type(value.bit_generator)(seed).state
        elif isinstance(value, np.random.RandomState):
            value.seed(seed % 2**32)
