"""A training step on sparse features (bag-of-words text classification), in every library.

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE taskset -c 1 \\
         .venv-bench312/bin/python benchmarks/sparse_training.py [--repeats 7] [--size small]

The model: ``h = relu(x @ W1 + b1)``, ``softmax(h @ W2 + b2)``, cross-entropy against the
labels, and one SGD update of all four parameters; ``x`` is a CSR matrix (``batch`` rows
of a ``vocab``-word vocabulary, ``words`` stored values per row). Its gradient for ``W1``
is a sparse-transposed x dense product. Implementations: tensorjit (one whole-graph
program: the sparse products are native steps), tensorjit per node (config
``whole_graph=False``, the same kernels called one node at a time: what a function with
a sparse input ran as before native steps), NumPy + scipy.sparse by hand, PyTensor
(``pytensor.sparse.structured_dot``), PyTorch eager (a CSR tensor), JAX (jit, a BCOO
matrix). Every implementation starts from the same parameters and batch; the losses and
the updated W1 are checked against NumPy's. float32, one thread.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _competitors import limit_threads, threads_from_argv  # noqa: E402

limit_threads(threads_from_argv())

import argparse  # noqa: E402
import os  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as ssp  # noqa: E402
from _timing import median_time  # noqa: E402

SIZES = {  # batch, vocab, words per row, hidden, classes
    "small": (64, 5000, 20, 32, 8),
    "large": (512, 50000, 100, 128, 16),
}
LR = 0.1


def make_data(size: str) -> tuple:
    batch, vocab, words, hidden, classes = SIZES[size]
    rng = np.random.default_rng(0)
    cols = rng.integers(0, vocab, (batch, words))
    rows = np.repeat(np.arange(batch), words)
    x = ssp.csr_matrix(
        (rng.random(batch * words).astype("float32"), (rows, cols.ravel())), (batch, vocab)
    )
    x.sum_duplicates()
    labels = rng.integers(0, classes, batch)
    params = [
        (rng.standard_normal((vocab, hidden)) * 0.05).astype("float32"),
        np.zeros(hidden, "float32"),
        (rng.standard_normal((hidden, classes)) * 0.1).astype("float32"),
        np.zeros(classes, "float32"),
    ]
    return x, labels, params


def numpy_step(x, labels, params) -> Callable:
    w1, b1, w2, b2 = (p.copy() for p in params)
    xt = x.T.tocsr()
    onehot = np.eye(w2.shape[1], dtype="float32")[labels]

    def step():
        pre = x @ w1 + b1
        h = np.maximum(pre, 0)
        z = h @ w2 + b2
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(len(labels)), labels]).mean()
        dz = (p - onehot) / len(labels)
        dh = (dz @ w2.T) * (pre > 0)
        w2[...] -= LR * (h.T @ dz)
        b2[...] -= LR * dz.sum(axis=0)
        w1[...] -= LR * (xt @ dh)
        b1[...] -= LR * dh.sum(axis=0)
        return loss, w1

    return step


def tensorjit_step(x, labels, params, whole_graph: bool) -> Callable:
    import tensorjit
    import tensorjit.sparse as S
    import tensorjit.tensor as T
    from tensorjit.tensor.nnet import categorical_crossentropy, softmax

    shared = [tensorjit.shared(p.copy()) for p in params]
    w1, b1, w2, b2 = shared
    xs = S.csr_matrix("x", dtype="float32")
    y = T.ivector("y")
    h = T.maximum(S.dot(xs, w1) + b1, 0)
    loss = categorical_crossentropy(softmax(T.dot(h, w2) + b2), y).mean()
    grads = tensorjit.grad(loss, shared)
    updates = [(p, p - LR * g) for p, g in zip(shared, grads)]
    mode = tensorjit.FAST_RUN.with_backends("c", "python")
    with tensorjit.config.change_flags(whole_graph=whole_graph):
        f = tensorjit.function([xs, y], loss, updates=updates, mode=mode)
    if whole_graph:  # one program (the sparse transpose, a view, is its one Python step)
        assert f.calls.program is not None
    labels32 = labels.astype("int32")
    return lambda: (f(x, labels32), w1.get_value(borrow=True))


def pytensor_step(x, labels, params) -> Callable:
    import pytensor
    import pytensor.sparse as S
    import pytensor.tensor as T
    from pytensor.tensor.special import softmax

    shared = [pytensor.shared(p.copy()) for p in params]
    w1, b1, w2, b2 = shared
    xs = S.csr_matrix("x", dtype="float32")
    y = T.ivector("y")
    h = T.maximum(S.structured_dot(xs, w1) + b1, 0)
    p = softmax(T.dot(h, w2) + b2, axis=1)
    loss = -T.log(p[T.arange(y.shape[0]), y]).mean()
    grads = pytensor.grad(loss, shared)
    f = pytensor.function(
        [xs, y], loss, updates=[(s, s - np.float32(LR) * g) for s, g in zip(shared, grads)]
    )
    labels32 = labels.astype("int32")
    return lambda: (f(x, labels32), w1.get_value(borrow=True))


def torch_step(x, labels, params) -> Callable:
    import torch

    torch.set_num_threads(1)
    xs = torch.sparse_csr_tensor(
        torch.from_numpy(x.indptr.astype("int64")),
        torch.from_numpy(x.indices.astype("int64")),
        torch.from_numpy(x.data),
        x.shape,
    )
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    y = torch.from_numpy(labels)

    def step():
        w1, b1, w2, b2 = ps
        h = torch.relu(xs @ w1 + b1)
        loss = torch.nn.functional.cross_entropy(h @ w2 + b2, y)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            for p, g in zip(ps, grads):
                p -= LR * g
        return float(loss), ps[0].detach().numpy()

    return step


def jax_step(x, labels, params) -> Callable:
    import jax
    import jax.numpy as jnp
    from jax.experimental import sparse

    xs = sparse.BCOO.from_scipy_sparse(x)
    state = [jnp.asarray(p) for p in params]
    y = jnp.asarray(labels)

    def loss_fn(ps, xs, y):
        w1, b1, w2, b2 = ps
        h = jax.nn.relu(xs @ w1 + b1)
        logp = jax.nn.log_softmax(h @ w2 + b2)
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    @jax.jit
    def update(ps, xs, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, xs, y)
        return loss, [p - LR * g for p, g in zip(ps, grads)]

    def step():
        loss, new = update(state, xs, y)
        state[:] = new
        loss.block_until_ready()
        return float(loss), np.asarray(state[0])

    return step


def implementations(x, labels, params) -> dict[str, Callable[[], Callable]]:
    return {
        "numpy+scipy": lambda: numpy_step(x, labels, params),
        "tensorjit": lambda: tensorjit_step(x, labels, params, whole_graph=True),
        "tensorjit per node": lambda: tensorjit_step(x, labels, params, whole_graph=False),
        "pytensor": lambda: pytensor_step(x, labels, params),
        "torch": lambda: torch_step(x, labels, params),
        "jax": lambda: jax_step(x, labels, params),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--size", choices=sorted(SIZES), action="append")
    args = parser.parse_args()
    print(f"cores: {sorted(os.sched_getaffinity(0))}, threads: {args.threads}, float32")
    for size in args.size or ["small", "large"]:
        x, labels, params = make_data(size)
        reference_loss, reference_w1 = numpy_step(x, labels, params)()
        print(f"\n{size}: batch x vocab {x.shape}, nnz {x.nnz}, sizes {SIZES[size]}")
        times: dict[str, float] = {}
        for name, make in implementations(x, labels, params).items():
            try:
                step = make()
            except ImportError as exc:
                print(f"  {name:20s} not installed ({exc.name})")
                continue
            loss, w1 = step()  # the first step from the same parameters: check it
            np.testing.assert_allclose(float(loss), reference_loss, rtol=1e-4)
            np.testing.assert_allclose(w1, reference_w1, rtol=1e-3, atol=1e-6)
            times[name] = median_time(step, args.repeats)
        best = min(t for name, t in times.items() if not name.startswith("tensorjit"))
        for name, t in times.items():
            print(f"  {name:20s} {t * 1e3:9.3f} ms   best rival / this: {best / t:5.2f}")


if __name__ == "__main__":
    main()
