/* Row-blocked runs of elementwise and reduction steps, included by program.c.
 *
 * A layer norm is a reduction over each row (its sum and squared deviations: Moments),
 * then an elementwise step over the rows: kernels that each read all of x. When x is
 * larger than the cache, each kernel reads it from memory again. Here consecutive
 * elementwise and reduction steps over the same leading axis are not run one after the
 * other over the whole arrays: their kernel calls are recorded and, when a step that
 * can not join comes (or the program ends), run block of rows by block of rows, every
 * call on one block before the next block, so the block read by the first kernel is
 * still in the cache for the others.
 *
 * That is only correct when each call's row r reads and writes nothing that another
 * call of the group writes in a row other than r. It is checked on the memory itself,
 * not on the graph: every array a call reads or writes is a span (its bytes, its step
 * from one row to the next), and a call joins the group only if each span it shares
 * memory with in the group (one of them written) is "aligned": the same step, and row r
 * of one overlaps only row r of the other. Otherwise the group runs first. So a view
 * (a column slice, a new broadcastable axis), an in-place update of a value the group
 * reads, or a value read across rows (a transposed one, one broadcast over the rows)
 * is handled by the same rule. The kernels are the ordinary ones, called with a shorter
 * leading axis and pointers moved by whole rows.
 *
 * Values that die while calls are pending stay alive (held) until the group runs: their
 * memory could otherwise be handed to a later step's output.
 *
 * With more than one thread the blocks are shared out, a contiguous range of blocks per
 * thread of the C backend's pool (tj_parallel, set by set_parallel): each thread runs
 * every call on its blocks in order, which the rule above makes independent of the
 * other threads' rows. A kernel called there finds the pool busy and runs its own parts
 * itself, with the same cuts: the values do not depend on which thread ran a block.
 */
typedef void (*tj_task_fn)(void *ctx, int64_t lo, int64_t hi, int part);
/* the pool's tj_pool_parallel (build/thread_pool.c), or NULL: blocks on this thread */
static int (*tj_parallel)(tj_task_fn, void *, int64_t, int64_t, int64_t) = NULL;
#define TJ_ROW_CALLS 16
#define TJ_ROW_HELD 64

enum { TJ_FORM_CONTIG = 0, TJ_FORM_STRIDED = 1, TJ_FORM_REDUCE = 2 };

typedef struct {
    char *lo;          /* row 0's lowest byte (the lowest of all: step >= 0) */
    int64_t row_span;  /* bytes of one row's elements, from lo */
    int64_t step;      /* bytes from row r to row r + 1; 0: the same row for every r */
    int written;
} tj_span;

typedef struct tj_row_call_s {
    void *fn, *stream_fn;           /* stream_fn: the streaming entry, when it may be used */
    int form, nd, n_ptrs, n_spans;
    int64_t shape[TJ_MAXDIM];
    char *ptrs[TJ_MAXOPS + 1];
    int64_t steps[TJ_MAXOPS + 1];   /* per pointer: bytes per row (0: broadcast) */
    int64_t strides[(TJ_MAXOPS + 1) * TJ_MAXDIM];
    char *out;                      /* reduce: the output, and its bytes per row */
    int64_t out_step;
    int64_t row_elems;              /* contiguous form: elements per row */
    tj_span spans[TJ_MAXOPS + 2];   /* operands, then the outputs */
} tj_row_call;

/* One run of a program's group (on tj_execute's stack); its calls' memory (about 190
   KB) is taken when the first call is recorded, from the program when it kept some. */
typedef struct {
    tj_program *program;
    size_t block_bytes;             /* the cache a block's rows may fill (> 0) */
    int n_calls, n_held;
    int64_t rows;
    size_t bytes;                   /* bytes the pending calls touch */
    tj_row_call *calls;             /* TJ_ROW_CALLS, or NULL before the first */
    int held_slots[TJ_ROW_HELD];
    PyObject *held[TJ_ROW_HELD];
} tj_row_group;

