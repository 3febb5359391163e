"""Today's workloads against every rival, same data, same run, pinned, medians.

Workloads (each a function of NumPy-like ``lib`` so one definition serves every
implementation; the results are checked against NumPy's float64 values):

- logsumexp: ``x - logsumexp(x, axis=1)`` of a 4000 x 1000 matrix, summed (the
  max-subtract-exp-sum written out, as users write it);
- softmax: the library's own softmax over the rows of a 4000 x 1000 matrix;
- layernorm: ``(x - mean) / sqrt(var + 1e-5) * g + b`` over the rows of 4096 x 1024;
- options: Black-Scholes call and put prices of 10^6 options (special_functions.py);
- gru: one training step of a GRU (32 steps, batch 16, 64 inputs, 128 states) through
  the library's loop construct (scan; a Python loop in PyTorch), mean squared error of
  its states;
- lstm: the same with an LSTM (the states h and c carried);
- mlp: one training step of a 1024-wide MLP (two ReLU layers, batch 256, 10 outputs,
  mean squared error);
- cnn: one training step of a small-image CNN: 64 images of 3x32x32, a 3x3 convolution
  to 16 channels, ReLU, 2x2 max-pooling, a 3x3 convolution to 32 channels, ReLU, the
  mean over each channel's image, a dense layer to 10 outputs, mean squared error
  (convolutions as PyTorch and JAX define them: filters not flipped);
- transformer: one training step (loss, gradients of every parameter, SGD update) of a
  pre-norm transformer block: single-head attention over a batch of 16 sequences of 64
  tokens of width 128, layer norms, an exact-GELU MLP of width 512, mean squared error
  against a target. Checked: the first step's loss against NumPy's float64 forward.

Implementations: NumPy, tensorjit (default mode), PyTensor (default mode and "CVM", its C
backend), JAX (jit), PyTorch eager and torch.compile; those not installed are named
and left out. Each runs in float32 unless ``--dtypes`` says otherwise. Times are medians
of ``--repeats`` samples (benchmarks/_timing.py) on the cores this process is pinned to.

Run: taskset -c 0 .venv-bench/bin/python benchmarks/workloads.py
     [--workloads logsumexp,softmax,layernorm,options] [--dtypes float32] [--repeats 9]
     [--threads 1] [--only numpy,tensorjit,...]
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _competitors import limit_threads, thread_report, threads_from_argv

limit_threads(threads_from_argv())  # before NumPy loads its BLAS

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402
from special_functions import agree as difference  # noqa: E402
from special_functions import options  # noqa: E402

EPS = 1e-5


# ---------------------------------------------------------------- the workloads
def logsumexp_total(lib: Any, x: Any) -> Any:
    m = lib.max(x, axis=1, keepdims=True)
    lse = m + lib.log(lib.sum(lib.exp(x - m), axis=1, keepdims=True))
    return lib.sum(x - lse)


def layernorm(lib: Any, x: Any, g: Any, b: Any) -> Any:
    mean = lib.mean(x, axis=1, keepdims=True)
    d = x - mean
    var = lib.mean(d * d, axis=1, keepdims=True)
    return d / lib.sqrt(var + EPS) * g + b


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


LEARNING_RATE = 1e-3
# The transformer block: batch, tokens, width, MLP width.
BATCH, TOKENS, WIDTH, HIDDEN = 16, 64, 128, 512
# The GRU: steps, batch, input width, hidden width.
STEPS, GRU_BATCH, INPUTS, STATE = 32, 16, 64, 128
# The MLP: batch, width, outputs.
MLP_BATCH, MLP_WIDTH, MLP_OUT = 256, 1024, 10
# The CNN: batch, channels in, image side, channels of the two convolutions, outputs.
CNN_BATCH, CNN_IN, CNN_SIDE, CNN_C1, CNN_C2, CNN_OUT = 64, 3, 32, 16, 32, 10


def transformer_loss(ops: Any, p: dict, x: Any, target: Any) -> Any:
    """The block's mean squared error; ``ops``: matmul, swap (the last two axes),
    softmax (last axis), erf, mean (axis, keepdims), sqrt of one library."""

    def norm(h, g, b):
        mean = ops.mean(h, -1, True)
        d = h - mean
        return d / ops.sqrt(ops.mean(d * d, -1, True) + EPS) * g + b

    h = norm(x, p["g1"], p["b1"])
    q, k, v = (ops.matmul(h, p[w]) for w in ("wq", "wk", "wv"))
    scores = ops.matmul(q, ops.swap(k)) * (1 / WIDTH**0.5)
    x1 = x + ops.matmul(ops.matmul(ops.softmax(scores), v), p["wo"])
    u = ops.matmul(norm(x1, p["g2"], p["b2"]), p["w1"])
    gelu = u * 0.5 * (1 + ops.erf(u * (1 / 2**0.5)))
    y = x1 + ops.matmul(gelu, p["w2"])
    err = y - target
    return ops.mean(ops.mean(ops.mean(err * err, -1, False), -1, False), -1, False)


def lstm_loss(ops: Any, p: dict, x: Any, target: Any) -> Any:
    """An LSTM over x's leading (time) axis from zero states, the mean squared error of
    its outputs h."""

    def step(xt, h, c):
        def gate(g):
            return ops.matmul(xt, p[f"w{g}"]) + ops.matmul(h, p[f"u{g}"]) + p[f"b{g}"]

        i, f, o = ops.sigmoid(gate("i")), ops.sigmoid(gate("f")), ops.sigmoid(gate("o"))
        c = f * c + i * ops.tanh(gate("g"))
        return o * ops.tanh(c), c

    zeros = ops.zeros((GRU_BATCH, STATE), x.dtype)
    err = ops.recur(step, x, (zeros, zeros)) - target
    return ops.mean(ops.mean(ops.mean(err * err, -1, False), -1, False), -1, False)


def mlp_loss(ops: Any, p: dict, x: Any, target: Any) -> Any:
    """A wide MLP (two ReLU layers) and the mean squared error of its outputs."""
    h = ops.relu(ops.matmul(x, p["w1"]) + p["b1"])
    h = ops.relu(ops.matmul(h, p["w2"]) + p["b2"])
    err = ops.matmul(h, p["w3"]) + p["b3"] - target
    return ops.mean(ops.mean(err * err, -1, False), -1, False)


def gru_loss(ops: Any, p: dict, x: Any, target: Any) -> Any:
    """A GRU over x's leading (time) axis from a zero state, the mean squared error of
    its states; ``ops``: matmul, sigmoid, tanh, mean, zeros and recur(step, x, states)
    (the step maps (x[t], *states) to the new states; recur stacks the first)."""

    def step(xt, h):
        z = ops.sigmoid(ops.matmul(xt, p["wz"]) + ops.matmul(h, p["uz"]) + p["bz"])
        r = ops.sigmoid(ops.matmul(xt, p["wr"]) + ops.matmul(h, p["ur"]) + p["br"])
        c = ops.tanh(ops.matmul(xt, p["wh"]) + ops.matmul(r * h, p["uh"]) + p["bh"])
        return (1 - z) * h + z * c

    h0 = ops.zeros((GRU_BATCH, STATE), x.dtype)
    err = ops.recur(lambda xt, h: (step(xt, h),), x, (h0,)) - target
    return ops.mean(ops.mean(ops.mean(err * err, -1, False), -1, False), -1, False)


def cnn_loss(ops: Any, p: dict, x: Any, target: Any) -> Any:
    """Two 3x3 convolutions (``ops.conv``: 'valid', filters not flipped) with ReLU, a
    2x2 max-pool (``ops.pool2``) between them, the mean over each channel's image, a
    dense layer; the mean squared error of its outputs."""
    h = ops.relu(ops.conv(x, p["w1"]) + ops.channels(p["b1"]))
    h = ops.relu(ops.conv(ops.pool2(h), p["w2"]) + ops.channels(p["b2"]))
    features = ops.mean(ops.mean(h, -1, False), -1, False)
    err = ops.matmul(features, p["w3"]) + p["b3"] - target
    return ops.mean(ops.mean(err * err, -1, False), -1, False)


def shifted_conv(lib: Any, x: Any, w: Any, stack: Callable, side: int = 3) -> Any:
    """A 'valid' side x side cross-correlation from tensor ops alone (for a library
    without a conv op): the shifted windows stacked (im2col) times the filters."""
    rows, cols = x.shape[2] - side + 1, x.shape[3] - side + 1
    shifted = [x[:, :, i : i + rows, j : j + cols] for i in range(side) for j in range(side)]
    windows = stack(shifted, 2).reshape((x.shape[0], -1, rows, cols))
    out = lib.tensordot(windows, w.reshape((w.shape[0], -1)), axes=[[1], [1]])
    return out.transpose(0, 3, 1, 2) if hasattr(out, "transpose") else out


def reshaped_pool2(x: Any) -> Any:
    """2x2 max-pooling of even images by a reshape."""
    n, c, h, w = x.shape
    return x.reshape((n, c, h // 2, 2, w // 2, 2)).max(axis=(3, 5))


@dataclass(frozen=True)
class Model:
    """A training workload: its parameters' shapes (weights drawn with variance 1/fan-in,
    a matrix's first axis or a filter bank's last three,
    "g*" ones, "b*" zeros), its loss, and the shapes of its input and target."""

    shapes: dict[str, tuple[int, ...]]
    loss: Callable[[Any, dict, Any, Any], Any]
    x: tuple[int, ...]
    target: tuple[int, ...]

    def data(self, dtype: str) -> list[np.ndarray]:
        """The parameters' starting values, then x and the target."""
        rng = np.random.default_rng(0)
        params = []
        for name, shape in self.shapes.items():
            if name.startswith("g"):
                params.append(np.ones(shape))
            elif name.startswith("b"):
                params.append(np.zeros(shape))
            else:
                fan_in = shape[0] if len(shape) == 2 else np.prod(shape[1:])  # matrix, filters
                params.append(rng.standard_normal(shape) / np.sqrt(fan_in))
        x, target = rng.standard_normal(self.x), rng.standard_normal(self.target)
        return [a.astype(dtype) for a in (*params, x, target)]


