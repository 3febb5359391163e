"""Every kind of kernel the CUDA backend launches compiles to PTX, on any machine: the
kernel families (plugins/device_kernels) render CUDA source for each op, dtype and
layout class their tests use, and nvcc and NVRTC each compile every program, which must
define the entry points the host code launches. Functions compiled with device=cuda on
a compile-only device place their nodes on CUDA kernels, compile those kernels and
refuse to run. (Running them needs a GPU: the device tests.)"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers.cuda import NoDevice, compiler_reason, cublas_reason, ptx_only_device

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.cstyle import Unsupported
from tensorjit.plugins.cuda_backend.compiler import compile_ptx, entry_names
from tensorjit.plugins.cuda_backend.dialect import SUPPORTED_NAMES
from tensorjit.plugins.cuda_backend.target import CUDA
from tensorjit.plugins.device_kernels import (
    construct,
    convolution,
    elementwise,
    indexing,
    random,
    reductions,
    rowwise,
    transpose,
)
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.tensor.scalar import SCALAR_OPS
from tensorjit.tensor.type import TensorType

DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint8", "bool"]
FLOATS = ["float64", "float32"]
ELEMWISE = {"tj_contig", "tj_strided"}


def cuda_var(dtype: str, ndim: int, name: str = "x"):
    return TensorType(dtype, (None,) * ndim, device="cuda")(name)


def on_cuda(var):
    """``var``'s node with its outputs placed on the device too (as placement does)."""
    node = var.owner
    return Apply(node.op, node.inputs, [o.type.on_device("cuda")() for o in node.outputs])


def elementwise_programs() -> dict[str, set[str]]:
    """Every supported scalar op (and its in-place form) on every dtype it takes, as a
    0-d, 1-d and 3-d map; casts between all dtypes; maps with several outputs."""
    programs = {}
    for name in sorted(SUPPORTED_NAMES & set(SCALAR_OPS)):
        op = SCALAR_OPS[name]
        for dtype in DTYPES:
            for ndim in (0, 1, 3):
                inputs = [
                    cuda_var("bool" if name == "switch" and k == 0 else dtype, ndim)
                    for k in range(op.nin)
                ]
                for inplace in (None, op.nin - 1):
                    try:
                        node = on_cuda(Elemwise(op, inplace)(*inputs))
                    except (TypeError, ValueError):
                        continue  # the op does not take this dtype, or in place
                    plan = elementwise.elemwise_plan(CUDA, node)
                    if plan is not None:
                        programs[plan.source] = ELEMWISE
    for src in DTYPES:
        for dst in DTYPES:
            programs[elementwise.cast_plan(CUDA, src, dst, 2).source] = ELEMWISE
    # maps with several outputs (multi-output fusion's nodes), apart and in place
    for dtype in FLOATS:
        x, y = T.vector("x", dtype=dtype), T.vector("y", dtype=dtype)
        a = T.exp(x) * y
        f = tensorjit.function([x, y], [a, T.tanh(a) * x + 1, a - y])
        (host,) = [n.op for n in f.fgraph.toposort() if isinstance(n.op, MultiOutputElemwise)]
        for inplace in ((), ((0, 0),), ((0, 1), (2, 0))):
            for ndim in (0, 1, 3):
                names = [f"x{k}" for k in range(host.scalar_op.nin)]
                op = MultiOutputElemwise(host.scalar_op, inplace)
                node = on_cuda(op(*(cuda_var(dtype, ndim, n) for n in names))[0])
                plan = elementwise.elemwise_plan(CUDA, node)
                assert plan is not None and len(plan.out_dtypes) == 3
                programs[plan.source] = ELEMWISE
    # the tiled maps (operands whose fast axis is the row staged in shared memory)
    for dtype in FLOATS:
        x, y = cuda_var(dtype, 2, "x"), cuda_var(dtype, 2, "y")
        plan = elementwise.elemwise_plan(CUDA, on_cuda(x * y))
        assert plan is not None
        for staged in ((True, False), (False, True), (True, True)):
            programs[elementwise.tiled_source(plan, staged)] = {"tj_tiled"}
    return programs