/* Groups run by this process, for tests: how many ran in blocks, and how many calls. */
static long long tj_row_groups_blocked = 0, tj_row_calls_blocked = 0;

/* The span of array a when the call's leading axis (length rows) advances `step` bytes
   in it per row (0 when a is broadcast along it). */
static tj_span tj_span_of(PyArrayObject *a, int64_t rows, int64_t step, int written)
{
    char *lo, *hi;
    tj_extent(a, &lo, &hi);
    tj_span sp = {lo, (int64_t)(hi - lo), step, written};
    if (step > 0)
        sp.row_span -= (rows - 1) * step;
    return sp;
}

static int tj_spans_overlap(const tj_span *a, int64_t rows_a, const tj_span *b, int64_t rows_b)
{
    char *ahi = a->lo + a->row_span + (a->step ? (rows_a - 1) * a->step : 0);
    char *bhi = b->lo + b->row_span + (b->step ? (rows_b - 1) * b->step : 0);
    return a->row_span > 0 && b->row_span > 0 && a->lo < bhi && b->lo < ahi;
}

/* Row r of a overlaps only row r of b (and rows are whole: one row's bytes fit in a
   step, so the neighbours' rows can not reach it). */
static int tj_spans_aligned(const tj_span *a, const tj_span *b)
{
    return a->step == b->step && a->step > 0 && a->row_span <= a->step &&
           b->row_span <= b->step && b->lo + b->row_span <= a->lo + a->step &&
           a->lo + a->row_span <= b->lo + b->step;
}

/* Whether call c may run block by block after the pending calls. */
static int tj_row_fits(const tj_row_group *g, const tj_row_call *c)
{
    for (int k = 0; k < g->n_calls; k++) {
        const tj_row_call *q = &g->calls[k];
        for (int i = 0; i < c->n_spans; i++)
            for (int j = 0; j < q->n_spans; j++) {
                const tj_span *a = &c->spans[i], *b = &q->spans[j];
                if ((a->written || b->written) && tj_spans_overlap(a, g->rows, b, g->rows) &&
                    !tj_spans_aligned(a, b))
                    return 0;
            }
    }
    return 1;
}

static void tj_row_call_block(const tj_row_call *c, void *fn, int64_t r0, int64_t n)
{
    char *ptrs[TJ_MAXOPS + 1];
    int64_t shape[TJ_MAXDIM];
    for (int j = 0; j < c->n_ptrs; j++)
        ptrs[j] = c->ptrs[j] + r0 * c->steps[j];
    if (c->form == TJ_FORM_CONTIG) {
        ((tj_contig_fn)fn)(n * c->row_elems, ptrs);
        return;
    }
    memcpy(shape, c->shape, sizeof(int64_t) * c->nd);
    shape[0] = n;
    if (c->form == TJ_FORM_STRIDED)
        ((tj_strided_fn)fn)(shape, ptrs, c->strides);
    else
        ((tj_reduce_fn)fn)(shape, ptrs, c->out + r0 * c->out_step, c->strides);
}

/* Bytes one block row takes in the cache: every distinct span read or written, once. */
static int64_t tj_row_bytes(const tj_row_group *g)
{
    int64_t bytes = 0;
    for (int k = 0; k < g->n_calls; k++)
        for (int i = 0; i < g->calls[k].n_spans; i++) {
            const tj_span *a = &g->calls[k].spans[i];
            int seen = a->step == 0;
            for (int kk = 0; kk <= k && !seen; kk++)
                for (int ii = 0; ii < (kk == k ? i : g->calls[kk].n_spans); ii++) {
                    const tj_span *b = &g->calls[kk].spans[ii];
                    if (b->lo == a->lo && b->step == a->step) {
                        seen = 1;
                        break;
                    }
                }
            if (!seen)
                bytes += a->row_span;
        }
    return bytes > 0 ? bytes : 1;
}

/* Whether call k streams its output: it may (tj_streams), and no later call of the
   group reads or writes that memory (it would find it gone from the cache). */