MODELS = {
    "transformer": Model(
        {
            "wq": (WIDTH, WIDTH),
            "wk": (WIDTH, WIDTH),
            "wv": (WIDTH, WIDTH),
            "wo": (WIDTH, WIDTH),
            "g1": (WIDTH,),
            "b1": (WIDTH,),
            "w1": (WIDTH, HIDDEN),
            "w2": (HIDDEN, WIDTH),
            "g2": (WIDTH,),
            "b2": (WIDTH,),
        },  # fmt: skip
        transformer_loss,
        (BATCH, TOKENS, WIDTH),
        (BATCH, TOKENS, WIDTH),
    ),
    "gru": Model(
        {
            **{f"w{g}": (INPUTS, STATE) for g in "zrh"},
            **{f"u{g}": (STATE, STATE) for g in "zrh"},
            **{f"b{g}": (STATE,) for g in "zrh"},
        },
        gru_loss,
        (STEPS, GRU_BATCH, INPUTS),
        (STEPS, GRU_BATCH, STATE),
    ),
    "lstm": Model(
        {
            **{f"w{g}": (INPUTS, STATE) for g in "ifog"},
            **{f"u{g}": (STATE, STATE) for g in "ifog"},
            **{f"b{g}": (STATE,) for g in "ifog"},
        },
        lstm_loss,
        (STEPS, GRU_BATCH, INPUTS),
        (STEPS, GRU_BATCH, STATE),
    ),
    "mlp": Model(
        {
            "w1": (MLP_WIDTH, MLP_WIDTH),
            "b1": (MLP_WIDTH,),
            "w2": (MLP_WIDTH, MLP_WIDTH),
            "b2": (MLP_WIDTH,),
            "w3": (MLP_WIDTH, MLP_OUT),
            "b3": (MLP_OUT,),
        },  # fmt: skip
        mlp_loss,
        (MLP_BATCH, MLP_WIDTH),
        (MLP_BATCH, MLP_OUT),
    ),
    "cnn": Model(
        {
            "w1": (CNN_C1, CNN_IN, 3, 3),
            "b1": (CNN_C1,),
            "w2": (CNN_C2, CNN_C1, 3, 3),
            "b2": (CNN_C2,),
            "w3": (CNN_C2, CNN_OUT),
            "b3": (CNN_OUT,),
        },  # fmt: skip
        cnn_loss,
        (CNN_BATCH, CNN_IN, CNN_SIDE, CNN_SIDE),
        (CNN_BATCH, CNN_OUT),
    ),
}
WORKLOADS = ("logsumexp", "softmax", "layernorm", "options", *MODELS)


