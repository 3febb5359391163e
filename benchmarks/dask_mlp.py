"""Data-parallel training of the paper's MLP (784 -> 500 tanh -> 10 softmax) on Dask.

For each minibatch size: examples/s and median ms per step of
- one process: the compiled SGD function (``function(..., updates=...)``), the baseline;
- synchronous data-parallel SGD (``tensorjit.dask.DataParallelTrainer``) on a
  LocalCluster of 1 and of 2 worker processes (one thread each);
- local SGD (state averaged every --local-steps minibatches) on 2 workers;
and the bytes moved per step (parameters to the workers, gradients or state back, as
array payloads). Every worker and the driver run BLAS on one thread, so on a 2-core
machine "2 workers" means both cores busy with the driver and scheduler competing.
Parameters are checked equal to the single-process run's (synchronous SGD) before timing
is reported.

Run: .venv/bin/pip install -e ".[dask]" && .venv/bin/python benchmarks/dask_mlp.py
     [--batches 60,600,3000] [--examples 24000] [--local-steps 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before NumPy: workers inherit it
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402
from tensorjit.dask import DataParallelTrainer, TrainingStats  # noqa: E402

N_IN, N_HIDDEN, N_OUT = 784, 500, 10
LEARNING_RATE = 0.01


def mlp():
    rng = np.random.default_rng(1)
    params = [
        tensorjit.shared(rng.normal(scale=0.03, size=(N_IN, N_HIDDEN)), name="W1"),
        tensorjit.shared(np.zeros(N_HIDDEN), name="b1"),
        tensorjit.shared(rng.normal(scale=0.03, size=(N_HIDDEN, N_OUT)), name="W2"),
        tensorjit.shared(np.zeros(N_OUT), name="b2"),
    ]
    W1, b1, W2, b2 = params
    x, y = T.matrix("x"), T.lvector("y")
    prob = T.nnet.softmax(T.dot(T.tanh(T.dot(x, W1) + b1), W2) + b2)
    cost = -T.mean(T.log(prob)[T.arange(y.shape[0]), y])
    return x, y, cost, params


def single_process(X, Y, batch: int):
    x, y, cost, params = mlp()
    grads = T.grad(cost, params)
    updates = [(p, p - LEARNING_RATE * g) for p, g in zip(params, grads)]
    step = tensorjit.function([x, y], cost, updates=updates)
    initial = [p.get_value() for p in params]
    step(X[:batch], Y[:batch])  # buffers warm
    for p, value in zip(params, initial):
        p.set_value(value)
    times = []
    for start in range(0, len(X) - batch + 1, batch):
        began = time.perf_counter()
        step(X[start : start + batch], Y[start : start + batch])
        times.append(time.perf_counter() - began)
    return statistics.median(times), [p.get_value() for p in params]


def distributed_run(client, X, Y, batch: int, local_steps: int):
    x, y, cost, params = mlp()
    trainer = DataParallelTrainer(
        cost, params, [x, y], client, learning_rate=LEARNING_RATE, local_steps=local_steps
    )
    usable = len(X) - len(X) % (batch * local_steps)  # whole rounds only
    assert usable >= 2 * batch * local_steps, "too few examples for two rounds"
    # A first round compiles the worker function on every worker (from the compile
    # cache): run it untimed, then start again from the same parameters.
    initial = [p.get_value() for p in params]
    warm = batch * local_steps
    trainer.fit(X[:warm], Y[:warm], batch_size=batch)
    for p, value in zip(trainer.state, initial + [None] * len(trainer.state)):
        p.set_value(value if value is not None else np.zeros_like(p.get_value()))
    trainer.stats = TrainingStats()
    stats = trainer.fit(X[:usable], Y[:usable], batch_size=batch)
    rounds = stats.round_seconds[1:] or stats.round_seconds  # the first round moves the data
    per_step = statistics.median(rounds) / local_steps
    data_bytes = X[:usable].nbytes + Y[:usable].nbytes
    step_bytes = (stats.bytes_to_workers - data_bytes + stats.bytes_from_workers) / stats.steps
    return per_step, step_bytes, [p.get_value() for p in params]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="60,600,3000")
    parser.add_argument("--examples", type=int, default=24000)
    parser.add_argument("--local-steps", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.examples, N_IN))
    Y = rng.integers(0, N_OUT, size=args.examples)
    batches = [int(b) for b in args.batches.split(",")]
    param_bytes = 8 * (N_IN * N_HIDDEN + N_HIDDEN + N_HIDDEN * N_OUT + N_OUT)
    print(f"MLP {N_IN}-{N_HIDDEN}-{N_OUT} float64, {args.examples} examples, "
          f"parameters {param_bytes / 1e6:.2f} MB, {os.cpu_count()} cores")  # fmt: skip
    header = f"{'batch':>6} {'run':<26} {'ms/step':>9} {'examples/s':>11} {'vs 1 proc':>9} {'MB/step':>8}"  # noqa: E501
    print(header)
    results = {}
    for batch in batches:
        base, reference = single_process(X, Y, batch)
        results[(batch, "one process")] = (base, 0.0)
        for workers in (1, 2):
            with (
                LocalCluster(
                    n_workers=workers, threads_per_worker=1, dashboard_address=None
                ) as cluster,
                Client(cluster) as client,
            ):  # noqa: E501
                per_step, moved, final = distributed_run(client, X, Y, batch, 1)
                error = max(float(np.abs(a - b).max()) for a, b in zip(final, reference))
                assert error < 1e-10, f"synchronous SGD differs from one process by {error}"
                results[(batch, f"sync SGD, {workers} worker(s)")] = (per_step, moved)
                if workers == 2:
                    per_step, moved, _ = distributed_run(client, X, Y, batch, args.local_steps)
                    results[(batch, f"local SGD k={args.local_steps}, 2 workers")] = (
                        per_step,
                        moved,
                    )  # noqa: E501
        for (b, run), (seconds, moved) in results.items():
            if b != batch:
                continue
            print(f"{batch:>6} {run:<26} {seconds * 1e3:>9.2f} {batch / seconds:>11,.0f} "
                  f"{base / seconds:>8.2f}x {moved / 1e6:>8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
