"""The C side of BLAS products made inside the thread pool's parts (convolution.py's
per-image products, blas.py's stacks of products): each part's products on one BLAS
thread. A threaded product inside a part wakes the BLAS's own workers, which then spin
on the cores the pool's other parts run on (a CNN step took 8.4 ms on two threads, 6.1
without). OpenBLAS 0.3.27 and later set the calling thread's count
(``openblas_set_num_threads_local``); where the BLAS lacks that (NumPy 2.5's
scipy-openblas64), the library's count is one for the call and restored after, through
the pool's ``tj_pool_blas_guard`` (thread_pool.c: calls on several threads, config's own
changes and fork agree on the one count; ``tj_blas_guard``, pointed at it by
``threads.attach``). ``threads.blas_thread_controls`` gives the three addresses (0 where
missing). ``CDEF`` declares the guard's pointer to cffi."""

from __future__ import annotations

CDEF = "extern int (*tj_blas_guard)(void *, void *, int);\n"

SOURCE = r"""
/* The pool's tj_pool_blas_guard (0 before there is a pool: then the count is set and
   put back here, by this library alone). */
int (*tj_blas_guard)(void *, void *, int) = 0;
typedef int (*tj_local_threads_t)(int);
typedef void (*tj_set_threads_t)(int);
typedef int (*tj_get_threads_t)(void);
static tj_local_threads_t tj_blas_local_threads;
static tj_set_threads_t tj_blas_set_threads;
static tj_get_threads_t tj_blas_get_threads;

static void tj_blas_threads_init(void *local_threads, void *set_threads, void *get_threads)
{
    tj_blas_local_threads = (tj_local_threads_t)local_threads;
    tj_blas_set_threads = (tj_set_threads_t)set_threads;
    tj_blas_get_threads = (tj_get_threads_t)get_threads;
}

/* Before a call whose parts make products: where the BLAS has no per-thread count, its
   library count set to 1. Returns what tj_blas_restore undoes: 0 nothing, -1 the pool's
   guard was entered, else the count to put back. */
static int tj_blas_single(void)
{
    if (tj_blas_local_threads || !tj_blas_set_threads || !tj_blas_get_threads)
        return 0;
    if (tj_blas_guard)
        return -tj_blas_guard((void *)tj_blas_set_threads, (void *)tj_blas_get_threads, 1);
    const int before = tj_blas_get_threads();
    if (before <= 1)
        return 0;
    tj_blas_set_threads(1);
    return before;
}

static void tj_blas_restore(int token)
{
    if (token < 0)
        tj_blas_guard((void *)tj_blas_set_threads, (void *)tj_blas_get_threads, 0);
    else if (token)
        tj_blas_set_threads(token);
}

/* In a part: its products on one BLAS thread (one), or back to the library's (0). */
static void tj_blas_part_threads(int one)
{
    if (tj_blas_local_threads)
        tj_blas_local_threads(one ? 1 : 0);
}
"""