def unrolled(step: Callable, x: Any, init: tuple, stack: Callable) -> Any:
    """A recurrence as a Python loop over x's leading axis; the first states stacked."""
    states, kept = init, []
    for xt in x:
        states = step(xt, *states)
        kept.append(states[0])
    return stack(kept)


class NumpyOps:
    matmul = staticmethod(np.matmul)
    sqrt = staticmethod(np.sqrt)

    @staticmethod
    def swap(a):
        return np.swapaxes(a, -1, -2)

    @staticmethod
    def softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    @staticmethod
    def erf(a):
        from scipy import special

        return special.erf(a)

    @staticmethod
    def mean(a, axis, keepdims):
        return np.mean(a, axis=axis, keepdims=keepdims)

    tanh = staticmethod(np.tanh)
    zeros = staticmethod(np.zeros)

    @staticmethod
    def sigmoid(a):
        return 1 / (1 + np.exp(-a))

    @staticmethod
    def relu(a):
        return np.maximum(a, 0)

    @staticmethod
    def recur(step, x, init):
        return unrolled(step, x, init, np.stack)

    @staticmethod
    def conv(x, w):
        return shifted_conv(np, x, w, np.stack)

    pool2 = staticmethod(reshaped_pool2)

    @staticmethod
    def channels(b):
        return b[:, None, None]


