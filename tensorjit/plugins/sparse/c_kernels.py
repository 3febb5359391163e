"""C kernels (backend "c") for the sparse x dense products with a dense result.

- ``StructuredDot`` (sparse ``x`` times dense ``y``, 1-d or 2-d): for CSR, each output
  row is accumulated from the row's stored values times the matching rows of ``y`` (the
  columns are processed in register-sized blocks, so an output row is written once);
  for CSC, the output is zeroed and each column of ``x`` scatters ``value * y[j, :]``
  into the output rows it touches.
- ``DenseSparseDot`` (dense ``a`` times sparse ``x``): for CSR, each output row
  scatters ``a[i, k] * x[k, :]``; for CSC, each output entry is a gathered dot product.

Stored values are used as they are: unsorted or duplicate indices, explicit zeros and
empty rows/columns need no preprocessing (``0 * inf`` gives NaN as in scipy). The
``indptr`` array is validated and every index is bounds-checked, so a malformed matrix
(built with ``check=False`` or edited in place) raises ValueError instead of reading or
writing out of bounds (scipy itself does not check). A CSC x dense product with at least
8 dense columns first counting-sorts x into a temporary CSR copy (``nnz`` values and
indices, ``m + 1`` offsets) so the output is written row by row instead of scattered;
if that allocation fails, it scatters in place.

Dense operands: ``y`` of ``StructuredDot`` is passed with its row stride when its
columns are contiguous (C order, or any row-sliced view); otherwise it is copied to C
order (an ``O(k * n)`` copy). ``a`` of ``DenseSparseDot`` is passed with both strides
(no copy; a transposed view such as the gradient's ``g.T`` is read in place). The
output is C-contiguous; the buffer in ``output_storage[0][0]`` is reused when it has
the right shape and dtype.

Supported: result dtype float32 or float64 (inputs of another dtype are cast to it,
as NumPy/scipy do), index arrays int32 or int64 (others are cast to int64). Any other
node gets a run that calls ``Op.perform``. The C backend is imported lazily, inside the
factory, so the sparse plugin still works when that backend is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from tensorjit.plugins.c_backend.generators.buffers import reusable
from tensorjit.plugins.sparse.basic import DenseSparseDot, StructuredDot

Run = Callable[[list, list], None]

PLUGIN = "sparse"
STRUCTURED_DOT_KERNEL = "sparse:c_structured_dot"
DENSE_SPARSE_DOT_KERNEL = "sparse:c_dense_sparse_dot"

_VALUE_TYPES = {"float32": ("float", "f32", 32), "float64": ("double", "f64", 16)}
_INDEX_TYPES = {"int32": ("int32_t", "i32"), "int64": ("int64_t", "i64")}

_PRELUDE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* From this many dense columns on, a CSC product converts x to CSR first. */
#define TJ_CSC_TO_CSR_MIN_N 8

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TJ_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TJ_CLONES
#endif

/* 0: ok; 1: indptr is not a valid offset array for nnz stored values. */
#define TJ_CHECK_INDPTR(indptr, nptr, nnz)                                        \
    do {                                                                          \
        if ((int64_t)(indptr)[0] < 0 || (int64_t)(indptr)[nptr] > (nnz))          \
            return 1;                                                             \
        for (int64_t q_ = 0; q_ < (nptr); q_++)                                   \
            if ((indptr)[q_] > (indptr)[q_ + 1])                                  \
                return 1;                                                         \
    } while (0)
"""

