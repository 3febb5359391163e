"""The C backend's worker threads (config ``threads``, thread_pool.c, parallel.py).

Kernels split their outermost loop over the pool above a size threshold (parallel.py's
grains), so every array here is large. Elementwise and row kernels, and reductions that
keep an axis, give the same bits on one thread and on two; a full reduction combines its
parts' values in part order (deterministic, close to NumPy). Both the per-node VM and
whole-graph programs run the same kernels. Processes of their own check fork safety, the
workers the pool starts, and that a kernel compiled on one thread still runs in parts once
``threads`` asks for more.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.build import compiler, parallel, threads
from tensorjit.plugins.c_backend.generators import rowwise
from tensorjit.plugins.c_backend.linalg import blas
from tensorjit.tensor import nnet
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.math import Reduce

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache", "restore_blas_threads")]

RNG = np.random.default_rng(23)
PATHS = ["per-node", "whole-graph"]
PROGRAM_REASON = compiler.extension_unavailable_reason()
# A length cut into uneven parts: two threads get 49216 and 49105 elements.
UNEVEN = 2 * parallel.CHEAP_GRAIN * 3 + 17
MATRIX = (600, 500)  # 300_000 elements: above every grain
LINUX_TASKS = os.path.isdir("/proc/self/task")


# ---------------------------------------------------------------- helpers
def blas_threads() -> int | None:
    """NumPy's OpenBLAS thread count (the BLAS config ``threads`` sets), None if unknown."""
    where = blas.provider().where
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        for info in threadpoolctl.threadpool_info():
            if info.get("filepath") and os.path.realpath(info["filepath"]) == os.path.realpath(
                where
            ):
                return int(info["num_threads"])
    try:
        lib = ctypes.CDLL(where)
    except OSError:
        return None
    for name in (
        "scipy_openblas_get_num_threads64_",
        "scipy_openblas_get_num_threads",
        "openblas_get_num_threads",
    ):
        getter = getattr(lib, name, None)
        if getter is not None:
            getter.restype = ctypes.c_int
            getter.argtypes = []
            return int(getter())
    return None


@pytest.fixture(scope="module")
def restore_blas_threads():
    """An explicit ``threads`` also sets the BLAS's threads: give it back its count."""
    original = blas_threads()
    yield
    if original is not None:
        threads.set_blas_threads(original)


def compile_c(inputs, outputs, path, n_threads=2, **kwargs):
    """``function`` with the C backend on ``path``, compiled with ``n_threads`` threads;
    its elementwise, reduction and row nodes must run C kernels."""
    if path == "whole-graph" and PROGRAM_REASON is not None:
        pytest.skip(f"no whole-graph C programs on this machine: {PROGRAM_REASON}")
    flags = {"whole_graph": path == "whole-graph", "threads": n_threads}
    with tensorjit.config.change_flags(**flags):
        f = tensorjit.function(inputs, outputs, mode=C_ONLY, **kwargs)
    assert (f.calls.program is not None) == (path == "whole-graph")
    checked = [n for n in f.kernels if isinstance(n.op, (Elemwise, Reduce, *rowwise.OPS))]
    assert checked
    for node in checked:
        assert f.kernels[node].name.startswith("c:"), (str(node.op), f.kernels[node].name)
    return f


def call(f, args, n_threads):
    """``f(*args)`` with ``n_threads`` threads, as a list of copies."""
    with tensorjit.config.change_flags(threads=n_threads):
        got = f(*args)
    return [np.array(g, copy=True) for g in (got if isinstance(got, list) else [got])]


def assert_same_bits(got, want, what=""):
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, k, a.dtype, b.dtype)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), (what, k)


