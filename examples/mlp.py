"""The Theano paper's MLP benchmark: 784 -> 500 tanh -> 10 softmax, trained by SGD.

Minibatches of 60, categorical cross-entropy, weights in shared variables updated by the
compiled training function. The data are random (no download): inputs drawn from a
normal distribution and labels from a random "teacher" network of the same shape, so
the task is learnable. Prints the mean training loss of each epoch and the time per
minibatch; exits non-zero if the loss did not decrease.

Run: python examples/mlp.py [--epochs N] [--examples N] [--device opencl] [--profile]
     [--picture mlp.svg]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.tensor import nnet


def _init(rng: np.random.Generator, n_in: int, n_out: int) -> np.ndarray:
    bound = np.sqrt(6.0 / (n_in + n_out))  # Glorot & Bengio's uniform initialization
    return rng.uniform(-bound, bound, size=(n_in, n_out))


def make_data(rng: np.random.Generator, n_examples: int, n_in: int, n_hidden: int, n_out: int):
    """Random inputs labelled by a random teacher network."""
    x = rng.standard_normal((n_examples, n_in))
    w1 = rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)
    w2 = rng.standard_normal((n_hidden, n_out)) / np.sqrt(n_hidden)
    y = np.argmax(np.tanh(x @ w1) @ w2, axis=1)
    return x, y.astype("int64")


def main(
    epochs: int = 4,
    n_examples: int = 6000,
    batch_size: int = 60,
    learning_rate: float = 0.1,
    max_batches: int | None = None,
    seed: int = 0,
    verbose: bool = True,
    profile: bool = False,
    picture: str | None = None,
) -> list[float]:
    """Train the MLP; returns the mean training loss of every epoch.

    ``max_batches`` limits the minibatches per epoch (for quick tests)."""
    n_in, n_hidden, n_out = 784, 500, 10
    rng = np.random.default_rng(seed)
    data_x, data_y = make_data(rng, n_examples, n_in, n_hidden, n_out)

    x = T.matrix("x")
    y = T.lvector("y")
    w1 = tensorjit.shared(_init(rng, n_in, n_hidden), name="w1")
    b1 = tensorjit.shared(np.zeros(n_hidden), name="b1")
    w2 = tensorjit.shared(np.zeros((n_hidden, n_out)), name="w2")
    b2 = tensorjit.shared(np.zeros(n_out), name="b2")
    params = [w1, b1, w2, b2]

    hidden = T.tanh(T.dot(x, w1) + b1)
    p_y = nnet.softmax(T.dot(hidden, w2) + b2)
    cost = nnet.categorical_crossentropy(p_y, y).mean()
    grads = tensorjit.grad(cost, params)
    train = tensorjit.function(
        [x, y],
        cost,
        updates=[(p, p - learning_rate * g) for p, g in zip(params, grads)],
        name="train",
        profile=profile,
    )
    predict = tensorjit.function([x], T.argmax(p_y, axis=1), name="predict")

    n_batches = n_examples // batch_size
    if max_batches is not None:
        n_batches = min(n_batches, max_batches)
    losses = []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        total = 0.0
        for i in range(n_batches):
            batch = slice(i * batch_size, (i + 1) * batch_size)
            total += float(train(data_x[batch], data_y[batch]))
        elapsed = time.perf_counter() - start
        losses.append(total / n_batches)
        if verbose:
            accuracy = float(
                np.mean(
                    predict(data_x[: n_batches * batch_size]) == data_y[: n_batches * batch_size]
                )
            )
            print(
                f"epoch {epoch:>3}  loss {losses[-1]:.4f}  training accuracy {accuracy:.3f}  "
                f"({elapsed / n_batches * 1e3:.2f} ms/minibatch of {batch_size})"
            )
    if profile:
        train.profile.report(file=sys.stdout, limit=12)
    if picture:
        from tensorjit.printing import pydotprint

        pydotprint(train, picture)
    return losses


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="passes over the data")
    parser.add_argument("--examples", type=int, default=6000, help="training examples")
    parser.add_argument(
        "--device", default=None, help="where to train: cpu (default, config.device) or opencl"
    )
    parser.add_argument(
        "--profile", action="store_true", help="print the training function's run-time profile"
    )
    parser.add_argument(
        "--picture", metavar="FILE", help="draw the training function (svg/png; [graphviz] extra)"
    )
    args = parser.parse_args()
    with config.change_flags(device=args.device or config.device):
        print(f"device: {config.device}")
        losses = main(
            epochs=args.epochs, n_examples=args.examples, profile=args.profile, picture=args.picture
        )
    if not (len(losses) >= 2 and losses[-1] < losses[0]):
        raise SystemExit(f"training failed: the loss did not decrease ({losses})")
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    _cli()