static int tj_row_streams(const tj_row_group *g, int k)
{
    const tj_row_call *c = &g->calls[k];
    if (c->stream_fn == NULL)
        return 0;
    for (int i = 0; i < c->n_spans; i++) {
        if (!c->spans[i].written)
            continue;
        for (int kk = k + 1; kk < g->n_calls; kk++)
            for (int j = 0; j < g->calls[kk].n_spans; j++)
                if (tj_spans_overlap(&c->spans[i], g->rows, &g->calls[kk].spans[j], g->rows))
                    return 0;
    }
    return 1;
}

/* Blocks [lo, hi) of a flush: every call on one block, then the next block. */
typedef struct {
    const tj_row_group *g;
    int64_t block;
    void *fns[TJ_ROW_CALLS];
} tj_row_blocks;

/* The pool cuts eighths of blocks at block boundaries: a sleeping worker is woken for
   parts of 8 grains or more, and a block is well worth a wake-up (it fills half an L2). */
#define TJ_BLOCK_GRAINS 8

static void tj_row_blocks_part(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const tj_row_blocks *job = ctx;
    const tj_row_group *g = job->g;
    for (int64_t b = lo / TJ_BLOCK_GRAINS; b < hi / TJ_BLOCK_GRAINS; b++) {
        int64_t r0 = b * job->block, n = g->rows - r0 < job->block ? g->rows - r0 : job->block;
        for (int k = 0; k < g->n_calls; k++)
            tj_row_call_block(&g->calls[k], job->fns[k], r0, n);
    }
}

/* Runs the pending calls (in blocks of rows when there are several and the rows do not
   fit the cache at once), then lets the held values go. */
static void tj_row_flush(const tj_program *p, tj_row_group *g)
{
    if (g->n_calls > 0) {
        int64_t per_row = tj_row_bytes(g), rows = g->rows;
        /* whole multiples of 64 rows: a block then starts on a cache line wherever the
           first row does (the contiguous streaming entry stores from its first element,
           which tj_streams found aligned) */
        int64_t block = ((int64_t)g->block_bytes / per_row + 63) / 64 * 64;
        if (block < 64)
            block = 64;
        if (g->n_calls == 1 || block >= rows)
            block = rows;
        else {
            tj_row_groups_blocked++;
            tj_row_calls_blocked += g->n_calls;
        }
        tj_row_blocks job = {g, block, {NULL}};
        for (int k = 0; k < g->n_calls; k++)
            job.fns[k] = tj_row_streams(g, k) ? g->calls[k].stream_fn : g->calls[k].fn;
        int64_t n_blocks = (rows + block - 1) / block;
        PyThreadState *saved = g->bytes > TJ_NOGIL_SIZE ? PyEval_SaveThread() : NULL;
        int64_t grains = n_blocks * TJ_BLOCK_GRAINS;
        int (*parallel)(tj_task_fn, void *, int64_t, int64_t, int64_t) = tj_parallel;
        if (parallel != NULL && n_blocks >= 2)
            parallel(tj_row_blocks_part, &job, grains, 1, TJ_BLOCK_GRAINS);
        else
            tj_row_blocks_part(&job, 0, grains, 0);
        if (saved != NULL)
            PyEval_RestoreThread(saved);
    }
    g->n_calls = 0;
    g->bytes = 0;
    for (int i = 0; i < g->n_held; i++)
        tj_let_go(p, g->held_slots[i], g->held[i]);
    g->n_held = 0;
}

/* Forgets the pending calls (the call failed) and lets the held values go. */
static void tj_row_drop(tj_row_group *g)
{
    g->n_calls = 0;
    for (int i = 0; i < g->n_held; i++)
        Py_DECREF(g->held[i]);
    g->n_held = 0;
}

