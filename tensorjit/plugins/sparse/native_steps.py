"""The sparse x dense products as native steps of the C backend's whole-graph programs.

A function using ``StructuredDot`` or ``DenseSparseDot`` compiled with the C backend runs
as one program; these steps let that program call the products' C kernels
(``c_kernels``) itself, instead of calling their per-node kernels through Python. A
step reads the scipy matrix's ``data``/``indices``/``indptr`` arrays in place and covers
what those kernels cover without a conversion: float32/float64 values of the result's
dtype, int32/int64 index arrays of one dtype. Anything else (another format or dtype, a
shape mismatch, a malformed matrix) is declined, and the node's per-node kernel converts
the values or raises its error (native.h's contract), so the error texts live in one
place.
"""

from __future__ import annotations

import functools

from tensorjit.core.graph.basic import Apply
from tensorjit.plugins.sparse import c_kernels
from tensorjit.plugins.sparse.basic import DenseSparseDot

# Below this many multiply-adds a product keeps the GIL (releasing it costs more).
NOGIL_WORK = 65536

_COMMON = r"""
/* x (a scipy CSR/CSC matrix) as the kernels read it; its arrays are new references. */
typedef struct {
    int csr, i64;
    int64_t rows, cols, nnz;
    PyArrayObject *data, *ind, *ptr;
} tj_sparse_arrays;

static void tj_sparse_release(tj_sparse_arrays *x)
{
    Py_XDECREF(x->data);
    Py_XDECREF(x->ind);
    Py_XDECREF(x->ptr);
}

/* x's attribute `name` as an array (a new reference); NULL with no exception set when
   x has none (or not an array), NULL with one set on another error. */
static PyArrayObject *tj_sparse_array(PyObject *x, const char *name)
{
    PyObject *o = PyObject_GetAttrString(x, name);
    if (o == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    if (o != NULL && !PyArray_Check(o)) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyArrayObject *)o;
}

static int tj_plain_vector(PyArrayObject *a, int typenum)
{
    return PyArray_NDIM(a) == 1 && PyArray_TYPE(a) == typenum && PyArray_ISCARRAY_RO(a) &&
           PyArray_ISNOTSWAPPED(a);
}

static int64_t tj_entry64(PyArrayObject *a, int i64, int64_t k)
{
    return i64 ? ((const int64_t *)PyArray_DATA(a))[k] : ((const int32_t *)PyArray_DATA(a))[k];
}

/* 1 when x is a CSR or CSC matrix the kernels read as it is (values of typenum, index
   arrays of one integer dtype, lengths that fit its shape); 0 to decline; -1 on an
   error (set). */
static int tj_sparse_arrays_of(PyObject *x, int typenum, tj_sparse_arrays *out)
{
    memset(out, 0, sizeof(*out));
    PyObject *format = PyObject_GetAttrString(x, "format"), *shape;
    if (format == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int csr = PyUnicode_Check(format) && PyUnicode_CompareWithASCIIString(format, "csr") == 0;
    int csc = PyUnicode_Check(format) && PyUnicode_CompareWithASCIIString(format, "csc") == 0;
    Py_DECREF(format);
    if (!csr && !csc)
        return 0;
    out->csr = csr;
    if ((shape = PyObject_GetAttrString(x, "shape")) == NULL)
        return -1;
    int shaped = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 2;
    if (shaped) {
        out->rows = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0));
        out->cols = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 1));
    }
    Py_DECREF(shape);
    if (PyErr_Occurred())
        return -1;
    if (!shaped || out->rows < 0 || out->cols < 0)
        return 0;
    if ((out->data = tj_sparse_array(x, "data")) == NULL ||
        (out->ind = tj_sparse_array(x, "indices")) == NULL ||
        (out->ptr = tj_sparse_array(x, "indptr")) == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int itype = PyArray_TYPE(out->ind);
    out->i64 = itype == NPY_INT64;
    if ((itype != NPY_INT32 && itype != NPY_INT64) || !tj_plain_vector(out->data, typenum) ||
        !tj_plain_vector(out->ind, itype) || !tj_plain_vector(out->ptr, itype))
        return 0;
    int64_t n_ptr = csr ? out->rows : out->cols;
    if (PyArray_DIM(out->ptr, 0) != n_ptr + 1)
        return 0;
    int64_t last = tj_entry64(out->ptr, out->i64, n_ptr);
    out->nnz = PyArray_DIM(out->data, 0);
    if (PyArray_DIM(out->ind, 0) < last || out->nnz < last)
        return 0;
    return 1;
}

/* stmt run with the GIL released when ``big`` (the work pays for the release). */
#define TJ_RELEASING(big, stmt)                                                        \
    do {                                                                               \
        if (big) {                                                                     \
            Py_BEGIN_ALLOW_THREADS stmt;                                               \
            Py_END_ALLOW_THREADS                                                       \
        } else {                                                                       \
            stmt;                                                                      \
        }                                                                              \
    } while (0)

/* A new array of typenum and shape: zeros when zero, else uninitialised. */
static PyObject *tj_sparse_result(int nd, npy_intp *dims, int typenum, int zero)
{
    return zero ? PyArray_ZEROS(nd, dims, typenum, 0) : PyArray_EMPTY(nd, dims, typenum, 0);
}
"""

