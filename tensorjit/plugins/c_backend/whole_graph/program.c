/* Whole-graph programs of the C backend: one C call runs every node of a function.
 *
 * This file is compiled once (cached like the kernels) into a CPython extension. Its
 * `make` turns a plan built in Python (program.py) into a callable: checking the
 * arguments, allocating outputs and temporaries and calling the generated kernels
 * through their uniform entry points all happen here, so a call costs one C call
 * instead of one Python kernel call per node plus cffi conversions per array.
 *
 * A program declines (returns None) arguments it does not run as they are (not exactly
 * an aligned, native-order ndarray of the input's dtype, ndim and static shape) and
 * shape errors, as long as nothing has been overwritten yet: the caller's general path
 * then gives the usual conversions and error messages. A shape error after a step that
 * overwrote a value the call did not create raises ValueError here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION /* PyDataMem_SetHandler */
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if NPY_ABI_VERSION < 0x02000000 /* NumPy 1.x: no accessor, the field is public */
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

/* Shapes are handed to the kernels as int64_t arrays. */
_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "npy_intp must be 64 bits");

#define TJ_MAXDIM 16
#define TJ_MAXOPS 64
#define TJ_STACK_SLOTS 64
/* Kernels on more elements than this run with the GIL released. */
#define TJ_NOGIL_SIZE 65536

#include "step_kinds.h" /* enum TJ_ELEMWISE, ...: generated from steps.py */
#include "native.h"     /* tj_native_fn: the plugins' native steps */
#include "index_rules.h" /* TJ_INDEX_OUT_OF_RANGE, ...: cstyle/indexing.py */
/* What a step returns: done, declined (the per-node path explains), a class index out
   of range (declined too, unless the call already overwrote a value), or an error set. */
enum { TJ_DONE = 0, TJ_DECLINED = 1, TJ_BAD_CLASS = 2, TJ_ERROR = -1 };

typedef void (*tj_contig_fn)(int64_t n, char **ptrs);
typedef void (*tj_strided_fn)(const int64_t *shape, char **ptrs, const int64_t *strides);
typedef void (*tj_reduce_fn)(const int64_t *shape, char **ptrs, char *out, const int64_t *strides);
typedef void (*tj_rows_fn)(const int64_t *shape, char **ptrs, const int64_t *strides);
/* The BLAS kernels of blas.py: 0 done, -1 a dimension too large for BLAS, else a bit
   mask of the array arguments (in order) BLAS can not address as they are. */
typedef long long tj_ll;
typedef int (*tj_gemm_fn)(char *, tj_ll, tj_ll, tj_ll, tj_ll, char *, tj_ll, tj_ll, tj_ll,
                          char *, tj_ll, tj_ll, double, double);
typedef int (*tj_gemv_fn)(char *, tj_ll, tj_ll, tj_ll, tj_ll, char *, tj_ll, char *, tj_ll,
                          double, double);
typedef int (*tj_ger_fn)(char *, tj_ll, tj_ll, tj_ll, tj_ll, char *, tj_ll, char *, tj_ll,
                         double);
typedef int (*tj_dot_fn)(char *, tj_ll, tj_ll, char *, tj_ll, char *);
enum { TJ_FN_GEMM = 0, TJ_FN_GEMV = 1, TJ_FN_GER = 2, TJ_FN_DOT = 3 };

typedef struct {
    int slot, typenum, ndim;
    npy_intp dims[TJ_MAXDIM]; /* -1: any length */
} tj_value_spec;

typedef struct {
    int kind;
    void *fn[4];                 /* elemwise: contiguous, strided, both with streaming
                                    stores (contiguous, strided);
                                    reduce, rowwise: the kernel; BLAS: gemm, gemv, ger,
                                    dot (TJ_FN_*) */
    int n_ops, ops[TJ_MAXOPS];   /* operand slots; rowwise: the value giving the shape,
                                    then the kernel's inputs; alloc: value, lengths */
    uint32_t bcast[TJ_MAXOPS];   /* elemwise, reduce: bit a set when the operand
                                    broadcasts on axis a */
    char full[TJ_MAXOPS];        /* elemwise, reduce: the operand has elements per
                                    element of the (broadcast) shape;
                                    rowwise: kernel operand j (the output last) has the
                                    row axis (else it holds one value per row) */
    int target;                  /* elemwise: operand written in place, or -1; BLAS:
                                    0 when the first input is updated in place */
    int out, typenum, ndim;      /* output slot, dtype, ndim */
    npy_intp dims[TJ_MAXDIM];    /* elemwise, alloc: static output lengths, -1 unknown;
                                    reduce: static lengths of the reduced operands'
                                    broadcast shape */
    int axes[TJ_MAXDIM], n_axes; /* reduce: kept axes then reduced ones; dimshuffle: the
                                    new order, -1 for a new broadcastable axis; subtensor:
                                    per indexed axis 0 for an integer, else 8 | 1 (start)
                                    | 2 (stop) | 4 (step) for a slice; rowwise: the row
                                    axis */
    int n_kept;                  /* reduce: how many of axes are kept; decay: the
                                    sum's dtype (its slot: axes[0]); inc_subtensor: 1 to
                                    set instead of adding */
    int dropped[TJ_MAXDIM], n_dropped; /* dimshuffle: removed axes (length 1) */
    int needs_elements;          /* reduce: max/min of nothing is an error; rowwise:
                                    kernel operand 1 holds class indices to check */
    int destroys;                /* overwrites a value this call did not create */
    int n_saves, saves[TJ_MAXOPS]; /* slots of the inputs this step copies before it
                                    runs (restored if the call fails later) */
    size_t stream_min_bytes;     /* elemwise: see streaming.c */
    int n_free, *free_slots;     /* slots dead after this step */
    PyObject **spare;            /* the program's spare array for slot `out` */
    /* python: thunk(inputs, cells) runs the node's own kernel (Op.perform, ...), with
       one [value] cell per output; native: fn[0] (a tj_native_fn, native.h) runs on the
       operands' values. Both output n_outs slots, with the dtype and ndim a tensor
       output must have (typenum -1: any object). */
    PyObject *thunk;
    int n_outs, *outs, *out_types, *out_ndims;
    /* elemwise with n_outs outputs: per output, the operand whose buffer it is written
       into, or -1 (n_targets 0: none) */
    int n_targets, targets[TJ_MAXOPS];
    /* C steps: fallback(values of the node's inputs) runs the node's own per-node kernel
       (raising its error, or giving its output) when the step declines but the call can
       not be handed to the per-node path any more; its inputs are in slots n_node_inputs */
    PyObject *fallback;
    int n_node_inputs, *node_inputs;
} tj_step;

typedef struct {
    int n_slots, n_inputs, n_shared, n_consts, n_steps, n_outputs;
    tj_value_spec *inputs, *shared;
    PyObject **cells;  /* lists holding the shared variables' values */
    int *const_slots;
    PyObject **consts;
    tj_step *steps;
    int *outputs;
    PyObject *notes;   /* per step: "while computing ..." for errors */
    PyObject *keep;    /* the kernel libraries, alive as long as this program */
    /* All-or-nothing calls (core/compile/commit.py): before step first_commit, the
       steps in prechecks are checked, through their copies in checks (whose operands
       updated in place by an earlier commit read the buffer before the update);
       n_snapshots steps save their input first. */
    int first_commit, n_prechecks, n_snapshots, *check_steps;
    int n_python; /* Python steps: another thread may run while one runs */
    tj_step *checks;
    /* Per slot a step writes (spare_ok): the array it held when it died, if nobody else
       held it then (see tj_take). */
    PyObject **spare;
    char *spare_ok;
    /* Row-blocked runs (row_blocks.c): the cache one block may fill (0: never), and a
       group's calls' memory kept between runs (taken by one run at a time, under the
       GIL). */
    size_t row_block_bytes;
    size_t row_group_min_bytes; /* what a group's first call must touch (row_blocks.c) */
    struct tj_row_call_s *row_calls_spare;
} tj_program;

/* ------------------------------------------------------------------ output memory */

#include "output_pool.c" /* tj_empty, pool_info, release_pool */

/* ------------------------------------------------------------------ temporaries */
/* A program's temporaries come from a pool of one array per slot: when a value dies
   (its last reader ran, or the call ended) and nobody else holds its array, the program
   keeps the array for that slot, and the step that computes the slot again (next call,
   or a loop's next step) takes it back if its dtype and shape still fit instead of
   creating one. Outputs handed to the caller are held by the caller, so they are never
   kept; views (they have a base) neither. Arrays above TJ_SPARE_MAX bytes are left to
   the output pool's few large blocks. All of it runs under the GIL. */
#define TJ_SPARE_MAX ((size_t)4 << 20)

static int tj_spare_fits(PyObject *o)
{
    if (!PyArray_CheckExact(o) || Py_REFCNT(o) != 1)
        return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    return PyArray_BASE(a) == NULL &&
           PyArray_CHKFLAGS(a, NPY_ARRAY_OWNDATA | NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_WRITEABLE) &&
           (size_t)PyArray_NBYTES(a) <= TJ_SPARE_MAX;
}

/* A new C-ordered array for a slot whose spare is *spare (NULL: none): the spare when
   it fits. */
static PyObject *tj_take_spare(PyObject **spare, int nd, const npy_intp *dims, int typenum)
{
    PyObject *o = spare != NULL ? *spare : NULL;
    if (o != NULL && Py_REFCNT(o) == 1 && PyArray_TYPE((PyArrayObject *)o) == typenum &&
        PyArray_NDIM((PyArrayObject *)o) == nd &&
        (nd == 0 || memcmp(dims, PyArray_DIMS((PyArrayObject *)o), nd * sizeof(npy_intp)) == 0)) {
        *spare = NULL;
        return o;
    }
    return tj_empty(nd, (npy_intp *)dims, typenum);
}

/* A new C-ordered array for step s's output: the slot's spare when it fits. */
static PyObject *tj_take(const tj_step *s, int nd, const npy_intp *dims, int typenum)
{
    return tj_take_spare(s->spare, nd, dims, typenum);
}

/* Lets go of value o of a slot: its array becomes the slot's spare when nobody else
   holds it. */
static void tj_let_go(const tj_program *p, int slot, PyObject *o)
{
    if (o != NULL && p->spare_ok[slot] && tj_spare_fits(o)) {
        Py_XSETREF(p->spare[slot], o);
        return;
    }
    Py_XDECREF(o);
}

/* Empties a slot (tj_let_go). */
static void tj_release(const tj_program *p, PyObject **v, int slot)
{
    PyObject *o = v[slot];
    v[slot] = NULL;
    tj_let_go(p, slot, o);
}

/* ------------------------------------------------------------------ running */

static int tj_matches(PyObject *o, const tj_value_spec *spec)
{
    PyArrayObject *a = (PyArrayObject *)o;
    if (spec->typenum < 0) /* a value no C step reads (a generator state, a sparse matrix) */
        return o != NULL;
    if (!PyArray_CheckExact(o) || PyArray_TYPE(a) != spec->typenum ||
        PyArray_NDIM(a) != spec->ndim || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a))
        return 0;
    for (int i = 0; i < spec->ndim; i++)
        if (spec->dims[i] >= 0 && PyArray_DIMS(a)[i] != spec->dims[i])
            return 0;
    return 1;
}

/* Byte range [lo, hi) an array's elements occupy. */
static void tj_extent(PyArrayObject *a, char **lo, char **hi)
{
    char *l = PyArray_BYTES(a), *h = l;
    for (int i = 0; i < PyArray_NDIM(a); i++) {
        npy_intp span = (PyArray_DIMS(a)[i] - 1) * PyArray_STRIDES(a)[i];
        if (span < 0)
            l += span;
        else
            h += span;
    }
    *lo = l;
    *hi = h + PyArray_ITEMSIZE(a);
}

