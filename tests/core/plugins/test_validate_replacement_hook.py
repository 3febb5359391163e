"""A plugin's tensorjit_validate_replacement veto: the substitution is rolled back whole
and counted against the rewrite that proposed it."""

from __future__ import annotations

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph import InconsistencyError
from tensorjit.core.hooks import get_plugin_system, hookimpl, register_plugin
from tensorjit.tensor import Elemwise


class VetoMerges:
    """Refuses every substitution proposed by the merge rewriter."""

    def __init__(self):
        self.seen: list[str | None] = []

    @hookimpl
    def tensorjit_validate_replacement(self, fgraph, replacements, reason):
        self.seen.append(reason)
        if reason in ("merge", "final_merge"):
            raise InconsistencyError("merging is vetoed by the test plugin")


def _exp_nodes(f):
    return [
        n
        for n in f.fgraph.apply_nodes
        if isinstance(n.op, Elemwise) and n.op.scalar_op.name == "exp"
    ]


def test_vetoed_substitution_is_rolled_back_and_counted():
    x = T.vector("x")
    y = T.exp(x) + T.exp(x)
    mode = tensorjit.FAST_RUN.excluding("fusion")  # keep the exp nodes visible
    merged = tensorjit.function([x], y, mode=mode)
    assert len(_exp_nodes(merged)) == 1  # without the veto, the two exp(x) merge

    veto = VetoMerges()
    register_plugin(veto, "test-veto-merges")
    try:
        f = tensorjit.function([x], y, mode=mode)
    finally:
        get_plugin_system().pm.unregister(veto)
    assert "merge" in veto.seen
    assert f.rewrite_stats.rejected["merge"] >= 1
    assert f.rewrite_stats.rejected_by_plugin["core"] >= 1
    assert len(_exp_nodes(f)) == 2
    value = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(f(value), 2 * np.exp(value))


def test_a_backend_can_exclude_rewrite_families():
    from tensorjit.core.registries import Backend

    class NoFusion:
        @hookimpl
        def tensorjit_register_backends(self, registry):
            registry.add(
                Backend(
                    "no-fusion", "cpu", -50, lambda: None, excludes_tags=("fusion",), plugin="test"
                )
            )

    x = T.vector("x")
    fused = tensorjit.function([x], T.exp(x) * 2 + 1)
    plugin = NoFusion()
    register_plugin(plugin, "test-no-fusion-backend")
    backends = get_plugin_system().registries.backends.backends
    try:
        mode = tensorjit.FAST_RUN.with_backends("no-fusion", "python")
        plain = tensorjit.function([x], T.exp(x) * 2 + 1, mode=mode)
    finally:
        get_plugin_system().pm.unregister(plugin)
        backends.pop("no-fusion", None)
    assert fused.rewrite_stats.applied["elemwise_fusion"] == 1
    assert plain.rewrite_stats.applied["elemwise_fusion"] == 0
    np.testing.assert_allclose(plain(np.zeros(2)), [3.0, 3.0])
