"""Data-parallel training on a LocalCluster of two worker processes equals single-process
SGD on the same minibatches, survives a killed worker, and reports what it sent."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from dask_models import data, mlp, single_process_sgd

import tensorjit
import tensorjit.tensor as T

da = pytest.importorskip("dask.array", reason="the [dask] extra is not installed")
distributed = pytest.importorskip("distributed", reason="the [dask] extra is not installed")
from tensorjit.dask import DataParallelTrainer, compile_count  # noqa: E402
from tensorjit.dask.training import _is_lost_work  # noqa: E402


def _max_error(params, reference):
    return max(float(np.abs(p.get_value() - r).max()) for p, r in zip(params, reference))


def test_synchronous_sgd_equals_single_process(client):
    X, Y = data()
    reference, ref_costs = single_process_sgd(X, Y, batch_size=50, epochs=2, learning_rate=0.1)
    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1)
    stats = trainer.fit(X, Y, batch_size=50, epochs=2)
    assert _max_error(params, reference) < 1e-10
    np.testing.assert_allclose(stats.costs, ref_costs, rtol=1e-12)
    assert stats.steps == 24 and stats.examples == 1200
    # Per step: the parameters broadcast to both workers, one gradient back per shard.
    param_bytes = sum(p.get_value().nbytes for p in params)
    assert stats.bytes_from_workers == 24 * 2 * param_bytes
    assert stats.bytes_to_workers >= 24 * 2 * param_bytes + X.nbytes + Y.nbytes


def test_dask_array_data_and_uneven_last_batch(client):
    X, Y = data(n=530)
    reference, _ = single_process_sgd(X, Y, batch_size=64, epochs=1, learning_rate=0.05)
    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.05)
    trainer.fit(da.from_array(X, chunks=(100, 20)), da.from_array(Y, chunks=100), batch_size=64)
    assert _max_error(params, reference) < 1e-10


def test_custom_update_rule_with_state(client):
    """Momentum keeps a velocity per parameter: the driver applies the same compiled rule."""
    X, Y = data()

    def momentum(params, grads):
        pairs = []
        for p, g in zip(params, grads):
            v = tensorjit.shared(np.zeros_like(p.get_value()), name=f"v_{p.name}")
            pairs += [(v, 0.9 * v - 0.05 * g), (p, p + 0.9 * v - 0.05 * g)]
        return pairs

    x, y, cost, params = mlp()
    train = tensorjit.function([x, y], cost, updates=momentum(params, T.grad(cost, params)))
    for start in range(0, 600, 60):
        train(X[start : start + 60], Y[start : start + 60])
    reference = [p.get_value() for p in params]
    x, y, cost, params = mlp()
    DataParallelTrainer(cost, params, [x, y], client, updates=momentum).fit(X, Y, batch_size=60)
    assert _max_error(params, reference) < 1e-10


def test_local_sgd_averages_state_every_k_steps(client):
    """With one shard, local SGD is plain SGD; with two, each round's result is the
    rows-weighted average of the shards' k local steps."""
    X, Y = data()
    reference, _ = single_process_sgd(X, Y, batch_size=50, epochs=1, learning_rate=0.1)
    x, y, cost, params = mlp()
    one = DataParallelTrainer(
        cost, params, [x, y], client, learning_rate=0.1, local_steps=4, n_shards=1
    )
    one.fit(X, Y, batch_size=50)
    assert _max_error(params, reference) < 1e-10

    x, y, cost, params = mlp()
    two = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1, local_steps=4)
    stats = two.fit(X, Y, batch_size=50)
    assert stats.rounds == 3 and stats.steps == 12 and len(stats.costs) == 12
    # The first round by hand: each shard's 25-row halves of minibatches 0..3, averaged.
    finals = []
    for half in (slice(0, 25), slice(25, 50)):
        xs, ys, c, ps = mlp()
        g = T.grad(c, ps)
        step = tensorjit.function([xs, ys], c, updates=[(p, p - 0.1 * gi) for p, gi in zip(ps, g)])
        for b in range(4):
            rows = slice(b * 50 + half.start, b * 50 + half.stop)
            step(X[rows], Y[rows])
        finals.append([p.get_value() for p in ps])
    x, y, cost, params = mlp()
    DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1, local_steps=4).fit(
        X[:200], Y[:200], batch_size=50
    )
    averaged = [(a + b) / 2 for a, b in zip(*finals)]
    assert _max_error(params, averaged) < 1e-12
    # State travels once per round (3 rounds of 4 steps), not once per step: out to
    # each of the two workers and back from each.
    param_bytes = sum(p.get_value().nbytes for p in params)
    assert stats.bytes_from_workers == 3 * 2 * param_bytes
    assert stats.bytes_to_workers == 3 * 2 * param_bytes + X.nbytes + Y.nbytes


