"""Models written the way Theano's deep-learning tutorials write them.

The data set lives in shared variables; a step is ``train(index)``, and ``givens``
replaces the model's symbolic ``x``/``y`` by the minibatch ``data[index*B:(index+1)*B]``.
Costs are the tutorials' own: ``-mean(log(p_y)[arange(n), y])`` (+ L2 for the MLP), the
denoising autoencoder's cross-entropy of a reconstruction from an input corrupted by a
binomial mask drawn from the graph's random streams.

- logreg: 784 -> 10 softmax regression, minibatches of 600, lr 0.13.
- mlp: 784 -> 500 tanh -> 10 softmax, minibatches of 20, lr 0.01, L2 1e-4.
- dA: 784 -> 500 sigmoid, tied weights, corruption 0.3, minibatches of 20, lr 0.1.
- rnn: the Elman network of the tutorials' slot-filling RNN (rnnslu), without its word
  embeddings: 16 inputs -> 32 sigmoid hidden units carried through ``scan`` -> 10-class
  softmax at every step, inside the step as the tutorial writes it; one sequence of 200
  steps a minibatch, the initial state h0 learnt too, lr 0.1.
- lenet: 1x28x28 images -> conv 20 5x5 -> max-pool 2x2 -> tanh -> conv 50 5x5 -> max-pool
  2x2 -> tanh -> 500 tanh -> 10 softmax (the tutorial's LeNetConvPoolLayer: a true
  convolution, bias after pooling), minibatches of 500, lr 0.1. PyTensor 3 has no
  conv2d/pool_2d ops (only SciPy-style ``convolve2d`` of single planes, a Python call per
  plane), so its LeNet writes them with its tensor ops: the windows as 25 shifted slices
  times the flipped filters (a tensordot), pooling by a reshape and a max.

Implementations, same data, same run: hand-written NumPy, tensorjit (default mode),
PyTensor (default mode, Numba in PyTensor 3; and mode="CVM", its C backend with its C
BLAS linked, see _competitors.py), JAX (jax.jit, the data set on the device, the
minibatch sliced inside the step). The MLP also gets its GEMM-only bound: the step's
five matrix products alone through NumPy's BLAS (_mlp_bound.py), and "% bound" = bound
time / the implementation's. Deterministic models must agree with NumPy on the
losses of the first three steps (the third depends on every gradient of the first); the
dA's mask is random (each library its own generator), so its losses must only be within
5% of NumPy's. Times are medians of samples taken round-robin.

Run: .venv/bin/pip install -e ".[bench]" && taskset -c 0 .venv/bin/python
     benchmarks/tutorial.py [--threads 1] [--models logreg,mlp,dA]
     [--dtypes float64,float32] [--repeats 7] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

from _competitors import (
    limit_threads,
    setup_pytensor_blas,
    thread_report,
    threads_from_argv,
    whole_graph_program,
)

limit_threads(threads_from_argv())  # before NumPy loads OpenBLAS
PYTENSOR_BLAS = setup_pytensor_blas()  # before PyTensor is imported

import numpy as np  # noqa: E402
from _mlp_bound import five_gemms  # noqa: E402
from _timing import median_time  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

N_BATCHES = 20
MODELS = {
    # name: (batch, hidden, lr, l2)
    "logreg": (600, 0, 0.13, 0.0),
    "mlp": (20, 500, 0.01, 1e-4),
    "dA": (20, 500, 0.1, 0.0),
    "lenet": (500, 500, 0.1, 0.0),
    "rnn": (200, 32, 0.1, 0.0),  # batch: the sequence's length
}
RNN_IN = 16
BOUND = "bound (5 GEMMs, NumPy)"
KERNS, FILTER, POOL = (20, 50), 5, 2  # LeNet's filters per layer, filter and pool sizes
N_IN, N_OUT, CORRUPTION = 784, 10, 0.3


def make_data(model: str, dtype: str, seed: int = 0):
    """The data set (inputs, labels) and the initial parameters, as the tutorials build
    them (zeros for logreg; Glorot-uniform weights and zero biases otherwise)."""
    batch, hidden, _, _ = MODELS[model]
    rng = np.random.default_rng(seed)
    n = N_BATCHES * batch
    if model == "dA":
        x = rng.uniform(0, 1, (n, N_IN)).astype(dtype)  # pixel intensities
    elif model == "lenet":
        x = rng.standard_normal((n, 1, 28, 28)).astype(dtype)
    elif model == "rnn":
        x = rng.standard_normal((n, RNN_IN)).astype(dtype)
        # labels that need the recurrence: a teacher of the last few inputs
        window = x + np.roll(x, 1, axis=0) + 0.5 * np.roll(x, 2, axis=0)
        y = np.argmax(window @ rng.standard_normal((RNN_IN, N_OUT)), axis=1).astype(np.int64)
        params = [rng.uniform(-0.2, 0.2, shape) for shape in  # the tutorial's 0.2 * U(-1, 1)
                  ((RNN_IN, hidden), (hidden, hidden), (hidden, N_OUT))]  # fmt: skip
        params += [np.zeros(hidden), np.zeros(N_OUT), np.zeros(hidden)]  # bh, b, h0
        return x, y, [p.astype(dtype) for p in params]
    else:
        x = rng.standard_normal((n, N_IN)).astype(dtype)
    teacher = rng.standard_normal((N_IN, N_OUT))
    y = np.argmax(x.reshape(n, N_IN) @ teacher, axis=1).astype(np.int64)
    if model == "logreg":
        params = [np.zeros((N_IN, N_OUT)), np.zeros(N_OUT)]
    elif model == "lenet":
        params, channels = [], 1
        for k in KERNS:  # the tutorial's bounds: fan_in, fan_out / pooling area
            bound = np.sqrt(6.0 / (channels * FILTER**2 + k * FILTER**2 / POOL**2))
            params += [rng.uniform(-bound, bound, (k, channels, FILTER, FILTER)), np.zeros(k)]
            channels = k
        flat = KERNS[1] * 4 * 4
        bound = np.sqrt(6.0 / (flat + hidden))
        params += [rng.uniform(-bound, bound, (flat, hidden)), np.zeros(hidden),
                   np.zeros((hidden, N_OUT)), np.zeros(N_OUT)]  # fmt: skip
    elif model == "mlp":
        b1 = np.sqrt(6.0 / (N_IN + hidden))
        b2 = np.sqrt(6.0 / (hidden + N_OUT))
        params = [rng.uniform(-b1, b1, (N_IN, hidden)), np.zeros(hidden),
                  rng.uniform(-b2, b2, (hidden, N_OUT)), np.zeros(N_OUT)]  # fmt: skip
    else:
        b = 4 * np.sqrt(6.0 / (N_IN + hidden))
        params = [rng.uniform(-b, b, (N_IN, hidden)), np.zeros(hidden), np.zeros(N_IN)]
    return x, y, [p.astype(dtype) for p in params]


# ------------------------------------------------------------------------------ NumPy
def numpy_step(model: str, x_all, y_all, params0, dtype):
    batch, _, lr, l2 = MODELS[model]
    params = [p.copy() for p in params0]
    rng = np.random.default_rng(1)

    def softmax_grad(z, y):
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss = np.mean(np.log(s[:, 0]) - z[rows, y])
        e /= s
        e[rows, y] -= 1
        return loss, e / len(y)

    def conv(x, w):
        """A true convolution ('valid'): the windows (a view) times flipped filters."""
        win = sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N, C, oh, ow, kh, kw
        out = np.tensordot(win, w[:, :, ::-1, ::-1], ([1, 4, 5], [1, 2, 3]))
        return out.transpose(0, 3, 1, 2), win

    def conv_grads(g, win, w, x_shape):
        gw = np.tensordot(g, win, ([0, 2, 3], [0, 2, 3]))[:, :, ::-1, ::-1]
        spread = np.tensordot(g, w[:, :, ::-1, ::-1], (1, 0))  # N, oh, ow, C, kh, kw
        gx = np.zeros(x_shape, g.dtype)
        oh, ow = g.shape[2:]
        for ky in range(w.shape[2]):
            for kx in range(w.shape[3]):
                gx[:, :, ky : ky + oh, kx : kx + ow] += spread[..., ky, kx].transpose(0, 3, 1, 2)
        return gx, gw

    def pool(a):
        n, c, h, w = a.shape
        return a.reshape(n, c, h // POOL, POOL, w // POOL, POOL).max(axis=(3, 5))

    def pool_grad(a, z, g):
        up = np.repeat(np.repeat(z, POOL, axis=2), POOL, axis=3)
        return (a == up) * np.repeat(np.repeat(g, POOL, axis=2), POOL, axis=3)

    def lenet(x, y):
        w0, b0, w1, b1, w2, b2, w3, b3 = params
        c0, win0 = conv(x, w0)
        p0 = pool(c0)
        h0 = np.tanh(p0 + b0[:, None, None])
        c1, win1 = conv(h0, w1)
        p1 = pool(c1)
        h1 = np.tanh(p1 + b1[:, None, None])
        flat = h1.reshape(len(x), -1)
        h2 = np.tanh(flat @ w2 + b2)
        loss, gz = softmax_grad(h2 @ w3 + b3, y)
        g2 = (gz @ w3.T) * (1 - h2 * h2)
        gp1 = (g2 @ w2.T).reshape(h1.shape) * (1 - h1 * h1)
        gh0, gw1 = conv_grads(pool_grad(c1, p1, gp1), win1, w1, h0.shape)
        gp0 = gh0 * (1 - h0 * h0)
        _, gw0 = conv_grads(pool_grad(c0, p0, gp0), win0, w0, x.shape)
        for param, grad in zip(params, [gw0, gp0.sum(axis=(0, 2, 3)), gw1,
                                        gp1.sum(axis=(0, 2, 3)), flat.T @ g2, g2.sum(axis=0),
                                        h2.T @ gz, gz.sum(axis=0)]):  # fmt: skip
            param -= lr * grad
        return loss

    def rnn(x, y):
        """Forward through time, then backpropagation through time; the output layer and
        the weight gradients are one product each over all steps."""
        wx, wh, w, bh, b, h0 = params
        hs = np.empty((len(x) + 1, len(h0)), dtype)
        hs[0] = h0
        pre = x @ wx + bh
        for t in range(len(x)):
            hs[t + 1] = 1 / (1 + np.exp(-(pre[t] + hs[t] @ wh)))
        loss, gz = softmax_grad(hs[1:] @ w + b, y)
        back = gz @ w.T
        da = np.empty_like(back)
        dh = np.zeros_like(h0)
        for t in range(len(x) - 1, -1, -1):
            h = hs[t + 1]
            da[t] = (dh + back[t]) * h * (1 - h)
            dh = wh @ da[t]
        for param, grad in zip(params, [x.T @ da, hs[:-1].T @ da, hs[1:].T @ gz,
                                        da.sum(axis=0), gz.sum(axis=0), dh]):  # fmt: skip
            param -= lr * grad
        return loss

    def step(i):
        x = x_all[i * batch : (i + 1) * batch]
        y = y_all[i * batch : (i + 1) * batch]
        if model == "lenet":
            return lenet(x, y)
        if model == "rnn":
            return rnn(x, y)
        if model == "logreg":
            w, b = params
            loss, gz = softmax_grad(x @ w + b, y)
            w -= lr * (x.T @ gz)
            b -= lr * gz.sum(axis=0)
            return loss
        if model == "mlp":
            w1, b1, w2, b2 = params
            h = np.tanh(x @ w1 + b1)
            loss, gz = softmax_grad(h @ w2 + b2, y)
            loss += l2 * ((w1**2).sum() + (w2**2).sum())
            gh = (gz @ w2.T) * (1 - h * h)
            w2 -= lr * (h.T @ gz + 2 * l2 * w2)
            b2 -= lr * gz.sum(axis=0)
            w1 -= lr * (x.T @ gh + 2 * l2 * w1)
            b1 -= lr * gh.sum(axis=0)
            return loss
        w, bh, bv = params
        tilde = x * (rng.random(x.shape) < 1 - CORRUPTION).astype(dtype)
        h = 1 / (1 + np.exp(-(tilde @ w + bh)))
        z = 1 / (1 + np.exp(-(h @ w.T + bv)))
        loss = np.mean(-np.sum(x * np.log(z) + (1 - x) * np.log(1 - z), axis=1))
        gz = (z - x) / len(x)  # d loss / d (pre-sigmoid reconstruction)
        gh = (gz @ w) * h * (1 - h)
        w -= lr * (tilde.T @ gh + gz.T @ h)
        bh -= lr * gh.sum(axis=0)
        bv -= lr * gz.sum(axis=0)
        return loss

    return step


# -------------------------------------------------- tensorjit / PyTensor (one builder)
def symbolic_step(lib: str, model: str, x_all, y_all, params0, dtype, mode):
    """The tutorial's code, for ``lib`` "tensorjit" or "pytensor" (their APIs differ
    only in the softmax's signature and the random streams' class)."""
    if lib == "tensorjit":
        import tensorjit as th
        import tensorjit.tensor as T
        from tensorjit.scan import scan
        from tensorjit.tensor.nnet.conv import conv2d
        from tensorjit.tensor.nnet.pool import pool_2d
        from tensorjit.tensor.random import RandomStreams

        def scan_outputs(*args, **kwargs):
            return scan(*args, **kwargs)[0]

        def softmax(v):
            return T.nnet.softmax(v)

        sigmoid = T.nnet.sigmoid

        def binomial(streams, shape, p):
            return streams.binomial(size=shape, n=1, p=p, dtype=dtype)
    else:
        import pytensor as th
        import pytensor.tensor as T
        from pytensor.tensor.random.utils import RandomStream as RandomStreams
        from pytensor.tensor.special import softmax as _softmax

        def scan_outputs(*args, **kwargs):  # PyTensor 3 warns unless told this
            return th.scan(*args, **kwargs, return_updates=False)

        def conv2d(x, w):
            """PyTensor 3 has no conv2d op (its convolve2d takes single planes, one Python
            call each): a true 'valid' convolution written with its tensor ops, the
            windows as FILTER**2 shifted slices (im2col) times the flipped filters."""
            height, width = x.shape[2] - FILTER + 1, x.shape[3] - FILTER + 1
            shifted = [x[:, :, i : i + height, j : j + width]
                       for i in range(FILTER) for j in range(FILTER)]  # fmt: skip
            windows = T.stack(shifted, axis=2)  # n, channels, FILTER**2, height, width
            windows = windows.reshape((x.shape[0], -1, height, width))
            flipped = w[:, :, ::-1, ::-1].reshape((w.shape[0], -1))
            return T.tensordot(windows, flipped, axes=[[1], [1]]).dimshuffle(0, 3, 1, 2)

        def pool_2d(x, ws, ignore_border=True):
            """Max-pooling by a reshape (no pool_2d op in PyTensor 3); exact tiles only."""
            assert ignore_border and ws == (POOL, POOL)
            n, c, h, w = x.shape
            return x.reshape((n, c, h // POOL, POOL, w // POOL, POOL)).max(axis=(3, 5))

        def softmax(v):
            return _softmax(v, axis=-1)

        sigmoid = T.sigmoid

        def binomial(streams, shape, p):
            return streams.binomial(1, p, size=shape).astype(dtype)

    batch, _, lr, l2 = MODELS[model]
    data_x = th.shared(x_all, name="data_x", borrow=True)
    data_y = th.shared(y_all, name="data_y", borrow=True)
    params = [th.shared(p.copy(), name=f"p{k}") for k, p in enumerate(params0)]
    index = T.lscalar("index")
    x, y = T.matrix("x", dtype=dtype), T.lvector("y")
    lr = np.asarray(lr, dtype)
    if model == "lenet":
        x = T.tensor4("x", dtype=dtype)
        w0, b0, w1, b1, w2, b2, w3, b3 = params
        layer = x
        for w, b in ((w0, b0), (w1, b1)):  # the tutorial's LeNetConvPoolLayer
            pooled = pool_2d(conv2d(layer, w), (POOL, POOL), ignore_border=True)
            layer = T.tanh(pooled + b.dimshuffle("x", 0, "x", "x"))
        hidden = T.tanh(T.dot(layer.flatten(2), w2) + b2)
        p_y = softmax(T.dot(hidden, w3) + b3)
        cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
        givens = {x: data_x[index * batch : (index + 1) * batch],
                  y: data_y[index * batch : (index + 1) * batch]}  # fmt: skip
    elif model == "rnn":
        wx, wh, w, bh, b, h0 = params

        def recurrence(x_t, h_tm1):  # the tutorial's step: state, then this step's softmax
            h_t = sigmoid(T.dot(x_t, wx) + T.dot(h_tm1, wh) + bh)
            return [h_t, softmax(T.dot(h_t, w) + b)]

        _, p_y = scan_outputs(recurrence, sequences=x, outputs_info=[h0, None])
        cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
        givens = {x: data_x[index * batch : (index + 1) * batch],
                  y: data_y[index * batch : (index + 1) * batch]}  # fmt: skip
    elif model in ("logreg", "mlp"):
        if model == "logreg":
            w, b = params
            p_y = softmax(T.dot(x, w) + b)
        else:
            w1, b1, w2, b2 = params
            hidden = T.tanh(T.dot(x, w1) + b1)
            p_y = softmax(T.dot(hidden, w2) + b2)
        cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
        if l2:
            cost = cost + np.asarray(l2, dtype) * ((w1**2).sum() + (w2**2).sum())
        givens = {x: data_x[index * batch : (index + 1) * batch],
                  y: data_y[index * batch : (index + 1) * batch]}  # fmt: skip
    else:
        w, bh, bv = params
        streams = RandomStreams(1)
        tilde = binomial(streams, x.shape, 1 - CORRUPTION) * x
        h = sigmoid(T.dot(tilde, w) + bh)
        z = sigmoid(T.dot(h, w.T) + bv)
        cost = T.mean(-T.sum(x * T.log(z) + (1 - x) * T.log(1 - z), axis=1))
        givens = {x: data_x[index * batch : (index + 1) * batch]}
    grads = th.grad(cost, params)
    updates = [(p, p - lr * g) for p, g in zip(params, grads)]
    kwargs = {} if mode is None else {"mode": mode}
    return th.function([index], cost, updates=updates, givens=givens, **kwargs)


# -------------------------------------------------------------------------------- JAX
def jax_step(model: str, x_all, y_all, params0):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    batch, _, lr, l2 = MODELS[model]
    data_x, data_y = jnp.asarray(x_all), jnp.asarray(y_all)

    def loss_fn(params, i, key):
        x = jax.lax.dynamic_slice_in_dim(data_x, i * batch, batch)
        y = jax.lax.dynamic_slice_in_dim(data_y, i * batch, batch)
        if model == "logreg":
            w, b = params
            logp = jax.nn.log_softmax(x @ w + b, axis=1)
            return -jnp.mean(logp[jnp.arange(batch), y])
        if model == "lenet":
            w0, b0, w1, b1, w2, b2, w3, b3 = params
            layer = x
            for w, b in ((w0, b0), (w1, b1)):  # a true convolution: flipped filters
                c = jax.lax.conv_general_dilated(layer, w[:, :, ::-1, ::-1], (1, 1), "VALID")
                pooled = jax.lax.reduce_window(
                    c, -jnp.inf, jax.lax.max, (1, 1, POOL, POOL), (1, 1, POOL, POOL), "VALID"
                )
                layer = jnp.tanh(pooled + b[:, None, None])
            hidden = jnp.tanh(layer.reshape(batch, -1) @ w2 + b2)
            logp = jax.nn.log_softmax(hidden @ w3 + b3, axis=1)
            return -jnp.mean(logp[jnp.arange(batch), y])
        if model == "rnn":
            wx, wh, w, bh, b, h0 = params

            def recurrence(h, x_t):
                h = jax.nn.sigmoid(x_t @ wx + h @ wh + bh)
                return h, jax.nn.log_softmax(h @ w + b)

            _, logp = jax.lax.scan(recurrence, h0, x)
            return -jnp.mean(logp[jnp.arange(batch), y])
        if model == "mlp":
            w1, b1, w2, b2 = params
            logp = jax.nn.log_softmax(jnp.tanh(x @ w1 + b1) @ w2 + b2, axis=1)
            reg = l2 * ((w1**2).sum() + (w2**2).sum())
            return -jnp.mean(logp[jnp.arange(batch), y]) + reg
        w, bh, bv = params
        mask = jax.random.bernoulli(key, 1 - CORRUPTION, x.shape).astype(x.dtype)
        h = jax.nn.sigmoid((mask * x) @ w + bh)
        z = jax.nn.sigmoid(h @ w.T + bv)
        return jnp.mean(-jnp.sum(x * jnp.log(z) + (1 - x) * jnp.log(1 - z), axis=1))

    def update(params, i, key):
        key, sub = jax.random.split(key)
        loss, grads = jax.value_and_grad(loss_fn)(params, i, sub)
        return [p - lr * g for p, g in zip(params, grads)], key, loss

    compiled = jax.jit(update, donate_argnums=0)
    state = [[jnp.asarray(p) for p in params0], jax.random.PRNGKey(0)]

    def step(i):
        state[0], state[1], loss = compiled(state[0], i, state[1])
        return loss.block_until_ready()

    return step, jax.__version__


# ------------------------------------------------------------------------------- main
def run(model: str, dtype: str, args) -> None:
    x_all, y_all, params0 = make_data(model, dtype)
    rtol = (1e-8 if dtype == "float64" else 1e-3) if model != "dA" else 0.05
    # The first three steps' losses: the third depends on every gradient of the first
    # (LeNet's first loss is ln 10 whatever its convolutions compute).
    reference_step = numpy_step(model, x_all, y_all, params0, dtype)
    references = [float(reference_step(i)) for i in range(3)]
    reference = references[0]
    rows: list[tuple[str, object]] = []
    notes: list[str] = []

    def add(name: str, step) -> None:
        losses = [float(step(i)) for i in range(3)]
        if not np.allclose(losses, references, rtol=rtol, atol=0):
            raise AssertionError(f"{model} {name}: losses {losses} != NumPy's {references}")
        counter = iter(range(3, 10**9))
        rows.append((name, lambda: step(next(counter) % N_BATCHES)))

    add("numpy (hand-written)", numpy_step(model, x_all, y_all, params0, dtype))
    batch = MODELS[model][0]
    if model == "mlp":  # the step's five matrix products alone (the bound)
        w1, _, w2, _ = (np.asarray(p, dtype) for p in params0)
        rows.append((BOUND, five_gemms(np.ascontiguousarray(x_all[:batch]), w1, w2)))
    import tensorjit

    start = time.perf_counter()
    fn = symbolic_step("tensorjit", model, x_all, y_all, params0, dtype, None)
    nodes = len(fn.kernels)
    inside = nodes if whole_graph_program(fn) is not None else fn.vm.segment_nodes
    # Inside a program, a node without a C step (a random draw, a scan) is a Python step.
    python = sum(k.backend != "c" for k in fn.kernels.values()) if whole_graph_program(fn) else 0
    notes.append(f"tensorjit: compiled in {time.perf_counter() - start:.2f} s; "
                 f"{inside} of {nodes} nodes inside whole-graph programs"
                 f"{f' ({python} of them Python steps)' if python else ''}")  # fmt: skip
    add("tensorjit", fn)
    del tensorjit
    try:
        import pytensor  # noqa: F401
    except ImportError as exc:
        rows.append(("pytensor", f"not installed ({exc})"))
    else:
        for name, mode in [("pytensor default", None), ("pytensor CVM", "CVM")]:
            try:
                add(name, symbolic_step("pytensor", model, x_all, y_all, params0, dtype, mode))
            except Exception as exc:
                rows.append((name, f"unavailable ({type(exc).__name__}: {exc})"[:120]))
    try:
        import jax  # noqa: F401
    except ImportError as exc:
        rows.append(("jax", f"not installed ({exc})"))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step, version = jax_step(model, x_all, y_all, params0)
            add(f"jax {version}", step)

    steps = {name: step for name, step in rows if callable(step)}
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            samples[name].append(median_time(step, 1, args.budget))
    times = {name: statistics.median(v) for name, v in samples.items()}
    numpy_time = times["numpy (hand-written)"]
    bound = times.get(BOUND)
    print(f"\n{model} {dtype}: first-step loss {reference:.6f}, third {references[2]:.6f}")
    header = f"  {'implementation':<24}{'ms/step':>10}{'examples/s':>13}{'x numpy':>10}"
    print(header + (f"{'% bound':>10}" if bound else ""))
    for name, value in rows:
        if not callable(value):
            print(f"  {name:<24}{value}")
            continue
        t = times[name]
        line = f"  {name:<24}{t * 1e3:>10.3f}{batch / t:>13.0f}{numpy_time / t:>10.2f}"
        print(line + (f"{100 * bound / t:>9.0f}%" if bound else ""))
    for note in notes:
        print(f"  - {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=0.3)
    parser.add_argument("--quick", action="store_true", help="3 repeats of 0.05 s")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.budget = 3, 0.05
    print(f"Theano-tutorial models; Python {sys.version.split()[0]}, NumPy {np.__version__}")
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            run(model, dtype, args)
    print()
    print(thread_report())


if __name__ == "__main__":
    main()
