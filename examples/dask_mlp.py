"""The paper's MLP trained data-parallel on a Dask cluster, then evaluated chunk by chunk.

Runs on a LocalCluster of two worker processes by default; give a scheduler's address to
use a real cluster started with ``dask scheduler`` and ``dask worker tcp://HOST:8786``:

    python examples/dask_mlp.py [--scheduler tcp://HOST:8786] [--epochs 3] [--local-steps 1]

Needs the ``[dask]`` extra (``pip install -e ".[dask]"``).
"""

from __future__ import annotations

import argparse
import time

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import tensorjit
import tensorjit.tensor as T
from tensorjit.dask import DataParallelTrainer, map_blocks


def mlp(n_in: int, n_hidden: int, n_out: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    W1 = tensorjit.shared(rng.normal(scale=0.05, size=(n_in, n_hidden)), name="W1")
    b1 = tensorjit.shared(np.zeros(n_hidden), name="b1")
    W2 = tensorjit.shared(rng.normal(scale=0.05, size=(n_hidden, n_out)), name="W2")
    b2 = tensorjit.shared(np.zeros(n_out), name="b2")
    x, y = T.matrix("x"), T.lvector("y")
    hidden = T.tanh(T.dot(x, W1) + b1)
    prob = T.nnet.softmax(T.dot(hidden, W2) + b2)
    cost = -T.mean(T.log(prob)[T.arange(y.shape[0]), y]) + 1e-4 * ((W1**2).sum() + (W2**2).sum())
    return x, y, prob, cost, [W1, b1, W2, b2]


def synthetic(n: int, n_in: int, n_out: int, seed: int = 0):
    """Gaussian blobs, one per class (the same centres for every seed): learnable, so
    the accuracy means something."""
    centres = np.random.default_rng(0).normal(scale=2.0, size=(n_out, n_in))
    rng = np.random.default_rng(seed + 1)
    labels = rng.integers(0, n_out, size=n)
    return centres[labels] + rng.normal(size=(n, n_in)), labels


def synthetic_on_workers(n_chunks: int, chunk: int, n_in: int, n_out: int):
    """A test set that Dask builds chunk by chunk on the workers (never on the driver)."""
    parts = [dask.delayed(synthetic)(chunk, n_in, n_out, seed=100 + i) for i in range(n_chunks)]
    X = da.concatenate([da.from_delayed(p[0], (chunk, n_in), np.float64) for p in parts])
    Y = da.concatenate([da.from_delayed(p[1], (chunk,), np.int64) for p in parts])
    return X, Y


def main(scheduler: str | None, epochs: int, local_steps: int, batch_size: int) -> None:
    n_in, n_hidden, n_out = 100, 64, 10
    X, Y = synthetic(20_000, n_in, n_out)
    cluster = None if scheduler else LocalCluster(n_workers=2, threads_per_worker=1)
    with Client(scheduler or cluster) as client:
        print("cluster:", client)
        x, y, prob, cost, params = mlp(n_in, n_hidden, n_out)
        trainer = DataParallelTrainer(
            cost, params, [x, y], client, learning_rate=0.1, local_steps=local_steps
        )
        started = time.perf_counter()
        stats = trainer.fit(X, Y, batch_size=batch_size, epochs=epochs)
        seconds = time.perf_counter() - started
        print(
            f"trained {stats.steps} steps in {seconds:.2f} s ({stats.examples / seconds:,.0f} "
            f"examples/s), cost {stats.costs[0]:.4f} -> {stats.costs[-1]:.4f}, "
            f"{stats.bytes_per_step / 1e3:.1f} kB moved per step"
        )

        # Evaluate on a test set held as a Dask array, chunk by chunk on the workers:
        # predictions keep the rows' chunks, the accuracy (a mean) combines across chunks.
        label = T.argmax(prob, axis=1)
        nll = -T.mean(T.log(prob)[T.arange(y.shape[0]), y])  # the tutorials' cost
        evaluate = tensorjit.function([x, y], [label, T.mean(T.eq(label, y)), nll])
        test_X, test_Y = synthetic_on_workers(8, 5000, n_in, n_out)
        lazy = map_blocks(evaluate, test_X, test_Y)
        labels, accuracy, test_nll = client.compute(lazy, sync=True)
        print(
            f"test accuracy {float(accuracy):.3f}, negative log-likelihood {float(test_nll):.4f} "
            f"over {len(labels)} rows in 8 chunks"
        )

        # The same minibatches in one process give the same parameters.
        x, y, prob, cost, reference = mlp(n_in, n_hidden, n_out)
        if local_steps == 1:
            grads = T.grad(cost, reference)
            step = tensorjit.function(
                [x, y], cost, updates=[(p, p - 0.1 * g) for p, g in zip(reference, grads)]
            )
            for _ in range(epochs):
                for start in range(0, len(X), batch_size):
                    step(X[start : start + batch_size], Y[start : start + batch_size])
            error = max(
                float(np.abs(p.get_value() - r.get_value()).max())
                for p, r in zip(params, reference)
            )  # noqa: E501
            print(f"largest difference from single-process SGD: {error:.2e}")
    if cluster is not None:
        cluster.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", help="a Dask scheduler's address (default: LocalCluster)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--local-steps", type=int, default=1, help="k > 1: local SGD")
    parser.add_argument("--batch-size", type=int, default=200)
    args = parser.parse_args()
    main(args.scheduler, args.epochs, args.local_steps, args.batch_size)
