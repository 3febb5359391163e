/* When an elementwise step streams its output, included by program.c.
 *
 * An ordinary store first reads the cache line it writes (read-for-ownership), and the
 * line then takes cache room. When a step touches more memory than the last-level
 * cache holds well, both are waste: its output goes to memory anyway. Such a step runs
 * its kernel's streaming entry (codegen.py's tj_contig_stream, or tj_strided_stream
 * when operands broadcast), which stores whole, aligned cache lines with non-temporal
 * stores. Only a program's outputs stream: a temporary is read again soon and should
 * stay cached (in a group of row_blocks.c, not even an output a later call reads).
 */
/* s->stream_min_bytes: 0 for a step whose output is not the program's, else the
   threshold of config stream_min_bytes when the function was compiled (0: never). */
static int tj_streams(const tj_step *s, int n, PyArrayObject **a, PyArrayObject *out,
                      int contiguous)
{
    /* (the contiguous entry's lines start at the output's first element; the strided
       one finds the aligned lines in each row) */
    if (s->stream_min_bytes == 0 || s->target >= 0 || s->fn[contiguous ? 2 : 3] == NULL ||
        (contiguous && ((uintptr_t)PyArray_BYTES(out) & 63) != 0))
        return 0;
    size_t touched = (size_t)PyArray_NBYTES(out);
    for (int j = 0; j < n; j++)
        touched += (size_t)PyArray_NBYTES(a[j]);
    return touched >= s->stream_min_bytes;
}