def reduction_programs() -> dict[str, set[str]]:
    programs = {}
    layouts = [(0, 1), (1, 1), (2, 1), (1, 2), (2, 3)]
    for dtype in DTYPES:
        x = cuda_var(dtype, 2)
        for reducer in (T.sum, T.prod, T.max, T.min, T.all, T.any):
            plan = reductions.reduce_plan(CUDA, on_cuda(reducer(x, axis=0)))
            for dk, dr in layouts:
                names = {"tj_reduce_out", "tj_reduce_part", "tj_combine"}
                names |= {"tj_reduce_group_out", "tj_reduce_group_part"}
                names |= {"tj_block_out", "tj_block_part"} if dk else set()
                programs[reductions.reduce_source(plan, dk, dr)] = names
        for arg in (T.argmax, T.argmin):
            plan = reductions.arg_plan(CUDA, on_cuda(arg(x, axis=1)))
            for dk, dr in layouts:
                programs[reductions.arg_source(plan, dk, dr)] = {
                    "tj_arg_out",
                    "tj_arg_part",
                    "tj_arg_combine",
                    "tj_arg_group_out",
                    "tj_arg_group_part",
                }
    return programs


def row_programs() -> dict[str, set[str]]:
    programs = {}
    for dtype in [*FLOATS, "int32"]:
        x = cuda_var(dtype, 3)
        for fn in (T.nnet.softmax, T.nnet.log_softmax):
            plan = rowwise.row_plan(CUDA, on_cuda(fn(x, axis=-1)))
            for dk, dr in [(0, 1), (1, 1), (2, 1), (1, 2)]:
                programs[rowwise.row_source(plan, dk, dr)] = {"tj_rows", "tj_rows_grouped"}
    return programs


def indexing_programs() -> dict[str, set[str]]:
    programs = {}
    for x_dtype in [*FLOATS, "int64", "bool"]:
        for y_dtype in ("int64", "int32", "uint8"):
            for ndim in (1, 2):
                programs[indexing.select_source(CUDA, ndim, x_dtype, y_dtype)] = {"tj_select"}
            if x_dtype in FLOATS:
                source = indexing.select_grad_source(CUDA, 1, x_dtype, y_dtype, x_dtype)
                programs[source] = {"tj_select_grad"}
            for idx in ((y_dtype,), ("int64", y_dtype)):
                for rest in (0, 1, 2):
                    programs[indexing.gather_source(CUDA, idx, rest, x_dtype)] = {"tj_gather"}
                    for set_value in (True, False):
                        source = indexing.scatter_source(
                            CUDA, idx, rest, x_dtype, x_dtype, set_value
                        )
                        programs[source] = {"tj_scatter"}
    return programs


def random_programs() -> dict[str, set[str]]:
    return {
        random.program_source(CUDA, dist, dtype): (
            {"tj_mrg_draw"} | ({"tj_box_muller"} if dist == "normal" else set())
        )
        for dist in ("uniform", "normal")
        for dtype in FLOATS
    }


def convolution_programs() -> dict[str, set[str]]:
    programs = {}
    for dtype in FLOATS:
        for kind in ("im2col", "col2im"):
            programs[convolution.conv_source(CUDA, kind, dtype)] = {f"tj_{kind}"}
        for kind in ("pool", "max_grad", "avg_grad"):
            programs[convolution.pool_source(CUDA, kind, dtype)] = {f"tj_{kind}"}
        for source_dtype in FLOATS:  # the tiled transposing copy (casting too)
            programs[transpose.transpose_source(CUDA, source_dtype, dtype)] = {"tj_transpose"}
    return programs


def construct_programs() -> dict[str, set[str]]:
    programs = {}
    for dtype in [*FLOATS, "int64", "int32", "int8", "uint8", "bool"]:
        for kind in ("eye", "tri"):
            programs[construct.matrix_source(CUDA, kind, dtype)] = {"tj_matrix"}
        if dtype != "bool":
            programs[construct.arange_source(CUDA, dtype)] = {"tj_arange"}
        for y_dtype in ("int64", "int32", "uint8"):
            programs[construct.one_hot_source(CUDA, 2, y_dtype, dtype)] = {"tj_one_hot"}
    for src, dst in [*((d, d) for d in FLOATS), ("int32", "int64"), ("bool", "int64")]:
        for mode in ("add", "mul"):
            for axis in (0, 2):
                source = construct.cumulative_source(CUDA, 3, axis, mode, src, dst)
                programs[source] = {"tj_cumulative"}
    for dtype in [*FLOATS, "int64", "int8", "bool"]:
        for stable in (False, True):
            programs[construct.sort_source(CUDA, 2, 0, dtype, stable)] = {"tj_sort"}
    return programs


FAMILIES = {
    "construct": construct_programs,
    "convolution": convolution_programs,
    "elementwise": elementwise_programs,
    "reductions": reduction_programs,
    "rowwise": row_programs,
    "indexing": indexing_programs,
    "random": random_programs,
}


