"""A compiled function's schedule (FunctionGraph.toposort with the destroy handler's
orderings) depends on the graph alone, not on where its nodes happen to live in memory:
the same program runs in the same order in every process."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
padding = [object() for _ in range(int(sys.argv[1]))]  # other ids for the graph's nodes
import numpy as np
import tensorjit
import tensorjit.tensor as T

rng = np.random.default_rng(0)
data = tensorjit.shared(rng.standard_normal((100, 8)), name="data")
labels = tensorjit.shared(rng.integers(0, 3, 100).astype("int64"), name="labels")
w1 = tensorjit.shared(rng.standard_normal((8, 5)) * 0.1, name="w1")
w2 = tensorjit.shared(rng.standard_normal((5, 3)) * 0.1, name="w2")
index = T.lscalar("index")
x, y = T.matrix("x"), T.lvector("y")
p = T.nnet.softmax(T.dot(T.tanh(T.dot(x, w1)), w2))
cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y]) + 1e-4 * T.sum(T.sqr(w1))
g1, g2 = tensorjit.grad(cost, [w1, w2])
f = tensorjit.function(
    [index],
    cost,
    updates=[(w1, w1 - 0.1 * g1), (w2, w2 - 0.1 * g2)],
    givens={x: data[index * 10 : (index + 1) * 10], y: labels[index * 10 : (index + 1) * 10]},
)
print(" | ".join(str(node.op) for node in f.fgraph.toposort()))
"""


def test_the_same_graph_gets_the_same_schedule_in_every_process():
    orders = {
        subprocess.run(
            [sys.executable, "-c", SCRIPT, str(padding)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for padding in (0, 1, 3, 777, 5000, 20000)
    }
    assert len(orders) == 1, orders
    assert "Dot" in orders.pop()