# {S}: value suffix (f32, f64), {N}: NumPy type number macro.
_STEPS = r"""
/* StructuredDot: out = x (sparse) @ y (dense vector or matrix). */
static int tj_structured_dot_step_{S}(PyObject *const *inputs, PyObject **outputs)
{{
    tj_sparse_arrays x;
    PyArrayObject *y = (PyArrayObject *)inputs[1];
    int found = tj_sparse_arrays_of(inputs[0], {N}, &x);
    if (found <= 0 || !PyArray_Check(y) || PyArray_TYPE(y) != {N} || !PyArray_ISNOTSWAPPED(y) ||
        (PyArray_NDIM(y) != 1 && PyArray_NDIM(y) != 2) || PyArray_DIM(y, 0) != x.cols) {{
        tj_sparse_release(&x);
        return found < 0 ? TJ_NATIVE_ERROR : TJ_NATIVE_DECLINED;
    }}
    const npy_intp item = sizeof(tj_{S}), m = x.rows, k = x.cols;
    const npy_intp n = PyArray_NDIM(y) == 1 ? 1 : PyArray_DIM(y, 1);
    npy_intp dims[2] = {{m, n}};
    PyObject *out = tj_sparse_result(PyArray_NDIM(y), dims, {N}, k == 0 || n == 0 || m == 0);
    if (out == NULL) {{
        tj_sparse_release(&x);
        return TJ_NATIVE_ERROR;
    }}
    if (k == 0 || n == 0 || m == 0) {{
        tj_sparse_release(&x);
        outputs[0] = out;
        return TJ_NATIVE_DONE;
    }}
    /* y's rows at a stride of ldy elements, each row contiguous; else a C-ordered copy */
    npy_intp s0 = PyArray_STRIDE(y, 0), s1 = PyArray_NDIM(y) == 2 ? PyArray_STRIDE(y, 1) : item;
    PyArrayObject *dense = y;
    if (!PyArray_ISALIGNED(y) || s0 % item != 0 ||
        (n > 1 && s1 != item)) {{
        dense = (PyArrayObject *)PyArray_NewCopy(y, NPY_CORDER);
        if (dense == NULL) {{
            Py_DECREF(out);
            tj_sparse_release(&x);
            return TJ_NATIVE_ERROR;
        }}
        s0 = n * item;
    }} else {{
        Py_INCREF(dense);
    }}
    int (*kernel)(int64_t, int64_t, int64_t, const void *, const void *, const void *, int64_t,
                  const void *, int64_t, void *) =
        x.csr ? (x.i64 ? tj_csr_dense_{S}_i64 : tj_csr_dense_{S}_i32)
              : (x.i64 ? tj_csc_dense_{S}_i64 : tj_csc_dense_{S}_i32);
    int bad;
    TJ_RELEASING((int64_t)x.nnz * n >= {NOGIL},
                 bad = kernel(m, k, n, PyArray_DATA(x.data), PyArray_DATA(x.ind),
                              PyArray_DATA(x.ptr), x.nnz, PyArray_DATA(dense), s0 / item,
                              PyArray_DATA((PyArrayObject *)out)));
    Py_DECREF(dense);
    tj_sparse_release(&x);
    if (bad) {{ /* malformed: the per-node kernel says so */
        Py_DECREF(out);
        return TJ_NATIVE_DECLINED;
    }}
    outputs[0] = out;
    return TJ_NATIVE_DONE;
}}

/* DenseSparseDot: out = a (dense vector or matrix) @ x (sparse). */
static int tj_dense_sparse_dot_step_{S}(PyObject *const *inputs, PyObject **outputs)
{{
    tj_sparse_arrays x;
    PyArrayObject *a = (PyArrayObject *)inputs[0];
    int found = tj_sparse_arrays_of(inputs[1], {N}, &x);
    if (found <= 0 || !PyArray_Check(a) || PyArray_TYPE(a) != {N} ||
        (PyArray_NDIM(a) != 1 && PyArray_NDIM(a) != 2) ||
        PyArray_DIM(a, PyArray_NDIM(a) - 1) != x.rows || !PyArray_ISALIGNED(a) ||
        !PyArray_ISNOTSWAPPED(a)) {{
        tj_sparse_release(&x);
        return found < 0 ? TJ_NATIVE_ERROR : TJ_NATIVE_DECLINED;
    }}
    const npy_intp item = sizeof(tj_{S}), k = x.rows, n = x.cols;
    const int vector = PyArray_NDIM(a) == 1;
    const npy_intp m = vector ? 1 : PyArray_DIM(a, 0);
    npy_intp s0 = vector ? 0 : PyArray_STRIDE(a, 0), s1 = PyArray_STRIDE(a, PyArray_NDIM(a) - 1);
    if (s0 % item != 0 || s1 % item != 0) {{ /* the per-node kernel copies it */
        tj_sparse_release(&x);
        return TJ_NATIVE_DECLINED;
    }}
    npy_intp dims[2] = {{m, n}};
    PyObject *out = vector ? tj_sparse_result(1, &dims[1], {N}, k == 0)
                           : tj_sparse_result(2, dims, {N}, k == 0);
    if (out == NULL || k == 0 || m == 0 || n == 0) {{
        tj_sparse_release(&x);
        if (out == NULL)
            return TJ_NATIVE_ERROR;
        outputs[0] = out;
        return TJ_NATIVE_DONE;
    }}
    int (*kernel)(int64_t, int64_t, int64_t, const void *, int64_t, int64_t, const void *,
                  const void *, const void *, int64_t, void *) =
        x.csr ? (x.i64 ? tj_dense_csr_{S}_i64 : tj_dense_csr_{S}_i32)
              : (x.i64 ? tj_dense_csc_{S}_i64 : tj_dense_csc_{S}_i32);
    int bad;
    TJ_RELEASING((int64_t)x.nnz * m >= {NOGIL},
                 bad = kernel(m, k, n, PyArray_DATA(a), s0 / item, s1 / item,
                              PyArray_DATA(x.data), PyArray_DATA(x.ind), PyArray_DATA(x.ptr),
                              x.nnz, PyArray_DATA((PyArrayObject *)out)));
    tj_sparse_release(&x);
    if (bad) {{
        Py_DECREF(out);
        return TJ_NATIVE_DECLINED;
    }}
    outputs[0] = out;
    return TJ_NATIVE_DONE;
}}
"""