# {T}: C value type, {I}: C index type, {S}: suffix, {W}: column block (a multiple of
# the vector width; the accumulators stay in registers).
_TEMPLATE = r"""
/* out (m x n, C order) = x (m x k, CSR) @ y (k x n, y[j*ldy + c]). 2: bad index. */
TJ_CLONES
int tj_csr_dense_{S}(int64_t m, int64_t k, int64_t n, const void *data_, const void *ind_,
                     const void *ptr_, int64_t nnz, const void *y_, int64_t ldy, void *out_)
{{
    const {T} *restrict data = (const {T} *)data_;
    const {I} *restrict ind = (const {I} *)ind_;
    const {I} *restrict ptr = (const {I} *)ptr_;
    const {T} *restrict y = (const {T} *)y_;
    {T} *restrict out = ({T} *)out_;
    if (m == 0 || n == 0)
        return 0;
    TJ_CHECK_INDPTR(ptr, m, nnz);
    for (int64_t i = 0; i < m; i++) {{
        const int64_t p0 = ptr[i], p1 = ptr[i + 1];
        {T} *restrict o = out + i * n;
        int64_t c0 = 0;
        for (; c0 + {W} <= n; c0 += {W}) {{
            {T} acc[{W}];
            for (int t = 0; t < {W}; t++)
                acc[t] = 0;
            for (int64_t p = p0; p < p1; p++) {{
                const int64_t j = ind[p];
                if ((uint64_t)j >= (uint64_t)k)
                    return 2;
                const {T} v = data[p];
                const {T} *restrict yr = y + j * ldy + c0;
                for (int t = 0; t < {W}; t++)
                    acc[t] += v * yr[t];
            }}
            for (int t = 0; t < {W}; t++)
                o[c0 + t] = acc[t];
        }}
        if (c0 < n) {{
            const int64_t r = n - c0;
            {T} acc[{W}];
            for (int64_t t = 0; t < r; t++)
                acc[t] = 0;
            for (int64_t p = p0; p < p1; p++) {{
                const int64_t j = ind[p];
                if ((uint64_t)j >= (uint64_t)k)
                    return 2;
                const {T} v = data[p];
                const {T} *restrict yr = y + j * ldy + c0;
                for (int64_t t = 0; t < r; t++)
                    acc[t] += v * yr[t];
            }}
            for (int64_t t = 0; t < r; t++)
                o[c0 + t] = acc[t];
        }}
    }}
    return 0;
}}

/* out (m x n, C order) = x (m x k, CSC) @ y (k x n, y[j*ldy + c]). 2: bad index. */
TJ_CLONES
int tj_csc_dense_{S}(int64_t m, int64_t k, int64_t n, const void *data_, const void *ind_,
                     const void *ptr_, int64_t nnz, const void *y_, int64_t ldy, void *out_)
{{
    const {T} *restrict data = (const {T} *)data_;
    const {I} *restrict ind = (const {I} *)ind_;
    const {I} *restrict ptr = (const {I} *)ptr_;
    const {T} *restrict y = (const {T} *)y_;
    {T} *restrict out = ({T} *)out_;
    if (m == 0 || n == 0)
        return 0;
    memset(out, 0, (size_t)m * (size_t)n * sizeof({T}));
    if (k == 0)
        return 0;
    TJ_CHECK_INDPTR(ptr, k, nnz);
    if (n >= TJ_CSC_TO_CSR_MIN_N && nnz > 0) {{
        /* Counting-sort the stored values by row (a CSR copy of x, rows in column
           order, so each output entry sums its terms in the same order as the scatter
           below) and run the CSR kernel: the output is then written row by row instead
           of scattered over the whole (usually cache-sized-plus) output. */
        const int64_t total = ptr[k] - ptr[0];
        {I} *rptr = ({I} *)calloc((size_t)m + 1, sizeof({I}));
        {I} *rind = ({I} *)malloc((size_t)(total > 0 ? total : 1) * sizeof({I}));
        {T} *rdata = ({T} *)malloc((size_t)(total > 0 ? total : 1) * sizeof({T}));
        if (rptr && rind && rdata) {{
            int status = 0;
            for (int64_t p = ptr[0]; p < ptr[k]; p++) {{
                const int64_t i = ind[p];
                if ((uint64_t)i >= (uint64_t)m) {{
                    status = 2;
                    break;
                }}
                rptr[i + 1]++;
            }}
            if (status == 0) {{
                for (int64_t i = 0; i < m; i++)
                    rptr[i + 1] += rptr[i];
                for (int64_t j = 0; j < k; j++)
                    for (int64_t p = ptr[j]; p < ptr[j + 1]; p++) {{
                        const int64_t q = rptr[ind[p]]++;
                        rind[q] = ({I})j;
                        rdata[q] = data[p];
                    }}
                for (int64_t i = m; i > 0; i--) /* back to row starts */
                    rptr[i] = rptr[i - 1];
                rptr[0] = 0;
                status = tj_csr_dense_{S}(m, k, n, rdata, rind, rptr, total, y, ldy, out);
            }}
            free(rptr);
            free(rind);
            free(rdata);
            return status;
        }}
        free(rptr);
        free(rind);
        free(rdata); /* out of memory: scatter in place */
    }}
    if (n == 1) {{
        for (int64_t j = 0; j < k; j++) {{
            const {T} yj = y[j * ldy];
            for (int64_t p = ptr[j]; p < ptr[j + 1]; p++) {{
                const int64_t i = ind[p];
                if ((uint64_t)i >= (uint64_t)m)
                    return 2;
                out[i] += data[p] * yj;
            }}
        }}
        return 0;
    }}
    for (int64_t j = 0; j < k; j++) {{
        const {T} *restrict yr = y + j * ldy;
        for (int64_t p = ptr[j]; p < ptr[j + 1]; p++) {{
            const int64_t i = ind[p];
            if ((uint64_t)i >= (uint64_t)m)
                return 2;
            const {T} v = data[p];
            {T} *restrict o = out + i * n;
            for (int64_t c = 0; c < n; c++)
                o[c] += v * yr[c];
        }}
    }}
    return 0;
}}

/* out (m x n, C order) = a (m x k, a[i*sa0 + kk*sa1]) @ x (k x n, CSR). */
TJ_CLONES
int tj_dense_csr_{S}(int64_t m, int64_t k, int64_t n, const void *a_, int64_t sa0,
                     int64_t sa1, const void *data_, const void *ind_, const void *ptr_,
                     int64_t nnz, void *out_)
{{
    const {T} *restrict a = (const {T} *)a_;
    const {T} *restrict data = (const {T} *)data_;
    const {I} *restrict ind = (const {I} *)ind_;
    const {I} *restrict ptr = (const {I} *)ptr_;
    {T} *restrict out = ({T} *)out_;
    if (m == 0 || n == 0)
        return 0;
    memset(out, 0, (size_t)m * (size_t)n * sizeof({T}));
    if (k == 0)
        return 0;
    TJ_CHECK_INDPTR(ptr, k, nnz);
    for (int64_t i = 0; i < m; i++) {{
        const {T} *restrict ar = a + i * sa0;
        {T} *restrict o = out + i * n;
        for (int64_t kk = 0; kk < k; kk++) {{
            const {T} s = ar[kk * sa1];
            for (int64_t p = ptr[kk]; p < ptr[kk + 1]; p++) {{
                const int64_t j = ind[p];
                if ((uint64_t)j >= (uint64_t)n)
                    return 2;
                o[j] += s * data[p];
            }}
        }}
    }}
    return 0;
}}

/* out (m x n, C order) = a (m x k, a[i*sa0 + kk*sa1]) @ x (k x n, CSC). */
TJ_CLONES
int tj_dense_csc_{S}(int64_t m, int64_t k, int64_t n, const void *a_, int64_t sa0,
                     int64_t sa1, const void *data_, const void *ind_, const void *ptr_,
                     int64_t nnz, void *out_)
{{
    const {T} *restrict a = (const {T} *)a_;
    const {T} *restrict data = (const {T} *)data_;
    const {I} *restrict ind = (const {I} *)ind_;
    const {I} *restrict ptr = (const {I} *)ptr_;
    {T} *restrict out = ({T} *)out_;
    if (m == 0 || n == 0)
        return 0;
    TJ_CHECK_INDPTR(ptr, n, nnz);
    for (int64_t i = 0; i < m; i++) {{
        const {T} *restrict ar = a + i * sa0;
        {T} *restrict o = out + i * n;
        for (int64_t j = 0; j < n; j++) {{
            {T} s = 0;
            for (int64_t p = ptr[j]; p < ptr[j + 1]; p++) {{
                const int64_t kk = ind[p];
                if ((uint64_t)kk >= (uint64_t)k)
                    return 2;
                s += ar[kk * sa1] * data[p];
            }}
            o[j] = s;
        }}
    }}
    return 0;
}}
"""

