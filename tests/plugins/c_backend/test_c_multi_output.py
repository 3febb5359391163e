"""The C kernel of a MultiOutputElemwise node (one loop writing each output,
codegen.elemwise_source): checked against Op.perform on every call (DebugMode), on
every memory layout, broadcast operands, 0-d and empty arrays, in whole-graph programs
(with row-blocked runs) and node by node, on one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, NEEDS_C, compiled_with
from helpers.layouts import matrix_layouts

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.build.compiler import extension_unavailable_reason
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

pytestmark = NEEDS_C
RNG = np.random.default_rng(19)
PROGRAMS = pytest.mark.skipif(
    extension_unavailable_reason() is not None,
    reason=f"no whole-graph C programs on this machine: {extension_unavailable_reason()}",
)


def shared_terms(x, r):
    """Three results sharing ``u`` (read twice) and ``w``; ``r`` broadcasts over rows."""
    u = T.exp(x * 0.5) + r
    w = T.tanh(u) * x
    return [u, w * 2, T.sqrt(T.abs(w)) - u]


def reference(x, r):
    u = np.exp(x * 0.5) + r
    w = np.tanh(u) * x
    return [u, w * 2, np.sqrt(np.abs(w)) - u]


def check(got, want, atol=1e-13):
    """Values within a few ulp of the terms (the last result subtracts u, up to ~20,
    from a square root: a difference of C's and NumPy's exp/tanh rounding cancels)."""
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=atol)


@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
def test_every_layout_with_a_broadcast_row_checked_against_perform(layout):
    x, r = T.matrix("x"), T.row("r")
    f = compiled_with("elemwise", MultiOutputElemwise, [x, r], shared_terms(x, r))
    (node,) = [n for n in f.kernels if isinstance(n.op, MultiOutputElemwise)]
    assert len(node.outputs) == 3
    arg = matrix_layouts(RNG.standard_normal((14, 10)), (7, 5))[layout]
    row = RNG.standard_normal((1, 5))
    check(f(arg, row), reference(arg, row))


@pytest.mark.parametrize("whole_graph", [True, False], ids=["program", "per-node"])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_arrays_in_programs_and_node_by_node_on_threads(whole_graph, threads):
    x, r = T.matrix("x"), T.row("r")
    with tensorjit.config.change_flags(whole_graph=whole_graph, threads=threads):
        f = tensorjit.function([x, r], shared_terms(x, r), mode=C_ONLY)
    assert (f.calls.program is not None) == whole_graph
    arg, row = RNG.standard_normal((300, 257)), RNG.standard_normal((1, 257))
    for _ in range(2):  # the second call reuses the first's output buffers
        got = f(arg, row)
        check(got, reference(arg, row))
    assert len({id(a) for a in got}) == 3


def test_zero_dimensional_and_empty_operands():
    x, r = T.matrix("x"), T.row("r")
    f = compiled_with("elemwise", MultiOutputElemwise, [x, r], shared_terms(x, r))
    empty, row = np.zeros((0, 4)), RNG.standard_normal((1, 4))
    check(f(empty, row), reference(empty, row))
    s, t = T.scalars("s", "t")
    a = T.exp(s) * t
    g = compiled_with("elemwise", MultiOutputElemwise, [s, t], [a, a * s + 1])
    check(g(np.float64(0.5), np.float64(3.0)), [np.exp(0.5) * 3.0, np.exp(0.5) * 1.5 + 1])


def test_outputs_of_three_dtypes_in_float32():
    x = T.matrix("x", dtype="float32")
    positive = x > 0
    outputs = [positive, T.where(positive, x, 0) * 2, T.cast(positive, "int64") + 3]
    f = compiled_with("elemwise", MultiOutputElemwise, [x], outputs)
    arg = RNG.standard_normal((9, 33)).astype("float32")
    mask = arg > 0
    want = [mask, np.where(mask, arg, 0).astype("float32") * 2, mask.astype("int64") + 3]
    check(f(arg), want, atol=0)


@PROGRAMS
def test_row_blocked_with_a_reduction_of_its_outputs():
    """A multi-output step between row reductions runs in the same row-blocked group
    as when run step by step over all rows."""
    x = T.matrix("x")
    mu = T.mean(x, axis=1, keepdims=True)
    centred = x - mu
    scaled = T.exp(centred) * 0.5
    outputs = [centred, scaled, (scaled * centred).sum(axis=1)]
    arg = RNG.standard_normal((200, 64))
    flags = {"excluded_rewrites": "local_moments_map"}
    with tensorjit.config.change_flags(row_block_bytes=4096, **flags):
        blocked = tensorjit.function([x], outputs, mode=C_ONLY)
    with tensorjit.config.change_flags(row_block_bytes=0, **flags):
        whole = tensorjit.function([x], outputs, mode=C_ONLY)
    assert any(isinstance(n.op, MultiOutputElemwise) for n in blocked.kernels)
    for g, w in zip(blocked(arg), whole(arg), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("whole_graph", [True, False], ids=["program", "per-node"])
def test_an_output_written_in_place_into_a_reversed_view(whole_graph):
    """The in-place pass gives output 0 the buffer of v, a reversed view of a
    temporary: it is written through v's negative strides."""
    x = T.vector("x")
    v = (x * 2)[::-1]
    a = T.exp(v) + 1
    with tensorjit.config.change_flags(whole_graph=whole_graph):
        f = tensorjit.function([x], [a, a * v], mode=C_ONLY)
    (node,) = [n for n in f.kernels if isinstance(n.op, MultiOutputElemwise)]
    assert node.op.inplace
    arg = np.arange(5.0)
    want_v = (arg * 2)[::-1]
    check(f(arg), [np.exp(want_v) + 1, (np.exp(want_v) + 1) * want_v])