def make_data(name: str, dtype: str) -> list[np.ndarray]:
    if name in MODELS:
        return MODELS[name].data(dtype)
    rng = np.random.default_rng(0)
    if name in ("logsumexp", "softmax"):
        return [(rng.standard_normal((4000, 1000)) * 3).astype(dtype)]
    if name == "layernorm":
        x = rng.standard_normal((4096, 1024)) * 2 + 1
        g, b = rng.uniform(0.5, 1.5, (1, 1024)), rng.standard_normal((1, 1024))
        return [a.astype(dtype) for a in (x, g, b)]
    n = 1_000_000
    return [
        a.astype(dtype)
        for a in (
            rng.uniform(50, 150, n),
            rng.uniform(50, 150, n),
            rng.uniform(0.1, 3, n),
            rng.uniform(0.05, 0.6, n),
        )
    ]


# ---------------------------------------------------------------- implementations
def numpy_fn(name: str, dtype: str) -> Callable:
    from scipy import special

    if name == "logsumexp":
        return lambda x: logsumexp_total(np, x)
    if name == "softmax":
        return numpy_softmax
    if name == "layernorm":
        return lambda *a: layernorm(np, *a)
    if name in MODELS:
        model = MODELS[name]
        return lambda *a: model.loss(NumpyOps, dict(zip(model.shapes, a)), a[-2], a[-1])
    return lambda *a: options(np, special.erf, *a, dtype)


def _symbolic(T: Any, name: str, dtype: str) -> tuple[list, Any]:
    """(inputs, outputs) of the workload in the symbolic library ``T``."""
    if name in ("logsumexp", "softmax"):
        x = T.matrix("x", dtype=dtype)
        if name == "softmax":
            softmax = T.special.softmax if hasattr(T, "special") else T.nnet.softmax
            return [x], softmax(x, axis=1)
        return [x], logsumexp_total(T, x)
    if name == "layernorm":
        x, g, b = T.matrix("x", dtype=dtype), T.row("g", dtype=dtype), T.row("b", dtype=dtype)
        return [x, g, b], layernorm(T, x, g, b)
    args = [T.vector(n, dtype=dtype) for n in ("s", "k", "t", "v")]
    return args, list(options(T, T.erf, *args, dtype))