_CDEF_TEMPLATE = """
int tj_csr_dense_{S}(int64_t, int64_t, int64_t, const void *, const void *, const void *,
                     int64_t, const void *, int64_t, void *);
int tj_csc_dense_{S}(int64_t, int64_t, int64_t, const void *, const void *, const void *,
                     int64_t, const void *, int64_t, void *);
int tj_dense_csr_{S}(int64_t, int64_t, int64_t, const void *, int64_t, int64_t,
                     const void *, const void *, const void *, int64_t, void *);
int tj_dense_csc_{S}(int64_t, int64_t, int64_t, const void *, int64_t, int64_t,
                     const void *, const void *, const void *, int64_t, void *);
"""

_FUNCTIONS = ("csr_dense", "csc_dense", "dense_csr", "dense_csc")


def _suffix(dtype: str, index: str) -> str:
    return f"{_VALUE_TYPES[dtype][1]}_{_INDEX_TYPES[index][1]}"


def source() -> tuple[str, str, tuple[str, ...]]:
    """(C source, cdef, symbols) of all kernels: float32/float64 x int32/int64 indices."""
    parts, cdefs, symbols = [_PRELUDE], [], []
    for dtype, (ctype, _, width) in _VALUE_TYPES.items():
        for index, (itype, _) in _INDEX_TYPES.items():
            s = _suffix(dtype, index)
            parts.append(_TEMPLATE.format(T=ctype, I=itype, S=s, W=width))
            cdefs.append(_CDEF_TEMPLATE.format(S=s))
            symbols.extend(f"tj_{f}_{s}" for f in _FUNCTIONS)
    return "".join(parts), "".join(cdefs), tuple(symbols)