/* Empties a slot; while calls are pending its value is held until they ran. */
static void tj_row_release(const tj_program *p, tj_row_group *g, PyObject **v, int slot)
{
    if (g == NULL || g->n_calls == 0 || v[slot] == NULL) {
        tj_release(p, v, slot);
        return;
    }
    if (g->n_held == TJ_ROW_HELD)
        tj_row_flush(p, g);
    if (g->n_calls == 0) {
        tj_release(p, v, slot);
        return;
    }
    g->held[g->n_held] = v[slot];
    g->held_slots[g->n_held++] = slot;
    v[slot] = NULL;
}

/* Takes call c (leading length rows, touching `bytes`) into the group: 1 when it was
   recorded, 0 when the caller runs it now (after the group, which ran first if c could
   not follow it; c NULL: a call that can never join, the group runs first). */
static int tj_row_record(const tj_program *p, tj_row_group *g, const tj_row_call *c,
                         int64_t rows, size_t bytes)
{
    if (g == NULL)
        return 0;
    if (g->n_calls > 0 && (c == NULL || rows != g->rows || g->n_calls == TJ_ROW_CALLS ||
                           !tj_row_fits(g, c)))
        tj_row_flush(p, g);
    /* a group starts with a call touching at least row_group_min_bytes (less stays in
       the cache without help); later calls of any size join */
    if (c == NULL || rows < 2 || (g->n_calls == 0 && bytes < p->row_group_min_bytes))
        return 0;
    if (g->calls == NULL) {
        g->calls = g->program->row_calls_spare;
        g->program->row_calls_spare = NULL;
        if (g->calls == NULL)
            g->calls = PyMem_Malloc(TJ_ROW_CALLS * sizeof(tj_row_call));
        if (g->calls == NULL) {
            PyErr_Clear(); /* (no memory for a group: the steps run one by one) */
            return 0;
        }
    }
    g->rows = rows;
    g->calls[g->n_calls++] = *c;
    g->bytes += bytes;
    return 1;
}

/* Records an elementwise step's kernel call (operands a; its n_out outputs outs, the
   kernel's pointers after the operands, except the output of a step working in place
   through s->target, which is that operand): 1 recorded, 0 the caller runs it now. */
static int tj_row_record_elemwise(const tj_program *p, tj_row_group *g, const tj_step *s,
                                  PyArrayObject **a, PyArrayObject **outs, int n_out,
                                  int fast, char **ptrs, const int64_t *shape,
                                  const int64_t *strides, int streams)
{
    int n = s->n_ops, nd = s->ndim, n_all = s->target < 0 ? n + n_out : n;
    PyArrayObject *out = outs[0];
    if (nd < 1)
        return 0;
    /* (on this stack: the flush in tj_row_record may release the GIL or run Python code
       in a finaliser, and with it another run of a program) */
    tj_row_call c;
    int64_t rows = shape[0];
    size_t bytes = 0;
    c.fn = fast ? s->fn[0] : s->fn[1];
    c.stream_fn = streams ? (fast ? s->fn[2] : s->fn[3]) : NULL;
    c.form = fast ? TJ_FORM_CONTIG : TJ_FORM_STRIDED;
    c.nd = nd;
    c.n_ptrs = c.n_spans = n_all;
    c.row_elems = rows > 0 ? PyArray_SIZE(out) / rows : 0;
    for (int j = 0; j < n_all; j++) {
        PyArrayObject *x = j < n ? a[j] : outs[j - n];
        int along = (j >= n || s->full[j]) && PyArray_NDIM(x) >= 1 &&
                    PyArray_DIMS(x)[0] == rows && !(j < n && (s->bcast[j] & 1));
        int64_t step = along ? PyArray_STRIDES(x)[0] : 0;
        if (step < 0)
            return tj_row_record(p, g, NULL, 0, 0);
        c.ptrs[j] = ptrs[j];
        c.steps[j] = step;
        c.spans[j] = tj_span_of(x, rows, step, j >= n || j == s->target);
        bytes += (size_t)PyArray_NBYTES(x);
    }
    memcpy(c.shape, shape, sizeof(int64_t) * nd);
    if (!fast)
        memcpy(c.strides, strides, sizeof(int64_t) * nd * n_all);
    return tj_row_record(p, g, &c, rows, bytes);
}

