"""The paper's MLP (tanh hidden layer, softmax output, L2 on the first layer), fresh
shared parameters from a seed each time."""

from __future__ import annotations

import numpy as np

import tensorjit
import tensorjit.tensor as T


def mlp(seed: int = 1, n_in: int = 20, n_hidden: int = 16, n_out: int = 3):
    rng = np.random.default_rng(seed)
    W1 = tensorjit.shared(rng.normal(scale=0.1, size=(n_in, n_hidden)), name="W1")
    b1 = tensorjit.shared(np.zeros(n_hidden), name="b1")
    W2 = tensorjit.shared(rng.normal(scale=0.1, size=(n_hidden, n_out)), name="W2")
    b2 = tensorjit.shared(np.zeros(n_out), name="b2")
    x, y = T.matrix("x"), T.lvector("y")
    hidden = T.tanh(T.dot(x, W1) + b1)
    prob = T.nnet.softmax(T.dot(hidden, W2) + b2)
    cost = -T.mean(T.log(prob)[T.arange(y.shape[0]), y]) + 1e-4 * (W1**2).sum()
    return x, y, cost, [W1, b1, W2, b2]


def data(n: int = 600, n_in: int = 20, n_out: int = 3):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, n_in)), rng.integers(0, n_out, size=n)


def single_process_sgd(X, Y, batch_size: int, epochs: int, learning_rate: float, seed: int = 1):
    """The reference: one compiled training function over the same minibatches."""
    x, y, cost, params = mlp(seed, X.shape[1])
    grads = T.grad(cost, params)
    updates = [(p, p - learning_rate * g) for p, g in zip(params, grads)]
    train = tensorjit.function([x, y], cost, updates=updates)
    costs = []
    for _ in range(epochs):
        for start in range(0, len(X), batch_size):
            costs.append(float(train(X[start : start + batch_size], Y[start : start + batch_size])))
    return [p.get_value() for p in params], costs
