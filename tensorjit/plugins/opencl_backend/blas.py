"""Dot, Gemm (GEMM and GEMV), Ger and 2-d MatMul on the OpenCL device: our own kernels.

No OpenCL BLAS installs as a wheel, so the products are computed here:

- GEMM (``C = alpha A B + beta C``), the way CPU BLAS libraries do it: A and B are first
  packed (``tj_pack``) into zero-padded panels, MR rows of A or NR columns of B each,
  stored k-major so the inner loop streams both panels; then every work-item computes
  an MR x NR block of C in registers (``tj_gemm``: a broadcast A element times a vector
  of B, fused multiply-adds), scaling and storing through C's byte strides. Packing
  copies O(mk + kn) elements for O(mnk) work and absorbs any operand layout
  (transposed, sliced, negatively strided), so one micro-kernel serves all of them;
  operands are read before C is written, so C may alias them.
- Small products skip packing (``tj_gemm_direct``: one element of C per work-item).
- GEMV (``tj_gemv``): GEMV_ROWS rows of the matrix per work-item; vector . matrix is
  the transposed matrix (swapped strides); vector . vector is one row.
- GER (``tj_ger``): ``out = z + alpha x y^T``, a block of a row per work-item.

alpha and beta are kernel arguments: a graph constant is passed by value, any other
scalar as its device buffer and offset, read on the device (no host synchronisation).
``beta == 0`` never reads C (BLAS semantics). The block shapes are tunables (module
constants, a CPU and a GPU default; ``config.opencl_work_per_item`` does not apply).
Integer products stay on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.device_kernels import blas_kernels
from tensorjit.plugins.device_kernels.blas_plan import BlasPlan, BlasPlanner
from tensorjit.plugins.device_kernels.elementwise import device_can_run
from tensorjit.plugins.device_kernels.target import Target
from tensorjit.plugins.opencl_backend.dialect import OPENCL_DIALECT as D
from tensorjit.plugins.opencl_backend.dialect import preamble
from tensorjit.plugins.opencl_backend.runtime import Runtime, runtime
from tensorjit.plugins.opencl_backend.target import OPENCL

I64 = np.int64
# Lets ``a * b + c`` compile to fused multiply-adds (PoCL's ``fma()`` is a slow call).
OPTIONS = ("-cl-mad-enable",)


@dataclass(frozen=True)
class Blocking:
    """How the work is cut: GEMM register blocks MR x NR (NR = VW * a whole number of
    vectors), GM x GN blocks per work-group, products of at most DIRECT_MAX
    multiply-adds unpacked, GEMV rows and GER columns per work-item."""

    mr: int
    nr: int
    vw: int
    gm: int
    gn: int
    direct_max: int
    gemv_rows: int
    ger_cols: int


# Tunables, per device type and dtype. On PoCL (CPU, AVX2) a work-item's block lives in
# vector registers (16 ymm): 6 x 8 doubles / 6 x 16 floats, 12 accumulators (as BLIS
# on Haswell); larger work-groups or k-blocks synchronised by barriers measured slower.
CPU_BLOCKING = {
    "float64": Blocking(6, 8, 4, 1, 4, 2**19, 4, 256),
    "float32": Blocking(6, 16, 8, 2, 8, 2**19, 4, 256),
}
GPU_BLOCKING = {
    "float64": Blocking(4, 4, 4, 8, 8, 16**3, 1, 4),
    "float32": Blocking(4, 4, 4, 8, 8, 16**3, 1, 4),
}


def blocking(rt: Runtime, dtype: str) -> Blocking:
    return (CPU_BLOCKING if rt.is_cpu else GPU_BLOCKING)[dtype]


# ---------------------------------------------------------------- kernel sources
def _scalar_params(name: str) -> str:
    """A scalar argument: its value (a host constant) and a device pointer (else NULL)."""
    return f"T {name}_v, __global const char *p_{name}, long o_{name}"


def _scalar_read(name: str, dtype: str | None) -> str:
    if dtype is None:
        return f"    T {name} = {name}_v;"
    src = D.type_name(dtype)
    return f"    T {name} = (T)*(__global const {src} *)(p_{name} + o_{name});"


def _store(target: str, value: str) -> str:
    """``target = alpha*value + beta*old`` where ``old`` is only read when beta != 0."""
    return (
        f"{{ __global T *q = (__global T *)(cout + oc + {target}); "
        f"T r = alpha * ({value}); "
        f"if (beta != (T)0) r += beta * *(__global const T *)(cin + oi + {target}_in); "
        "*q = r; }"
    )


def _pack_kernel() -> list[str]:
    # dst[p][k][w] = src[p*W + w][k] (zero past the last row): panel p of W rows.
    return [
        "__kernel void tj_pack(long rows, long K, long W, __global const char *src, long o,",
        "                      long rs, long ks, __global T *dst) {",
        "    long idx = get_global_id(0), p = idx / K, k = idx - p * K;",
        "    __global const char *s = src + o + k * ks;",
        "    __global T *d = dst + idx * W;",
        "    for (long w = 0; w < W; w++) {",
        "        long r = p * W + w;",
        "        d[w] = r < rows ? *(__global const T *)(s + r * rs) : (T)0;",
        "    }",
        "}",
    ]


def gemm_source(dtype: str, alpha: str | None, beta: str | None, b: Blocking) -> str:
    """The program of every product kernel for ``dtype``; ``alpha``/``beta`` is the
    dtype of a device scalar, None for a value passed from the host."""
    t = D.type_name(dtype)
    head = [preamble({dtype, alpha, beta} - {None}), f"typedef {t} T;"]
    head += [f"typedef {t}{w} T{w};" for w in (2, 4, 8, 16) if not (dtype == "float64" and w > 4)]
    reads = [_scalar_read("alpha", alpha), _scalar_read("beta", beta)]
    return "\n".join([*head, *_pack_kernel(), *_gemm(b, reads), *_rest(b, reads)]) + "\n"


def _gemm(b: Blocking, reads: list[str]) -> list[str]:
    mr, nv, vw = b.mr, b.nr // b.vw, b.vw
    v = f"T{vw}"
    lines = [
        "__kernel void tj_gemm(long m, long n, long K, long tiles_m, long tiles_n,",
        "        __global const T *restrict ap, __global const T *restrict bp,",
        "        __global const char *cin, long oi, long ci0, long ci1,",
        "        __global char *cout, long oc, long co0, long co1,",
        f"        {_scalar_params('alpha')}, {_scalar_params('beta')}) {{",
        f"    long groups_n = (tiles_n + {b.gn} - 1) / {b.gn};",
        "    long g = get_group_id(0), l = get_local_id(0);",
        f"    long ti = (g / groups_n) * {b.gm} + l / {b.gn};",
        f"    long tj = (g % groups_n) * {b.gn} + l % {b.gn};",
        "    if (ti >= tiles_m || tj >= tiles_n) return;",
        f"    __global const T *a = ap + ti * K * {mr};",
        f"    __global const T *bb = bp + tj * K * {b.nr};",
    ]
    acc = [[f"c{r}_{j}" for j in range(nv)] for r in range(mr)]
    lines += [f"    {v} {', '.join(f'{c} = 0' for c in row)};" for row in acc]
    # Aligned vector loads: a panel row is NR = VW * nv elements (``vload`` is not
    # inlined by PoCL 3.0; the call spills every accumulator).
    lines += [
        "    for (long k = 0; k < K; k++) {",
        *(f"        {v} b{j} = ((__global const {v} *)bb)[{j}];" for j in range(nv)),
    ]
    for r in range(mr):
        lines.append(f"        {v} a{r} = ({v})(a[{r}]);")
        lines += [f"        {acc[r][j]} += a{r} * b{j};" for j in range(nv)]
    lines += [f"        a += {mr}; bb += {b.nr};", "    }", *reads]
    lanes = [f"s{k:x}" for k in range(vw)]
    for r in range(mr):
        lines += [
            f"    if (ti * {mr} + {r} < m) {{",
            f"        long i = ti * {mr} + {r}, j0 = tj * {b.nr};",
            "        long ri = i * ci0, ro = i * co0;",
        ]
        for j in range(nv):
            for k, lane in enumerate(lanes):
                col = j * vw + k
                lines.append(
                    f"        if (j0 + {col} < n) {{ long t = ro + (j0 + {col}) * co1, "
                    f"t_in = ri + (j0 + {col}) * ci1; " + _store("t", f"{acc[r][j]}.{lane}") + " }"
                )
        lines.append("    }")
    lines.append("}")
    return lines


def _rest(b: Blocking, reads: list[str]) -> list[str]:
    rows = b.gemv_rows
    direct = [
        # One element of C per work-item, operands read through their strides.
        "__kernel void tj_gemm_direct(long m, long n, long K,",
        "        __global const char *pa, long oa, long a0, long a1,",
        "        __global const char *pb, long ob, long b0, long b1,",
        "        __global const char *cin, long oi, long ci0, long ci1,",
        "        __global char *cout, long oc, long co0, long co1,",
        f"        {_scalar_params('alpha')}, {_scalar_params('beta')}) {{",
        "    long idx = get_global_id(0), i = idx / n, j = idx - i * n;",
        "    __global const char *x = pa + oa + i * a0, *y = pb + ob + j * b1;",
        "    T s = 0;",
        "    for (long k = 0; k < K; k++)",
        "        s += *(__global const T *)(x + k * a1) * *(__global const T *)(y + k * b0);",
        *reads,
        "    long t = i * co0 + j * co1, t_in = i * ci0 + j * ci1;",
        "    " + _store("t", "s"),
        "}",
    ]
    gemv = [
        # GEMV_ROWS rows per work-item (rows past the end repeat the last one, unstored).
        "__kernel void tj_gemv(long m, long K,",
        "        __global const char *pa, long oa, long a0, long a1,",
        "        __global const char *px, long ox, long xs,",
        "        __global const char *cin, long oi, long ci0,",
        "        __global char *cout, long oc, long co0,",
        f"        {_scalar_params('alpha')}, {_scalar_params('beta')}) {{",
        f"    long i0 = get_global_id(0) * {rows};",
        *(
            f"    __global const char *r{r} = pa + oa + min(i0 + {r}, m - 1) * a0; T s{r} = 0;"
            for r in range(rows)
        ),
        "    __global const char *x = px + ox;",
        "    for (long k = 0; k < K; k++) {",
        "        T xk = *(__global const T *)(x + k * xs);",
        *(f"        s{r} += *(__global const T *)(r{r} + k * a1) * xk;" for r in range(rows)),
        "    }",
        *reads,
    ]
    for r in range(rows):
        gemv.append(
            f"    if (i0 + {r} < m) {{ long t = (i0 + {r}) * co0, t_in = (i0 + {r}) * ci0; "
            + _store("t", f"s{r}")
            + " }"
        )
    gemv.append("}")
    ger = [
        # out[i][j] = z[i][j] + alpha x[i] y[j]: GER_COLS columns of a row per work-item.
        "__kernel void tj_ger(long m, long n, long blocks,",
        "        __global const char *cin, long oi, long ci0, long ci1,",
        "        __global const char *px, long ox, long xs,",
        "        __global const char *py, long oy, long ys,",
        "        __global char *cout, long oc, long co0, long co1,",
        f"        {_scalar_params('alpha')}) {{",
        "    long idx = get_global_id(0), i = idx / blocks;",
        f"    long j0 = (idx - i * blocks) * {b.ger_cols}, j1 = min(j0 + {b.ger_cols}, n);",
        reads[0],
        "    T ax = alpha * *(__global const T *)(px + ox + i * xs);",
        "    __global const char *zi = cin + oi + i * ci0, *yj = py + oy;",
        "    __global char *oo = cout + oc + i * co0;",
        "    for (long j = j0; j < j1; j++)",
        "        *(__global T *)(oo + j * co1) = *(__global const T *)(zi + j * ci1)",
        "            + ax * *(__global const T *)(yj + j * ys);",
        "}",
    ]
    return direct + gemv + ger


# ---------------------------------------------------------------- launches
Scalar = tuple[Any, Any, Any]  # (value, buffer or None, offset): a kernel's scalar argument


@dataclass(frozen=True)
class Operand:
    """A strided device operand as kernels take it (byte offset and strides)."""

    data: Any
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def args(self) -> list:
        return [self.data, I64(self.offset), *(I64(s) for s in self.strides)]

    @property
    def T(self) -> Operand:  # noqa: N802 (the usual name of a transpose)
        return Operand(self.data, self.offset, self.shape[::-1], self.strides[::-1])


def operand(v: Any) -> Operand:
    return Operand(v.base_data, int(v.offset), tuple(v.shape), tuple(v.strides))


def as_row(v: Any) -> Operand:
    """A vector as a one-row matrix."""
    return Operand(v.base_data, int(v.offset), (1, *v.shape), (0, *v.strides))


def scalar_arg(value: Any, dtype: str) -> Scalar:
    """A scalar argument: a host number by value, a device 0-d array by buffer."""
    t = np.dtype(dtype).type
    if isinstance(value, np.ndarray | int | float | np.generic):
        return t(value), None, I64(0)
    return t(0), value.base_data, I64(value.offset)


class Program:
    """The kernels of one (dtype, alpha source, beta source) on the runtime's device."""

    def __init__(self, dtype: str, alpha: str | None, beta: str | None):
        self.rt = rt = runtime()
        self.dtype = dtype
        self.block = blocking(rt, dtype)
        source = gemm_source(dtype, alpha, beta, self.block)
        names = ("tj_pack", "tj_gemm", "tj_gemm_direct", "tj_gemv", "tj_ger")
        self.kernels = {name: rt.kernel(source, name, OPTIONS) for name in names}