@pytest.mark.parametrize("choice", ["nvcc", "nvrtc"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_kernel_of_the_family_compiles_to_ptx(family, choice):
    reason = compiler_reason(choice)
    if reason is not None:
        pytest.skip(f"{choice} is not installed on this machine: {reason}")
    with ptx_only_device(), config.change_flags(cuda_compiler=choice):
        programs = FAMILIES[family]()
        assert len(programs) >= 4
        if choice == "nvcc" and family == "elementwise":
            # NVRTC compiles all ~1400 maps; nvcc (~0.25 s a program) every fifth.
            programs = dict(list(programs.items())[::5])
        with ThreadPoolExecutor(4) as pool:
            ptxs = list(pool.map(lambda s: compile_ptx(s, "compute_75"), programs))
    for (source, names), ptx in zip(programs.items(), ptxs):
        missing = names - entry_names(ptx)
        assert not missing, f"{missing} not in the PTX of:\n{source}"


def test_the_elementwise_battery_covers_every_supported_scalar_op():
    with ptx_only_device():
        sources = "\n".join(elementwise_programs())
    # Each op's helper or operator shows up in some program (spot checks by name).
    for helper in ("tj_softplus_d", "tj_sigmoid_f", "tj_floordiv_i", "tj_mod_u", "tgamma"):
        assert helper in sources


def test_an_unsupported_dtype_is_declined_not_rendered_wrong():
    with ptx_only_device():
        node = on_cuda(
            Elemwise(SCALAR_OPS["add"])(cuda_var("complex128", 1), cuda_var("complex128", 1))
        )
        assert elementwise.elemwise_plan(CUDA, node) is None
        with pytest.raises(Unsupported):
            CUDA.dialect.type_name("complex128")


def mlp_training_step():
    rng = np.random.default_rng(0)
    x, y = T.matrix("x", dtype="float32"), T.ivector("y")
    w1 = tensorjit.shared(rng.standard_normal((20, 16)).astype("float32"), name="w1", target="cpu")
    w2 = tensorjit.shared(rng.standard_normal((16, 5)).astype("float32"), name="w2", target="cpu")
    h = T.tanh(T.dot(x, w1))
    p = T.nnet.softmax(T.dot(h, w2))
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    grads = tensorjit.grad(cost, [w1, w2])
    return [x, y], [cost, T.argmax(p, axis=1), *grads]


def test_a_training_step_compiled_for_cuda_runs_its_nodes_on_cuda_kernels_compiled_to_ptx():
    inputs, outputs = mlp_training_step()
    with ptx_only_device() as rt, config.change_flags(device="cuda"):
        f = tensorjit.function(inputs, outputs)
        names = {kernel.name for kernel in f.kernels.values()}
        wanted = {"elemwise", "softmax", "reduce", "argmax", "advanced_subtensor"}
        assert {f"cuda:{k}" for k in wanted} <= names, names
        # the products go to cuBLAS where it loads, else stay on the host's BLAS
        assert ("cuda:dot" in names) == (cublas_reason() is None), names
        assert not any(name.startswith("opencl:") for name in names)
        # the kernels built when the function was made (the rest build at first call)
        assert {"tj_contig", "tj_strided", "tj_gather", "tj_scatter"} <= {n for _, n in rt.kernels}
        with pytest.raises(NoDevice):
            f(np.zeros((4, 20), "float32"), np.zeros(4, "int32"))


def test_device_cuda1_names_the_cuda_device_and_its_ordinal():
    from tensorjit.core.devices import default_device, default_ordinal
    from tensorjit.plugins.cuda_backend.runtime import chosen_ordinal

    with config.change_flags(device="cuda1"):
        assert (default_device(), default_ordinal(), chosen_ordinal()) == ("cuda", 1, 1)
    with config.change_flags(device="cuda", cuda_device=2):
        assert (default_device(), chosen_ordinal()) == ("cuda", 2)


@pytest.mark.parametrize("choice", ["nvcc", "nvrtc"])
def test_a_multiply_then_add_is_rounded_twice_as_numpy_does(choice):
    # CUDA's compilers fuse them into one fma by default, across statements too (one
    # rounding): an arange's start + i * step, a fused map's a * b + c would differ
    # from NumPy's and the host's in the last bit.
    reason = compiler_reason(choice)
    if reason is not None:
        pytest.skip(f"{choice} is not installed on this machine: {reason}")
    with ptx_only_device(), config.change_flags(cuda_compiler=choice):
        ptx = compile_ptx(construct.arange_source(CUDA, "float32"), "compute_75")
    assert "mul.rn.f32" in ptx and "fma.rn" not in ptx