class SymbolicOps:
    """tensorjit's or PyTensor's tensor module as the models' ops."""

    def __init__(
        self,
        T: Any,
        softmax: Callable,
        sigmoid: Callable,
        scan: Callable,
        conv: Callable,
        pool2: Callable,
    ):
        self.T, self.softmax, self.sigmoid, self.scan = T, softmax, sigmoid, scan
        self.matmul, self.erf, self.sqrt, self.tanh = T.matmul, T.erf, T.sqrt, T.tanh
        self.zeros, self.conv, self.pool2 = T.zeros, conv, pool2

    def channels(self, b):
        return b.dimshuffle(0, "x", "x")

    def swap(self, a):
        return a.dimshuffle(0, 2, 1)

    def mean(self, a, axis, keepdims):
        return self.T.mean(a, axis=axis, keepdims=keepdims)

    def relu(self, a):
        return self.T.maximum(a, 0)

    def recur(self, step, x, init):
        states, _ = self.scan(lambda *a: list(step(*a)), sequences=[x], outputs_info=list(init))
        return states[0] if isinstance(states, (list, tuple)) else states


def _training_step(name: str, library: Any, ops: SymbolicOps, data, **kwargs) -> Callable:
    """A compiled step(x, target) -> loss updating shared parameters by SGD; the
    parameters start from ``data``'s first values each time the step is made."""
    model = MODELS[name]
    params = {n: library.shared(v.copy(), name=n) for n, v in zip(model.shapes, data)}
    dtype = data[0].dtype.name
    x = ops.T.tensor(dtype=dtype, shape=(None,) * len(model.x), name="x")
    target = ops.T.tensor(dtype=dtype, shape=(None,) * len(model.target), name="target")
    loss = model.loss(ops, params, x, target)
    grads = library.grad(loss, list(params.values()))
    lr = np.asarray(LEARNING_RATE, dtype)
    updates = [(p, p - lr * g) for p, g in zip(params.values(), grads)]
    step = library.function([x, target], loss, updates=updates, **kwargs)
    return lambda *a: step(*a[-2:])


def tensorjit_fn(name: str, dtype: str, data: list) -> Callable:
    import tensorjit
    import tensorjit.tensor as T

    if name in MODELS:
        from tensorjit.scan import scan
        from tensorjit.tensor.nnet.conv import conv2d
        from tensorjit.tensor.nnet.pool import pool_2d

        def conv(x, w):
            return conv2d(x, w, filter_flip=False)

        def pool2(x):
            return pool_2d(x, (2, 2))

        ops = SymbolicOps(T, T.nnet.softmax, T.nnet.sigmoid, scan, conv, pool2)
        return _training_step(name, tensorjit, ops, data)
    inputs, outputs = _symbolic(T, name, dtype)
    return tensorjit.function(inputs, outputs)


def pytensor_fn(name: str, dtype: str, mode: str | None, data: list) -> Callable:
    import pytensor
    import pytensor.tensor as pt

    if name in MODELS:
        softmax = lambda a: pt.special.softmax(a, axis=-1)  # noqa: E731

        def conv(x, w):  # PyTensor 3 has no conv2d op
            return shifted_conv(pt, x, w, lambda arrays, axis: pt.stack(arrays, axis=axis))

        ops = SymbolicOps(pt, softmax, pt.sigmoid, pytensor.scan, conv, reshaped_pool2)
        return _training_step(name, pytensor, ops, data, mode=mode)
    inputs, outputs = _symbolic(pt, name, dtype)
    return pytensor.function(inputs, outputs, mode=mode)