_PROGRAMS: dict[tuple, Program] = {}


def program(dtype: str, alpha: str | None = None, beta: str | None = None) -> Program:
    """The kernels for ``dtype``; ``alpha``/``beta``: dtype of a device scalar, or None."""
    key = (runtime().device, dtype, alpha, beta)
    found = _PROGRAMS.get(key)
    if found is None:
        found = _PROGRAMS[key] = Program(dtype, alpha, beta)
    return found


def _pack(prog: Program, a: Operand, width: int) -> Any:
    """Panels of ``width`` rows of the (rows, K) matrix ``a``, k-major, zero-padded."""
    rows, k = a.shape
    panels = -(-rows // width)
    dst = prog.rt.empty((panels * k * width,), prog.dtype)
    args = [I64(rows), I64(k), I64(width), *a.args(), dst.base_data]
    prog.rt.launch(prog.kernels["tj_pack"], panels * k, *args)
    return dst


def gemm_into(
    prog: Program, out: Operand, c: Operand, a: Operand, b: Operand, alpha: Scalar, beta: Scalar
) -> None:
    """``out = alpha a b + beta c`` for matrices (``out`` may be ``c``). Packing reads a
    and b before out is written; the direct kernel needs them apart from out."""
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0:
        return
    rt, blk = prog.rt, prog.block
    if m * n * k <= blk.direct_max:
        args = [I64(m), I64(n), I64(k), *a.args(), *b.args(), *c.args(), *out.args()]
        rt.launch(prog.kernels["tj_gemm_direct"], m * n, *args, *alpha, *beta)
        return
    ap, bp = _pack(prog, a, blk.mr), _pack(prog, b.T, blk.nr)
    tiles_m, tiles_n = -(-m // blk.mr), -(-n // blk.nr)
    groups = -(-tiles_m // blk.gm) * -(-tiles_n // blk.gn)
    args = [I64(m), I64(n), I64(k), I64(tiles_m), I64(tiles_n), ap.base_data, bp.base_data]
    args += [*c.args(), *out.args(), *alpha, *beta]
    rt.launch_groups(prog.kernels["tj_gemm"], groups, blk.gm * blk.gn, *args)


def gemv_into(
    prog: Program, out: Operand, c: Operand, a: Operand, x: Operand, alpha: Scalar, beta: Scalar
) -> None:
    """``out = alpha a x + beta c`` for a matrix ``a`` and vectors (0-d ``out``/``c`` for
    a one-row ``a``: a dot product). ``a`` and ``x`` must not overlap ``out``."""
    m, k = a.shape
    if m == 0:
        return
    rows = prog.block.gemv_rows
    vector = [c.data, I64(c.offset), I64(c.strides[0] if c.strides else 0)]
    vector += [out.data, I64(out.offset), I64(out.strides[0] if out.strides else 0)]
    args = [I64(m), I64(k), *a.args(), *x.args(), *vector, *alpha, *beta]
    prog.rt.launch(prog.kernels["tj_gemv"], -(-m // rows), *args)


def ger_into(
    prog: Program, out: Operand, z: Operand, x: Operand, y: Operand, alpha: Scalar
) -> None:
    """``out = z + alpha outer(x, y)`` (``out`` may be ``z``; x, y apart from it)."""
    m, n = z.shape
    if m == 0 or n == 0:
        return
    blocks = -(-n // prog.block.ger_cols)
    args = [I64(m), I64(n), I64(blocks), *z.args(), *x.args(), *y.args(), *out.args(), *alpha]
    prog.rt.launch(prog.kernels["tj_ger"], m * blocks, *args)


# ---------------------------------------------------------------- ops
PLANS = BlasPlanner(lambda node: device_can_run(OPENCL, node))


def matmul_into(out: Any, a: Any, b: Any, accumulate: bool = False) -> None:
    """out = a @ b, or out += a @ b (2-d, one float dtype): the Target's ``matmul``."""
    dtype = out.dtype.name
    one, beta = scalar_arg(1.0, dtype), scalar_arg(float(accumulate), dtype)
    gemm_into(program(dtype), operand(out), operand(out), operand(a), operand(b), one, beta)


def _program(plan: BlasPlan) -> Program:
    """The kernels for the plan's dtype and the sources of its alpha and beta."""
    device = [v if BlasPlan.is_input(v) else None for v in (plan.alpha, plan.beta)]
    return program(plan.dtype, *device)


def _scalars(plan: BlasPlan, alpha: Any, beta: Any) -> tuple[Scalar, Scalar]:
    """The kernel arguments of alpha and beta: inlined constants or device values."""
    a = alpha if BlasPlan.is_input(plan.alpha) else plan.alpha
    b = beta if BlasPlan.is_input(plan.beta) else plan.beta
    return scalar_arg(a, plan.dtype), scalar_arg(b, plan.dtype)


def _product(prog: Program, out: Any, c: Any, x: Any, y: Any, alpha: Scalar, beta: Scalar):
    """``out = alpha dot(x, y) + beta c`` for vectors and matrices (x, y apart from out
    unless both are matrices)."""
    o, c = operand(out), operand(c)
    if x.ndim == 2 and y.ndim == 2:
        gemm_into(prog, o, c, operand(x), operand(y), alpha, beta)
    elif x.ndim == 2:
        gemv_into(prog, o, c, operand(x), operand(y), alpha, beta)
    elif y.ndim == 2:  # x . Y is Y^T x
        gemv_into(prog, o, c, operand(y).T, operand(x), alpha, beta)
    else:
        gemv_into(prog, o, c, as_row(x), operand(y), alpha, beta)


@dataclass(frozen=True)
class PackedProducts:
    """One plan's products: its kernels (``_program``) found once."""

    plan: BlasPlan
    prog: Program

    def product(self, out: Any, c: Any, x: Any, y: Any, alpha: Any, beta: Any) -> None:
        _product(self.prog, out, c, x, y, *_scalars(self.plan, alpha, beta))

    def ger(self, out: Any, z: Any, x: Any, y: Any, alpha: Any) -> None:
        scalar = _scalars(self.plan, alpha, None)[0]
        ger_into(self.prog, operand(out), operand(z), operand(x), operand(y), scalar)


@dataclass(frozen=True)
class PackedGemm:
    """Our kernels as the shared BLAS factories' ``GemmProvider``
    (device_kernels/blas_kernels.py): they only launch, so launch plans record them."""

    target: Target = OPENCL
    launches_only: bool = True

    def bind(self, plan: BlasPlan) -> PackedProducts:
        return PackedProducts(plan, _program(plan))


def specs() -> list[KernelSpec]:
    return blas_kernels.specs(PackedGemm(), PLANS)