def test_worker_killed_mid_training_changes_nothing(client):
    X, Y = data(n=2000)
    reference, _ = single_process_sgd(X, Y, batch_size=40, epochs=2, learning_rate=0.1)
    pids = client.run(os.getpid)
    victim = pids[sorted(pids)[0]]
    killed = threading.Event()

    def kill_once(step: int) -> None:
        if step == 10 and not killed.is_set():
            # Kill while the next round's tasks are in flight, not between rounds.
            def later():
                time.sleep(0.01)
                os.kill(victim, signal.SIGKILL)
                killed.set()

            threading.Thread(target=later, daemon=True).start()

    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1)
    stats = trainer.fit(X, Y, batch_size=40, epochs=2, callback=kill_once)
    assert killed.is_set()
    assert stats.steps == 100
    assert _max_error(params, reference) < 1e-10
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it, for the next tests
    assert victim not in client.run(os.getpid).values()


def test_workers_compile_each_graph_once(client):
    X, Y = data()
    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1)
    before = client.run(compile_count)
    trainer.fit(X, Y, batch_size=50, epochs=2)  # 24 steps, 48 tasks
    after = client.run(compile_count)
    compiles = {w: after[w] - before.get(w, 0) for w in after}
    assert all(n <= 1 for n in compiles.values()) and sum(compiles.values()) >= 1


def test_killed_worker_holding_a_shard_is_rebuilt_from_lineage(client):
    """Deterministic: the worker is gone between two rounds; the next round needs its
    shard, which the scheduler recomputes on the other worker."""
    X, Y = data(n=800)
    reference, _ = single_process_sgd(X, Y, batch_size=40, epochs=1, learning_rate=0.1)
    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1)

    def kill_at_step_5(step: int) -> None:
        if step != 5:
            return
        pids = client.run(os.getpid)
        victim = sorted(pids)[0]
        os.kill(pids[victim], signal.SIGKILL)
        deadline = time.time() + 30
        while victim in client.scheduler_info()["workers"] and time.time() < deadline:
            time.sleep(0.05)
        assert victim not in client.scheduler_info()["workers"]

    trainer.fit(X, Y, batch_size=40, callback=kill_at_step_5)
    assert _max_error(params, reference) < 1e-10
    client.wait_for_workers(2, timeout=60)


