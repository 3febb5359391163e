/* When an elementwise step streams its output, included by program.c.
 *
 * An ordinary store first reads the cache line it writes (read-for-ownership), and the
 * line then takes cache room. When a step touches more memory than the last-level
 * cache holds well, both are waste: its output goes to memory anyway. Such a step runs
 * its kernel's streaming entry (codegen.py's tj_contig_stream), which stores whole,
 * aligned cache lines with non-temporal stores. Only a program's outputs stream: a
 * temporary is read again soon and should stay cached.
 */
/* Steps touching at least this many bytes (operands and output) stream their output;
   set from program.py (half the last-level cache); 0: never. */
static size_t tj_stream_min_bytes;

static int tj_streams(const tj_step *s, int n, PyArrayObject **a, PyArrayObject *out)
{
    if (!s->streams || s->target >= 0 || s->fn[2] == NULL || tj_stream_min_bytes == 0 ||
        ((uintptr_t)PyArray_BYTES(out) & 63) != 0)
        return 0;
    size_t touched = (size_t)PyArray_NBYTES(out);
    for (int j = 0; j < n; j++)
        touched += (size_t)PyArray_NBYTES(a[j]);
    return touched >= tj_stream_min_bytes;
}

/* set_stream_threshold(bytes) -> the previous threshold (0: never stream). */
static PyObject *tj_set_stream_threshold(PyObject *self, PyObject *arg)
{
    (void)self;
    size_t bytes = PyLong_AsSize_t(arg);
    if (bytes == (size_t)-1 && PyErr_Occurred())
        return NULL;
    size_t previous = tj_stream_min_bytes;
    tj_stream_min_bytes = bytes;
    return PyLong_FromSize_t(previous);
}
