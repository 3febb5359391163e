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