def test_sum_cost_keeps_data_free_terms_once(client):
    """With cost_is_mean=False each slice's cost carries the regulariser: it is counted
    once in all, as in the single-process step."""
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(300, 5)), rng.normal(size=300)

    def model():
        w = tensorjit.shared(np.full(5, 0.3), name="w")
        x, y = T.matrix("x"), T.vector("y")
        return x, y, T.sum((T.dot(x, w) - y) ** 2) + 10 * T.sum(w**2), w

    x, y, cost, w = model()
    step = tensorjit.function([x, y], cost, updates=[(w, w - 1e-3 * T.grad(cost, w))])
    ref_costs = [float(step(X[i : i + 30], Y[i : i + 30])) for i in range(0, 300, 30)]
    x, y, cost, w2 = model()
    trainer = DataParallelTrainer(
        cost, [w2], [x, y], client, learning_rate=1e-3, cost_is_mean=False
    )  # noqa: E501
    stats = trainer.fit(X, Y, batch_size=30)
    np.testing.assert_allclose(w2.get_value(), w.get_value(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(stats.costs, ref_costs, rtol=1e-10)


def test_other_shared_variables_are_read_each_round(client):
    """A shared variable that is not a parameter (a regularisation strength) is an input
    of the workers' function, sent again when it changes, not frozen at construction."""
    X, Y = data()
    lam = tensorjit.shared(1e-4, name="lam")

    def with_lam():
        x, y, cost, params = mlp()
        return x, y, cost + lam * (params[2] ** 2).sum(), params

    x, y, cost, params = with_lam()
    trainer = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1)
    lam.set_value(0.5)  # after the trainer was built
    stats = trainer.fit(X, Y, batch_size=50)
    sent_once = stats.bytes_to_workers
    x, y, cost, ref_params = with_lam()
    grads = T.grad(cost, ref_params)
    step = tensorjit.function(
        [x, y], cost, updates=[(p, p - 0.1 * g) for p, g in zip(ref_params, grads)]
    )  # noqa: E501
    for start in range(0, 600, 50):
        step(X[start : start + 50], Y[start : start + 50])
    assert _max_error(params, [p.get_value() for p in ref_params]) < 1e-10
    # Unchanged, it is not sent again: a second fit moves the same bytes.
    trainer.stats = type(stats)()
    assert trainer.fit(X, Y, batch_size=50).bytes_to_workers == sent_once - 8 * len(
        client.scheduler_info()["workers"]
    )  # noqa: E501


def test_a_last_minibatch_smaller_than_the_shards_leaves_no_nan(client):
    X, Y = data(n=601)  # the last minibatch has one row: one shard gets none
    reference, ref_costs = single_process_sgd(X, Y, batch_size=50, epochs=1, learning_rate=0.1)
    x, y, cost, params = mlp()
    stats = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1).fit(
        X, Y, batch_size=50
    )  # noqa: E501
    assert np.isfinite(stats.costs).all()
    np.testing.assert_allclose(stats.costs, ref_costs, rtol=1e-10)
    assert _max_error(params, reference) < 1e-10
    x, y, cost, params = mlp()
    local = DataParallelTrainer(cost, params, [x, y], client, learning_rate=0.1, local_steps=4)
    assert np.isfinite(local.fit(X, Y, batch_size=50).costs).all()


def test_only_lost_work_is_resubmitted():
    class KilledWorker(Exception):
        pass

    assert not _is_lost_work(ValueError("lost precision"))
    try:
        try:
            raise KilledWorker("worker died")
        except KilledWorker as inner:
            raise RuntimeError("gather failed") from inner
    except RuntimeError as outer:
        assert _is_lost_work(outer)


def test_bad_data_is_refused_with_names(client):
    X, Y = data()
    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(cost, params, [x, y], client)
    with pytest.raises(ValueError, match="data for 'y' .* 599 rows"):
        trainer.fit(X, Y[:-1], batch_size=50)
    with pytest.raises(TypeError, match="one array per input"):
        trainer.fit(X, batch_size=50)
    with pytest.raises(ValueError, match="local_steps"):
        DataParallelTrainer(cost, params, [x, y], client, local_steps=0)


def test_a_trainer_made_before_any_worker_joins_waits_for_one():
    """A cluster just started (or a nanny restarting a lost worker) has no worker for a
    moment: the trainer waits for one instead of refusing the cluster."""
    with (
        distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as empty,
    ):
        assert not empty.scheduler_info()["workers"]
        joins = threading.Timer(0.5, cluster.scale, args=(1,))
        joins.start()
        x, y, cost, params = mlp()
        trainer = DataParallelTrainer(cost, params, [x, y], empty, learning_rate=0.1)
        joins.join()
        assert len(trainer._workers) == 1 and trainer.n_shards == 1
