"""L2-penalised weight updates with and without ``PenalisedGemm`` (the rewrite
``local_decay_with_penalty``: the penalty's sum of squares and the weight's decay in one
pass, then BLAS's GEMM; c_backend/linalg/penalised.py), in the same process, the two
steps taking turns in blocks of calls; medians and minimums of the blocks' mean times.

Models: the tutorial MLP (benchmarks/tutorial.py: 784-500-10, minibatches of 20,
l2 = 1e-4) and an L2-penalised softmax regression with a hidden ReLU layer of 1024
(minibatches of 128, l2 = 1e-4 on both weights), float32 and float64. Losses of the two
steps are checked equal (to the dtype's rounding) before timing.

Run: taskset -c 0 .venv/bin/python benchmarks/penalised_update.py [--dtypes float32,float64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import tutorial  # (limits the threads, by --threads, before NumPy loads)

# isort: split
import numpy as np  # noqa: E402

WITHOUT = "local_decay_with_penalty"


def tutorial_mlp(dtype: str, mode):
    x_all, y_all, params0 = tutorial.make_data("mlp", dtype)
    step = tutorial.symbolic_step("tensorjit", "mlp", x_all, y_all, params0, dtype, mode)
    return lambda i: step(i % tutorial.N_BATCHES), step


def penalised_classifier(dtype: str, mode, batch: int = 128, hidden: int = 1024):
    import tensorjit
    import tensorjit.tensor as T

    rng = np.random.default_rng(0)
    n_in, n_out, l2, lr = 784, 10, 1e-4, 0.05
    data = rng.standard_normal((batch * 8, n_in)).astype(dtype)
    labels = rng.integers(0, n_out, batch * 8).astype("int32")
    w1 = tensorjit.shared((rng.standard_normal((n_in, hidden)) / 28).astype(dtype), name="w1")
    w2 = tensorjit.shared((rng.standard_normal((hidden, n_out)) / 32).astype(dtype), name="w2")
    x, y = T.matrix("x", dtype=dtype), T.ivector("y")
    probs = T.nnet.softmax(T.dot(T.maximum(T.dot(x, w1), 0), w2))
    cost = -T.mean(T.log(probs)[T.arange(y.shape[0]), y])
    cost = cost + l2 * (T.sum(w1**2) + T.sum(w2**2))
    updates = [(w, w - lr * g) for w, g in zip((w1, w2), T.grad(cost, [w1, w2]))]
    step = tensorjit.function([x, y], cost, updates=updates, mode=mode)
    parts = [slice(k * batch, (k + 1) * batch) for k in range(8)]
    batches = [(data[part], labels[part]) for part in parts]
    return lambda i: step(*batches[i % 8]), step


MODELS = {"tutorial MLP": tutorial_mlp, "penalised classifier": penalised_classifier}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--blocks", type=int, default=15, help="blocks of 20 calls per step")
    parser.add_argument("--threads", type=int, default=1, help="(read by tutorial.py)")
    args = parser.parse_args()
    from tensorjit.core.compile.mode import get_mode
    from tensorjit.tensor.blas import PenalisedGemm

    for dtype in args.dtypes.split(","):
        for model, build in MODELS.items():
            steps, losses = {}, {}
            for name, mode in [("PenalisedGemm", None), ("plain", get_mode(None).without(WITHOUT))]:
                call, fn = build(dtype, mode)
                has = any(isinstance(n.op, PenalisedGemm) for n in fn.fgraph.toposort())
                assert has == (name == "PenalisedGemm"), (model, name)
                losses[name] = [float(call(i)) for i in range(3)]
                steps[name] = call
            rtol = 1e-4 if dtype == "float32" else 1e-10
            np.testing.assert_allclose(losses["PenalisedGemm"], losses["plain"], rtol=rtol)
            times: dict[str, list[float]] = {name: [] for name in steps}
            for block in range(args.blocks):
                for name, call in steps.items():
                    start = time.perf_counter()
                    for i in range(20):
                        call(3 + block * 20 + i)
                    times[name].append((time.perf_counter() - start) / 20)
            line = ", ".join(
                f"{name} {statistics.median(t) * 1e3:.3f} ms (min {min(t) * 1e3:.3f})"
                for name, t in times.items()
            )
            ratio = statistics.median(times["plain"]) / statistics.median(times["PenalisedGemm"])
            print(f"{model:<22}{dtype:<9}{line}; plain / PenalisedGemm {ratio:.2f}")


if __name__ == "__main__":
    main()
