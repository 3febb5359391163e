"""How a row-major product maps onto a column-major BLAS call (cuBLAS's contract, the
reference BLAS's): pure functions of shapes and strides, so the mapping is tested on the
host against a real BLAS making the same call.

A matrix with element strides (row step ``rs``, column step ``cs``) is column-major
with leading dimension ``cs`` when ``rs == 1`` (an "N" view), or holds its transpose
column-major with leading dimension ``rs`` when ``cs == 1`` (a "T" view): C-ordered,
Fortran-ordered and sliced matrices need no copy. Axes of length 1 take any stride.
``C = A B`` is computed as is when C is an N view, as ``C^T = B^T A^T`` when C is a T
view. An operand without such a view (negative, zero or overlapping strides) is copied
by the caller to a C-contiguous array first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Matrix:
    """A matrix operand: its first element's address, shape and element strides."""

    pointer: int
    rows: int
    cols: int
    rs: int
    cs: int

    @property
    def T(self) -> Matrix:  # noqa: N802 (the usual name of a transpose)
        return Matrix(self.pointer, self.cols, self.rows, self.cs, self.rs)


def column_major(m: Matrix) -> tuple[str, int] | None:
    """("N", ld) when ``m`` is column-major as it is, ("T", ld) when its memory is its
    transpose's column-major layout, or None (copy it first)."""
    rows, cols = max(m.rows, 1), max(m.cols, 1)
    if (m.rs == 1 or m.rows <= 1) and (m.cols <= 1 or m.cs >= rows):
        return "N", (m.cs if m.cols > 1 else rows)
    if (m.cs == 1 or m.cols <= 1) and (m.rows <= 1 or m.rs >= cols):
        return "T", (m.rs if m.rows > 1 else cols)
    return None


@dataclass(frozen=True)
class GemmCall:
    """``gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)``."""

    transa: str
    transb: str
    m: int
    n: int
    k: int
    a: int
    lda: int
    b: int
    ldb: int
    c: int
    ldc: int


def _operand(m: Matrix) -> tuple[str, int]:
    """The op and ld giving ``m`` from its memory: an N view as is, a T view transposed."""
    found = column_major(m)
    if found is None:
        raise ValueError(f"{m} has no column-major view")
    view, ld = found
    return ("N" if view == "N" else "T"), ld


def gemm_call(c: Matrix, a: Matrix, b: Matrix) -> GemmCall | None:
    """The call computing ``c = alpha a b + beta c``, or None when ``c`` has no
    column-major view (compute into a contiguous copy). ``a`` and ``b`` must have one."""
    found = column_major(c)
    if found is None:
        return None
    view, ldc = found
    if view == "T":  # c^T = b^T a^T, all column-major
        c, a, b = c.T, b.T, a.T
    opa, lda = _operand(a)
    opb, ldb = _operand(b)
    return GemmCall(
        opa, opb, c.rows, c.cols, a.cols, a.pointer, lda, b.pointer, ldb, c.pointer, ldc
    )


@dataclass(frozen=True)
class GemvCall:
    """``gemv(trans, m, n, alpha, a, lda, x, incx, beta, y, incy)`` (``a`` is m x n)."""

    trans: str
    m: int
    n: int
    a: int
    lda: int
    x: int
    incx: int
    y: int
    incy: int


def gemv_call(y: int, incy: int, a: Matrix, x: int, incx: int) -> GemvCall:
    """``y = alpha a x + beta y`` (``a`` must have a column-major view; increments are
    positive element steps)."""
    view, ld = _operand(a)
    if view == "N":
        return GemvCall("N", a.rows, a.cols, a.pointer, ld, x, incx, y, incy)
    return GemvCall("T", a.cols, a.rows, a.pointer, ld, x, incx, y, incy)


@dataclass(frozen=True)
class GerCall:
    """``ger(m, n, alpha, x, incx, y, incy, a, lda)``: ``a += alpha x y^T``, a m x n."""

    m: int
    n: int
    x: int
    incx: int
    y: int
    incy: int
    a: int
    lda: int


def ger_call(a: Matrix, x: int, incx: int, y: int, incy: int) -> GerCall | None:
    """``a += alpha x y^T``, or None when ``a`` has no column-major view."""
    found = column_major(a)
    if found is None:
        return None
    view, ld = found
    if view == "N":
        return GerCall(a.rows, a.cols, x, incx, y, incy, a.pointer, ld)
    return GerCall(a.cols, a.rows, y, incy, x, incx, a.pointer, ld)  # a^T += alpha y x^T