static int tj_overlap(PyArrayObject *a, PyArrayObject *b)
{
    char *alo, *ahi, *blo, *bhi;
    if (PyArray_SIZE(a) == 0 || PyArray_SIZE(b) == 0)
        return 0;
    tj_extent(a, &alo, &ahi);
    tj_extent(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

/* Points *a at a new C-ordered copy of it, owned by *copy (which releases an earlier
   copy); -1 with an exception set when none can be made. */
static int tj_use_copy(PyArrayObject **a, PyObject **copy)
{
    PyObject *made = PyArray_NewCopy(*a, NPY_CORDER);
    if (made == NULL)
        return -1;
    Py_XSETREF(*copy, made);
    *a = (PyArrayObject *)made;
    return 0;
}

static int tj_same_shape(PyArrayObject *a, int nd, const npy_intp *dims)
{
    if (PyArray_NDIM(a) != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (PyArray_DIMS(a)[i] != dims[i])
            return 0;
    return 1;
}

#include "streaming.c" /* tj_streams */
#include "row_blocks.c" /* tj_row_group, tj_row_record, tj_row_flush */

/* 0 done, 1 declined (shapes do not match), -1 error set. */
/* An elementwise step's output shape into `shape`; 1 when the operands do not fit. */
/* The broadcast shape of a step's nd-d operands (static lengths from s->dims): 0, or 1
   when an operand's shape does not fit (Python raises the error). */
static int tj_broadcast_shape(const tj_step *s, PyObject **v, int nd, int64_t *shape)
{
    int n = s->n_ops, j, ax;
    for (ax = 0; ax < nd; ax++) {
        shape[ax] = s->dims[ax] >= 0 ? s->dims[ax] : 1;
        if (s->dims[ax] < 0)
            for (j = 0; j < n; j++)
                if (s->full[j] && !(s->bcast[j] >> ax & 1)) {
                    shape[ax] = PyArray_DIMS((PyArrayObject *)v[s->ops[j]])[ax];
                    break;
                }
    }
    for (j = 0; j < n; j++)
        if (s->full[j])
            for (ax = 0; ax < nd; ax++)
                if (!(s->bcast[j] >> ax & 1) &&
                    PyArray_DIMS((PyArrayObject *)v[s->ops[j]])[ax] != shape[ax])
                    return 1;
    return 0;
}

/* An elementwise step: its kernel over n_ops operands, writing its output (s->out,
   or operand s->target in place) or, with n_outs outputs (a MultiOutputElemwise), each
   of them: the kernel's pointers after the operands, in order. */
static int tj_elemwise(const tj_program *p, tj_row_group *g, const tj_step *s, PyObject **v)
{
    PyArrayObject *a[TJ_MAXOPS], *out, *outs[TJ_MAXOPS];
    PyObject *copies[TJ_MAXOPS];
    char *ptrs[TJ_MAXOPS + 1];
    int64_t shape[TJ_MAXDIM], strides[(TJ_MAXOPS + 1) * TJ_MAXDIM];
    /* (a kernel without flat entries: always the strided ones) */
    int n = s->n_ops, nd = s->ndim, fast = s->fn[0] != NULL, j, ax;
    int n_out = s->n_outs > 1 ? s->n_outs : 1;

    if (tj_broadcast_shape(s, v, nd, shape))
        return 1;
    for (j = 0; j < n; j++) {
        a[j] = (PyArrayObject *)v[s->ops[j]];
        copies[j] = NULL;
    }
    /* The operands written in place: s->target, or the several outputs' targets. */
    int written[TJ_MAXOPS], n_written = 0;
    if (s->target >= 0)
        written[n_written++] = s->target;
    for (j = 0; j < s->n_targets; j++)
        if (s->targets[j] >= 0)
            written[n_written++] = s->targets[j];
    for (int w = 0; w < n_written; w++) {
        /* An operand partly overlapping one written is read from a copy. */
        PyArrayObject *t = a[written[w]];
        for (j = 0; j < n; j++) {
            if (j == written[w] || a[j] == t || !tj_overlap(a[j], t))
                continue;
            if (g != NULL) /* (the copy reads a[j]: pending calls may write it) */
                tj_row_record(p, g, NULL, 0, 0);
            if (tj_use_copy(&a[j], &copies[j]) < 0)
                goto error;
        }
    }
    for (j = 0; j < n_out; j++) {
        int into = s->target >= 0 ? s->target : j < s->n_targets ? s->targets[j] : -1;
        if (into >= 0) {
            outs[j] = a[into];
            Py_INCREF(outs[j]);
        } else {
            PyObject **spare = j == 0 ? s->spare : &p->spare[s->outs[j]];
            outs[j] = (PyArrayObject *)tj_take_spare(spare, nd, (npy_intp *)shape,
                                                     j == 0 ? s->typenum : s->out_types[j]);
        }
        if (outs[j] == NULL) {
            while (--j >= 0)
                Py_DECREF(outs[j]);
            goto error;
        }
    }
    out = outs[0];
    for (j = 0; j < n && fast; j++) {
        if (!s->full[j])
            continue;
        if (!PyArray_IS_C_CONTIGUOUS(a[j]))
            fast = 0;
        for (ax = 0; ax < nd; ax++)
            if ((s->bcast[j] >> ax & 1) && shape[ax] != 1)
                fast = 0;
    }
    int n_all = s->target < 0 ? n + n_out : n;
    for (j = 0; j < n_all; j++)
        ptrs[j] = PyArray_BYTES(j < n ? a[j] : outs[j - n]);
    npy_intp size = PyArray_SIZE(out);
    if (!fast)
        for (j = 0; j < n_all; j++) {
            PyArrayObject *x = j < n ? a[j] : outs[j - n];
            for (ax = 0; ax < nd; ax++)
                strides[j * nd + ax] = PyArray_STRIDES(x)[ax];
        }
    int recorded = 0, streams = n_out == 1 && tj_streams(s, n, a, out, fast);
    if (g != NULL) {
        for (j = 0; j < n && copies[j] == NULL; j++)
            ;
        if (j == n) /* (a copy would have to live until the group runs) */
            recorded = tj_row_record_elemwise(p, g, s, a, outs, n_out, fast, ptrs, shape,
                                              strides, streams);
    }
    if (!recorded) {
        PyThreadState *saved = size > TJ_NOGIL_SIZE ? PyEval_SaveThread() : NULL;
        if (fast)
            ((tj_contig_fn)s->fn[streams ? 2 : 0])(size, ptrs);
        else
            ((tj_strided_fn)s->fn[streams ? 3 : 1])(shape, ptrs, strides);
        if (saved != NULL)
            PyEval_RestoreThread(saved);
    }
    for (j = 0; j < n; j++)
        Py_XDECREF(copies[j]);
    Py_XSETREF(v[s->out], (PyObject *)out);
    for (j = 1; j < n_out; j++)
        Py_XSETREF(v[s->outs[j]], (PyObject *)outs[j]);
    return 0;
error:
    for (j = 0; j < n; j++)
        Py_XDECREF(copies[j]);
    return -1;
}

/* A reduction of an element function of n_ops broadcasting operands (one, read as it
   is, for a plain sum): the kernel gets the lengths and each operand's strides in the
   order of s->axes (kept axes, then reduced ones), 0 along an axis it broadcasts over. */
static int tj_reduce(const tj_program *p, tj_row_group *g, const tj_step *s, PyObject **v)
{
    PyArrayObject *out;
    int64_t full[TJ_MAXDIM], all[TJ_MAXDIM], strides[TJ_MAXOPS * TJ_MAXDIM];
    char *ptrs[TJ_MAXOPS + 1];
    npy_intp shape[TJ_MAXDIM], size = 1;
    int n = s->n_ops, nd = s->n_axes;
    if (tj_broadcast_shape(s, v, nd, full))
        return 1;
    for (int i = 0; i < nd; i++) {
        all[i] = full[s->axes[i]];
        size *= all[i];
        if (i >= s->n_kept && all[i] == 0 && s->needs_elements)
            return 1; /* NumPy's error for the max/min of nothing */
        if (i < s->n_kept)
            shape[i] = all[i];
    }
    for (int j = 0; j < n; j++) {
        PyArrayObject *x = (PyArrayObject *)v[s->ops[j]];
        ptrs[j] = PyArray_BYTES(x);
        for (int i = 0; i < nd; i++)
            strides[j * nd + i] =
                (s->bcast[j] >> s->axes[i] & 1) ? 0 : PyArray_STRIDES(x)[s->axes[i]];
    }
    out = (PyArrayObject *)tj_take(s, s->n_kept, shape, s->typenum);
    if (out == NULL)
        return -1;
    /* A reduction with two outputs (Moments: the sums, then the m2s) takes the second,
       of the same shape and type, as the pointer after its operands. */
    PyArrayObject *second = NULL;
    if (s->n_outs == 2) {
        second = (PyArrayObject *)tj_empty(s->n_kept, shape, s->out_types[1]);
        if (second == NULL) {
            Py_DECREF(out);
            return -1;
        }
        ptrs[n] = PyArray_BYTES(second);
    }
    if (!tj_row_record_reduce(p, g, s, v, out, second, all, ptrs, strides)) {
        PyThreadState *saved = size > TJ_NOGIL_SIZE ? PyEval_SaveThread() : NULL;
        ((tj_reduce_fn)s->fn[0])(all, ptrs, PyArray_BYTES(out), strides);
        if (saved != NULL)
            PyEval_RestoreThread(saved);
    }
    Py_XSETREF(v[s->out], (PyObject *)out);
    if (second != NULL)
        Py_XSETREF(v[s->outs[1]], (PyObject *)second);
    return 0;
}

/* A new view of x's memory (x stays alive as its base), or NULL with an error set. */
static PyObject *tj_view(PyArrayObject *x, int nd, npy_intp *shape, npy_intp *strides,
                         char *data)
{
    PyArray_Descr *descr = PyArray_DESCR(x);
    Py_INCREF(descr);
    PyObject *view = PyArray_NewFromDescr(&PyArray_Type, descr, nd, shape, strides, data,
                                          PyArray_FLAGS(x) & NPY_ARRAY_WRITEABLE, NULL);
    if (view == NULL)
        return NULL;
    Py_INCREF(x);
    if (PyArray_SetBaseObject((PyArrayObject *)view, (PyObject *)x) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    return view;
}

/* Stores a new view in *slot: 0, or -1 with an error set. */
static int tj_store_view(PyArrayObject *x, int nd, npy_intp *shape, npy_intp *strides,
                         char *data, PyObject **slot)
{
    PyObject *view = tj_view(x, nd, shape, strides, data);
    if (view == NULL)
        return -1;
    Py_XSETREF(*slot, view);
    return 0;
}

static int tj_dimshuffle(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]];
    npy_intp shape[TJ_MAXDIM], strides[TJ_MAXDIM];
    for (int i = 0; i < s->n_dropped; i++)
        if (PyArray_DIMS(x)[s->dropped[i]] != 1)
            return 1;
    for (int i = 0; i < s->n_axes; i++) {
        int d = s->axes[i];
        shape[i] = d < 0 ? 1 : PyArray_DIMS(x)[d];
        strides[i] = d < 0 ? 0 : PyArray_STRIDES(x)[d];
    }
    return tj_store_view(x, s->n_axes, shape, strides, PyArray_BYTES(x), &v[s->out]);
}

/* The value of a 0-d integer array. */
static npy_intp tj_index(PyArrayObject *a)
{
    const char *p = PyArray_BYTES(a);
    switch (PyArray_TYPE(a)) {
    case NPY_BYTE: return *(const npy_byte *)p;
    case NPY_UBYTE: return *(const npy_ubyte *)p;
    case NPY_SHORT: return *(const npy_short *)p;
    case NPY_USHORT: return *(const npy_ushort *)p;
    case NPY_INT: return *(const npy_int *)p;
    case NPY_UINT: return (npy_intp)*(const npy_uint *)p;
    case NPY_LONG: return *(const npy_long *)p;
    case NPY_LONGLONG: return (npy_intp)*(const npy_longlong *)p;
    case NPY_ULONG: {
        npy_ulong u = *(const npy_ulong *)p;
        return u > (npy_ulong)NPY_MAX_INTP ? NPY_MAX_INTP : (npy_intp)u;
    }
    case NPY_ULONGLONG: {
        npy_ulonglong u = *(const npy_ulonglong *)p;
        return u > (npy_ulonglong)NPY_MAX_INTP ? NPY_MAX_INTP : (npy_intp)u;
    }
    }
    return NPY_MAX_INTP; /* not reached: program.py admits integer indices only */
}

/* Basic indexing (integers and slices): a view; out-of-range integers are declined. */
/* x's basic-indexing view by the step's per-axis codes (s->axes), the indices read from
   the operands from ops[first] on: 0 with *view set, or 1 (declined: an index out of
   range or a zero step; the per-node kernel raises NumPy's error), or -1 (error set). */
static int tj_index_view(const tj_step *s, PyObject **v, PyArrayObject *x, int first,
                         PyObject **view)
{
    npy_intp shape[TJ_MAXDIM], strides[TJ_MAXDIM];
    char *data = PyArray_BYTES(x);
    int next = first, nd = 0, ax;
    for (ax = 0; ax < s->n_axes; ax++) {
        npy_intp n = PyArray_DIMS(x)[ax], st = PyArray_STRIDES(x)[ax];
        int code = s->axes[ax];
        if (code == 0) {
            npy_intp i = tj_index((PyArrayObject *)v[s->ops[next++]]);
            if (i < 0)
                i += n;
            if (i < 0 || i >= n)
                return 1;
            data += i * st;
            continue;
        }
        Py_ssize_t start, stop, step = 1;
        npy_intp given[3] = {0, 0, 0};
        for (int part = 0; part < 3; part++)
            if (code >> part & 1)
                given[part] = tj_index((PyArrayObject *)v[s->ops[next++]]);
        if (code & 4)
            step = given[2];
        if (step == 0)
            return 1;
        start = code & 1 ? given[0] : (step < 0 ? PY_SSIZE_T_MAX : 0);
        stop = code & 2 ? given[1] : (step < 0 ? PY_SSIZE_T_MIN : PY_SSIZE_T_MAX);
        shape[nd] = PySlice_AdjustIndices(n, &start, &stop, step);
        strides[nd] = st * step;
        data += start * st;
        nd++;
    }
    for (; ax < PyArray_NDIM(x); ax++, nd++) {
        shape[nd] = PyArray_DIMS(x)[ax];
        strides[nd] = PyArray_STRIDES(x)[ax];
    }
    *view = tj_view(x, nd, shape, strides, data);
    return *view == NULL ? -1 : 0;
}

static int tj_subtensor(const tj_step *s, PyObject **v)
{
    PyObject *view = NULL;
    int status = tj_index_view(s, v, (PyArrayObject *)v[s->ops[0]], 1, &view);
    if (status == 0)
        Py_XSETREF(v[s->out], view);
    return status;
}

/* IncSubtensor/SetSubtensor in place (ops: x, y, the indices): y added into (copied to)
   x's view with NumPy's broadcasting and casting. A y that does not broadcast to the view
   is declined before anything is written (the per-node kernel raises the error); an
   error NumPy raises once it has run (a float error set to raise, a cast it refuses) is
   the call's error, as on the per-node path: declining then would add y twice. */
static int tj_inc_subtensor(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]], *y = (PyArrayObject *)v[s->ops[1]];
    PyObject *view = NULL, *done;
    int status = tj_index_view(s, v, x, 2, &view);
    if (status != 0)
        return status;
    int nd = PyArray_NDIM((PyArrayObject *)view), ny = PyArray_NDIM(y);
    for (int k = 1; k <= ny; k++) {
        npy_intp want = k <= nd ? PyArray_DIMS((PyArrayObject *)view)[nd - k] : 1;
        npy_intp have = PyArray_DIMS(y)[ny - k];
        if (k > nd ? have != 1 : (have != want && have != 1)) {
            Py_DECREF(view);
            return TJ_DECLINED;
        }
    }
    if (s->n_kept) {
        done = PyArray_CopyInto((PyArrayObject *)view, y) < 0 ? NULL : Py_None;
        Py_XINCREF(done);
    } else {
        done = PyNumber_InPlaceAdd(view, (PyObject *)y);
    }
    Py_DECREF(view);
    if (done == NULL)
        return TJ_ERROR;
    Py_DECREF(done);
    Py_INCREF(x);
    Py_XSETREF(v[s->out], (PyObject *)x);
    return TJ_DONE;
}

