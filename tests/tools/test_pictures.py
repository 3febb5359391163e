"""Graph pictures: the DOT text marks backends, devices, inplace and view nodes and
transfers; pydotprint renders SVG and PNG through graphviz (pygraphviz's wheels)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.pictures import graph_dot, pydotprint


def _mlp_train():
    rng = np.random.default_rng(0)
    x, y = T.matrix("x"), T.lvector("y")
    W1 = tensorjit.shared(rng.normal(size=(8, 5)), name="W1")
    W2 = tensorjit.shared(rng.normal(size=(5, 3)), name="W2")
    prob = T.nnet.softmax(T.dot(T.tanh(T.dot(x, W1)), W2))
    cost = -T.mean(T.log(prob)[T.arange(y.shape[0]), y])
    grads = T.grad(cost, [W1, W2])
    updates = [(W1, W1 - 0.1 * grads[0]), (W2, W2 - 0.1 * grads[1])]
    return tensorjit.function([x, y], cost, updates=updates, name="train"), cost


@NEEDS_C
def test_dot_text_of_a_compiled_function_marks_what_ran_where():
    train, _ = _mlp_train()
    dot = graph_dot(train, with_ids=True)
    assert dot.startswith("digraph tensorjit {") and dot.rstrip().endswith("}")
    for node in train.fgraph.apply_nodes:  # every node drawn, with its kernel
        assert f"[{train.kernels[node].name}]" in dot
    assert "(inplace)" in dot and 'xlabel="destroys"' in dot  # Gemm_inplace on W1
    assert "(view)" in dot and "style=dashed" in dot  # the transposes
    assert "shared W1" in dot and "box3d" in dot
    assert "update of W1" in dot and "update of W2" in dot and "output" in dot
    assert 'legend_c [label="c"' in dot  # the backends' colour legend
    assert "0: " in dot  # with_ids


def test_dot_text_of_variables_and_of_a_second_device():
    x = T.vector("x")
    dot = graph_dot(T.exp(x) + 1)
    assert "exp" in dot and "legend" not in dot  # no kernels before compiling
    from tensorjit.core.config import config

    with config.change_flags(device="wrapdev"):
        w = tensorjit.shared(np.ones(3), name="w")
        f = tensorjit.function([x], T.exp(w) * x)
    dot = graph_dot(f)
    assert "hexagon" in dot and ("cpu -> wrapdev" in dot or "wrapdev -> cpu" in dot)
    assert "on wrapdev" in dot and "peripheries=2" in dot


@NEEDS_C
def test_pydotprint_renders_svg_and_png(tmp_path, capsys):
    pytest.importorskip("pygraphviz", reason="the [graphviz] extra is not installed")
    train, cost = _mlp_train()
    svg = pydotprint(train, tmp_path / "mlp.svg")
    assert "The output file is available at" in capsys.readouterr().out
    text = (tmp_path / "mlp.svg").read_text()
    assert svg == str(tmp_path / "mlp.svg") and "<svg" in text and "Gemm_inplace" in text
    png = pydotprint(cost, tmp_path / "cost.png", print_output_file=False)
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    image = pydotprint(train, format="svg", return_image=True)
    assert b"<svg" in image
    assert pydotprint(train, tmp_path / "g.dot", print_output_file=False).endswith("g.dot")
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    with pytest.warns(UserWarning, match="high_contrast"):
        pydotprint(cost, tmp_path / "c.svg", high_contrast=True, print_output_file=False)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="compiled function or variables"):
        graph_dot([1, 2])


def test_inputs_that_are_outputs_and_updates_keep_every_role():
    x = T.vector("x")
    w = tensorjit.shared(np.ones(3), name="W")
    f = tensorjit.function([x], [x, x * 2, T.constant(np.float64(1.0))])
    dot = graph_dot(f)
    assert 'label="x, output 0\\n' in dot
    assert "out2 -> out2" not in dot  # a constant output is a box, not a loop
    g = tensorjit.function([x], w + x, updates=[(w, w + x)])
    assert "output, update of W" in graph_dot(g) or "update of W" in graph_dot(g)