_DTYPES = {"float32": ("f32", "NPY_FLOAT32", "float"), "float64": ("f64", "NPY_FLOAT64", "double")}


@functools.cache  # one text per process: its cache key is computed once
def source() -> str:
    """The C of every step (both value dtypes), after the products' kernels."""
    kernels, _, _ = c_kernels.source()
    types = "".join(f"typedef {ctype} tj_{s};\n" for s, _, ctype in _DTYPES.values())
    steps = "".join(
        _STEPS.format(S=s, N=typenum, NOGIL=NOGIL_WORK) for s, typenum, _ in _DTYPES.values()
    )
    return kernels + types + _COMMON + steps


def function_name(node: Apply) -> str | None:
    """The step function for ``node``, or None when its result dtype has no kernel."""
    dtype = node.outputs[0].type.dtype
    if dtype not in _DTYPES:
        return None
    product = "dense_sparse_dot" if isinstance(node.op, DenseSparseDot) else "structured_dot"
    return f"tj_{product}_step_{_DTYPES[dtype][0]}"


def program_step(builder, node: Apply, plan: object) -> object:
    """The node's step in a C program (a ``KernelSpec.step``): native where the result
    dtype has a kernel, else whatever the builder does with a declined node."""
    from tensorjit.plugins.c_backend.whole_graph.native import NativeStep  # lazy: optional

    name = function_name(node)
    if name is None:
        return builder.decline(node)
    return builder.native(node, NativeStep(source(), name, "sparse x dense products"))