static double tj_real(PyArrayObject *a)
{
    return PyArray_TYPE(a) == NPY_FLOAT ? *(const float *)PyArray_BYTES(a)
                                        : *(const double *)PyArray_BYTES(a);
}

enum { TJ_CALL_GEMM, TJ_CALL_GEMV, TJ_CALL_GEMV_T, TJ_CALL_DOT, TJ_CALL_GER };

#define TJ_D(a, i) ((tj_ll)PyArray_DIMS(a)[i])
#define TJ_S(a, i) ((tj_ll)PyArray_STRIDES(a)[i])
#define TJ_P(a) PyArray_BYTES(a)

/* One BLAS kernel call on arr (in the kernel's argument order). */
static int tj_blas_call(const tj_step *s, int call, PyArrayObject **arr, double alpha,
                        double beta)
{
    PyArrayObject *a = arr[0], *b = arr[1], *c = arr[2];
    switch (call) {
    case TJ_CALL_GEMM: /* c = alpha a . b + beta c */
        return ((tj_gemm_fn)s->fn[TJ_FN_GEMM])(TJ_P(a), TJ_D(a, 0), TJ_D(a, 1), TJ_S(a, 0),
                                               TJ_S(a, 1), TJ_P(b), TJ_D(b, 1), TJ_S(b, 0),
                                               TJ_S(b, 1), TJ_P(c), TJ_S(c, 0), TJ_S(c, 1),
                                               alpha, beta);
    case TJ_CALL_GEMV: /* c = alpha a . b + beta c, b and c vectors */
        return ((tj_gemv_fn)s->fn[TJ_FN_GEMV])(TJ_P(a), TJ_D(a, 0), TJ_D(a, 1), TJ_S(a, 0),
                                               TJ_S(a, 1), TJ_P(b), TJ_S(b, 0), TJ_P(c),
                                               TJ_S(c, 0), alpha, beta);
    case TJ_CALL_GEMV_T: /* c = alpha a.T . b + beta c */
        return ((tj_gemv_fn)s->fn[TJ_FN_GEMV])(TJ_P(a), TJ_D(a, 1), TJ_D(a, 0), TJ_S(a, 1),
                                               TJ_S(a, 0), TJ_P(b), TJ_S(b, 0), TJ_P(c),
                                               TJ_S(c, 0), alpha, beta);
    case TJ_CALL_DOT: /* c (0-d) = a . b */
        return ((tj_dot_fn)s->fn[TJ_FN_DOT])(TJ_P(a), TJ_D(a, 0), TJ_S(a, 0), TJ_P(b),
                                             TJ_S(b, 0), TJ_P(c));
    default: /* a += alpha b . c^T */
        return ((tj_ger_fn)s->fn[TJ_FN_GER])(TJ_P(a), TJ_D(a, 0), TJ_D(a, 1), TJ_S(a, 0),
                                             TJ_S(a, 1), TJ_P(b), TJ_S(b, 0), TJ_P(c),
                                             TJ_S(c, 0), alpha);
    }
}

/* Calls the kernel, copying to C order what it can not address and calling again (a
   copied output is written back). 0 done, 1 declined (too large for BLAS), -1 error. */
static int tj_blas(const tj_step *s, int call, PyArrayObject **arr, int written,
                   double alpha, double beta)
{
    PyArrayObject *dest = arr[written];
    PyObject *copies[3] = {NULL, NULL, NULL};
    int status = 0, round, i, result = -1;
    npy_intp work = PyArray_SIZE(arr[0]) + PyArray_SIZE(arr[1]) + PyArray_SIZE(arr[2]);
    for (round = 0; round < 4; round++) {
        PyThreadState *saved = work > TJ_NOGIL_SIZE ? PyEval_SaveThread() : NULL;
        status = tj_blas_call(s, call, arr, alpha, beta);
        if (saved != NULL)
            PyEval_RestoreThread(saved);
        if (status <= 0)
            break;
        for (i = 0; i < 3; i++)
            if ((status >> i & 1) && tj_use_copy(&arr[i], &copies[i]) < 0)
                goto done;
    }
    if (status != 0) {
        result = 1;
        goto done;
    }
    if (arr[written] != dest && PyArray_CopyInto(dest, arr[written]) < 0)
        goto done;
    result = 0;
done:
    for (i = 0; i < 3; i++)
        Py_XDECREF(copies[i]);
    return result;
}

/* 1 when a dot step's operands are not aligned. */
static int tj_dot_misfit(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]], *y = (PyArrayObject *)v[s->ops[1]];
    return PyArray_DIMS(x)[PyArray_NDIM(x) - 1] != PyArray_DIMS(y)[0];
}

static int tj_dot(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]], *y = (PyArrayObject *)v[s->ops[1]];
    PyArrayObject *arr[3];
    npy_intp shape[2];
    int nx = PyArray_NDIM(x), ny = PyArray_NDIM(y), nd = 0, call, status;
    if (tj_dot_misfit(s, v))
        return 1;
    if (nx == 2)
        shape[nd++] = PyArray_DIMS(x)[0];
    if (ny == 2)
        shape[nd++] = PyArray_DIMS(y)[1];
    PyArrayObject *out = (PyArrayObject *)tj_take(s, nd, shape, s->typenum);
    if (out == NULL)
        return -1;
    call = nx == 2 ? (ny == 2 ? TJ_CALL_GEMM : TJ_CALL_GEMV)
                   : (ny == 2 ? TJ_CALL_GEMV_T : TJ_CALL_DOT);
    arr[0] = call == TJ_CALL_GEMV_T ? y : x;
    arr[1] = call == TJ_CALL_GEMV_T ? x : y;
    arr[2] = out;
    status = tj_blas(s, call, arr, 2, 1.0, 0.0);
    if (status != 0) {
        Py_DECREF(out);
        return status;
    }
    Py_XSETREF(v[s->out], (PyObject *)out);
    return 0;
}

/* dest = src (same shape): one memcpy when both are C-contiguous of one dtype (a fresh
   output and most operands are), else NumPy's assignment. 0, or -1 with an error set. */
static int tj_copy_into(PyArrayObject *dest, PyArrayObject *src)
{
    if (PyArray_IS_C_CONTIGUOUS(dest) && PyArray_IS_C_CONTIGUOUS(src) &&
        PyArray_TYPE(dest) == PyArray_TYPE(src) && !tj_overlap(dest, src)) {
        memcpy(PyArray_BYTES(dest), PyArray_BYTES(src), (size_t)PyArray_NBYTES(src));
        return 0;
    }
    return PyArray_CopyInto(dest, src);
}

/* 1 when operand j of step s may be overwritten although the step was not planned in
   place: its slot dies with this step and the slot's reference is the only one (so
   the value is this call's own temporary, or a loop's carry handed over to the call;
   a caller's, a shared variable's or a constant's value is always held elsewhere too)
   and the array owns its memory (a view would be held by nobody but could share it). */
static int tj_dead_and_unshared(const tj_step *s, PyObject **v, int j)
{
    int slot = s->ops[j], i;
    PyArrayObject *a = (PyArrayObject *)v[slot];
    if (Py_REFCNT(a) != 1 || !PyArray_CheckExact((PyObject *)a) || PyArray_BASE(a) != NULL ||
        !PyArray_CHKFLAGS(a, NPY_ARRAY_OWNDATA | NPY_ARRAY_WRITEABLE | NPY_ARRAY_ALIGNED) ||
        PyArray_TYPE(a) != s->typenum)
        return 0;
    for (i = 0; i < s->n_ops; i++)
        if (i != j && s->ops[i] == slot)
            return 0;
    for (i = 0; i < s->n_free; i++)
        if (s->free_slots[i] == slot)
            return 1;
    return 0;
}

/* 1 when a gemm or ger step's operands are not aligned. */
static int tj_gemm_ger_misfit(const tj_step *s, PyObject **v)
{
    PyArrayObject *z = (PyArrayObject *)v[s->ops[0]], *x = (PyArrayObject *)v[s->ops[2]];
    PyArrayObject *y = (PyArrayObject *)v[s->ops[3]];
    if (s->kind != TJ_GER) /* Gemm's operands (PenalisedGemm's too) */
        return PyArray_DIMS(x)[1] != PyArray_DIMS(y)[0] ||
               PyArray_DIMS(z)[0] != PyArray_DIMS(x)[0] ||
               (PyArray_NDIM(z) == 2 && PyArray_DIMS(z)[1] != PyArray_DIMS(y)[1]);
    return PyArray_DIMS(z)[0] != PyArray_DIMS(x)[0] || PyArray_DIMS(z)[1] != PyArray_DIMS(y)[0];
}

/* Gemm: z * beta + alpha x . y; Ger: z + alpha x . y^T; in place or into a new array. */
static int tj_gemm_ger(const tj_step *s, PyObject **v)
{
    PyArrayObject *z = (PyArrayObject *)v[s->ops[0]], *x = (PyArrayObject *)v[s->ops[2]];
    PyArrayObject *y = (PyArrayObject *)v[s->ops[3]], *target = NULL, *arr[3];
    PyObject *copies[2] = {NULL, NULL};
    double alpha = tj_real((PyArrayObject *)v[s->ops[1]]), beta = 1.0;
    int gemm = s->kind == TJ_GEMM, status = -1, call, written;
    if (tj_gemm_ger_misfit(s, v))
        return 1;
    if (gemm)
        beta = tj_real((PyArrayObject *)v[s->ops[4]]);
    if (s->target == 0) {
        target = z;
        Py_INCREF(target);
        /* An operand overlapping the target is read from a copy. */
        if ((tj_overlap(x, z) && tj_use_copy(&x, &copies[0]) < 0) ||
            (tj_overlap(y, z) && tj_use_copy(&y, &copies[1]) < 0))
            goto done;
    } else if (tj_dead_and_unshared(s, v, 0) && z != x && z != y) {
        target = z; /* nobody else can see z: update it in place instead of a copy */
        Py_INCREF(target);
    } else {
        target = (PyArrayObject *)tj_take(s, PyArray_NDIM(z), PyArray_DIMS(z), s->typenum);
        if (target == NULL)
            goto done;
        /* Gemm with beta 0 does not read the target. */
        if ((!gemm || beta != 0.0) && tj_copy_into(target, z) < 0)
            goto done;
    }
    if (gemm) {
        call = PyArray_NDIM(z) == 2 ? TJ_CALL_GEMM : TJ_CALL_GEMV;
        arr[0] = x, arr[1] = y, arr[2] = target, written = 2;
    } else {
        call = TJ_CALL_GER;
        arr[0] = target, arr[1] = x, arr[2] = y, written = 0;
    }
    status = tj_blas(s, call, arr, written, alpha, beta);
done:
    if (status == 0)
        Py_XSETREF(v[s->out], (PyObject *)target);
    else
        Py_XDECREF(target);
    Py_XDECREF(copies[0]);
    Py_XDECREF(copies[1]);
    return status;
}

typedef int (*tj_penalised_fn)(char *, tj_ll, tj_ll, tj_ll, tj_ll, char *, tj_ll, tj_ll, tj_ll,
                               char *, char *, double, double, double *);

/* PenalisedGemm (penalised.py): out = beta * z + alpha * x . y, into z itself when the
   step is in place (target 0), else into a new array; the sum of the squares of z into
   slot axes[0], of dtype n_kept. A z that is not C-contiguous is read from a copy (in
   place, the result is then copied back into z); x and y are read from copies where BLAS
   can not address them or, in place, where they overlap z. 1 (declined) when the shapes
   do not match: prechecked, so never after a write. */
