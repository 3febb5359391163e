"""The example plugin's tests, written with tensorjit's test kit (its pytest plugin
gives the ``check_op`` fixture; ``tensorjit.testing.check_op`` is the same function)."""

from __future__ import annotations

import numpy as np
import pytest
from tensorjit_softsign import Softsign, softsign

import tensorjit
import tensorjit.tensor as T


def test_the_op_passes_the_kit(check_op):
    x = np.random.default_rng(0).normal(size=(5, 4))
    report = check_op(Softsign(), x, dtypes=("float32",))
    assert "c" in report.backends  # the C kernel was compared with perform
    assert "grad (verify_grad)" in report.checks


def test_the_inplace_variant_passes_the_kit(check_op):
    x = np.random.default_rng(1).normal(size=(3, 6))
    report = check_op(Softsign(inplace=True), x, gradients=False)
    assert "c" in report.backends


@pytest.mark.tensorjit_isolated
def test_a_function_uses_the_c_kernel_in_place_and_differentiates():
    x = T.vector("x")
    y = softsign(T.exp(x))  # exp's result is a temporary: softsign may overwrite it
    f = tensorjit.function([x], [y, tensorjit.grad(y.sum(), x)])
    kernels = {str(node.op): k.name for node, k in f.kernels.items()}
    assert "c:softsign" in kernels.values()
    assert any(isinstance(n.op, Softsign) and n.op.inplace for n in f.fgraph.apply_nodes)
    value = np.linspace(-2.0, 2.0, 9)
    got, g = f(value)
    e = np.exp(value)
    np.testing.assert_allclose(got, e / (1 + e))
    np.testing.assert_allclose(g, e / (1 + e) ** 2)


def test_an_integer_input_is_refused_at_the_users_line():
    n = T.lvector("n")
    with pytest.raises(
        TypeError, match=r"softsign needs a float32 or float64 tensor, got 'n'"
    ) as info:  # noqa: E501
        softsign(n)
    assert "test_softsign.py" in str(info.value)  # where n was made, not the plugin's code
