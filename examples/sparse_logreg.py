"""Sparse logistic regression on bag-of-words-like data (tensorjit.sparse).

10^5 features at 0.1% density, a few thousand examples, labels from a random sparse
teacher. The model trains with SGD on dense weights through a sparse x dense product;
the input is never densified (its dense copy would be n_examples x 10^5 floats).

    python examples/sparse_logreg.py [--examples 3000] [--features 100000] [--epochs 20]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.sparse

import tensorjit
import tensorjit.sparse as S
import tensorjit.tensor as T


def make_data(n_examples: int, n_features: int, density: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = scipy.sparse.random(
        n_examples, n_features, density=density, format="csr", random_state=rng,
        data_rvs=lambda n: rng.uniform(0.5, 2.0, n),
    )  # fmt: skip
    teacher = scipy.sparse.random(n_features, 1, density=0.05, random_state=rng)
    teacher.data = rng.normal(0.0, 3.0, teacher.nnz)
    logits = np.asarray(X @ teacher.toarray()).ravel()
    y = (logits > np.median(logits)).astype(np.float64)
    return X, y


def build(n_features: int, lr: float = 0.5):
    x = S.csr_matrix("x")
    y = T.vector("y")
    w = tensorjit.shared(np.zeros(n_features), name="w")
    b = tensorjit.shared(np.float64(0.0), name="b")
    logits = S.dot(x, w) + b
    # -(y log p + (1-y) log(1-p)) with p = sigmoid(logits), in a stable form
    loss = T.mean(T.softplus(logits) - y * logits)
    gw, gb = tensorjit.grad(loss, [w, b])
    train = tensorjit.function([x, y], loss, updates={w: w - lr * gw, b: b - lr * gb})
    return train, w


def main(n_examples=3000, n_features=100_000, density=0.001, epochs=20, batch=500, quiet=False):
    X, y = make_data(n_examples, n_features, density)
    train, _w = build(n_features)
    losses = []
    for epoch in range(epochs):
        total = 0.0
        for start in range(0, n_examples, batch):
            total += float(train(X[start : start + batch], y[start : start + batch]))
        losses.append(total / -(-n_examples // batch))
        if not quiet:
            print(f"epoch {epoch:3d}  loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--features", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    main(args.examples, args.features, epochs=args.epochs)