static int tj_penalised(const tj_step *s, PyObject **v)
{
    PyArrayObject *z = (PyArrayObject *)v[s->ops[0]], *x = (PyArrayObject *)v[s->ops[2]];
    PyArrayObject *y = (PyArrayObject *)v[s->ops[3]], *out = NULL, *dest = z;
    PyObject *copies[3] = {NULL, NULL, NULL}, *sum = NULL;
    double alpha = tj_real((PyArrayObject *)v[s->ops[1]]), total = 0;
    double beta = tj_real((PyArrayObject *)v[s->ops[4]]);
    int status = -1, round, result = -1, matrix = PyArray_NDIM(y) == 2;
    if (tj_gemm_ger_misfit(s, v))
        return 1;
    if ((!PyArray_IS_C_CONTIGUOUS(z) || !PyArray_ISALIGNED(z)) && tj_use_copy(&z, &copies[0]) < 0)
        return -1;
    if (s->target == 0 && z == dest) { /* in place on a C-contiguous z */
        out = z;
        Py_INCREF(out);
    } else {
        out = (PyArrayObject *)tj_take(s, PyArray_NDIM(z), PyArray_DIMS(z), s->typenum);
    }
    if (out == NULL || (sum = PyArray_SimpleNew(0, NULL, s->n_kept)) == NULL)
        goto done;
    /* In place, the products must not read what the pass overwrites. */
    if (s->target == 0 && ((tj_overlap(x, dest) && tj_use_copy(&x, &copies[1]) < 0) ||
                           (tj_overlap(y, dest) && tj_use_copy(&y, &copies[2]) < 0)))
        goto done;
    for (round = 0; round < 3; round++) {
        PyThreadState *saved = PyArray_SIZE(z) > TJ_NOGIL_SIZE ? PyEval_SaveThread() : NULL;
        status = ((tj_penalised_fn)s->fn[0])(
            TJ_P(x), TJ_D(x, 0), TJ_D(x, 1), TJ_S(x, 0), TJ_S(x, 1), TJ_P(y),
            matrix ? TJ_D(y, 1) : 1, TJ_S(y, 0), matrix ? TJ_S(y, 1) : PyArray_ITEMSIZE(y),
            TJ_P(z), TJ_P(out), alpha, beta, &total);
        if (saved != NULL)
            PyEval_RestoreThread(saved);
        if (status <= 0)
            break;
        /* status bit 1: x, bit 2: y */
        if (((status & 1) && tj_use_copy(&x, &copies[1]) < 0) ||
            ((status & 2) && tj_use_copy(&y, &copies[2]) < 0))
            goto done;
    }
    if (status != 0) {
        PyErr_SetString(status < 0 ? PyExc_OverflowError : PyExc_RuntimeError,
                        status < 0 ? "a dimension does not fit BLAS's int"
                                   : "BLAS kernel refused C-ordered copies");
        goto done;
    }
    if (s->n_kept == NPY_FLOAT)
        *(float *)PyArray_BYTES((PyArrayObject *)sum) = (float)total;
    else
        *(double *)PyArray_BYTES((PyArrayObject *)sum) = total;
    if (s->target == 0 && out != dest) { /* z was read from a copy: write into z itself */
        if (PyArray_CopyInto(dest, out) < 0)
            goto done;
        Py_INCREF(dest);
        Py_SETREF(out, dest);
    }
    Py_XSETREF(v[s->out], (PyObject *)out);
    Py_XSETREF(v[s->axes[0]], sum);
    out = NULL;
    sum = NULL;
    result = 0;
done:
    Py_XDECREF(out);
    Py_XDECREF(sum);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(copies[i]);
    return result;
}

/* Every entry of the integer array y lies in [0, n). */
static int tj_classes_in_range(PyArrayObject *y, npy_intp n)
{
    npy_intp size = PyArray_SIZE(y), index[TJ_MAXDIM] = {0};
    int nd = PyArray_NDIM(y), wide = PyArray_ITEMSIZE(y) == 8;
    const char *p = PyArray_BYTES(y);
    for (npy_intp k = 0; k < size; k++) {
        int64_t c = wide ? *(const int64_t *)p : *(const int32_t *)p;
        if (c < 0 || c >= n)
            return 0;
        for (int d = nd - 1; d >= 0; d--) { /* the next element in C order */
            if (++index[d] < PyArray_DIMS(y)[d]) {
                p += PyArray_STRIDES(y)[d];
                break;
            }
            p -= PyArray_STRIDES(y)[d] * (PyArray_DIMS(y)[d] - 1);
            index[d] = 0;
        }
    }
    return 1;
}

/* A row kernel (rowwise.py): operands with the row axis have x's shape, the others one
   value per row (x's shape without the axis). Empty inputs and mismatched shapes are
   declined (the per-node kernel gives NumPy's result or the error). */
static int tj_rowwise(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]], *a[TJ_MAXOPS], *out;
    int axis = s->axes[0], nd = PyArray_NDIM(x), n_in = s->n_ops - 1, n_outer = 0, j, ax;
    npy_intp outer[TJ_MAXDIM];
    int64_t shape[TJ_MAXDIM], strides[(TJ_MAXOPS + 1) * TJ_MAXDIM];
    char *ptrs[TJ_MAXOPS + 1];
    if (PyArray_SIZE(x) == 0)
        return TJ_DECLINED;
    for (ax = 0; ax < nd; ax++)
        if (ax != axis)
            shape[n_outer] = outer[n_outer] = PyArray_DIMS(x)[ax], n_outer++;
    shape[n_outer] = PyArray_DIMS(x)[axis];
    for (j = 0; j < n_in; j++) {
        a[j] = (PyArrayObject *)v[s->ops[j + 1]];
        if (s->full[j] ? !tj_same_shape(a[j], nd, PyArray_DIMS(x))
                       : !tj_same_shape(a[j], n_outer, outer))
            return TJ_DECLINED;
    }
    if (s->needs_elements && !tj_classes_in_range(a[1], shape[n_outer]))
        return TJ_BAD_CLASS;
    out = (PyArrayObject *)(s->full[n_in] ? tj_take(s, nd, PyArray_DIMS(x), s->typenum)
                                          : tj_take(s, n_outer, outer, s->typenum));
    if (out == NULL)
        return TJ_ERROR;
    a[n_in] = out;
    int64_t *st = strides;
    for (j = 0; j <= n_in; j++) {
        ptrs[j] = PyArray_BYTES(a[j]);
        for (ax = 0; ax < PyArray_NDIM(a[j]); ax++) /* the row axis last */
            if (!s->full[j] || ax != axis)
                *st++ = PyArray_STRIDES(a[j])[ax];
        if (s->full[j])
            *st++ = PyArray_STRIDES(a[j])[axis];
    }
    PyThreadState *saved = PyArray_SIZE(x) > TJ_NOGIL_SIZE ? PyEval_SaveThread() : NULL;
    ((tj_rows_fn)s->fn[0])(shape, ptrs, strides);
    if (saved != NULL)
        PyEval_RestoreThread(saved);
    Py_XSETREF(v[s->out], (PyObject *)out);
    return TJ_DONE;
}

/* Alloc: the value broadcast (NumPy's rule) into the shape the length operands give. */
static int tj_alloc(const tj_step *s, PyObject **v)
{
    PyArrayObject *value = (PyArrayObject *)v[s->ops[0]], *out;
    npy_intp shape[TJ_MAXDIM];
    int nd = s->ndim, lead = nd - PyArray_NDIM(value), i;
    if (lead < 0 || s->n_ops != nd + 1)
        return TJ_DECLINED;
    for (i = 0; i < nd; i++) {
        shape[i] = tj_index((PyArrayObject *)v[s->ops[i + 1]]);
        if (shape[i] < 0 || (s->dims[i] >= 0 && shape[i] != s->dims[i]))
            return TJ_DECLINED;
    }
    for (i = 0; i < PyArray_NDIM(value); i++) {
        npy_intp d = PyArray_DIMS(value)[i];
        if (d != 1 && d != shape[lead + i])
            return TJ_DECLINED;
    }
    out = (PyArrayObject *)tj_take(s, nd, shape, s->typenum);
    if (out == NULL)
        return TJ_ERROR;
    if (PyArray_SIZE(out) > 0 && PyArray_CopyInto(out, value) < 0) {
        Py_DECREF(out);
        return TJ_ERROR;
    }
    Py_XSETREF(v[s->out], (PyObject *)out);
    return TJ_DONE;
}

/* Shape: the lengths of an array as an int64 vector. */
static int tj_shape(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]];
    npy_intp nd = PyArray_NDIM(x);
    PyArrayObject *out = (PyArrayObject *)PyArray_EMPTY(1, &nd, NPY_INT64, 0);
    if (out == NULL)
        return TJ_ERROR;
    for (npy_intp i = 0; i < nd; i++)
        ((int64_t *)PyArray_BYTES(out))[i] = PyArray_DIMS(x)[i];
    Py_XSETREF(v[s->out], (PyObject *)out);
    return TJ_DONE;
}

static npy_intp tj_entry(PyArrayObject *a, npy_intp k);

/* Reshape(x, shape vector): a view of x, or of a C-ordered copy when x is not
   C-contiguous (NumPy's reshape copies then too); one length may be -1. A shape that
   does not fit is declined (the node's own kernel raises NumPy's error). */
static int tj_reshape(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]], *shp = (PyArrayObject *)v[s->ops[1]];
    npy_intp shape[TJ_MAXDIM], strides[TJ_MAXDIM], known = 1, size = PyArray_SIZE(x);
    int nd = s->ndim, free_axis = -1;
    if (PyArray_NDIM(shp) != 1 || PyArray_DIMS(shp)[0] != nd ||
        !(PyArray_TYPE(shp) == NPY_INT64 || PyArray_TYPE(shp) == NPY_INT))
        return TJ_DECLINED;
    for (int i = 0; i < nd; i++) {
        shape[i] = tj_entry(shp, i);
        if (shape[i] == -1 && free_axis < 0)
            free_axis = i;
        else if (shape[i] < 0)
            return TJ_DECLINED;
        else
            known *= shape[i];
    }
    if (free_axis >= 0) {
        if (known == 0 || size % known != 0)
            return TJ_DECLINED;
        shape[free_axis] = size / known;
    } else if (known != size) {
        return TJ_DECLINED;
    }
    npy_intp step = PyArray_ITEMSIZE(x);
    for (int i = nd - 1; i >= 0; i--) {
        if (s->dims[i] >= 0 && shape[i] != s->dims[i])
            return TJ_DECLINED;
        strides[i] = step;
        step *= shape[i] > 0 ? shape[i] : 1;
    }
    if (PyArray_IS_C_CONTIGUOUS(x))
        return tj_store_view(x, nd, shape, strides, PyArray_BYTES(x), &v[s->out]) < 0
                   ? TJ_ERROR
                   : TJ_DONE;
    PyArrayObject *copy = (PyArrayObject *)PyArray_NewCopy(x, NPY_CORDER);
    if (copy == NULL)
        return TJ_ERROR;
    int status = tj_store_view(copy, nd, shape, strides, PyArray_BYTES(copy), &v[s->out]);
    Py_DECREF(copy); /* (the view holds it) */
    return status < 0 ? TJ_ERROR : TJ_DONE;
}

/* MakeVector of 0-d integer operands into an integer vector of the output's dtype (the
   shapes a Reshape or an Alloc reads); other dtypes are not made program steps. */
static int tj_make_vector(const tj_step *s, PyObject **v)
{
    npy_intp n = s->n_ops;
    PyArrayObject *out = (PyArrayObject *)tj_take(s, 1, &n, s->typenum);
    if (out == NULL)
        return TJ_ERROR;
    for (int i = 0; i < s->n_ops; i++) {
        npy_intp value = tj_index((PyArrayObject *)v[s->ops[i]]);
        if (s->typenum == NPY_INT)
            ((npy_int *)PyArray_BYTES(out))[i] = (npy_int)value;
        else
            ((int64_t *)PyArray_BYTES(out))[i] = (int64_t)value;
    }
    Py_XSETREF(v[s->out], (PyObject *)out);
    return TJ_DONE;
}

/* The ValueError of a shape error found after the call overwrote a value. */
/* Integer arange(start, stop, step) (0-d integer operands) of the output's integer
   dtype; a zero step is declined (the VM explains). */
static int tj_arange(const tj_step *s, PyObject **v)
{
    npy_intp start = tj_index((PyArrayObject *)v[s->ops[0]]);
    npy_intp stop = tj_index((PyArrayObject *)v[s->ops[1]]);
    npy_intp step = tj_index((PyArrayObject *)v[s->ops[2]]), n, k;
    const npy_intp far = (npy_intp)1 << 62;
    /* a zero step, bounds whose length arithmetic could overflow, or values outside the
       output's type: declined, the kernel raises NumPy's error (cstyle/construct.py) */
    if (step == 0 || start < -far || start > far || stop < -far || stop > far || step < -far ||
        step > far)
        return TJ_DECLINED;
    n = step > 0 ? (stop - start + step - 1) / step : (start - stop - step - 1) / -step;
    if (n < 0)
        n = 0;
    if (s->typenum == NPY_INT && ((n > 0 && (start < INT32_MIN || start > INT32_MAX)) ||
                                  (n > 1 && (start + step < INT32_MIN || start + step > INT32_MAX))))
        return TJ_DECLINED;
    PyArrayObject *out = (PyArrayObject *)tj_take(s, 1, &n, s->typenum);
    if (out == NULL)
        return TJ_ERROR;
    char *p = PyArray_BYTES(out);
    for (k = 0; k < n; k++) {
        npy_intp value = start + k * step;
        if (s->typenum == NPY_INT)
            ((npy_int *)p)[k] = (npy_int)value;
        else
            ((int64_t *)p)[k] = (int64_t)value;
    }
    Py_XSETREF(v[s->out], (PyObject *)out);
    return TJ_DONE;
}

/* Entry k of an integer index vector (int64 or int32; one entry broadcasts). */
static npy_intp tj_entry(PyArrayObject *a, npy_intp k)
{
    const char *p = PyArray_BYTES(a) + (PyArray_DIMS(a)[0] == 1 ? 0 : k * PyArray_STRIDES(a)[0]);
    return PyArray_TYPE(a) == NPY_INT ? *(const npy_int *)p : (npy_intp)*(const int64_t *)p;
}

