"""Session set-up: the second-device test plugin is installed like a third party's.

``tests/fixtures/tensorjit_wrapdev_plugin`` is built and installed with pip into a
temporary directory put on ``sys.path`` before tensorjit creates its plugin system, so
the plugin is found through its entry point exactly as after ``pip install``. Every test
then runs with a second device registered (host-only functions must not notice it).
The run compiles into its own cache and checks the user's is untouched
(helpers/compile_cache.py).
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.compile_cache import cache_state, describe_changes, use_test_cache, user_cache_dir
from helpers.fixtures import install_fixture
from hypothesis import settings

# Property tests: the default run replays the same cases every time (derandomized, no
# example database); TENSORJIT_HYPOTHESIS=explore draws new random cases (README, "Tests").
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=500)
settings.load_profile(os.environ.get("TENSORJIT_HYPOTHESIS", "deterministic"))


@pytest.fixture(autouse=True)
def _seeded_random_state(request):
    """Every test starts from random states of its own: NumPy's and Python's global
    generators, and the generators its module keeps at module level, are re-seeded
    from the test's id (tensorjit.testing.seeding). A test's data then do not depend on
    which tests ran before it (alone, or in any order)."""
    from tensorjit.testing.seeding import reseed  # (tensorjit is imported after set-up)

    reseed(request.node.nodeid, getattr(request.node, "module", None))
    yield


_site: list[str] = []
_user_cache: dict = {}


def pytest_configure(config) -> None:
    # The user's compile cache is never written by the tests (checked at the end).
    user_cache = user_cache_dir()
    test_cache = use_test_cache()
    # A test run started by a test (a subprocess) already uses the tests' cache.
    if user_cache.resolve() != test_cache.resolve():
        _user_cache.update(root=user_cache, state=cache_state(user_cache))
    if "tensorjit.core.hooks" in sys.modules:
        from tensorjit.core import hooks

        assert hooks._system is None, "the plugin system was created before the test set-up"
    base = Path(tempfile.mkdtemp(prefix="tensorjit-wrapdev-"))
    site = install_fixture("tensorjit_wrapdev_plugin", base / "site")
    _site.append(str(base))
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()


def pytest_sessionfinish(session, exitstatus) -> None:
    if not _user_cache:
        return
    root = _user_cache["root"]
    changes = describe_changes(_user_cache["state"], cache_state(root))
    if changes:
        print(f"\nthe test run changed the user's compile cache {root}:", file=sys.stderr)
        for line in changes:
            print(f"  {line}", file=sys.stderr)
        session.exitstatus = 1


def pytest_unconfigure(config) -> None:
    for path in _site:
        shutil.rmtree(path, ignore_errors=True)
