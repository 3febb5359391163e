"""The import hook that makes ``import theano`` (and its submodules) resolve to tensorjit.

Every ``theano.a.b`` module is the source file ``_theano/a/b.py`` (or
``_theano/a/b/__init__.py``) of this package, executed as a fresh module named
``theano.a.b``. A name with no such file raises an ImportError that says the Theano
module is not supported yet; a missing attribute of a compat module raises an
AttributeError that names the Theano attribute.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

ROOT = "theano"
SOURCES = Path(__file__).with_name("_theano")


def not_supported(name: str) -> str:
    return f"{name} is not supported by tensorjit yet"


def source_of(fullname: str) -> Path | None:
    """The compat source file of module ``fullname`` (``theano...``), or None."""
    parts = fullname.split(".")
    if parts[0] != ROOT or any(not p.isidentifier() for p in parts):
        return None
    base = SOURCES.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if len(parts) > 1 and candidate == SOURCES / "__init__.py":
            continue
        if candidate.is_file():
            return candidate
    return None


#: Theano names provided by tensorjit modules that may not exist yet, loaded on first use.
LAZY = {
    "theano.scan": ("tensorjit.scan", "scan"),
    "theano.scan_module.scan": ("tensorjit.scan", "scan"),
}


def load_lazy(full: str) -> Any:
    """The object behind lazy name ``full``, or ImportError saying it is not available."""
    module_name, attr = LAZY[full]
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            f"{full} is not available yet: {module_name}.{attr} does not exist in this "
            f"tensorjit ({type(exc).__name__}: {exc})",
            name=full,
        ) from exc


class CompatModule(types.ModuleType):
    """A compat module. It is also a package (empty ``__path__``), so that
    ``from theano.x import missing`` reaches the finder, which names ``theano.x.missing``."""

    def __getattr__(self, attr: str) -> Any:
        name = self.__dict__.get("__name__", "theano")
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        hook = self.__dict__.get("_compat_getattr")
        if hook is not None:
            return hook(attr)
        full = f"{name}.{attr}"
        if full in LAZY:
            try:
                return load_lazy(full)
            except ImportError as exc:
                raise AttributeError(str(exc)) from exc.__cause__
        if source_of(full) is not None:  # a submodule not imported yet
            return importlib.import_module(full)
        raise AttributeError(not_supported(full))


class CallableModule(CompatModule):
    """``theano.compile.function`` is both a module and the ``function`` callable."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["function"](*args, **kwargs)


_CALLABLE = {"theano.compile.function"}


class TheanoFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads ``theano`` and ``theano.*`` from the compat sources."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if fullname != ROOT and not fullname.startswith(ROOT + "."):
            return None
        if fullname in LAZY:
            load_lazy(fullname)  # raises if it is missing; if not, it is no module
        source = source_of(fullname)
        if source is None:
            raise ImportError(not_supported(fullname), name=fullname)
        spec = importlib.machinery.ModuleSpec(fullname, self, origin=str(source), is_package=True)
        spec.submodule_search_locations = []
        spec.has_location = True
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        cls = CallableModule if spec.name in _CALLABLE else CompatModule
        return cls(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        source = Path(module.__spec__.origin)
        module.__file__ = str(source)
        code = compile(source.read_text(), str(source), "exec")
        exec(code, module.__dict__)

    def invalidate_caches(self) -> None:
        pass


def installed_finder() -> TheanoFinder | None:
    return next((f for f in sys.meta_path if isinstance(f, TheanoFinder)), None)