/* x[rows, cols] and its inc/set: the number of pairs (the index vectors' lengths, one of
   them may be 1), or -1 when they do not broadcast, x is empty or a pair is out of
   range (declined: the VM explains). Negative indices count from the end. */
static npy_intp tj_pair_count(PyArrayObject *x, PyArrayObject *r, PyArrayObject *c)
{
    npy_intp nr = PyArray_DIMS(r)[0], nc = PyArray_DIMS(c)[0], n = nr > nc ? nr : nc, k;
    npy_intp rows = PyArray_DIMS(x)[0], cols = PyArray_DIMS(x)[1];
    if ((nr != n && nr != 1) || (nc != n && nc != 1) || rows == 0 || cols == 0)
        return -1;
    for (k = 0; k < n; k++) {
        npy_intp i = tj_entry(r, k), j = tj_entry(c, k);
        if (TJ_INDEX_OUT_OF_RANGE(i, rows) || TJ_INDEX_OUT_OF_RANGE(j, cols))
            return -1;
    }
    return n;
}

static char *tj_pair_address(PyArrayObject *x, PyArrayObject *r, PyArrayObject *c,
                             npy_intp k)
{
    npy_intp i = tj_entry(r, k), j = tj_entry(c, k);
    TJ_WRAP_INDEX(i, PyArray_DIMS(x)[0])
    TJ_WRAP_INDEX(j, PyArray_DIMS(x)[1])
    return PyArray_BYTES(x) + i * PyArray_STRIDES(x)[0] + j * PyArray_STRIDES(x)[1];
}

static int tj_pair_take(const tj_step *s, PyObject **v)
{
    PyArrayObject *x = (PyArrayObject *)v[s->ops[0]];
    PyArrayObject *r = (PyArrayObject *)v[s->ops[1]], *c = (PyArrayObject *)v[s->ops[2]];
    npy_intp n = tj_pair_count(x, r, c), k;
    if (n < 0)
        return TJ_DECLINED;
    PyArrayObject *out = (PyArrayObject *)tj_take(s, 1, &n, s->typenum);
    if (out == NULL)
        return TJ_ERROR;
    size_t item = (size_t)PyArray_ITEMSIZE(out);
    for (k = 0; k < n; k++)
        memcpy(PyArray_BYTES(out) + k * item, tj_pair_address(x, r, c, k), item);
    Py_XSETREF(v[s->out], (PyObject *)out);
    return TJ_DONE;
}

#define TJ_PAIR_ADD(T)                                                                    \
    for (k = 0; k < n; k++) {                                                             \
        T *o = (T *)tj_pair_address(target, r, c, k);                                     \
        T value = *(const T *)(PyArray_BYTES(g) + (g_steps ? k * g_stride : 0));          \
        if (set)                                                                          \
            *o = value;                                                                   \
        else                                                                              \
            TJ_INDEX_ADD(*o, value, T)                                                    \
    }

/* The inc/set of x[rows, cols] by g (a vector of the pairs' length, or one value where
   the type lets it broadcast), in place (target 0) or into a copy. */
static int tj_pair_scatter(const tj_step *s, PyObject **v)
{
    PyArrayObject *z = (PyArrayObject *)v[s->ops[0]], *g = (PyArrayObject *)v[s->ops[1]];
    PyArrayObject *r = (PyArrayObject *)v[s->ops[2]], *c = (PyArrayObject *)v[s->ops[3]];
    PyArrayObject *target;
    PyObject *copy = NULL;
    int set = s->axes[0], g_steps, status = TJ_ERROR;
    npy_intp n = tj_pair_count(z, r, c), k, g_len, g_stride;
    if (n < 0)
        return TJ_DECLINED;
    g_len = PyArray_NDIM(g) == 0 ? 1 : PyArray_DIMS(g)[0];
    g_steps = g_len == n && (PyArray_NDIM(g) == 1 && g_len != 1);
    if (!(g_len == n || (g_len == 1 && (s->n_kept || n == 1))))
        return TJ_DECLINED; /* a value that does not fit: NumPy's error from the VM */
    g_stride = PyArray_NDIM(g) == 1 ? PyArray_STRIDES(g)[0] : 0;
    if (s->target == 0) {
        target = z;
        Py_INCREF(target);
        if (tj_overlap(g, z)) { /* the values are read while the target is written */
            if ((copy = PyArray_NewCopy(g, NPY_CORDER)) == NULL)
                goto done;
            g = (PyArrayObject *)copy;
            g_stride = PyArray_NDIM(g) == 1 ? PyArray_STRIDES(g)[0] : 0;
        }
    } else {
        target = (PyArrayObject *)tj_take(s, 2, PyArray_DIMS(z), s->typenum);
        if (target == NULL)
            goto done;
        if (PyArray_CopyInto(target, z) < 0) {
            Py_DECREF(target);
            goto done;
        }
    }
    switch (s->typenum) {
    case NPY_DOUBLE: TJ_PAIR_ADD(double) break;
    case NPY_FLOAT: TJ_PAIR_ADD(float) break;
    case NPY_INT: TJ_PAIR_ADD(npy_int) break;
    default: TJ_PAIR_ADD(int64_t) break; /* program.py admits these four dtypes */
    }
    Py_XSETREF(v[s->out], (PyObject *)target);
    status = TJ_DONE;
done:
    Py_XDECREF(copy);
    return status;
}

/* A new reference to o, or to o converted to an array of typenum and nd dimensions when
   it is not exactly one (typenum -1: any object); NULL with an exception set. */
static PyObject *tj_as_output(PyObject *o, int typenum, int nd)
{
    if (typenum < 0 || (PyArray_CheckExact(o) && PyArray_TYPE((PyArrayObject *)o) == typenum &&
                        PyArray_NDIM((PyArrayObject *)o) == nd &&
                        PyArray_ISNOTSWAPPED((PyArrayObject *)o) &&
                        PyArray_ISALIGNED((PyArrayObject *)o))) {
        Py_INCREF(o);
        return o;
    }
    return PyArray_FromAny(o, PyArray_DescrFromType(typenum), nd, nd,
                           NPY_ARRAY_ALIGNED | NPY_ARRAY_NOTSWAPPED | NPY_ARRAY_ENSUREARRAY |
                               NPY_ARRAY_FORCECAST,
                           NULL);
}

/* Stores a kernel's output o (borrowed) in slot, as an array of typenum and nd
   dimensions when typenum >= 0; 0, or -1 with an exception set. */
static int tj_store_output(PyObject **v, int slot, PyObject *o, int typenum, int nd, int j)
{
    if (o == NULL || (o == Py_None && typenum >= 0)) {
        PyErr_Format(PyExc_RuntimeError, "a kernel stored no value for its output %d", j);
        return -1;
    }
    if ((o = tj_as_output(o, typenum, nd)) == NULL)
        return -1;
    Py_XSETREF(v[slot], o);
    return 0;
}

/* Step s (a C or native step that declined) run by its node's own per-node kernel
   instead: the fallback returns the list of the node's outputs. */
static int tj_fallback(const tj_step *s, PyObject **v)
{
    if (s->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a program step declined and has no fallback");
        return TJ_ERROR;
    }
    PyObject *values = PyList_New(s->n_node_inputs);
    if (values == NULL)
        return TJ_ERROR;
    for (int j = 0; j < s->n_node_inputs; j++) {
        PyObject *o = v[s->node_inputs[j]];
        if (o == NULL)
            o = Py_None; /* not expected: every input of a running step is alive */
        Py_INCREF(o);
        PyList_SET_ITEM(values, j, o);
    }
    PyObject *outs = PyObject_CallOneArg(s->fallback, values);
    Py_DECREF(values);
    if (outs == NULL)
        return TJ_ERROR;
    /* A C step's outputs: its output slot (PenalisedGemm: and the sum's, axes[0]) */
    int n = s->n_outs ? s->n_outs : s->kind == TJ_PENALISED ? 2 : 1, status = TJ_DONE;
    if (!PyList_Check(outs) || PyList_GET_SIZE(outs) != n) {
        PyErr_SetString(PyExc_RuntimeError, "a fallback must return one value per output");
        status = TJ_ERROR;
    }
    for (int j = 0; status == TJ_DONE && j < n; j++) {
        PyObject *o = PyList_GET_ITEM(outs, j);
        int stored = s->n_outs  ? tj_store_output(v, s->outs[j], o, s->out_types[j],
                                                  s->out_ndims[j], j)
                     : j == 0   ? tj_store_output(v, s->out, o, s->typenum, s->ndim, j)
                                : tj_store_output(v, s->axes[0], o, s->n_kept, 0, j);
        if (stored < 0)
            status = TJ_ERROR;
    }
    Py_DECREF(outs);
    return status;
}

/* The error set now, of the same type, its message followed by step s's note ("while
   computing ..."), the original as its cause (errors that are not an Exception's kind,
   or whose type takes other arguments, stay as they are). */
static void tj_explain(const tj_program *p, const tj_step *s)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL || !PyType_IsSubtype((PyTypeObject *)type, (PyTypeObject *)PyExc_Exception) ||
        PyExc_MemoryError == type) {
        PyErr_Restore(type, value, tb);
        return;
    }
    PyObject *note = PyTuple_GET_ITEM(p->notes, s - p->steps);
    PyObject *told = PyUnicode_FromFormat("%S\n%U", value, note);
    PyObject *explained = told == NULL ? NULL : PyObject_CallOneArg(type, told);
    Py_XDECREF(told);
    if (explained == NULL) {
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return;
    }
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyException_SetCause(explained, value); /* steals value */
    PyErr_SetObject(type, explained);
    Py_DECREF(explained);
    Py_DECREF(type);
    Py_XDECREF(tb);
}

/* A plugin's native step (native.h): its function runs on the operands' values and
   sets one new reference per output; it may decline (nothing set) when it does not
   cover the values, and the program then treats it as any C step that declined. */
static int tj_native(const tj_program *p, const tj_step *s, PyObject **v)
{
    PyObject *inputs[TJ_MAXOPS], *outputs[TJ_MAXOPS] = {NULL};
    for (int j = 0; j < s->n_ops; j++)
        inputs[j] = v[s->ops[j]];
    int status = ((tj_native_fn)s->fn[0])(inputs, outputs);
    if (status == TJ_NATIVE_DONE)
        for (int j = 0; j < s->n_outs; j++)
            if (tj_store_output(v, s->outs[j], outputs[j], s->out_types[j], s->out_ndims[j],
                                j) < 0) {
                status = TJ_NATIVE_ERROR;
                break;
            }
    for (int j = 0; j < s->n_outs; j++)
        Py_XDECREF(outputs[j]);
    if (status == TJ_NATIVE_ERROR && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "a native step failed without an exception");
    if (status == TJ_NATIVE_ERROR)
        tj_explain(p, s);
    return status == TJ_NATIVE_DONE     ? TJ_DONE
           : status == TJ_NATIVE_ERROR ? TJ_ERROR
           : PyErr_Occurred()          ? TJ_ERROR
                                       : TJ_DECLINED;
}

/* A step's kernel run from Python (a node without a C step): the thunk fills one cell
   per output, made for this call (two threads may run the step at once), whose values
   move into the output slots; a tensor output that is not exactly an array of its type
   is converted (C steps after it read it as one). */
static int tj_python(const tj_step *s, PyObject **v)
{
    PyObject *inputs = PyList_New(s->n_ops), *cells = PyList_New(s->n_outs);
    if (inputs == NULL || cells == NULL)
        goto error;
    for (int j = 0; j < s->n_ops; j++) {
        PyObject *o = v[s->ops[j]];
        Py_INCREF(o);
        PyList_SET_ITEM(inputs, j, o);
    }
    for (int j = 0; j < s->n_outs; j++) {
        PyObject *cell = PyList_New(1);
        if (cell == NULL)
            goto error;
        Py_INCREF(Py_None);
        PyList_SET_ITEM(cell, 0, Py_None);
        PyList_SET_ITEM(cells, j, cell);
    }
    PyObject *done = PyObject_CallFunctionObjArgs(s->thunk, inputs, cells, NULL);
    Py_CLEAR(inputs);
    if (done == NULL)
        goto error;
    Py_DECREF(done);
    for (int j = 0; j < s->n_outs; j++) {
        PyObject *cell = PyList_GET_ITEM(cells, j);
        PyObject *o = PyList_Check(cell) && PyList_GET_SIZE(cell) == 1 ? PyList_GET_ITEM(cell, 0)
                                                                       : NULL;
        if (tj_store_output(v, s->outs[j], o, s->out_types[j], s->out_ndims[j], j) < 0)
            goto error;
    }
    Py_DECREF(cells); /* the program holds the only references to new outputs */
    return TJ_DONE;
error:
    Py_XDECREF(inputs);
    Py_XDECREF(cells);
    return TJ_ERROR;
}

/* The error of step k's precheck (s: its copy, reading stand-ins) failing after a
   Python step ran: handing the call to the per-node path would run that step again. */
static void tj_shape_error(const tj_program *p, const tj_step *s, int k, PyObject **v)
{
    PyObject *shapes = PyList_New(0);
    if (shapes == NULL)
        return;
    for (int j = 0; j < s->n_ops; j++) {
        PyObject *shape = PyObject_GetAttrString(v[s->ops[j]], "shape");
        if (shape == NULL || PyList_Append(shapes, shape) < 0) {
            Py_XDECREF(shape);
            Py_DECREF(shapes);
            return;
        }
        Py_DECREF(shape);
    }
    PyErr_Format(PyExc_ValueError, "input shapes %R do not match\n%U", shapes,
                 PyTuple_GET_ITEM(p->notes, k));
    Py_DECREF(shapes);
}