def _library():
    from tensorjit.plugins.c_backend.build import compiler  # lazy: the C backend may be absent

    src, cdef, symbols = source()
    return compiler.load(src, cdef, symbols, what="sparse x dense products")


def supported(node) -> bool:
    """Whether the C kernels cover ``node`` (a float32/float64 result)."""
    return node.outputs[0].type.dtype in _VALUE_TYPES


def _malformed(x, what: str):
    raise ValueError(
        f"{what}: malformed {x.format.upper()} matrix of shape {x.shape}: its indptr is not "
        "non-decreasing within [0, nnz] or an index is out of range (call check_format())"
    )


def _sparse_arrays(x, dtype: np.dtype, what: str) -> tuple | None:
    """(format, data, indices, indptr, index dtype name) as C-ready arrays, or None."""
    fmt = getattr(x, "format", None)
    if fmt not in ("csr", "csc"):
        return None
    data, indices, indptr = x.data, x.indices, x.indptr
    if data.dtype != dtype:
        data = data.astype(dtype)
    itype = indices.dtype.name
    if itype != indptr.dtype.name or itype not in _INDEX_TYPES:
        indices, indptr, itype = indices.astype(np.int64), indptr.astype(np.int64), "int64"
    nptr = x.shape[0] if fmt == "csr" else x.shape[1]
    if len(indptr) != nptr + 1 or len(indices) < indptr[-1] or len(data) < indptr[-1]:
        _malformed(x, what)
    return (
        fmt,
        np.ascontiguousarray(data),
        np.ascontiguousarray(indices),
        np.ascontiguousarray(indptr),
        itype,
    )


def _perform_run(node) -> Run:
    return partial(node.op.perform, node)


