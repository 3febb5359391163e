"""Native steps: a plugin's C function run by whole-graph programs themselves
(whole_graph/native.py, native.h). The sparse plugin's products are the real client:
functions of sparse and dense values run as one program without Python steps, with the
same values as the per-node kernels, and every case the native step does not cover
(formats, dtypes, strides, malformed matrices, shape errors) ends as the per-node path
ends. A small local plugin checks the contract itself: declining, raising, several
outputs, and the step kinds' table generating program.c's enum and dispatch."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
import scipy.sparse as ss

import tensorjit
import tensorjit.sparse as S
import tensorjit.tensor as T
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.core.hooks import get_plugin_system, hookimpl, register_plugin, registries
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.c_backend.build import compiler

pytestmark = pytest.mark.skipif(
    compiler.extension_unavailable_reason() is not None,
    reason=f"no whole-graph programs here: {compiler.extension_unavailable_reason()}",
)

FAST_C = tensorjit.FAST_RUN.with_backends("c", "python")


def _program(f):
    program = f.calls.program
    assert program is not None, "the function should run as one program"
    return program


def _per_node(inputs, outputs):
    with tensorjit.config.change_flags(whole_graph=False):
        return tensorjit.function(inputs, outputs, mode=FAST_C)


def _matrix(fmt: str, shape, dtype: str, seed: int, index: str = "int32"):
    m = ss.random(*shape, density=0.2, format=fmt, dtype=dtype, random_state=seed)
    m.indices = m.indices.astype(index)
    m.indptr = m.indptr.astype(index)
    return m


@pytest.mark.parametrize(
    "fmt,dtype,index",
    list(itertools.product(["csr", "csc"], ["float32", "float64"], ["int32", "int64"])),
)
def test_sparse_products_run_natively_in_one_program(fmt, dtype, index):
    x = (S.csr_matrix if fmt == "csr" else S.csc_matrix)("x", dtype=dtype)
    y = T.matrix("y", dtype=dtype)
    g = T.matrix("g", dtype=dtype)
    v = T.vector("v", dtype=dtype)
    outputs = [T.tanh(S.dot(x, y)), S.dot(g.T, x), S.dot(x, v), S.dot(g[:, 0], x)]
    f = tensorjit.function([x, y, g, v], outputs, mode=FAST_C)
    program = _program(f)
    assert program.runs_python == 0
    assert not program.takes_unfiltered  # a sparse input comes filtered by its type
    reference = _per_node([x, y, g, v], outputs)
    rng = np.random.default_rng(3)
    a = _matrix(fmt, (40, 25), dtype, seed=1, index=index)
    b = rng.standard_normal((25, 6)).astype(dtype)
    gg = rng.standard_normal((40, 3)).astype(dtype)
    vv = rng.standard_normal(25).astype(dtype)
    got = f(a, b, gg, vv)
    want = reference(a, b, gg, vv)
    for mine, theirs in zip(got, want):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)  # the same kernels


def test_a_sparse_training_step_is_one_program_with_per_node_values():
    """Logistic regression on sparse features: the forward product, its gradient
    (a dense x sparse product) and the update, all inside one program."""
    x = S.csr_matrix("x", dtype="float64")
    t = T.vector("t", dtype="float64")
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(30) * 0.1

    def step(w):
        p = T.sigmoid(S.dot(x, w))
        cost = -T.mean(t * T.log(p) + (1 - t) * T.log(1 - p))
        return cost, w - 0.5 * tensorjit.grad(cost, w)

    w = tensorjit.shared(w0.copy(), name="w")
    cost, new_w = step(w)
    f = tensorjit.function([x, t], cost, updates=[(w, new_w)], mode=FAST_C)
    assert _program(f).runs_python == 0
    w_ref = tensorjit.shared(w0.copy(), name="w_ref")
    cost_ref, new_w_ref = step(w_ref)
    with tensorjit.config.change_flags(whole_graph=False):
        g = tensorjit.function([x, t], cost_ref, updates=[(w_ref, new_w_ref)], mode=FAST_C)
    a = _matrix("csr", (64, 30), "float64", seed=2)
    labels = (rng.random(64) > 0.5).astype("float64")
    for _ in range(3):
        assert f(a, labels) == g(a, labels)
    np.testing.assert_array_equal(w.get_value(), w_ref.get_value())


def test_values_the_native_step_declines_end_as_on_the_per_node_path():
    x = S.csr_matrix("x", dtype="float64")
    y = T.matrix("y", dtype="float64")
    f = tensorjit.function([x, y], S.dot(x, y) * 2, mode=FAST_C)
    _program(f)
    rng = np.random.default_rng(1)
    b = rng.standard_normal((20, 8))
    # Index arrays of two dtypes, float32 values, a strided dense operand: converted.
    a = _matrix("csr", (10, 20), "float64", seed=4)
    mixed = ss.csr_matrix((a.data, a.indices.astype("int64"), a.indptr.astype("int32")), a.shape)
    np.testing.assert_allclose(f(mixed, b), 2 * (a @ b))
    np.testing.assert_allclose(f(a, np.asfortranarray(b)), 2 * (a @ b))
    wide = rng.standard_normal((20, 16))
    np.testing.assert_allclose(f(a, wide[:, ::2]), 2 * (a @ wide[:, ::2]))
    # A byte-swapped constant operand (constants reach native steps as they are).
    swapped = np.arange(20 * 8, dtype=">f8").reshape(20, 8)
    g = tensorjit.function([x], S.dot(x, T.constant(swapped)) * 1, mode=FAST_C)
    np.testing.assert_array_equal(g(a), a @ swapped.astype("float64"))
    v = tensorjit.function([x], S.dot(T.constant(swapped[:10, 0].copy()), x) * 1, mode=FAST_C)
    np.testing.assert_array_equal(v(a), swapped[:10, 0].astype("float64") @ a)
    # A malformed matrix: the per-node kernel's error.
    bad = ss.csr_matrix((a.data.copy(), a.indices.copy(), a.indptr.copy()), a.shape)
    bad.indices[0] = 99
    with pytest.raises(ValueError, match="malformed CSR matrix"):
        f(bad, b)
    # A shape mismatch: the op's own error.
    with pytest.raises(ValueError, match="not aligned"):
        f(a, rng.standard_normal((7, 8)))


# ---------------------------------------------------------------- the contract itself


class Twice(Op):
    """2 * x for float64 vectors, and the sum of x as a second output; NaN raises."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type(), T.scalar(dtype=x.type.dtype)])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        if np.isnan(x).any():
            raise ValueError("twice: a NaN in the input")
        output_storage[0][0] = 2 * x
        output_storage[1][0] = np.asarray(x.sum(), dtype=x.dtype)


