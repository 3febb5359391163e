"""The suite's run is deterministic (conftest.py): each test starts from random states
seeded by its own id, and property tests replay fixed cases unless asked to explore."""

from __future__ import annotations

import os
import random
import zlib

import numpy as np
from hypothesis import settings

RNG = np.random.default_rng(0)  # a module-level generator, as many test modules keep
LEGACY = np.random.RandomState(0)


def _fresh_draw(request) -> float:
    seed = zlib.crc32(request.node.nodeid.encode())
    return float(np.random.default_rng(seed).standard_normal())


def test_module_generators_start_from_the_tests_own_seed(request):
    # whatever ran before (another test drawing from RNG, or none), the first draw is
    # the one the test's id gives
    assert float(RNG.standard_normal()) == _fresh_draw(request)
    RNG.standard_normal(1000)  # leave the generator elsewhere for the next test


def test_a_second_test_is_not_affected_by_the_first(request):
    assert float(RNG.standard_normal()) == _fresh_draw(request)
    seed = zlib.crc32(request.node.nodeid.encode())
    assert LEGACY.randint(1 << 30) == np.random.RandomState(seed % 2**32).randint(1 << 30)
    assert np.random.randint(1 << 30) == np.random.RandomState(seed % 2**32).randint(1 << 30)
    assert random.random() == random.Random(seed).random()


def test_property_tests_replay_fixed_cases_by_default():
    if os.environ.get("TENSORJIT_HYPOTHESIS", "deterministic") == "deterministic":
        assert settings.default.derandomize and settings.default.database is None
    else:
        assert not settings.default.derandomize