#include "step_dispatch.h" /* tj_run_step, tj_check, tj_row_passes: from steps.py */

/* Copies back the n saved values (the call failed after overwriting them in place);
   an error already set stays the one reported. */
static void tj_restore(PyObject **saved, const int *slots, int n, PyObject **v)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    for (int i = n - 1; i >= 0; i--)
        if (PyArray_CopyInto((PyArrayObject *)v[slots[i]], (PyArrayObject *)saved[i]) < 0)
            PyErr_WriteUnraisable(saved[i]);
    PyErr_Restore(type, value, traceback);
}

/* Runs the program on n_args argument values: a new list of outputs, Py_None (a new
   reference) when declined, or NULL with an exception set. A call that fails or
   declines after overwriting values in place puts back what it saved (commit.py).
   handed: the caller gives its references to the arguments away (a loop does, for its
   carries: a carry nobody else holds may then be updated in place, see
   tj_dead_and_unshared); they are released once every argument has its slot. */
static PyObject *tj_execute(const tj_program *p, PyObject *const *args, Py_ssize_t n_args,
                            int handed)
{
    PyObject *stack[TJ_STACK_SLOTS], **v = stack, *result = NULL, **saved = NULL;
    int i, k, unsaved = 0, declined = 0, n_saved = 0, *saved_slots = NULL;
    tj_row_group group, *g = tj_row_group_start((tj_program *)p, &group);
    /* unsaved: a value was overwritten in place and not saved; ran_python: a Python
       step ran (it may have side effects, a Print's): either way a step that declines
       raises its error instead of handing the call to the per-node path, which would
       run everything again. */
    int ran_python = 0;

    if (p->n_slots > TJ_STACK_SLOTS) {
        v = PyMem_Calloc(p->n_slots, sizeof(PyObject *));
        if (v == NULL)
            return PyErr_NoMemory();
    } else {
        memset(stack, 0, sizeof(stack));
    }
    if (n_args != p->n_inputs) {
        declined = 1;
        goto done;
    }
    for (i = 0; i < p->n_inputs; i++) {
        if (!tj_matches(args[i], &p->inputs[i])) {
            declined = 1;
            goto done;
        }
        Py_INCREF(args[i]);
        v[p->inputs[i].slot] = args[i];
    }
    if (handed) {
        for (i = 0; i < n_args; i++)
            Py_DECREF(args[i]);
        handed = 0;
    }
    for (i = 0; i < p->n_shared; i++) {
        PyObject *cell = p->cells[i], *o;
        if (PyList_GET_SIZE(cell) < 1 || !tj_matches(o = PyList_GET_ITEM(cell, 0), &p->shared[i])) {
            declined = 1;
            goto done;
        }
        Py_INCREF(o);
        v[p->shared[i].slot] = o;
    }
    for (i = 0; i < p->n_consts; i++) {
        Py_INCREF(p->consts[i]);
        v[p->const_slots[i]] = p->consts[i];
    }
    if (p->n_snapshots) {
        saved = PyMem_Calloc(p->n_snapshots, sizeof(PyObject *));
        saved_slots = PyMem_Calloc(p->n_snapshots, sizeof(int));
        if (saved == NULL || saved_slots == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (k = 0; k < p->n_steps; k++) {
        const tj_step *s = &p->steps[k];
        int status;
        if (k == p->first_commit)
            for (i = 0; i < p->n_prechecks; i++)
                if (tj_check(&p->checks[i], v)) {
                    if (ran_python)
                        tj_shape_error(p, &p->checks[i], p->check_steps[i], v);
                    else
                        declined = 1; /* nothing overwritten yet: the VM explains */
                    goto done;
                }
        if (g != NULL && (s->n_saves || !tj_row_passes(s, v)))
            tj_row_flush(p, g);
        for (i = 0; i < s->n_saves; i++) {
            saved[n_saved] = PyArray_NewCopy((PyArrayObject *)v[s->saves[i]], NPY_KEEPORDER);
            if (saved[n_saved] == NULL)
                goto done;
            saved_slots[n_saved++] = s->saves[i];
        }
        status = tj_run_step(p, g, s, v);
        ran_python |= s->kind == TJ_PYTHON;
        if (status < 0)
            goto done;
        if (status > 0) {
            if (!unsaved && !ran_python) {
                declined = 1; /* as if nothing was overwritten, once restored */
                goto done;
            }
            /* The per-node kernel raises the error the per-node path would (or, where
               it covers what the step does not, computes the value) */
            if (g != NULL)
                tj_row_flush(p, g);
            if (tj_fallback(s, v) < 0)
                goto done;
        }
        unsaved |= s->destroys && s->n_saves == 0;
        for (i = 0; i < s->n_free; i++)
            tj_row_release(p, g, v, s->free_slots[i]);
    }
    if (g != NULL)
        tj_row_flush(p, g);
    result = PyList_New(p->n_outputs);
    if (result == NULL)
        goto done;
    for (i = 0; i < p->n_outputs; i++) {
        PyObject *o = v[p->outputs[i]];
        Py_INCREF(o);
        PyList_SET_ITEM(result, i, o);
    }
done:
    if (g != NULL) {
        tj_row_drop(g); /* (pending calls only when the call failed or declined) */
        tj_row_group_end(g);
    }
    if (result == NULL && n_saved)
        tj_restore(saved, saved_slots, n_saved, v);
    for (i = 0; i < n_saved; i++)
        Py_DECREF(saved[i]);
    PyMem_Free(saved);
    PyMem_Free(saved_slots);
    for (i = 0; i < p->n_slots; i++)
        tj_release(p, v, i);
    if (v != stack)
        PyMem_Free(v);
    for (i = 0; handed && i < n_args; i++) /* declined before the release above */
        Py_DECREF(args[i]);
    if (declined) {
        Py_RETURN_NONE;
    }
    return result;
}

typedef struct {
    PyObject_HEAD
    tj_program *p;
} tj_program_object;

static PyObject *tj_program_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "program(arguments): one sequence of values");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(PyTuple_GET_ITEM(args, 0), "program(arguments): "
                                                               "one sequence of values");
    if (seq == NULL)
        return NULL;
    PyObject *result = tj_execute(((tj_program_object *)self)->p, PySequence_Fast_ITEMS(seq),
                                  PySequence_Fast_GET_SIZE(seq), 0);
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------ loops */

/* a[t] along the first axis, as an array (a 0-d one for a vector). */
static PyObject *tj_row(PyArrayObject *a, npy_intp t)
{
    return tj_view(a, PyArray_NDIM(a) - 1, PyArray_DIMS(a) + 1, PyArray_STRIDES(a) + 1,
                   PyArray_BYTES(a) + t * PyArray_STRIDES(a)[0]);
}

/* Row t of a, through a per-argument cache of a loop: the cached view of a is moved to
   row t when nobody else holds it (a step that returned it, a carry, would: then a new
   view is made), which saves creating a view per argument per step. A new reference. */
static PyObject *tj_row_cached(PyArrayObject *a, npy_intp t, PyObject **cache,
                               PyArrayObject **source)
{
    PyObject *v = *cache;
    if (v != NULL && *source == a && Py_REFCNT(v) == 1 &&
        PyArray_STRIDES(a)[0] % PyArray_ITEMSIZE(a) == 0) { /* every row as aligned */
        ((PyArrayObject_fields *)v)->data = PyArray_BYTES(a) + t * PyArray_STRIDES(a)[0];
        Py_INCREF(v);
        return v;
    }
    PyObject *row = tj_row(a, t);
    if (row == NULL)
        return NULL;
    Py_XDECREF(v);
    *cache = row;
    *source = a;
    Py_INCREF(row);
    return row;
}

/* Copies value into a[t] (same shape, checked by the caller): one memcpy when both
   are contiguous of one dtype (a loop's buffers and its steps' new outputs are), else
   through a row view. */
static int tj_store_row(PyArrayObject *a, npy_intp t, PyArrayObject *value)
{
    if (PyArray_IS_C_CONTIGUOUS(a) && PyArray_IS_C_CONTIGUOUS(value) &&
        PyArray_EquivTypes(PyArray_DESCR(a), PyArray_DESCR(value))) {
        npy_intp bytes = PyArray_NBYTES(value);
        char *dest = PyArray_BYTES(a) + t * PyArray_STRIDES(a)[0];
        char *src = PyArray_BYTES(value);
        if (src + bytes <= dest || dest + bytes <= src) { /* (a step may return a row) */
            memcpy(dest, src, (size_t)bytes);
            return 0;
        }
    }
    PyObject *row = tj_row(a, t);
    if (row == NULL)
        return -1;
    int status = PyArray_CopyInto((PyArrayObject *)row, value);
    Py_DECREF(row);
    return status;
}

/* loop(n_steps, sequences, taps, carries, non_sequences, n_mit, n_nit): the loop of a
   scan whose step function is this program (see tensorjit/scan/op.py). Step t gets
   each sequence's row t, then for each (buffer, lag, taps) of `taps` the rows
   t + lag + tap, then the carries and the non-sequences. Its outputs are: n_mit rows
   stored into the buffers at t + lag, n_nit rows stacked into new arrays, and the next
   carries. Returns (stacked outputs, last carries), or None, having changed nothing
   but the buffers' rows from lag on, when a step is declined or an output changes
   shape (the caller's loop then runs and explains). */
static PyObject *tj_loop(PyObject *self, PyObject *args)
{
    const tj_program *p = ((tj_program_object *)self)->p;
    PyObject *seqs, *taps, *carries_in, *nonseqs, *nits = NULL, *carries = NULL, *out = NULL;
    PyObject *argv[TJ_MAXOPS], *rows[TJ_MAXOPS] = {0};
    PyArrayObject *row_sources[TJ_MAXOPS] = {0};
    Py_ssize_t n, n_seqs, n_taps, n_carries, n_nonseqs, n_args = 0, i, j, t;
    int n_mit, n_nit, declined = 0, stepped = 0;
    if (!PyArg_ParseTuple(args, "nO!O!O!O!ii", &n, &PyList_Type, &seqs, &PyList_Type, &taps,
                          &PyList_Type, &carries_in, &PyList_Type, &nonseqs, &n_mit, &n_nit))
        return NULL;
    n_seqs = PyList_GET_SIZE(seqs);
    n_taps = PyList_GET_SIZE(taps);
    n_carries = PyList_GET_SIZE(carries_in);
    n_nonseqs = PyList_GET_SIZE(nonseqs);
    Py_ssize_t n_tap_args = 0;
    for (i = 0; i < n_taps; i++) {
        PyObject *plan = PyList_GET_ITEM(taps, i);
        if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != 3 ||
            !PyArray_CheckExact(PyTuple_GET_ITEM(plan, 0)) ||
            !PyList_Check(PyTuple_GET_ITEM(plan, 2))) {
            PyErr_SetString(PyExc_TypeError, "taps: (buffer, lag, [taps]) tuples");
            return NULL;
        }
        n_tap_args += PyList_GET_SIZE(PyTuple_GET_ITEM(plan, 2));
    }
    for (i = 0; i < n_seqs; i++)
        if (!PyArray_CheckExact(PyList_GET_ITEM(seqs, i)) ||
            PyArray_NDIM((PyArrayObject *)PyList_GET_ITEM(seqs, i)) < 1)
            Py_RETURN_NONE;
    if (n_seqs + n_tap_args + n_carries + n_nonseqs > TJ_MAXOPS ||
        n_mit != n_taps || n_mit + n_nit + n_carries != p->n_outputs)
        Py_RETURN_NONE;
    nits = PyList_New(n_nit);
    carries = PyList_GetSlice(carries_in, 0, n_carries);
    if (nits == NULL || carries == NULL)
        goto done;
    for (t = 0; t < n && !declined; t++) {
        n_args = 0;
        for (i = 0; i < n_seqs; i++) {
            PyObject *row = tj_row_cached((PyArrayObject *)PyList_GET_ITEM(seqs, i), t,
                                          &rows[n_args], &row_sources[n_args]);
            if (row == NULL)
                goto done;
            argv[n_args++] = row;
        }
        for (i = 0; i < n_taps; i++) {
            PyObject *plan = PyList_GET_ITEM(taps, i), *offsets = PyTuple_GET_ITEM(plan, 2);
            Py_ssize_t lag = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 1));
            if (lag == -1 && PyErr_Occurred())
                goto done;
            for (j = 0; j < PyList_GET_SIZE(offsets); j++) {
                Py_ssize_t tap = PyLong_AsSsize_t(PyList_GET_ITEM(offsets, j));
                if (tap == -1 && PyErr_Occurred())
                    goto done;
                PyObject *row = tj_row_cached((PyArrayObject *)PyTuple_GET_ITEM(plan, 0),
                                              t + lag + tap, &rows[n_args],
                                              &row_sources[n_args]);
                if (row == NULL)
                    goto done;
                argv[n_args++] = row;
            }
        }
        for (i = 0; i < n_carries; i++) { /* moved out of the list: see tj_execute */
            argv[n_args++] = PyList_GET_ITEM(carries, i);
            Py_INCREF(Py_None);
            PyList_SET_ITEM(carries, i, Py_None);
        }
        for (i = 0; i < n_nonseqs; i++) {
            argv[n_args] = PyList_GET_ITEM(nonseqs, i);
            Py_INCREF(argv[n_args++]);
        }
        PyObject *results = tj_execute(p, argv, n_args, 1);
        n_args = 0;
        if (results == NULL)
            goto done;
        if (results == Py_None) {
            Py_DECREF(results);
            declined = 1;
            break;
        }
        stepped = 1;
        for (i = 0; i < n_mit && !declined; i++) {
            PyObject *plan = PyList_GET_ITEM(taps, i);
            PyArrayObject *buf = (PyArrayObject *)PyTuple_GET_ITEM(plan, 0);
            PyArrayObject *value = (PyArrayObject *)PyList_GET_ITEM(results, i);
            Py_ssize_t lag = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 1));
            if (!tj_same_shape(value, PyArray_NDIM(buf) - 1, PyArray_DIMS(buf) + 1))
                declined = 1;
            else if (tj_store_row(buf, t + lag, value) < 0) {
                Py_DECREF(results);
                goto done;
            }
        }
        for (i = 0; i < n_nit && !declined; i++) {
            PyArrayObject *value = (PyArrayObject *)PyList_GET_ITEM(results, n_mit + i);
            PyArrayObject *stacked = (PyArrayObject *)PyList_GET_ITEM(nits, i);
            if (stacked == NULL) {
                npy_intp dims[TJ_MAXDIM + 1];
                if (PyArray_NDIM(value) >= TJ_MAXDIM) {
                    declined = 1;
                    break;
                }
                dims[0] = n;
                memcpy(dims + 1, PyArray_DIMS(value), PyArray_NDIM(value) * sizeof(npy_intp));
                stacked = (PyArrayObject *)tj_empty(PyArray_NDIM(value) + 1, dims,
                                                    PyArray_TYPE(value));
                if (stacked == NULL) {
                    Py_DECREF(results);
                    goto done;
                }
                PyList_SET_ITEM(nits, i, (PyObject *)stacked);
            } else if (!tj_same_shape(value, PyArray_NDIM(stacked) - 1,
                                      PyArray_DIMS(stacked) + 1)) {
                declined = 1;
                break;
            }
            if (tj_store_row(stacked, t, value) < 0) {
                Py_DECREF(results);
                goto done;
            }
        }
        for (i = 0; i < n_carries && !declined; i++) {
            PyObject *value = PyList_GET_ITEM(results, n_mit + n_nit + i);
            Py_INCREF(value);
            PyList_SetItem(carries, i, value);
        }
        /* Rows already copied into the loop's buffers: their arrays serve the next step
           (held by the results list alone, they are the program's to reuse). */
        for (i = 0; i < n_mit + n_nit && !declined; i++) {
            PyObject *value = PyList_GET_ITEM(results, i);
            int slot = p->outputs[i];
            if (p->spare_ok[slot] && p->spare[slot] == NULL && tj_spare_fits(value)) {
                Py_INCREF(value);
                p->spare[slot] = value;
            }
        }
        Py_DECREF(results);
    }
    if (declined && p->n_python && stepped) {
        /* The caller's loop would start again at step 0, running the Python steps of
           the steps done here a second time (a Print's output, a random draw's). */
        PyErr_Format(PyExc_ValueError,
                     "scan step %zd: an output's shape differs from its rows' (those of "
                     "step 0 or of the initial value), or the step declined its values; the "
                     "loop is not started again in Python, since its Python steps already "
                     "ran",
                     t);
        goto done;
    }
    if (declined) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    for (i = 0; i < n_nit; i++)
        if (PyList_GET_ITEM(nits, i) == NULL) { /* no step ran: the caller makes them */
            Py_INCREF(Py_None);
            PyList_SET_ITEM(nits, i, Py_None);
        }
    out = PyTuple_Pack(2, nits, carries);