def uniform(shape, dtype="float64", low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def run_script(tmp_path, script, timeout=120):
    """Runs ``script`` in a new Python compiling into this module's cache; its last
    line of output is JSON."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, TENSORJIT_FLAGS=f"compiledir={tensorjit.config.compiledir}")
    proc = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- elementwise
def _matrices(n, dtype="float64"):
    xs = [T.matrix(name, dtype=dtype) for name in "abc"[:n]]
    return xs, [uniform(MATRIX, dtype) for _ in range(n)]


def _cheap(dtype):
    (a, b, c), args = _matrices(3, dtype)
    return [a, b, c], a * b + c, args, lambda a, b, c: a * b + c


def _costly(dtype):
    (a, b, c), args = _matrices(3, dtype)
    out = T.exp(a) * T.tanh(b) + T.log1p(abs(c))
    return [a, b, c], out, args, lambda a, b, c: np.exp(a) * np.tanh(b) + np.log1p(np.abs(c))


def _int64():
    a, b = T.lmatrix("a"), T.lmatrix("b")
    args = [RNG.integers(-10_000, 10_000, size=MATRIX) for _ in range(2)]
    return (
        [a, b],
        a * b - 7 * a + T.maximum(a, b),
        args,
        lambda a, b: a * b - 7 * a + np.maximum(a, b),
    )


def _uneven(costly):
    a, b = T.vector("a"), T.vector("b")
    args = [uniform(UNEVEN), uniform(UNEVEN)]
    if costly:
        return [a, b], T.exp(a) - T.tanh(b), args, lambda a, b: np.exp(a) - np.tanh(b)
    return [a, b], a * b + 1.5, args, lambda a, b: a * b + 1.5


def _transposed():
    (a, b, c), (x, y, z) = _matrices(3)
    x = np.ascontiguousarray(x.T).T  # Fortran order: a transposed C array
    return [a, b, c], a * b + c, [x, y, z], lambda a, b, c: a * b + c


def _reversed_rows():
    (a, b), (x, y) = _matrices(2)
    return [a, b], T.exp(a) * b, [x[::-1], y], lambda a, b: np.exp(a) * b


def _reversed_vector():
    a, b = T.vector("a"), T.vector("b")
    x, y = uniform(UNEVEN), uniform(UNEVEN)
    return [a, b], a - 2 * b, [x[::-1], y[::-1]], lambda a, b: a - 2 * b


def _column_slice():
    (a, b), (_, y) = _matrices(2)
    x = uniform((MATRIX[0], 2 * MATRIX[1]))
    return [a, b], a * b - a, [x[:, ::2], y], lambda a, b: a * b - a


def _row_broadcast():
    # The row is broadcast along axis 0, the axis the parts split.
    a, r = T.matrix("a"), T.vector("r")
    args = [uniform(MATRIX), uniform(MATRIX[1])]
    return [a, r], a * 3 + r, args, lambda a, r: a * 3 + r[None, :]


def _column_broadcast():
    a, v = T.matrix("a"), T.vector("v")
    args = [uniform(MATRIX), uniform(MATRIX[0])]
    return [a, v], T.tanh(a) * v.dimshuffle(0, "x"), args, lambda a, v: np.tanh(a) * v[:, None]


def _scalar():
    a, s = T.matrix("a"), T.scalar("s")
    return [a, s], a * s + 1, [uniform(MATRIX), np.float64(0.75)], lambda a, s: a * s + 1


def _mixed_dtypes():
    # Operands of 1, 4 and 8 bytes: each part moves each pointer by its own item size.
    a, b, c = T.matrix("a", dtype="uint8"), T.matrix("b", dtype="float32"), T.vector("c")
    args = [
        RNG.integers(0, 256, size=MATRIX).astype("uint8"),
        uniform(MATRIX, "float32"),
        uniform(MATRIX[1]),
    ]
    return [a, b, c], a * b + c, args, lambda a, b, c: a * b + c


def _three_long_rows():
    # Three items on the split axis: two threads get two rows and one.
    a, b = T.matrix("a"), T.matrix("b")
    x, y = uniform((3, 100_000)), uniform((3, 100_000))
    return [a, b], a * b - b, [x[::-1], y], lambda a, b: a * b - b


def _three_d(permuted):
    a, b = T.tensor3("a"), T.tensor3("b")
    shape = (40, 100, 100)
    x, y = uniform(shape), uniform(shape)
    if permuted:
        x = np.transpose(uniform((100, 40, 100)), (1, 2, 0))  # outer axis not the slowest
    return [a, b], a * b + T.exp(b), [x, y], lambda a, b: a * b + np.exp(b)


ELEMWISE = {
    "float64 cheap": lambda: _cheap("float64"),
    "float32 cheap": lambda: _cheap("float32"),
    "float64 costly": lambda: _costly("float64"),
    "float32 costly": lambda: _costly("float32"),
    "int64": _int64,
    "uneven cheap": lambda: _uneven(False),
    "uneven costly": lambda: _uneven(True),
    "transposed": _transposed,
    "reversed rows": _reversed_rows,
    "reversed vector": _reversed_vector,
    "column slice": _column_slice,
    "row broadcast": _row_broadcast,
    "column broadcast": _column_broadcast,
    "scalar operand": _scalar,
    "mixed dtypes": _mixed_dtypes,
    "three long rows": _three_long_rows,
    "3-d": lambda: _three_d(False),
    "3-d permuted": lambda: _three_d(True),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", list(ELEMWISE))
def test_elementwise_gives_the_same_bits_on_one_and_two_threads(case, path):
    inputs, output, args, reference = ELEMWISE[case]()
    f = compile_c(inputs, output, path)
    g = compile_c(inputs, output, path, n_threads=1)  # the same kernels
    serial = call(f, args, 1)
    for h, n_threads in [(f, 2), (f, 3), (g, 2), (g, 1), (f, 2)]:
        assert_same_bits(call(h, args, n_threads), serial, (case, n_threads))
    (got,) = serial
    want = reference(*args)
    assert got.dtype == want.dtype
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        tol = 1e-5 if got.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("path", PATHS)
def test_streamed_outputs_on_two_threads(path):
    # With a tiny stream_min_bytes a program writes its outputs with the streaming entry
    # (line-aligned parts); the per-node path uses the cached stores.
    a, b = T.vector("a"), T.vector("b")
    x, y = uniform(UNEVEN), uniform(UNEVEN)
    with tensorjit.config.change_flags(stream_min_bytes=64):
        f = compile_c([a, b], [a * b + 1, T.exp(a) - b], path)
    if path == "whole-graph":
        assert 64 in f.calls.program.stream_thresholds()
    serial = call(f, [x, y], 1)
    assert_same_bits(call(f, [x, y], 2), serial)
    np.testing.assert_allclose(serial[0], x * y + 1, rtol=1e-12)
    np.testing.assert_allclose(serial[1], np.exp(x) - y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_streamed_outputs_of_broadcasting_operands_on_two_threads(dtype):
    # Outputs broadcast from smaller operands (a bias, a per-row scale) stream through
    # the strided kernel's entry: each row's aligned whole lines, the ends stored as
    # usual; rows of 333 elements start anywhere within a line.
    x, b, r = T.matrix("x", dtype=dtype), T.vector("b", dtype=dtype), T.col("r", dtype=dtype)
    xv, bv, rv = (uniform(s, dtype) for s in ((400, 333), 333, (400, 1)))
    with tensorjit.config.change_flags(stream_min_bytes=64):
        f = compile_c([x, b, r], [T.tanh(x + b) / r, x[:, ::-1] * 2 + b], "whole-graph")
    assert 64 in f.calls.program.stream_thresholds()
    serial = call(f, [xv, bv, rv], 1)
    assert_same_bits(call(f, [xv, bv, rv], 2), serial)
    assert_same_bits(call(f, [xv[:, :], bv, rv], 1), serial)
    tol = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(serial[0], np.tanh(xv + bv) / rv, rtol=tol)
    np.testing.assert_allclose(serial[1], xv[:, ::-1] * 2 + bv, rtol=tol)


@pytest.mark.parametrize("costly", [False, True], ids=["cheap", "costly"])
@pytest.mark.parametrize("path", PATHS)
def test_inplace_updates_of_a_shared_variable(path, costly):
    start, steps = uniform(MATRIX), [uniform(MATRIX) for _ in range(3)]
    x = T.matrix("x")
    w = tensorjit.shared(start.copy(), name="w")
    new = w * 0.5 - 0.1 * T.tanh(x) if costly else w * 0.5 + x
    f = compile_c([x], (w * x).sum(axis=1), path, updates=[(w, new)])
    assert any(isinstance(n.op, Elemwise) and n.op.inplace is not None for n in f.kernels)
    runs = {}
    for n_threads in (1, 2):
        w.set_value(start.copy())
        outs = [call(f, [s], n_threads)[0] for s in steps]
        runs[n_threads] = outs + [w.get_value()]
    assert_same_bits(runs[2], runs[1])
    value = start.copy()
    for step, out in zip(steps, runs[1]):
        np.testing.assert_allclose(out, (value * step).sum(axis=1), rtol=1e-10, atol=1e-10)
        value = value * 0.5 - 0.1 * np.tanh(step) if costly else value * 0.5 + step
    np.testing.assert_allclose(runs[1][-1], value, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- reductions
REDUCE_SHAPE = (1000, 400)
AXES = [None, 0, 1, (0, 1)]
KINDS = {
    "float64": ("sum", "prod", "max", "min"),
    "float32": ("sum", "prod", "max", "min"),
    "int64": ("sum", "prod", "max", "min"),
    "bool": ("all", "any"),
}


def reduction_data(dtype):
    """(x, p): x for every kind but prod, p (values near one, or ±1 with a few 2s) for
    prod; for bool, x mostly True (False only in the last part) and p mostly False
    (True only in the last part)."""
    shape = REDUCE_SHAPE
    if dtype == "bool":
        x = np.ones(shape, dtype=bool)
        x[-3, 11] = False
        p = np.zeros(shape, dtype=bool)
        p[-2, 5] = True
        return x, p
    if dtype == "int64":
        x = RNG.integers(-1000, 1000, size=shape)
        p = RNG.choice(np.array([-1, 1]), size=shape)
        p.flat[RNG.choice(p.size, 20, replace=False)] = 2
        return x, p
    return uniform(shape, dtype, 0.5, 1.5), uniform(shape, dtype, 0.999, 1.001)


def reduction_outputs(dtype, x, p):
    """[(kind, axis, symbolic output, which input)] for every kind and axis."""
    outs = []
    for kind in KINDS[dtype]:
        for axis in AXES:
            for name, var in [("x", x), ("p", p)]:
                if dtype == "bool" or (kind == "prod") == (name == "p"):
                    outs.append((kind, axis, getattr(T, kind)(var, axis=axis), name))
    return outs


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", list(KINDS))
def test_reductions_on_two_threads(dtype, layout, path):
    x, p = T.matrix("x", dtype=dtype), T.matrix("p", dtype=dtype)
    plan = reduction_outputs(dtype, x, p)
    f = compile_c([x, p], [out for _, _, out, _ in plan], path)
    values = dict(zip("xp", reduction_data(dtype)))
    if layout == "transposed":
        values = {k: np.ascontiguousarray(v.T).T for k, v in values.items()}
    args = [values["x"], values["p"]]
    serial, first, second = call(f, args, 1), call(f, args, 2), call(f, args, 2)
    assert_same_bits(second, first, "two calls on two threads")
    for (kind, axis, _, name), one, two in zip(plan, serial, first):
        what = (kind, axis, name)
        want = getattr(np, kind)(values[name], axis=axis)
        assert two.dtype == want.dtype and two.shape == want.shape, what
        if axis in (0, 1) or dtype in ("int64", "bool"):
            assert_same_bits([two], [one], what)  # kept axes, exact arithmetic
        if dtype in ("int64", "bool") or kind in ("max", "min"):
            np.testing.assert_array_equal(two, want, err_msg=str(what))
        else:  # against float64 arithmetic: NumPy's float32 prod drifts by ~1e-5
            exact = getattr(np, kind)(values[name].astype("float64"), axis=axis)
            tol = 1e-6 if dtype == "float32" else 1e-11
            np.testing.assert_allclose(two, exact, rtol=tol, err_msg=str(what))
            np.testing.assert_allclose(one, exact, rtol=tol, err_msg=str(what))


@pytest.mark.parametrize("path", PATHS)
def test_three_d_reductions_on_two_threads(path):
    x = T.tensor3("x")
    axes = [None, 0, 1, 2, (0, 2), (1, 2), (0, 1)]
    plan = [(kind, axis) for kind in ("sum", "max") for axis in axes]
    f = compile_c([x], [getattr(T, kind)(x, axis=axis) for kind, axis in plan], path)
    value = uniform((40, 100, 100), "float64", 0.5, 1.5)
    for arg in (value, np.transpose(value, (2, 0, 1))):
        serial, two = call(f, [arg], 1), call(f, [arg], 2)
        assert_same_bits(call(f, [arg], 2), two)
        for (kind, axis), a, b in zip(plan, serial, two):
            if axis is not None and len(np.atleast_1d(axis)) < 3:
                assert_same_bits([b], [a], (kind, axis))
            want = getattr(np, kind)(arg, axis=axis)
            np.testing.assert_allclose(b, want, rtol=1e-11, err_msg=str((kind, axis)))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_vector_reductions_on_two_threads(dtype, path):
    x, p = T.vector("x", dtype=dtype), T.vector("p", dtype=dtype)
    kinds = ("sum", "max", "min")
    f = compile_c([x, p], [getattr(T, k)(x) for k in kinds] + [T.prod(p)], path)
    if dtype == "int64":
        value = RNG.integers(-1000, 1000, size=UNEVEN)
        near_one = RNG.choice(np.array([-1, 1]), size=UNEVEN)
        near_one[[5, 40_000, UNEVEN - 1]] = [2, 3, 5]
    else:
        value = uniform(UNEVEN, dtype, 0.5, 1.5)
        near_one = uniform(UNEVEN, dtype, 0.999, 1.001)
    for args in ([value, near_one], [value[::-1], near_one[::-1]]):
        serial, two = call(f, args, 1), call(f, args, 2)
        assert_same_bits(call(f, args, 2), two)
        inputs = [args[0]] * len(kinds) + [args[1]]
        for k, arg, one, got in zip([*kinds, "prod"], inputs, serial, two):
            want = getattr(np, k)(arg)
            assert got.dtype == want.dtype, k
            if dtype == "int64" or k in ("max", "min"):
                assert got == want == one, k
            else:
                exact = getattr(np, k)(arg.astype("float64"))
                tol = 1e-6 if dtype == "float32" else 1e-11
                np.testing.assert_allclose([got, one], [exact, exact], rtol=tol, err_msg=k)


NAN_AT = {
    "first element": (0, 0),
    "first part": (7, 123),
    "last part": (993, 45),
    "last element": (999, 399),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("where", list(NAN_AT))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_max_and_min_propagate_nan_from_any_part(dtype, where, path):
    x = T.matrix("x", dtype=dtype)
    plan = [(kind, axis) for kind in ("max", "min") for axis in (None, 0, 1, (0, 1))]
    f = compile_c([x], [getattr(T, kind)(x, axis=axis) for kind, axis in plan], path)
    value = uniform(REDUCE_SHAPE, dtype)
    value[NAN_AT[where]] = np.nan
    for arg in (value, np.ascontiguousarray(value.T).T):
        for n_threads in (1, 2):
            for (kind, axis), got in zip(plan, call(f, [arg], n_threads)):
                want = getattr(np, kind)(arg, axis=axis)
                what = f"{kind} axis={axis} with {n_threads} threads"
                np.testing.assert_array_equal(got, want, err_msg=what)
                if axis in (None, (0, 1)):
                    assert np.isnan(got), what


def absorbing_matrix():
    """A matrix whose sum depends on how its rows were split: 1e16 in row 0, 0.5 in each
    of rows 500..999. Added row after row, each 0.5 is lost against 1e16; summed as two
    (or three) parts, the second part's 250 (or 84 + 166) survives."""
    value = np.zeros(REDUCE_SHAPE)
    value[0, 0] = 1e16
    value[500:, 7] = 0.5
    return value


@pytest.mark.parametrize("path", PATHS)
def test_a_full_sum_runs_in_parts_combined_in_order(path):
    x = T.matrix("x")
    f = compile_c([x], [x.sum(), T.sum(x, axis=1)], path)
    value = absorbing_matrix()
    assert call(f, [value], 1)[0] == 1e16
    for n_threads in (2, 3):
        total, rows = call(f, [value], n_threads)
        assert total == 1e16 + 250, (n_threads, total - 1e16)
        np.testing.assert_array_equal(rows, value.sum(axis=1))


# ---------------------------------------------------------------- row kernels
def np_softmax(x, axis=1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_row_kernels_on_two_threads(dtype, layout, path):
    x = T.matrix("x", dtype=dtype)
    outputs = [
        nnet.softmax(x),
        nnet.log_softmax(x),
        T.argmax(x, axis=1),
        T.argmin(x, axis=1),
        nnet.softmax(x, axis=0),
    ]
    f = compile_c([x], outputs, path)
    assert sum(isinstance(n.op, rowwise.OPS) for n in f.kernels) == 5
    value = (RNG.standard_normal((3000, 200)) * 4).astype(dtype)
    if layout == "transposed":
        value = np.ascontiguousarray(value.T).T
    serial = call(f, [value], 1)
    assert_same_bits(call(f, [value], 2), serial)
    assert_same_bits(call(f, [value], 3), serial)
    sm, lsm, amax, amin, sm0 = serial
    wide = value.astype("float64")
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(sm, np_softmax(wide), rtol=tol, atol=tol)
    np.testing.assert_allclose(sm0, np_softmax(wide, axis=0), rtol=tol, atol=tol)
    want = wide - wide.max(axis=1, keepdims=True)
    want -= np.log(np.exp(want).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(lsm, want, rtol=tol, atol=10 * tol)
    np.testing.assert_array_equal(amax, np.argmax(value, axis=1))
    np.testing.assert_array_equal(amin, np.argmin(value, axis=1))


@pytest.mark.parametrize("path", PATHS)
def test_row_kernels_on_a_three_d_array(path):
    # Two outer axes: the parts split the first, each row is one part's.
    x = T.tensor3("x")
    outputs = [nnet.softmax(x, axis=2), nnet.log_softmax(x, axis=1), T.argmax(x, axis=0)]
    f = compile_c([x], outputs, path)
    value = RNG.standard_normal((30, 100, 120)) * 3
    for arg in (value, np.transpose(value, (1, 0, 2))):
        serial = call(f, [arg], 1)
        assert_same_bits(call(f, [arg], 2), serial)
        np.testing.assert_allclose(serial[0], np_softmax(arg, axis=2), rtol=1e-12, atol=1e-15)
        want = np.log(np_softmax(arg, axis=1))
        np.testing.assert_allclose(serial[1], want, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(serial[2], np.argmax(arg, axis=0))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("idiom", ["indexing", "crossentropy"])
def test_classification_cost_and_gradient_on_two_threads(idiom, path):
    x, y = T.matrix("x"), T.lvector("y")
    p = nnet.softmax(x)
    if idiom == "indexing":
        cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    else:
        cost = nnet.categorical_crossentropy(p, y).mean()
    f = compile_c([x, y], [cost, tensorjit.grad(cost, x)], path)
    if idiom == "crossentropy":  # the class selection and its gradient: row kernels
        names = {type(n.op).__name__: k.name for n, k in f.kernels.items()}
        assert names["SelectClass"] == names["SelectClassGrad"] == "c:rowwise", names
    n, k = 3000, 200
    value, labels = RNG.standard_normal((n, k)) * 3, RNG.integers(0, k, n)
    serial = call(f, [value, labels], 1)
    assert_same_bits(call(f, [value, labels], 2), serial)
    c, g = serial
    probs = np_softmax(value)
    np.testing.assert_allclose(c, -np.log(probs[np.arange(n), labels]).mean(), rtol=1e-12)
    np.testing.assert_allclose(g, (probs - np.eye(k)[labels]) / n, rtol=1e-9, atol=1e-15)


# ---------------------------------------------------------------- concurrency
@pytest.mark.parametrize("path", PATHS)
def test_two_python_threads_calling_one_function(path):
    # One caller at a time has the pool, the other runs serially: elementwise, kept-axis
    # and row results never change; a full sum is the one-part or the two-part value.
    x, y = T.matrix("x"), T.matrix("y")
    outputs = [T.tanh(x) * 2 + y, T.sum(x, axis=1), nnet.softmax(y), x.sum()]
    f = compile_c([x, y], outputs, path)
    args = [[uniform(MATRIX), uniform(MATRIX)] for _ in range(2)]
    expected = [call(f, a, 2) for a in args]
    full_sums = [{call(f, a, 1)[3].item(), e[3].item()} for a, e in zip(args, expected)]
    for a, e in zip(args, expected):
        np.testing.assert_allclose(e[0], np.tanh(a[0]) * 2 + a[1], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(e[3], a[0].sum(), rtol=1e-11)
    errors: list[str] = []
    start = threading.Barrier(2)

    def work(t: int) -> None:
        start.wait()
        for i in range(40):
            got = [np.array(g, copy=True) for g in f(*args[t])]
            for k in range(3):
                if not np.array_equal(got[k], expected[t][k]):
                    errors.append(f"thread {t}, call {i}: output {k} differs")
            if got[3].item() not in full_sums[t]:
                errors.append(f"thread {t}, call {i}: sum {got[3].item()!r} not {full_sums[t]}")
            if errors:
                return

    with tensorjit.config.change_flags(threads=2):
        workers = [threading.Thread(target=work, args=(t,)) for t in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers), "a caller hangs"
    assert errors == []


COUNTING_SOURCE = (
    "#include <stdint.h>\n"
    + parallel.DECLARATIONS
    + """
static void count_part(void *ctx, int64_t lo, int64_t hi, int part)
{
    int64_t *runs = (int64_t *)ctx;
    __atomic_add_fetch(&runs[part], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&runs[64], hi - lo, __ATOMIC_RELAXED);
    volatile double spin = 0; /* work enough that a part outlasts a late worker's wake */
    for (int64_t i = lo; i < hi; i++)
        spin += (double)i;
}

/* calls pool calls over [0, n); runs[part]: times each part ran; runs[64]: items run */
int count_parts(int64_t *runs, int64_t n, int64_t grain, int calls)
{
    int parts = 0;
    for (int c = 0; c < calls; c++)
        parts = tj_parallel ? tj_parallel(count_part, runs, n, grain, 1) : 0;
    return parts;
}
"""
)


def test_each_part_of_a_pool_call_runs_once_with_the_worker_awake_or_asleep():
    """Each part of a pool call runs exactly once, never twice and never not at all,
    whether the worker was spinning or asleep when it was posted (pauses between calls
    let it fall asleep), and a call never hangs."""
    import time

    ffi, lib = compiler.load(
        COUNTING_SOURCE,
        parallel.CDEF + "int count_parts(int64_t *, int64_t, int64_t, int);",
        ("count_parts",),
        "part counting",
    )
    runs = np.zeros(65, dtype=np.int64)
    n, grain = 400_000, 10_000
    seen = {"calls": 0, "parts": 0}

    def calls() -> None:
        for round_ in range(60):
            batch = 1 + round_ % 7
            seen["parts"] = lib.count_parts(ffi.from_buffer("int64_t[]", runs), n, grain, batch)
            seen["calls"] += batch
            if round_ % 3 == 0:
                time.sleep(0.002)  # the worker stops spinning (~20 us) and sleeps

    with tensorjit.config.change_flags(threads=2):
        caller = threading.Thread(target=calls, daemon=True)  # (a miscount can hang it)
        caller.start()
        caller.join(timeout=60)
    assert not caller.is_alive(), f"a pool call hangs after {seen['calls']} calls"
    calls = seen["calls"]
    assert seen["parts"] == 2
    assert runs[:2].tolist() == [calls, calls]
    assert runs[2:64].sum() == 0
    assert runs[64] == n * calls


# ---------------------------------------------------------------- processes
FORK_SCRIPT = """
import json, os, signal, sys, threading, time
import numpy as np
import tensorjit, tensorjit.tensor as T
from tensorjit.plugins.c_backend.build import threads

tensorjit.config.threads = 2
x = T.vector("x")
f = tensorjit.function(
    [x], [T.tanh(x) * 2 + 1, x.sum()], mode=tensorjit.FAST_RUN.with_backends("c", "python")
)
value = np.linspace(-3.0, 3.0, 600_001)
want = np.tanh(value) * 2 + 1

def check():
    out, total = f(value)
    return bool(np.allclose(out, want, rtol=1e-12) and abs(total - value.sum()) < 1e-6)

def tasks():
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1

assert check() and threads._pool is not None
{background}
children, parent_ok = [], True
for _ in range(3):
    pid = os.fork()
    if pid == 0:  # the child: new workers, the same results
        code = 1
        try:
            before = tasks()
            ok = all(check() for _ in range(5))
            code = 0 if ok and (before < 0 or tasks() > before) else 1
        finally:
            os._exit(code)
    children.append(pid)
    parent_ok = check() and parent_ok
codes = []
for pid in children:
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            codes.append(os.waitstatus_to_exitcode(status))
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            codes.append("hung")
            break
        time.sleep(0.01)
{stop}
print(json.dumps({{"children": codes, "parent": parent_ok and check()}}))
"""
BUSY_PARENT = """
stop = threading.Event()
def busy():
    while not stop.is_set():
        check()
worker = threading.Thread(target=busy)
worker.start()
time.sleep(0.05)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available on this platform")
@pytest.mark.parametrize("parent", ["idle", "busy"])
def test_fork_after_the_pool_ran(tmp_path, parent):
    # A fork child starts with none of the parent's workers and makes its own; with a
    # parent thread running kernels, fork waits for the pool's job to finish.
    background, stop = ("", "") if parent == "idle" else (BUSY_PARENT, "stop.set(); worker.join()")
    script = FORK_SCRIPT.format(background=textwrap.dedent(background), stop=stop)
    got = run_script(tmp_path, script, timeout=120)
    assert got == {"children": [0, 0, 0], "parent": True}


TASKS_SCRIPT = """
import json, os
import numpy as np
import tensorjit, tensorjit.tensor as T
from tensorjit.plugins.c_backend.build import threads
from tensorjit.tensor import nnet

def tasks():
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1

tensorjit.config.threads = {n_threads}
x = T.matrix("x")
f = tensorjit.function(
    [x],
    [T.exp(x) * 2 + 1, x.sum(), x.max(axis=0), nnet.softmax(x)],
    mode=tensorjit.FAST_RUN.with_backends("c", "python"),
)
f(np.ones((3, 4)))  # too small to split
counts = [tasks()]
value = np.linspace(-3.0, 3.0, 400_000).reshape(800, 500)
out = f(value)
ok = bool(np.allclose(out[0], np.exp(value) * 2 + 1) and np.isclose(out[1], value.sum()))
counts.append(tasks())
if {n_threads} > 1:
    tensorjit.config.threads = {n_threads} + 1  # the BLAS may start a thread of its own
    f(np.ones((3, 4)))
    counts.append(tasks())
    f(value)
    counts.append(tasks())
print(json.dumps({{"counts": counts, "ok": ok, "pool": threads._pool is not None}}))
"""


@pytest.mark.skipif(not LINUX_TASKS, reason="counts threads in /proc/self/task (Linux only)")
def test_two_threads_start_workers(tmp_path):
    got = run_script(tmp_path, TASKS_SCRIPT.format(n_threads=2))
    before, after, before_three, three = got["counts"]
    assert got["ok"] and got["pool"]
    assert after == before + 1, got  # one worker beside the caller
    assert three == before_three + 1, got  # threads=3: one more worker


def test_one_thread_builds_no_pool(tmp_path):
    got = run_script(tmp_path, TASKS_SCRIPT.format(n_threads=1))
    assert got["ok"]
    assert got["pool"] is False
    before, after = got["counts"]
    assert after == before  # no worker started


LATE_SCRIPT = """
import json
import numpy as np
import tensorjit, tensorjit.tensor as T

mode = tensorjit.FAST_RUN.with_backends("c", "python")
tensorjit.config.threads = 2
v = T.vector("v")
warm = tensorjit.function([v], v * 2 + 1, mode=mode)
warm(np.ones(400_000))  # the pool is built
tensorjit.config.threads = 1
x = T.matrix("x")
f = tensorjit.function([x], x.sum(), mode=mode)  # its kernel is loaded now
value = np.zeros((1000, 400))
value[0, 0] = 1e16
value[500:, 7] = 0.5
one = float(f(value))
tensorjit.config.threads = 2
two = float(f(value))
print(json.dumps({{"one": one - 1e16, "two": two - 1e16}}))
"""


def test_a_kernel_compiled_on_one_thread_splits_once_threads_rise(tmp_path):
    # A kernel first loaded with threads=1 after the pool was built must still get the
    # pool once threads=2 (absorbing_matrix: 250 survives only a sum in two parts).
    got = run_script(tmp_path, LATE_SCRIPT.format())
    assert got == {"one": 0.0, "two": 250.0}


# ---------------------------------------------------------------- config
def test_threads_option_is_checked():
    before = tensorjit.config.threads
    for bad in (0, -1, "many", 2.5, "2.0"):
        with pytest.raises(ValueError, match="'threads'.*'auto' or a number of threads >= 1"):
            tensorjit.config.threads = bad
        assert tensorjit.config.threads == before


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity"), reason="os.sched_getaffinity is not available"
)
def test_auto_is_the_cores_this_process_may_use():
    with tensorjit.config.change_flags(threads="auto"):
        assert threads.thread_count() == len(os.sched_getaffinity(0))
    with tensorjit.config.change_flags(threads=3):
        assert threads.thread_count() == 3


def test_a_thread_count_also_sets_the_blas_threads():
    original = blas_threads()
    if original is None:
        pytest.skip("no getter of NumPy's OpenBLAS thread count (threadpoolctl or symbol)")
    try:
        with tensorjit.config.change_flags(threads=1):
            assert blas_threads() == 1
            with tensorjit.config.change_flags(threads=2):
                assert blas_threads() == 2
            assert blas_threads() == 1
        if tensorjit.config.threads == "auto":
            assert blas_threads() == original  # back to auto: the BLAS's own count
    finally:
        assert threads.set_blas_threads(original)
    assert blas_threads() == original


@NEEDS_C
@pytest.mark.parametrize("path", ["per_node", "program"])
def test_float32_full_reductions_combine_parts_in_double(path):
    # Each part's float32 sum/product stays a double until the parts are combined, as
    # on one thread: rounding a part to float32 first lost the 1 below (1e8 + 1 - 1e8)
    # and made the product 0 * inf = NaN.
    v = T.vector("v", dtype="float32")
    a = np.ones(400_000, np.float32)
    a[:50], a[-50:] = 0.1, 10.0
    b = np.zeros(400_000, np.float32)
    b[0], b[1], b[200_000] = 1e8, 1.0, -1e8
    flags = {"whole_graph": path == "program"}
    for count in (1, 2, 3):
        with tensorjit.config.change_flags(threads=count, **flags):
            prod = tensorjit.function([v], T.prod(v), mode=C_ONLY)
            total = tensorjit.function([v], T.sum(v), mode=C_ONLY)
            assert prod(a) == np.float32(np.prod(a.astype(np.float64)))
            assert total(b) == np.float32(1.0)


def test_openblas_names_the_kernels_it_runs_and_the_avx512_hint_follows_the_cpu():
    """``python -m tensorjit info`` reports OpenBLAS's kernels, and says why where the
    CPU has AVX-512 but OpenBLAS runs other kernels: the environment's OPENBLAS_CORETYPE
    (named, not overruled), or a CPU the library does not know (the remedy given)."""
    from tensorjit.plugins.c_backend.build.threads import avx512_hint, blas_core
    from tensorjit.plugins.c_backend.linalg.blas import provider

    core = blas_core(provider().where)
    assert core is None or (core and core.isprintable())
    avx512 = {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    unknown_cpu = avx512_hint("Haswell", avx512, None)
    assert "does not know" in unknown_cpu and "OPENBLAS_CORETYPE=SkylakeX" in unknown_cpu
    from_environment = avx512_hint("Haswell", avx512, "Haswell")
    assert "environment sets OPENBLAS_CORETYPE=Haswell" in from_environment
    assert "SkylakeX" not in from_environment  # no advice to overrule the machine's choice
    assert avx512_hint("SkylakeX", avx512, None) is None  # already its AVX-512 kernels
    assert avx512_hint("Haswell", {"avx2", "fma"}, None) is None  # no AVX-512 to use
    assert avx512_hint(None, avx512, None) is None  # a BLAS that does not say