def jax_fn(name: str, dtype: str, data: list) -> Callable:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.scipy.special import erf

    if name in MODELS:
        jax_erf = erf
        model = MODELS[name]

        class Ops:
            matmul, sqrt, erf, tanh, zeros = jnp.matmul, jnp.sqrt, jax_erf, jnp.tanh, jnp.zeros
            sigmoid = jax.nn.sigmoid

            @staticmethod
            def swap(a):
                return jnp.swapaxes(a, -1, -2)

            @staticmethod
            def softmax(a):
                return jax.nn.softmax(a, axis=-1)

            @staticmethod
            def mean(a, axis, keepdims):
                return jnp.mean(a, axis=axis, keepdims=keepdims)

            @staticmethod
            def relu(a):
                return jnp.maximum(a, 0)

            @staticmethod
            def recur(step, x, init):
                def body(states, xt):
                    new = step(xt, *states)
                    return new, new[0]

                return jax.lax.scan(body, init, x)[1]

            @staticmethod
            def conv(x, w):
                return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")

            pool2 = staticmethod(reshaped_pool2)

            @staticmethod
            def channels(b):
                return b[:, None, None]

        def loss(params, x, target):
            return model.loss(Ops, params, x, target)

        @jax.jit
        def train(params, x, target):
            value, grads = jax.value_and_grad(loss)(params, x, target)
            new = {n: params[n] - LEARNING_RATE * grads[n] for n in params}
            return value, new

        state = {"params": {n: jnp.asarray(v) for n, v in zip(model.shapes, data)}}

        def run_step(*a):
            value, state["params"] = train(state["params"], a[-2], a[-1])
            return jax.block_until_ready(value)

        return run_step
    if name == "logsumexp":
        step = jax.jit(lambda x: logsumexp_total(jnp, x))
    elif name == "softmax":
        step = jax.jit(lambda x: jax.nn.softmax(x, axis=1))
    elif name == "layernorm":
        step = jax.jit(lambda *a: layernorm(jnp, *a))
    else:
        step = jax.jit(lambda *a: options(jnp, erf, *a, dtype))
    # JAX reads its own buffers: a NumPy argument is copied on every call (16 MiB: 1.5-2
    # ms) unless it happens to be aligned for zero-copy, which made its times bimodal;
    # tensorjit and torch.from_numpy read the NumPy array in place. So each input is put
    # on the device once (kept with its array, whose id names it).
    placed: dict[int, tuple[np.ndarray, Any]] = {}

    def run(*arrays: np.ndarray) -> Any:
        for a in arrays:
            if id(a) not in placed:
                placed[id(a)] = (a, jax.device_put(a))
        return jax.block_until_ready(step(*[placed[id(a)][1] for a in arrays]))

    return run


class _TorchNamespace:
    """PyTorch spelled as NumPy's functions (axis, keepdims)."""

    def __init__(self, torch: Any):
        self.torch = torch

    def max(self, x, axis, keepdims=False):
        return self.torch.amax(x, dim=axis, keepdim=keepdims)

    def sum(self, x, axis=None, keepdims=False):
        if axis is None:
            return self.torch.sum(x)
        return self.torch.sum(x, dim=axis, keepdim=keepdims)

    def mean(self, x, axis, keepdims=False):
        return self.torch.mean(x, dim=axis, keepdim=keepdims)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.torch, name)


def torch_fn(name: str, dtype: str, compiled: bool, data: list) -> Callable:
    import torch

    torch.set_num_threads(threads_from_argv())
    lib = _TorchNamespace(torch)
    if name in MODELS:
        return _torch_training(MODELS[name], torch, compiled, data)
    if name == "logsumexp":

        def body(x):
            return logsumexp_total(lib, x)
    elif name == "softmax":

        def body(x):
            return torch.softmax(x, dim=1)
    elif name == "layernorm":

        def body(x, g, b):
            return layernorm(lib, x, g, b)
    else:

        def body(s, k, t, v):
            return options(lib, torch.erf, s, k, t, v, dtype, const=float)

    step = torch.compile(body) if compiled else body

    def run(*arrays):
        with torch.no_grad():
            out = step(*[torch.from_numpy(a) for a in arrays])
        if isinstance(out, tuple):
            return [o.numpy() for o in out]
        return out.numpy()

    return run


