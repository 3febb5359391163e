"""The shared scalar renderer serves any C-like dialect: the C backend's, and (here,
defined by the test as the CUDA backend will define it) a CUDA dialect whose kernels
nvcc compiles to PTX without a GPU."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators.codegen import C_DIALECT
from tensorjit.plugins.cstyle import Dialect, Unsupported, scalar_expr
from tensorjit.plugins.cstyle.elementwise import (
    contiguous_kernel,
    element_function,
    multi_element_function,
)
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

CUDA_TYPES = {
    "bool": "bool",
    "int32": "int32_t",
    "int64": "int64_t",
    "float32": "float",
    "float64": "double",
}
CUDA = Dialect(
    "CUDA (test)",
    CUDA_TYPES,
    unary={"exp": "exp", "tanh": "tanh", "log1p": "log1p", "sqrt": "sqrt"},
    kernel_qualifier='extern "C" __global__',
    function_qualifier="static __device__ __forceinline__",
    restrict="__restrict__",
    flat_loop=(
        "for (int64_t {i} = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; {i} < {n}; "
        "{i} += (int64_t)gridDim.x * blockDim.x)"
    ),
    preamble="#include <stdint.h>\n",
)


def _fused(expression, *inputs):
    """The fused elementwise node of ``expression`` (rewritten as FAST_RUN would)."""
    import tensorjit

    f = tensorjit.function(list(inputs), expression)
    (node,) = [n for n in f.kernels if isinstance(n.op, Elemwise)]
    return node


def _kernel(dialect, node):
    """The contiguous kernel of an Elemwise node, or of a MultiOutputElemwise node (its
    element function returning a struct of one element of each output)."""
    dtypes = [v.type.dtype for v in node.inputs]
    outs = [v.type.dtype for v in node.outputs]
    kinds = ["full"] * len(dtypes)
    scalar_op = node.op.scalar_op
    if len(outs) > 1:
        function, _ = multi_element_function(dialect, scalar_op, dtypes, outs, kinds, {})
    else:
        function, _ = element_function(dialect, scalar_op, dtypes, outs[0], kinds, {})
    ops = [(f"d{i}", d, "full", (False,)) for i, d in enumerate(dtypes)]
    names = [f"dout{k}" for k in range(len(outs))]
    ops += [(name, dt, "full", (False,)) for name, dt in zip(names, outs)]

    def store(load, index):
        call = "tj_f(" + ", ".join(load[f"d{i}"] for i in range(len(dtypes))) + ")"
        if len(outs) == 1:
            return f"p_dout0[{index}] = {call};"
        fields = " ".join(f"p_{name}[{index}] = r.r{k};" for k, name in enumerate(names))
        return f"{{ const tj_fr r = {call}; {fields} }}"

    kernel = contiguous_kernel(dialect, "tj_contig", ops, names, len(outs) == 1, store)
    return "\n".join([dialect.preamble, *function, *kernel]) + "\n"


def _fused_multi(outputs, *inputs):
    """The MultiOutputElemwise node of ``outputs`` (rewritten as FAST_RUN would)."""
    import tensorjit

    f = tensorjit.function(list(inputs), outputs)
    (node,) = [n for n in f.kernels if isinstance(n.op, MultiOutputElemwise)]
    return node


def test_one_scalar_graph_renders_in_each_dialect():
    a, b = T.fvectors("a", "b")
    node = _fused(T.tanh(a) * T.exp(b) + T.log1p(a), a, b)
    assert isinstance(node.op.scalar_op, Composite)
    c_source = _kernel(C_DIALECT, node)
    cuda_source = _kernel(CUDA, node)
    # The same computation; the dialects spell float32 math and the loop differently.
    assert "tj_vtanh_f(" in c_source and "for (int64_t i = 0; i < n; i++)" in c_source
    assert "tanhf(" in cuda_source and "expf(" in cuda_source
    assert 'extern "C" __global__ void tj_contig(' in cuda_source
    assert "blockIdx.x" in cuda_source


def test_several_outputs_render_as_one_loop_storing_each():
    a, b = T.fvectors("a", "b")
    shared = T.tanh(a) * T.exp(b)
    node = _fused_multi([shared, T.sqrt(shared * shared + 1) - b], a, b)
    for dialect in (C_DIALECT, CUDA):
        source = _kernel(dialect, node)
        assert "tj_fr tj_f(" in source and "p_dout0[i] = r.r0; p_dout1[i] = r.r1;" in source


def test_a_dialect_without_a_function_declines_the_op():
    x = T.dvector("x")
    node = _fused(T.erf(x) * 2, x)
    with pytest.raises(Unsupported):
        _kernel(CUDA, node)
    # ... while the C dialect has it (its helper: libm's erf in float64, vector_erf.py's
    # in float32).
    assert "tj_erf_d(" in _kernel(C_DIALECT, node)


def test_literals_are_exact_in_every_dialect():
    for dialect in (C_DIALECT, CUDA):
        assert dialect.literal(np.float64(0.1)) == "((double)(0.1))"
        assert dialect.literal(np.int64(-(2**63))) == "INT64_MIN"
    x = T.dvector("x")
    add = (x + x).owner.op.scalar_op
    expr, dtype = scalar_expr(add, ["x", "y"], ["int32", "float32"], CUDA)
    assert dtype == "float64"  # NumPy's promotion, whatever the dialect
    assert expr == "((double)(((double)(x)) + ((double)(y))))"


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(
    NVCC is None, reason="nvcc not found: the CUDA rendering is checked as text only"
)
def test_the_cuda_rendering_compiles_to_ptx(tmp_path):
    a, b = T.fvectors("a", "b")
    shared = T.tanh(a) * T.exp(b)
    nodes = [
        _fused(T.tanh(a) * T.exp(b) + T.log1p(a), a, b),
        _fused(T.sqrt(a * a + b * 2.5) - 1, a, b),
        _fused_multi([shared, T.sqrt(shared * shared + 1) - b], a, b),  # two outputs
    ]
    for node in nodes:
        source = tmp_path / "kernel.cu"
        source.write_text(_kernel(CUDA, node))
        ptx = tmp_path / "kernel.ptx"
        result = subprocess.run(
            [NVCC, "--ptx", "-arch=sm_80", str(source), "-o", str(ptx)],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr + source.read_text()
        assert ".entry tj_contig" in ptx.read_text()
