"""The core must not depend on the tensor family or on plugins (the layering of
docs/architecture.md: a small core, everything else registered by plugins)."""

from __future__ import annotations

import ast
from pathlib import Path

import tensorjit.core

CORE = Path(tensorjit.core.__file__).parent
FORBIDDEN = ("tensorjit.tensor", "tensorjit.plugins", "tensorjit.compat")


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_core_imports_nothing_from_tensor_or_plugins():
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10
    offenders = [
        f"{path.relative_to(CORE)} imports {name}"
        for path in files
        for name in _imported_modules(path)
        if name.startswith(FORBIDDEN)
    ]
    assert offenders == []


# The core's own layers, lowest first (docs/architecture.md, "Layers of the core"): a
# module may import from its own layer and those below, never from a layer above: not at
# the top of the file, not inside a function. What a lower layer needs from a higher one
# is installed into it from above (the plugin system's registries, the compiler behind
# Variable.eval).
LAYERS = (
    ("config", "diagnostics", "source"),
    ("devices",),
    ("graph", "gradient"),
    ("registries", "memory"),
    ("kernel_selection",),
    ("rewrites",),
    ("hooks", "builtin_plugin"),
    ("compile",),
    ("__init__",),
)


def _layer(module: str) -> int:
    """The layer of ``tensorjit.core.<module>`` (a dotted name below the core)."""
    top = module.split(".")[0]
    for level, names in enumerate(LAYERS):
        if top in names:
            return level
    raise AssertionError(f"tensorjit.core.{module} is in no layer of LAYERS: add it")


def _core_imports(source: str) -> list[tuple[str, int]]:
    """(module below tensorjit.core, line) for every import of the core in ``source``,
    at any depth (function bodies included), except those only for type checkers."""
    tree = ast.parse(source)
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tensorjit.core":  # from tensorjit.core import devices
                names = [f"tensorjit.core.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            if name.startswith("tensorjit.core."):
                found.append((name.removeprefix("tensorjit.core."), node.lineno))
    return found


def upward_imports(module: str, source: str) -> list[str]:
    """The imports in ``source`` (the text of ``tensorjit.core.<module>``) of a module in
    a higher layer than its own."""
    own = _layer(module)
    return [
        f"{module} line {line} imports tensorjit.core.{name} (layer {_layer(name)} > {own})"
        for name, line in _core_imports(source)
        if _layer(name) > own
    ]


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    return ".".join(parts) if parts != ("__init__",) else "__init__"


def test_no_core_module_imports_from_a_layer_above_its_own():
    files = sorted(CORE.rglob("*.py"))
    offenders = [
        problem
        for path in files
        for problem in upward_imports(_module_name(path), path.read_text())
    ]
    assert offenders == []


def test_a_planted_function_level_upward_import_is_found():
    devices = (CORE / "devices.py").read_text()
    planted = devices + (
        "\n\ndef _declared_backends():\n"
        "    from tensorjit.core.hooks import registries\n\n"
        "    return registries().backends\n"
    )
    assert upward_imports("devices", devices) == []
    found = upward_imports("devices", planted)
    assert len(found) == 1 and "tensorjit.core.hooks" in found[0], found
    # ... and the same through ``from tensorjit.core import <module>``
    planted = devices + "\n\ndef _f():\n    from tensorjit.core import compile\n"
    assert upward_imports("devices", planted) != []


def test_every_core_module_has_a_layer():
    for path in CORE.rglob("*.py"):
        _layer(_module_name(path))  # raises for a module LAYERS does not place