def _torch_training(model: Model, torch: Any, compiled: bool, data: list) -> Callable:
    class Ops:
        matmul, sqrt, erf = torch.matmul, torch.sqrt, torch.erf
        tanh, sigmoid = torch.tanh, torch.sigmoid

        @staticmethod
        def zeros(shape, dtype):
            return torch.zeros(shape, dtype=dtype)

        @staticmethod
        def swap(a):
            return a.transpose(-1, -2)

        @staticmethod
        def softmax(a):
            return torch.softmax(a, dim=-1)

        @staticmethod
        def mean(a, axis, keepdims):
            return torch.mean(a, dim=axis, keepdim=keepdims)

        @staticmethod
        def relu(a):
            return torch.relu(a)

        @staticmethod
        def recur(step, x, init):
            return unrolled(step, x, init, torch.stack)

        @staticmethod
        def conv(x, w):
            return torch.nn.functional.conv2d(x, w)

        @staticmethod
        def pool2(x):
            return torch.nn.functional.max_pool2d(x, 2)

        @staticmethod
        def channels(b):
            return b[:, None, None]

    params = {n: torch.from_numpy(v.copy()).requires_grad_() for n, v in zip(model.shapes, data)}

    def loss(x, target):
        return model.loss(Ops, params, x, target)

    forward = torch.compile(loss) if compiled else loss

    def run_step(*a):
        value = forward(torch.from_numpy(a[-2]), torch.from_numpy(a[-1]))
        grads = torch.autograd.grad(value, list(params.values()))
        with torch.no_grad():
            for p, g in zip(params.values(), grads):
                p.sub_(LEARNING_RATE * g)
        return value.detach().numpy()

    return run_step


def implementations(
    name: str, dtype: str, only: set[str] | None, data: list
) -> dict[str, Callable]:
    builders = {
        "numpy": lambda: numpy_fn(name, dtype),
        "tensorjit": lambda: tensorjit_fn(name, dtype, data),
        "pytensor": lambda: pytensor_fn(name, dtype, None, data),
        "pytensor-c": lambda: pytensor_fn(name, dtype, "CVM", data),
        "jax": lambda: jax_fn(name, dtype, data),
        "torch": lambda: torch_fn(name, dtype, False, data),
        "torch.compile": lambda: torch_fn(name, dtype, True, data),
    }
    if name in MODELS:
        del builders["numpy"]  # no gradients
    made = {}
    for label, build in builders.items():
        if only and label not in only:
            continue
        try:
            made[label] = build()
        except ImportError as exc:
            print(f"  ({label} not installed: {exc})")
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--only", default="", help="implementations, comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="(read before NumPy loads)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    only = set(args.only.split(",")) if args.only else None
    print(thread_report())
    print(f"{'workload':<13}{'dtype':<9}{'implementation':<15}{'ms':>9}{'x tensorjit':>13}"
          f"{'max rel diff':>14}")  # fmt: skip
    for name in args.workloads.split(","):
        for dtype in args.dtypes.split(","):
            data = make_data(name, dtype)
            reference = numpy_fn(name, "float64")(*[a.astype(np.float64) for a in data])
            # float32: the sum of 4 10^6 terms in float32 rounds at ~1e-5 of its size
            tolerance = 1e-4 if dtype == "float32" else 1e-10
            times = {}
            for label, fn in implementations(name, dtype, only, data).items():
                off = difference(fn(*data), reference)
                if off > tolerance:
                    raise AssertionError(f"{label} {name} {dtype}: {off:.3g} off")
                times[label] = (median_time(lambda fn=fn, data=data: fn(*data), args.repeats), off)
            mine = times.get("tensorjit", (float("nan"), 0))[0]
            for label, (seconds, off) in times.items():
                print(f"{name:<13}{dtype:<9}{label:<15}{seconds * 1e3:>9.3f}"
                      f"{seconds / mine:>13.2f}{off:>14.2g}")  # fmt: skip


if __name__ == "__main__":
    main()
