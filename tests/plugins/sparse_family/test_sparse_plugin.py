"""The sparse family as a plugin: registration, ``info``, blocking, and the example."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np

import tensorjit.sparse as S
from tensorjit.core.hooks import registries

ROOT = Path(__file__).resolve().parents[3]


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORJIT_")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, cwd=ROOT
    )


def test_registered_through_hooks():
    reg = registries()
    assert set(S.OP_CLASSES) <= set(reg.ops.families["sparse"])
    assert S.SparseType in reg.types.type_classes
    names = {e.name for e in reg.rewrites.entries.values() if e.plugin == "sparse"}
    assert {"local_sparse_dense_roundtrip", "local_dot_transposed_sparse"} <= names
    for e in reg.rewrites.entries.values():
        if e.plugin == "sparse":
            assert {"fast_run", "sparse"} <= e.tags


def test_info_lists_sparse_family():
    out = subprocess.run(
        [sys.executable, "-m", "tensorjit", "info"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert f"sparse: {len(S.OP_CLASSES)} op classes" in out.stdout


def test_blocklist_disables_sparse():
    code = "import tensorjit.sparse"
    res = _run(code, TENSORJIT_FLAGS="plugins_blocklist=sparse")
    assert res.returncode != 0
    assert "SparsePluginDisabledError" in res.stderr
    assert "sparse plugin is disabled" in res.stderr and "plugins_blocklist" in res.stderr
    # using the plugin's modules directly fails the same way, at use time
    use = "from tensorjit.plugins.sparse import csr_matrix; csr_matrix('x')"
    res = _run(use, TENSORJIT_FLAGS="plugins_blocklist=sparse")
    assert res.returncode != 0 and "sparse plugin is disabled" in res.stderr
    shared = "import scipy.sparse, tensorjit; tensorjit.shared(scipy.sparse.eye(3, format='csr'))"
    res = _run(shared, TENSORJIT_FLAGS="plugins_blocklist=sparse")
    assert res.returncode != 0 and "no registered constructor" in res.stderr


def test_autoload_disabled_then_registered_by_hand():
    res = _run("import tensorjit.sparse", TENSORJIT_DISABLE_PLUGIN_AUTOLOAD="1")
    assert res.returncode != 0
    assert "sparse plugin is disabled" in res.stderr
    assert "TENSORJIT_DISABLE_PLUGIN_AUTOLOAD" in res.stderr
    by_hand = (
        "import tensorjit.tensor.plugin as tp, tensorjit.plugins.sparse.plugin as sp\n"
        "from tensorjit.core.hooks import register_plugin\n"
        "register_plugin(tp, 'tensor'); register_plugin(sp, 'sparse')\n"
        "import tensorjit.sparse as S; print(S.csr_matrix('x').type)"
    )
    res = _run(by_hand, TENSORJIT_DISABLE_PLUGIN_AUTOLOAD="1")
    assert res.returncode == 0, res.stderr
    assert "SparseType(csr" in res.stdout


def test_logreg_example_trains_without_densifying():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import sparse_logreg
    finally:
        sys.path.pop(0)
    n_examples, n_features = 2000, 100_000
    dense_bytes = n_examples * n_features * 8  # 1.6 GB
    tracemalloc.start()
    try:
        losses = sparse_logreg.main(n_examples, n_features, epochs=4, quiet=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0] - 0.05, losses
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert peak < dense_bytes / 50, (peak, dense_bytes)
