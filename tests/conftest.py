"""Session set-up: the second-device test plugin is installed like a third party's.

``tests/fixtures/tensorjit_wrapdev_plugin`` is built and installed with pip into a
temporary directory put on ``sys.path`` before tensorjit creates its plugin system, so
the plugin is found through its entry point exactly as after ``pip install``. Every test
then runs with a second device registered (host-only functions must not notice it).
"""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from pathlib import Path

from helpers.fixtures import install_fixture

_site: list[str] = []


def pytest_configure(config) -> None:
    if "tensorjit.core.hooks" in sys.modules:
        from tensorjit.core import hooks

        assert hooks._system is None, "the plugin system was created before the test set-up"
    base = Path(tempfile.mkdtemp(prefix="tensorjit-wrapdev-"))
    site = install_fixture("tensorjit_wrapdev_plugin", base / "site")
    _site.append(str(base))
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()


def pytest_unconfigure(config) -> None:
    for path in _site:
        shutil.rmtree(path, ignore_errors=True)