_TWICE_SOURCE = r"""
static int tj_twice(PyObject *const *inputs, PyObject **outputs)
{
    PyArrayObject *x = (PyArrayObject *)inputs[0];
    if (PyArray_TYPE(x) != NPY_FLOAT64 || !PyArray_IS_C_CONTIGUOUS(x))
        return TJ_NATIVE_DECLINED; /* Op.perform handles the rest */
    npy_intp n = PyArray_DIM(x, 0);
    const double *in = (const double *)PyArray_DATA(x);
    for (npy_intp i = 0; i < n; i++)
        if (in[i] != in[i]) {
            PyErr_SetString(PyExc_ValueError, "native twice: a NaN in the input");
            return TJ_NATIVE_ERROR;
        }
    PyObject *out = PyArray_EMPTY(1, &n, NPY_FLOAT64, 0);
    PyObject *total = PyArray_ZEROS(0, NULL, NPY_FLOAT64, 0);
    if (out == NULL || total == NULL) {
        Py_XDECREF(out);
        Py_XDECREF(total);
        return TJ_NATIVE_ERROR;
    }
    double *o = (double *)PyArray_DATA((PyArrayObject *)out), sum = 0;
    for (npy_intp i = 0; i < n; i++) {
        o[i] = 2 * in[i];
        sum += in[i];
    }
    *(double *)PyArray_DATA((PyArrayObject *)total) = sum;
    outputs[0] = out;
    outputs[1] = total;
    return TJ_NATIVE_DONE;
}
"""


class _TwicePlugin:
    @hookimpl
    def tensorjit_register_kernels(self, registry):
        from tensorjit.plugins.c_backend.whole_graph.native import NativeStep

        def step(builder, node, plan):
            return builder.native(node, NativeStep(_TWICE_SOURCE, "tj_twice", "twice"))

        registry.add_spec(
            KernelSpec(
                "test:twice",
                "c",
                (Twice,),
                lambda node: lambda inputs, storage: Twice().perform(node, inputs, storage),
                step=step,
                plugin="test_native_twice",
            )
        )


@contextlib.contextmanager
def _twice_registered():
    plugin = _TwicePlugin()
    register_plugin(plugin, "test_native_twice")
    try:
        yield
    finally:
        get_plugin_system().pm.unregister(plugin)
        registries().kernels.table.pop(("c", Twice), None)


def test_a_local_plugin_contributes_a_native_step_with_two_outputs():
    with _twice_registered():
        x = T.vector("x", dtype="float64")
        doubled, total = Twice()(T.exp(x))
        f = tensorjit.function([x], [doubled + 1, total], mode=FAST_C)
        assert _program(f).runs_python == 0
        values = np.linspace(-1, 1, 9)
        got_doubled, got_total = f(values)
        np.testing.assert_allclose(got_doubled, 2 * np.exp(values) + 1)
        np.testing.assert_allclose(got_total, np.exp(values).sum())
        # A strided input is declined: Op.perform computes it (the per-node path).
        y = T.vector("y", dtype="float64")
        g = tensorjit.function([y], Twice()(y[::2])[0], mode=FAST_C)
        _program(g)
        np.testing.assert_array_equal(g(values), 2 * values[::2])


def test_a_native_steps_error_names_the_node():
    with _twice_registered():
        x = T.vector("x", dtype="float64")
        f = tensorjit.function([x], Twice()(x * 1)[0], mode=FAST_C)
        _program(f)
        with pytest.raises(ValueError, match="native twice: a NaN") as caught:
            f(np.array([1.0, np.nan]))
        assert "while computing Twice" in str(caught.value)


def test_the_step_kinds_table_generates_both_sides():
    from tensorjit.plugins.c_backend.whole_graph import steps
    from tensorjit.plugins.c_backend.whole_graph.program import _source

    source = _source("program.c")
    for kind in steps.StepKind:
        assert f"TJ_{kind.name} = {int(kind)}" in source
        assert f"case TJ_{kind.name}: return " in source
    assert f"#define TJ_N_KINDS {len(steps.StepKind)}" in source
    assert steps.checked_kinds() == {
        steps.StepKind.ELEMWISE,
        steps.StepKind.DOT,
        steps.StepKind.GEMM,
        steps.StepKind.GER,
        steps.StepKind.PENALISED,
    }