done:
    for (i = 0; i < n_args; i++)
        Py_DECREF(argv[i]);
    for (i = 0; i < TJ_MAXOPS; i++)
        Py_XDECREF(rows[i]);
    Py_XDECREF(nits);
    Py_XDECREF(carries);
    return out;
}

static void tj_program_dealloc(PyObject *self);

/* stream_thresholds() -> per step, the bytes from which its output streams (0: never). */
static PyObject *tj_stream_thresholds(PyObject *self, PyObject *args)
{
    (void)args;
    const tj_program *p = ((tj_program_object *)self)->p;
    PyObject *list = PyList_New(p->n_steps);
    for (int k = 0; list != NULL && k < p->n_steps; k++) {
        PyObject *bytes = PyLong_FromSize_t(p->steps[k].stream_min_bytes);
        if (bytes == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, k, bytes);
    }
    return list;
}

static PyMethodDef tj_program_methods[] = {
    {"loop", tj_loop, METH_VARARGS,
     "loop(n_steps, sequences, taps, carries, non_sequences, n_mit, n_nit)"},
    {"stream_thresholds", tj_stream_thresholds, METH_NOARGS,
     "stream_thresholds() -> per step, the bytes from which its output streams (0: never)"},
    {NULL, NULL, 0, NULL},
};

static PyObject *tj_runs_python(PyObject *self, void *closure)
{
    return PyLong_FromLong(((tj_program_object *)self)->p->n_python);
}

static PyObject *tj_takes_unfiltered(PyObject *self, void *closure)
{
    const tj_program *p = ((tj_program_object *)self)->p;
    for (int i = 0; i < p->n_inputs; i++)
        if (p->inputs[i].typenum < 0)
            Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

static PyGetSetDef tj_program_getset[] = {
    {"runs_python", tj_runs_python, NULL,
     "how many steps call Python (a node's own kernel): calls that update shared values "
     "must then run one at a time",
     NULL},
    {"takes_unfiltered", tj_takes_unfiltered, NULL,
     "whether the program checks every argument itself (false when an input is not a "
     "tensor: such values must come filtered by their type)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject tj_program_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tj_program.Program",
    .tp_basicsize = sizeof(tj_program_object),
    .tp_dealloc = tj_program_dealloc,
    .tp_call = tj_program_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled graph: program(arguments) -> list of outputs, or None",
    .tp_methods = tj_program_methods,
    .tp_getset = tj_program_getset,
};

/* ------------------------------------------------------------------ building */

static void tj_program_free(tj_program *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->n_shared; i++)
        Py_XDECREF(p->cells ? p->cells[i] : NULL);
    for (int i = 0; i < p->n_consts; i++)
        Py_XDECREF(p->consts ? p->consts[i] : NULL);
    if (p->steps)
        for (int k = 0; k < p->n_steps; k++) {
            tj_step *s = &p->steps[k];
            PyMem_Free(s->free_slots);
            Py_XDECREF(s->thunk);
            Py_XDECREF(s->fallback);
            PyMem_Free(s->node_inputs);
            PyMem_Free(s->outs);
            PyMem_Free(s->out_types);
            PyMem_Free(s->out_ndims);
        }
    PyMem_Free(p->row_calls_spare);
    PyMem_Free(p->inputs);
    PyMem_Free(p->shared);
    PyMem_Free(p->cells);
    PyMem_Free(p->const_slots);
    PyMem_Free(p->consts);
    PyMem_Free(p->steps);
    PyMem_Free(p->outputs);
    PyMem_Free(p->checks);
    PyMem_Free(p->check_steps);
    if (p->spare)
        for (int i = 0; i < p->n_slots; i++)
            Py_XDECREF(p->spare[i]);
    PyMem_Free(p->spare);
    PyMem_Free(p->spare_ok);
    Py_XDECREF(p->notes);
    Py_XDECREF(p->keep);
    PyMem_Free(p);
}

static void tj_program_dealloc(PyObject *self)
{
    tj_program_free(((tj_program_object *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

/* Reads up to `cap` ints from a sequence of Python ints into out; returns the count. */
static int tj_ints(PyObject *obj, int *out, int cap, const char *what)
{
    PyObject *seq = PySequence_Fast(obj, what);
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > cap) {
        PyErr_Format(PyExc_ValueError, "%s: %zd entries, at most %d", what, n, cap);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (int)x;
    }
    Py_DECREF(seq);
    return (int)n;
}

static int tj_value_specs(PyObject *list, tj_value_spec **out, int *count)
{
    Py_ssize_t n = PyList_Size(list);
    if (n < 0)
        return -1;
    *count = (int)n;
    *out = PyMem_Calloc(n ? n : 1, sizeof(tj_value_spec));
    if (*out == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        tj_value_spec *spec = &(*out)[i];
        int dims[TJ_MAXDIM];
        PyObject *dims_obj;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "iiO", &spec->slot, &spec->typenum,
                              &dims_obj))
            return -1;
        spec->ndim = tj_ints(dims_obj, dims, TJ_MAXDIM, "static shape");
        if (spec->ndim < 0)
            return -1;
        for (int d = 0; d < spec->ndim; d++)
            spec->dims[d] = dims[d];
    }
    return 0;
}

/* A step's attribute `name` (steps.py's Step): a new reference, or NULL with an
   exception set. */
static PyObject *tj_field(PyObject *step, const char *name)
{
    return PyObject_GetAttrString(step, name);
}

/* Integer attribute `name` into *out; 0, or -1 with an exception set. */
static int tj_int_field(PyObject *step, const char *name, int *out)
{
    PyObject *o = tj_field(step, name);
    if (o == NULL)
        return -1;
    long value = PyLong_AsLong(o);
    Py_DECREF(o);
    if (value == -1 && PyErr_Occurred())
        return -1;
    *out = (int)value;
    return 0;
}

/* Integer-list attribute `name` into out (at most cap); the count, or -1. */
static int tj_ints_field(PyObject *step, const char *name, int *out, int cap)
{
    PyObject *o = tj_field(step, name);
    if (o == NULL)
        return -1;
    int n = tj_ints(o, out, cap, name);
    Py_DECREF(o);
    return n;
}

/* A Python, native or two-output reduce step's [(slot, typenum, ndim)] outputs; 0, or -1
   with an exception set. */
static int tj_parse_outs(PyObject *outs, tj_step *s, int n_slots)
{
    if (!PyList_Check(outs)) {
        PyErr_SetString(PyExc_TypeError, "a step's outs must be a list");
        return -1;
    }
    s->n_outs = (int)PyList_GET_SIZE(outs);
    if (s->n_outs == 0)
        return 0;
    if (s->n_outs > TJ_MAXOPS) {
        PyErr_Format(PyExc_ValueError, "a step with %d outputs, at most %d", s->n_outs,
                     TJ_MAXOPS);
        return -1;
    }
    s->outs = PyMem_Calloc(s->n_outs, sizeof(int));
    s->out_types = PyMem_Calloc(s->n_outs, sizeof(int));
    s->out_ndims = PyMem_Calloc(s->n_outs, sizeof(int));
    if (s->outs == NULL || s->out_types == NULL || s->out_ndims == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int j = 0; j < s->n_outs; j++)
        if (!PyArg_ParseTuple(PyList_GET_ITEM(outs, j), "iii", &s->outs[j], &s->out_types[j],
                              &s->out_ndims[j]) ||
            s->outs[j] < 0 || s->outs[j] >= n_slots) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a step's output must name a slot");
            return -1;
        }
    return 0;
}

/* A C step's (fallback, [slots of the node's inputs]); 0, or -1 with an exception set. */
static int tj_parse_fallback(PyObject *fallback, tj_step *s, int n_slots)
{
    PyObject *run, *slots;
    if (!PyArg_ParseTuple(fallback, "OO!", &run, &PyList_Type, &slots))
        return -1;
    s->n_node_inputs = (int)PyList_GET_SIZE(slots);
    s->node_inputs = PyMem_Calloc(s->n_node_inputs ? s->n_node_inputs : 1, sizeof(int));
    if (s->node_inputs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (tj_ints(slots, s->node_inputs, s->n_node_inputs, "node inputs") != s->n_node_inputs)
        return -1;
    for (int j = 0; j < s->n_node_inputs; j++)
        if (s->node_inputs[j] < 0 || s->node_inputs[j] >= n_slots) {
            PyErr_SetString(PyExc_ValueError, "a node input must name a slot");
            return -1;
        }
    Py_INCREF(run);
    s->fallback = run;
    return 0;
}

/* The object attributes of a step (its thunk, outs, kernel addresses, fallback). */
static int tj_parse_objects(PyObject *obj, tj_step *s, int n_slots)
{
    PyObject *thunk = NULL, *outs = NULL, *fns = NULL, *fallback = NULL;
    int status = -1;
    if ((thunk = tj_field(obj, "thunk")) == NULL || (outs = tj_field(obj, "outs")) == NULL ||
        (fns = tj_field(obj, "fns")) == NULL || (fallback = tj_field(obj, "fallback")) == NULL)
        goto done;
    if ((s->kind == TJ_PYTHON) != (thunk != Py_None) ||
        (s->kind == TJ_PYTHON && !PyCallable_Check(thunk))) {
        PyErr_SetString(PyExc_ValueError, "Python steps, and only they, have a thunk");
        goto done;
    }
    if (tj_parse_outs(outs, s, n_slots) < 0)
        goto done;
    if ((s->kind == TJ_PYTHON || s->kind == TJ_NATIVE) && s->n_outs < 1) {
        PyErr_SetString(PyExc_ValueError, "a Python or native step names its outputs");
        goto done;
    }
    if (s->kind == TJ_ELEMWISE && s->n_outs != 0 &&
        (s->n_outs < 2 || s->outs[0] != s->out || s->target >= 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "an elementwise step names no outputs, or several (its own first, "
                        "none in place through target)");
        goto done;
    }
    if (s->kind == TJ_REDUCE && s->n_outs != 0 &&
        (s->n_outs != 2 || s->outs[0] != s->out || s->out_types[1] != s->typenum)) {
        PyErr_SetString(PyExc_ValueError,
                        "a reduction names no outputs, or two of one type (its own first)");
        goto done;
    }
    if (fallback != Py_None && tj_parse_fallback(fallback, s, n_slots) < 0)
        goto done;
    if (!PyList_Check(fns) || PyList_GET_SIZE(fns) > 4) {
        PyErr_SetString(PyExc_ValueError, "at most 4 kernel addresses per step");
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fns); i++) {
        s->fn[i] = PyLong_AsVoidPtr(PyList_GET_ITEM(fns, i));
        if (s->fn[i] == NULL && PyErr_Occurred())
            goto done;
    }
    if (s->kind == TJ_NATIVE && s->fn[0] == NULL) {
        PyErr_SetString(PyExc_ValueError, "a native step needs its function's address");
        goto done;
    }
    if (thunk != Py_None) {
        Py_INCREF(thunk);
        s->thunk = thunk;
    }
    status = 0;
done:
    Py_XDECREF(thunk);
    Py_XDECREF(outs);
    Py_XDECREF(fns);
    Py_XDECREF(fallback);
    return status;
}

/* A step from its Step object (steps.py), read by field name. */
static int tj_parse_step(PyObject *obj, tj_step *s, int n_slots)
{
    int bits[TJ_MAXOPS], flags[TJ_MAXOPS], static_dims[TJ_MAXDIM], n;
    if (tj_int_field(obj, "kind", &s->kind) < 0 || tj_int_field(obj, "target", &s->target) < 0 ||
        tj_int_field(obj, "out", &s->out) < 0 || tj_int_field(obj, "typenum", &s->typenum) < 0 ||
        tj_int_field(obj, "ndim", &s->ndim) < 0 || tj_int_field(obj, "n_kept", &s->n_kept) < 0 ||
        tj_int_field(obj, "needs_elements", &s->needs_elements) < 0 ||
        tj_int_field(obj, "destroys", &s->destroys) < 0)
        return -1;
    if (s->kind < 1 || s->kind > TJ_N_KINDS) {
        PyErr_Format(PyExc_ValueError, "unknown step kind %d", s->kind);
        return -1;
    }
    if (tj_parse_objects(obj, s, n_slots) < 0)
        return -1;
    if ((s->n_ops = tj_ints_field(obj, "ops", s->ops, TJ_MAXOPS)) < 0)
        return -1;
    if ((n = tj_ints_field(obj, "bcast", bits, TJ_MAXOPS)) < 0)
        return -1;
    for (int j = 0; j < n; j++)
        s->bcast[j] = (uint32_t)bits[j];
    if ((n = tj_ints_field(obj, "full", flags, TJ_MAXOPS)) < 0)
        return -1;
    for (int j = 0; j < n; j++)
        s->full[j] = (char)flags[j];
    if ((n = tj_ints_field(obj, "dims", static_dims, TJ_MAXDIM)) < 0)
        return -1;
    for (int d = 0; d < n; d++)
        s->dims[d] = static_dims[d];
    if ((s->n_axes = tj_ints_field(obj, "axes", s->axes, TJ_MAXDIM)) < 0)
        return -1;
    if ((s->n_dropped = tj_ints_field(obj, "dropped", s->dropped, TJ_MAXDIM)) < 0)
        return -1;
    if ((s->n_targets = tj_ints_field(obj, "targets", s->targets, TJ_MAXOPS)) < 0)
        return -1;
    if (s->n_targets != 0 && (s->kind != TJ_ELEMWISE || s->n_targets != s->n_outs)) {
        PyErr_SetString(PyExc_ValueError,
                        "in-place targets are per output of an elementwise step");
        return -1;
    }
    for (int j = 0; j < s->n_targets; j++)
        if (s->targets[j] < -1 || s->targets[j] >= s->n_ops) {
            PyErr_SetString(PyExc_ValueError, "an in-place target is not an operand");
            return -1;
        }
    PyObject *free_slots = tj_field(obj, "free");
    if (free_slots == NULL)
        return -1;
    Py_ssize_t n_free = PySequence_Size(free_slots);
    if (n_free < 0) {
        Py_DECREF(free_slots);
        return -1;
    }
    s->free_slots = PyMem_Calloc(n_free ? n_free : 1, sizeof(int));
    if (s->free_slots == NULL) {
        Py_DECREF(free_slots);
        PyErr_NoMemory();
        return -1;
    }
    s->n_free = tj_ints(free_slots, s->free_slots, (int)n_free, "freed slots");
    Py_DECREF(free_slots);
    return s->n_free < 0 ? -1 : 0;
}

/* The prechecks [(step, [(slot, stand-in slot)])] as copies of their steps reading the
   stand-ins; 0, or -1 with an exception set. */
static int tj_parse_prechecks(PyObject *prechecks, tj_program *p)
{
    p->n_prechecks = (int)PyList_GET_SIZE(prechecks);
    p->checks = PyMem_Calloc(p->n_prechecks ? p->n_prechecks : 1, sizeof(tj_step));
    p->check_steps = PyMem_Calloc(p->n_prechecks ? p->n_prechecks : 1, sizeof(int));
    if (p->checks == NULL || p->check_steps == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < p->n_prechecks; i++) {
        PyObject *stand_ins;
        int k;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(prechecks, i), "iO!", &k, &PyList_Type, &stand_ins))
            return -1;
        if (k <= p->first_commit || k >= p->n_steps) {
            PyErr_SetString(PyExc_ValueError, "a precheck must name a step after the first commit");
            return -1;
        }
        tj_step *check = &p->checks[i];
        *check = p->steps[k]; /* shares the step's pointers; only the operands differ */
        p->check_steps[i] = k;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(stand_ins); j++) {
            int slot, stand_in;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(stand_ins, j), "ii", &slot, &stand_in))
                return -1;
            if (stand_in < 0 || stand_in >= p->n_slots) {
                PyErr_SetString(PyExc_ValueError, "a stand-in must name a slot");
                return -1;
            }
            for (int op = 0; op < check->n_ops; op++)
                if (check->ops[op] == slot)
                    check->ops[op] = stand_in;
        }
    }
    return 0;
}