/* Records a reduction step's kernel call (lengths `all`: kept axes first; `second`: a
   second output, the kernel's pointer after the operands, or NULL): 1 recorded, 0 the
   caller runs it now. Only reductions keeping an axis split into rows. */
static int tj_row_record_reduce(const tj_program *p, tj_row_group *g, const tj_step *s,
                                PyObject **v, PyArrayObject *out, PyArrayObject *second,
                                const int64_t *all, char **ptrs, const int64_t *strides)
{
    int n = s->n_ops, nd = s->n_axes;
    if (g == NULL)
        return 0;
    if (s->n_kept < 1 || PyArray_STRIDES(out)[0] < 0 ||
        (second != NULL && PyArray_STRIDES(second)[0] < 0))
        return tj_row_record(p, g, NULL, 0, 0);
    tj_row_call c; /* (on this stack, as above) */
    int64_t rows = all[0];
    size_t bytes = (size_t)PyArray_NBYTES(out);
    c.fn = s->fn[0];
    c.stream_fn = NULL;
    c.form = TJ_FORM_REDUCE;
    c.nd = nd;
    c.n_ptrs = n;
    c.n_spans = n + 1;
    for (int j = 0; j < n; j++) {
        PyArrayObject *x = (PyArrayObject *)v[s->ops[j]];
        int64_t step = strides[j * nd];
        if (step < 0)
            return tj_row_record(p, g, NULL, 0, 0);
        c.ptrs[j] = ptrs[j];
        c.steps[j] = step;
        c.spans[j] = tj_span_of(x, rows, step, 0);
        bytes += (size_t)PyArray_NBYTES(x);
    }
    c.out = PyArray_BYTES(out);
    c.out_step = PyArray_STRIDES(out)[0];
    c.spans[n] = tj_span_of(out, rows, c.out_step, 1);
    if (second != NULL) { /* moved by rows like an operand, written like out */
        c.ptrs[n] = ptrs[n];
        c.steps[n] = PyArray_STRIDES(second)[0];
        c.spans[n + 1] = tj_span_of(second, rows, c.steps[n], 1);
        c.n_ptrs = n + 1;
        c.n_spans = n + 2;
        bytes += (size_t)PyArray_NBYTES(second);
    }
    memcpy(c.shape, all, sizeof(int64_t) * nd);
    memcpy(c.strides, strides, sizeof(int64_t) * nd * n);
    return tj_row_record(p, g, &c, rows, bytes);
}

/* The group of one run of program p (NULL when p runs no groups). */
static tj_row_group *tj_row_group_start(tj_program *p, tj_row_group *g)
{
    if (p->row_block_bytes == 0)
        return NULL;
    memset(g, 0, sizeof(*g));
    g->program = p;
    g->block_bytes = p->row_block_bytes;
    return g;
}

/* Ends a run's group (its calls ran or were dropped): the program keeps its memory. */
static void tj_row_group_end(tj_row_group *g)
{
    if (g->program->row_calls_spare == NULL)
        g->program->row_calls_spare = g->calls;
    else
        PyMem_Free(g->calls);
    g->calls = NULL;
}

/* set_parallel(address): the pool's tj_pool_parallel (0: none), for the row blocks. */
static PyObject *tj_set_parallel(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long address;
    if (!PyArg_ParseTuple(args, "K", &address))
        return NULL;
    tj_parallel = (int (*)(tj_task_fn, void *, int64_t, int64_t, int64_t))(uintptr_t)address;
    Py_RETURN_NONE;
}

/* row_block_info() -> (groups run in blocks of rows, their kernel calls), for tests. */
static PyObject *tj_row_block_info(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return Py_BuildValue("(LL)", tj_row_groups_blocked, tj_row_calls_blocked);
}
