"""docs/table1.md names only what exists, and every tensor op infers its shape."""

from __future__ import annotations

import re
from pathlib import Path

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.hooks import registries

TABLE = Path(__file__).resolve().parents[2] / "docs" / "table1.md"
NAMESPACES = {
    "T": T,
    "T.linalg": T.linalg,
    "T.nnet": T.nnet,
    "T.random": T.random,
    "tensorjit": tensorjit,
}


def test_every_name_in_the_table_exists():
    rows = re.findall(r"^\| [^|]+ \| `([^`]+)` \| `([^`]+)` \|", TABLE.read_text(), re.M)
    assert len(rows) > 150
    missing = [f"{where}.{name}" for name, where in rows if not hasattr(NAMESPACES[where], name)]
    assert missing == []


def test_every_registered_tensor_op_infers_its_shape():
    classes = registries().ops.families["tensor"]
    assert len(classes) > 50
    assert [c.__name__ for c in classes if not hasattr(c, "infer_shape")] == []