/* make(n_slots, inputs, shared, cells, const_slots, consts, steps, outputs, notes, keep,
   stream_min_bytes, (first_commit, [(step, [(slot, stand-in slot)])] prechecks,
   [(step, slot) snapshots]), (row_block_bytes, row_group_min_bytes))
   inputs/shared: lists of (slot, typenum, static shape with -1 for unknown); steps: see
   program.py. */
static PyObject *tj_make(PyObject *self, PyObject *args)
{
    PyObject *inputs, *shared, *cells, *const_slots, *consts, *steps, *outputs, *notes, *keep;
    tj_program *p = PyMem_Calloc(1, sizeof(tj_program));
    if (p == NULL)
        return PyErr_NoMemory();
    unsigned long long stream_min_bytes, row_block_bytes, row_group_min_bytes;
    PyObject *prechecks, *snapshots;
    if (!PyArg_ParseTuple(args, "iO!O!O!O!O!O!O!O!OK(iO!O!)(KK)", &p->n_slots, &PyList_Type,
                          &inputs, &PyList_Type, &shared, &PyList_Type, &cells, &PyList_Type,
                          &const_slots, &PyList_Type, &consts, &PyList_Type, &steps,
                          &PyList_Type, &outputs, &PyTuple_Type, &notes, &keep,
                          &stream_min_bytes, &p->first_commit, &PyList_Type, &prechecks,
                          &PyList_Type, &snapshots, &row_block_bytes, &row_group_min_bytes))
        goto error;
    p->row_block_bytes = (size_t)row_block_bytes;
    p->row_group_min_bytes = (size_t)row_group_min_bytes;
    Py_INCREF(notes);
    p->notes = notes;
    Py_INCREF(keep);
    p->keep = keep;
    if (tj_value_specs(inputs, &p->inputs, &p->n_inputs) < 0 ||
        tj_value_specs(shared, &p->shared, &p->n_shared) < 0)
        goto error;
    if (PyList_GET_SIZE(cells) != p->n_shared) {
        PyErr_SetString(PyExc_ValueError, "one cell per shared input");
        goto error;
    }
    p->cells = PyMem_Calloc(p->n_shared ? p->n_shared : 1, sizeof(PyObject *));
    if (p->cells == NULL)
        goto error;
    for (int i = 0; i < p->n_shared; i++) {
        PyObject *cell = PyList_GET_ITEM(cells, i);
        if (!PyList_Check(cell)) {
            PyErr_SetString(PyExc_TypeError, "a shared variable's cell must be a list");
            goto error;
        }
        Py_INCREF(cell);
        p->cells[i] = cell;
    }
    p->n_consts = (int)PyList_GET_SIZE(consts);
    p->const_slots = PyMem_Calloc(p->n_consts ? p->n_consts : 1, sizeof(int));
    p->consts = PyMem_Calloc(p->n_consts ? p->n_consts : 1, sizeof(PyObject *));
    if (p->const_slots == NULL || p->consts == NULL)
        goto error;
    if (tj_ints(const_slots, p->const_slots, p->n_consts, "constant slots") != p->n_consts)
        goto error;
    for (int i = 0; i < p->n_consts; i++) {
        p->consts[i] = PyList_GET_ITEM(consts, i);
        Py_INCREF(p->consts[i]);
    }
    p->n_steps = (int)PyList_GET_SIZE(steps);
    p->steps = PyMem_Calloc(p->n_steps ? p->n_steps : 1, sizeof(tj_step));
    if (p->steps == NULL)
        goto error;
    for (int k = 0; k < p->n_steps; k++) {
        if (tj_parse_step(PyList_GET_ITEM(steps, k), &p->steps[k], p->n_slots) < 0)
            goto error;
        p->n_python += p->steps[k].kind == TJ_PYTHON;
        p->steps[k].n_saves = 0;
    }
    if (tj_parse_prechecks(prechecks, p) < 0)
        goto error;
    p->n_snapshots = (int)PyList_GET_SIZE(snapshots);
    for (int i = 0; i < p->n_snapshots; i++) {
        int k, slot;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(snapshots, i), "ii", &k, &slot))
            goto error;
        if (k < 0 || k >= p->n_steps || slot < 0 || slot >= p->n_slots ||
            p->steps[k].n_saves == TJ_MAXOPS) {
            PyErr_SetString(PyExc_ValueError, "a snapshot must name a step and a slot");
            goto error;
        }
        p->steps[k].saves[p->steps[k].n_saves++] = slot;
    }
    p->n_outputs = (int)PyList_GET_SIZE(outputs);
    p->outputs = PyMem_Calloc(p->n_outputs ? p->n_outputs : 1, sizeof(int));
    if (p->outputs == NULL)
        goto error;
    if (tj_ints(outputs, p->outputs, p->n_outputs, "output slots") != p->n_outputs)
        goto error;
    for (int k = 0; k < p->n_steps; k++)
        for (int i = 0; i < p->n_outputs; i++)
            if (p->steps[k].out == p->outputs[i])
                p->steps[k].stream_min_bytes = (size_t)stream_min_bytes;
    p->spare = PyMem_Calloc(p->n_slots ? p->n_slots : 1, sizeof(PyObject *));
    p->spare_ok = PyMem_Calloc(p->n_slots ? p->n_slots : 1, 1);
    if (p->spare == NULL || p->spare_ok == NULL)
        goto error;
    for (int k = 0; k < p->n_steps; k++) {
        tj_step *s = &p->steps[k];
        int second = s->kind == TJ_PENALISED ? (s->n_axes == 1 ? s->axes[0] : -1) : 0;
        if (s->out < 0 || s->out >= p->n_slots || second < 0 || second >= p->n_slots) {
            PyErr_SetString(PyExc_ValueError, "a step's output slot is out of range");
            goto error;
        }
        if (s->kind != TJ_PYTHON && s->kind != TJ_NATIVE) /* their kernels' own outputs */
            p->spare_ok[s->out] = 1;
        if (s->kind == TJ_ELEMWISE) /* (its other outputs: tj_elemwise takes their spares) */
            for (int j = 1; j < s->n_outs; j++)
                p->spare_ok[s->outs[j]] = 1;
        s->spare = &p->spare[s->out];
    }
    tj_program_object *program = PyObject_New(tj_program_object, &tj_program_type);
    if (program == NULL)
        goto error;
    program->p = p;
    return (PyObject *)program;
error:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "malformed program");
    tj_program_free(p);
    return NULL;
}

static PyMethodDef tj_methods[] = {
    {"make", tj_make, METH_VARARGS, "make(...) -> program: see program.py"},
    {"pool_info", tj_pool_info, METH_NOARGS, "pool_info() -> (blocks, bytes) kept for reuse"},
    {"release_pool", tj_release_pool, METH_NOARGS, "release_pool(): free the kept blocks"},
    {"set_parallel", tj_set_parallel, METH_VARARGS,
     "set_parallel(address): the worker pool's entry, for row blocks (0: none)"},
    {"row_block_info", tj_row_block_info, METH_NOARGS,
     "row_block_info() -> (groups run in blocks of rows, their kernel calls)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef tj_module = {PyModuleDef_HEAD_INIT, "tj_program", NULL, -1,
                                       tj_methods};

PyMODINIT_FUNC PyInit_tj_program(void)
{
    import_array();
    if (PyType_Ready(&tj_program_type) < 0)
        return NULL;
    tj_pool_handler = PyCapsule_New(&tj_pool_handler_struct, "mem_handler", NULL);
    if (tj_pool_handler == NULL)
        return NULL;
    return PyModule_Create(&tj_module);
}
