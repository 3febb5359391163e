"""A small convolutional network trained by SGD on random 12x12 images.

conv2d (8 filters of 3x3) -> relu -> 2x2 max pooling -> dense -> softmax over 4 classes.
The images are random, labelled by a random "teacher" convnet of the same shape, so the
task is learnable. Prints the mean training loss of each epoch and the time per
minibatch; exits non-zero if the loss did not decrease.

Run: python examples/convnet.py [--epochs N] [--examples N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor import nnet

IMAGE = 12
N_FILTERS = 8
FILTER = 3
N_CLASSES = 4
POOLED = (IMAGE - FILTER + 1) // 2


def _teacher_labels(rng: np.random.Generator, images: np.ndarray) -> np.ndarray:
    """Labels from a random network of the student's shape (computed with NumPy)."""
    from numpy.lib.stride_tricks import sliding_window_view

    filters = rng.standard_normal((N_FILTERS, FILTER, FILTER))
    windows = sliding_window_view(images[:, 0], (FILTER, FILTER), axis=(1, 2))
    maps = np.maximum(np.einsum("nhwij,fij->nfhw", windows, filters), 0)
    size = POOLED * 2
    pooled = maps[:, :, :size, :size].reshape(len(images), N_FILTERS, POOLED, 2, POOLED, 2)
    features = pooled.max(axis=(3, 5)).reshape(len(images), -1)
    features = (features - features.mean(axis=0)) / (features.std(axis=0) + 1e-8)
    dense = rng.standard_normal((features.shape[1], N_CLASSES))
    return np.argmax(features @ dense, axis=1).astype("int64")


def main(
    epochs: int = 8,
    n_examples: int = 1200,
    batch_size: int = 50,
    learning_rate: float = 0.05,
    max_batches: int | None = None,
    seed: int = 0,
    verbose: bool = True,
) -> list[float]:
    """Train the convnet; returns the mean training loss of every epoch.

    ``max_batches`` limits the minibatches per epoch (for quick tests)."""
    rng = np.random.default_rng(seed)
    data_x = rng.standard_normal((n_examples, 1, IMAGE, IMAGE))
    data_y = _teacher_labels(rng, data_x)

    x = T.tensor4("x")
    y = T.lvector("y")
    fan_in = FILTER * FILTER
    w_conv = tensorjit.shared(
        rng.standard_normal((N_FILTERS, 1, FILTER, FILTER)) / np.sqrt(fan_in), name="w_conv"
    )
    b_conv = tensorjit.shared(np.zeros(N_FILTERS), name="b_conv")
    n_features = N_FILTERS * POOLED * POOLED
    w_out = tensorjit.shared(
        rng.standard_normal((n_features, N_CLASSES)) / np.sqrt(n_features), name="w_out"
    )
    b_out = tensorjit.shared(np.zeros(N_CLASSES), name="b_out")
    params = [w_conv, b_conv, w_out, b_out]

    conv = nnet.conv2d(x, w_conv, border_mode="valid") + b_conv.dimshuffle("x", 0, "x", "x")
    pooled = nnet.max_pool_2d(nnet.relu(conv), (2, 2), ignore_border=True)
    logits = T.dot(pooled.flatten(2), w_out) + b_out
    cost = nnet.softmax_crossentropy_with_logits(logits, y).mean()
    grads = tensorjit.grad(cost, params)
    train = tensorjit.function(
        [x, y],
        cost,
        updates=[(p, p - learning_rate * g) for p, g in zip(params, grads)],
        name="train",
    )
    predict = tensorjit.function([x], T.argmax(logits, axis=1), name="predict")

    n_batches = n_examples // batch_size
    if max_batches is not None:
        n_batches = min(n_batches, max_batches)
    used = n_batches * batch_size
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
            accuracy = float(np.mean(predict(data_x[:used]) == data_y[:used]))
            print(
                f"epoch {epoch:>3}  loss {losses[-1]:.4f}  training accuracy {accuracy:.3f}  "
                f"({elapsed / n_batches * 1e3:.2f} ms/minibatch of {batch_size})"
            )
    return losses


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8, help="passes over the data")
    parser.add_argument("--examples", type=int, default=1200, help="training examples")
    args = parser.parse_args()
    losses = main(epochs=args.epochs, n_examples=args.examples)
    if not (len(losses) >= 2 and losses[-1] < losses[0]):
        raise SystemExit(f"training failed: the loss did not decrease ({losses})")
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    _cli()