def structured_dot_factory(node) -> Run:
    """``run`` for a ``StructuredDot`` node (``Op.perform`` when not ``supported``)."""
    if not supported(node):
        return _perform_run(node)
    ffi, lib = _library()
    out_dtype = node.outputs[0].type.numpy_dtype
    dname = out_dtype.name
    fns = {
        (fmt, index): getattr(lib, f"tj_{fmt}_dense_{_suffix(dname, index)}")
        for fmt in ("csr", "csc")
        for index in _INDEX_TYPES
    }
    from_buffer, cast = ffi.from_buffer, ffi.cast
    perform = node.op.perform
    itemsize = out_dtype.itemsize

    def run(inputs: list, output_storage: list) -> None:
        x, y = inputs
        arrays = _sparse_arrays(x, out_dtype, "structured_dot")
        if arrays is None or y.ndim not in (1, 2) or x.shape[1] != y.shape[0]:
            perform(node, inputs, output_storage)
            return
        fmt, data, indices, indptr, itype = arrays
        m, k = x.shape
        n = 1 if y.ndim == 1 else y.shape[1]
        if y.dtype != out_dtype:
            y = y.astype(out_dtype)
        if y.ndim == 1:
            ldy = y.strides[0] // itemsize if y.strides[0] % itemsize == 0 else None
        elif n == 1 or y.strides[1] == itemsize:
            ldy = y.strides[0] // itemsize if y.strides[0] % itemsize == 0 else None
        else:
            ldy = None
        if ldy is None or k == 0 or n == 0:
            y = np.ascontiguousarray(y)
            ldy = n
        shape = (m,) if y.ndim == 1 else (m, n)
        out = output_storage[0][0]
        if not reusable(out, shape, out_dtype, []) or any(
            np.may_share_memory(out, a) for a in (y, data)
        ):
            out = np.empty(shape, out_dtype)
        if k == 0:
            out[...] = 0
            output_storage[0][0] = out
            return
        py = from_buffer(y) if y.flags.c_contiguous else cast("void *", y.ctypes.data)
        status = fns[fmt, itype](
            m,
            k,
            n,
            from_buffer(data),
            from_buffer(indices),
            from_buffer(indptr),
            len(data),
            py,
            ldy,
            from_buffer(out),
        )
        if status != 0:
            _malformed(x, "structured_dot")
        output_storage[0][0] = out

    return run


def dense_sparse_dot_factory(node) -> Run:
    """``run`` for a ``DenseSparseDot`` node (``Op.perform`` when not ``supported``)."""
    if not supported(node):
        return _perform_run(node)
    ffi, lib = _library()
    out_dtype = node.outputs[0].type.numpy_dtype
    dname = out_dtype.name
    fns = {
        (fmt, index): getattr(lib, f"tj_dense_{fmt}_{_suffix(dname, index)}")
        for fmt in ("csr", "csc")
        for index in _INDEX_TYPES
    }
    from_buffer, cast = ffi.from_buffer, ffi.cast
    perform = node.op.perform
    itemsize = out_dtype.itemsize

    def run(inputs: list, output_storage: list) -> None:
        a, x = inputs
        arrays = _sparse_arrays(x, out_dtype, "structured_dot")
        if arrays is None or a.ndim not in (1, 2) or a.shape[-1] != x.shape[0]:
            perform(node, inputs, output_storage)
            return
        fmt, data, indices, indptr, itype = arrays
        k, n = x.shape
        if a.dtype != out_dtype:
            a = a.astype(out_dtype)
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        m = a2.shape[0]
        if any(s % itemsize for s in a2.strides):
            a2 = np.ascontiguousarray(a2)
        sa0, sa1 = (s // itemsize for s in a2.strides)
        shape = (n,) if a.ndim == 1 else (m, n)
        out = output_storage[0][0]
        if not reusable(out, shape, out_dtype, []) or any(
            np.may_share_memory(out, b) for b in (a, data)
        ):
            out = np.empty(shape, out_dtype)
        if out.size == 0:
            output_storage[0][0] = out
            return
        if k == 0:
            out[...] = 0
            output_storage[0][0] = out
            return
        pa = cast("void *", a2.ctypes.data)
        status = fns[fmt, itype](
            m,
            k,
            n,
            pa,
            sa0,
            sa1,
            from_buffer(data),
            from_buffer(indices),
            from_buffer(indptr),
            len(data),
            from_buffer(out),
        )
        if status != 0:
            _malformed(x, "structured_dot")
        output_storage[0][0] = out

    return run


KERNELS = (
    (StructuredDot, structured_dot_factory, STRUCTURED_DOT_KERNEL),
    (DenseSparseDot, dense_sparse_dot_factory, DENSE_SPARSE_DOT_KERNEL),
)


def register(registry) -> None:
    """Add the kernels to the kernel registry (backend "c"), with their native steps in
    whole-graph programs (native_steps.py)."""
    from tensorjit.core.registries import KernelSpec
    from tensorjit.plugins.sparse import native_steps

    for op_class, factory, name in KERNELS:
        registry.add_spec(
            KernelSpec(
                name, "c", (op_class,), factory, step=native_steps.program_step, plugin=PLUGIN
            )
        )
