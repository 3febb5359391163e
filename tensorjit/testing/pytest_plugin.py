"""tensorjit's pytest plugin (entry point ``pytest11``: loaded wherever tensorjit is
installed, but it only adds opt-in fixtures and a marker; nothing runs unless a test asks).

- ``tensorjit_cache``: this test compiles into a fresh temporary cache;
- ``tensorjit_plugins``: ``tensorjit_plugins.register(plugin, name)`` registers a plugin
  (an object or module with hook implementations) for this test only; afterwards it is
  unregistered and every registry (ops, kernels, rewrites, ...) is as before;
- ``check_op``: ``tensorjit.testing.check_op``;
- ``@pytest.mark.tensorjit_isolated``: the test gets both isolations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "tensorjit_isolated: the test gets its own compile cache and plugin set "
        "(tensorjit's pytest plugin)",
    )


@pytest.fixture
def tensorjit_cache(tmp_path_factory: Any) -> Iterator[Any]:
    """A fresh compile cache for this test (``config.compiledir``), removed after."""
    from tensorjit.core.config import config

    path = tmp_path_factory.mktemp("tensorjit-cache")
    with config.change_flags(compiledir=str(path)):
        yield path


class PluginSet:
    """Plugins registered for one test; ``restore()`` puts the registries back."""

    def __init__(self) -> None:
        from tensorjit.core.hooks import get_plugin_system

        self.system = get_plugin_system()
        self.names: list[str] = []
        self._saved = _snapshot(self.system.registries)

    def register(self, plugin: Any, name: str) -> Any:
        """Register ``plugin`` under ``name`` (its registration hooks run now)."""
        self.system.register(plugin, name)
        # a kernel it selects must not be shadowed by a remembered miss
        self.system.kernel_source.forget_selections()
        self.names.append(name)
        return plugin

    def restore(self) -> None:
        for name in reversed(self.names):
            plugin = self.system.pm.get_plugin(name)
            if plugin is not None:
                self.system.pm.unregister(plugin)
        _restore(self._saved)
        self.system.kernel_source.forget_selections()  # kernels a removed plugin selected


def _snapshot(registries: Any) -> list[tuple[Any, str, Any]]:
    """Copies of every registry's containers, two levels deep (an op family is a list
    inside a dict)."""
    saved = []
    for registry in vars(registries).values():
        for attr, value in vars(registry).items():
            if isinstance(value, dict):
                inner = {
                    k: v.copy() if isinstance(v, (dict, list, set)) else v for k, v in value.items()
                }  # noqa: E501
                saved.append((value, attr, inner))
            elif isinstance(value, (list, set)):
                saved.append((value, attr, value.copy()))
    return saved


def _restore(saved: list[tuple[Any, str, Any]]) -> None:
    for live, _, copy in saved:  # in place: other objects hold these containers
        live.clear()
        if isinstance(live, dict):
            live.update(copy)
        elif isinstance(live, list):
            live.extend(copy)
        else:
            live.update(copy)


@pytest.fixture
def tensorjit_plugins() -> Iterator[PluginSet]:
    """Register plugins for this test only (see ``PluginSet``)."""
    plugins = PluginSet()
    try:
        yield plugins
    finally:
        plugins.restore()


@pytest.fixture
def check_op() -> Any:
    """``tensorjit.testing.check_op``."""
    from tensorjit.testing import check_op as check

    return check


def pytest_collection_modifyitems(items: list) -> None:
    """``@pytest.mark.tensorjit_isolated`` adds both isolating fixtures to a test."""
    for item in items:
        if item.get_closest_marker("tensorjit_isolated") is not None:
            for name in ("tensorjit_cache", "tensorjit_plugins"):
                if name not in item.fixturenames:
                    item.fixturenames.append(name)
