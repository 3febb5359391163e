/* The C backend's worker threads: one pool per process, shared by every kernel.
 *
 * A kernel splits its work with tj_pool_parallel(fn, ctx, n, grain, align): [0, n) is cut
 * into at most `threads` parts of at least `grain` items (boundaries multiples of
 * `align`), the calling thread runs part 0 and one worker each of the others, and the call
 * returns when all are done. Too little work, one thread, or a pool already busy (two
 * Python threads calling kernels at once; a kernel inside a kernel) run fn(ctx, 0, n, 0)
 * on the caller: the result never depends on whether threads were used, only on how
 * many parts there were (reductions combine per-part results in part order).
 *
 * Why not OpenMP: libgomp's workers spin for a long time after a region and fight
 * OpenBLAS's spinning workers for the cores (an elementwise kernel between two GEMMs ran
 * 14x slower on two cores), and a process that forks after using libgomp hangs in the
 * child. Here each worker spins briefly on its own mailbox, then sleeps; a fork child
 * starts with no workers and makes new ones when it first needs them.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#define TJ_MAX_THREADS 256
/* Polls of a mailbox (or of the parts left) before sleeping, about 20 us (a pause is
   ~30 ns here, AMD EPYC): long enough for back-to-back kernels of one program, short
   enough not to hold a core that BLAS's own workers need for the product that follows
   (with ~110 us, a softmax before a GEMM slowed the GEMM). tj_pool_set_spin changes it. */
static int tj_spin = 700;

typedef void (*tj_task_fn)(void *ctx, int64_t lo, int64_t hi, int part);

typedef struct {
    pthread_t thread;
    unsigned ticket;           /* set by the caller (release) when a part is posted */
    tj_task_fn fn;
    void *ctx;
    int64_t lo, hi;
    int part;
} tj_worker;

static tj_worker workers[TJ_MAX_THREADS];
static int n_started = 0;      /* workers running: workers[1 .. n_started] */
static int n_wanted = 1;       /* threads per kernel, the caller included */
static unsigned next_ticket = 0;
static int remaining = 0;      /* posted parts not finished (atomic) */

static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;  /* held while a job runs */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int atfork_installed = 0;

static inline void tj_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void *tj_worker_main(void *arg)
{
    tj_worker *w = (tj_worker *)arg;
    unsigned seen = 0; /* no part posted yet: tickets are never 0 (one may be posted
                          before this thread first runs) */
    for (;;) {
        int spins = 0;
        while (__atomic_load_n(&w->ticket, __ATOMIC_ACQUIRE) == seen) {
            if (++spins < tj_spin) {
                tj_relax();
                continue;
            }
            pthread_mutex_lock(&sleep_lock);
            while (__atomic_load_n(&w->ticket, __ATOMIC_ACQUIRE) == seen)
                pthread_cond_wait(&wake, &sleep_lock);
            pthread_mutex_unlock(&sleep_lock);
        }
        seen = __atomic_load_n(&w->ticket, __ATOMIC_ACQUIRE);
        w->fn(w->ctx, w->lo, w->hi, w->part);
        if (__atomic_sub_fetch(&remaining, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&sleep_lock);
            pthread_cond_broadcast(&done);
            pthread_mutex_unlock(&sleep_lock);
        }
    }
    return NULL;
}

/* fork: the child has none of the parent's workers; it starts new ones when needed. */
static void tj_before_fork(void) { pthread_mutex_lock(&busy); }
static void tj_after_fork_parent(void) { pthread_mutex_unlock(&busy); }
static void tj_after_fork_child(void)
{
    n_started = 0;
    remaining = 0;
    memset(workers, 0, sizeof workers);
    pthread_mutex_init(&busy, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&done, NULL);
}

/* Start workers up to `count` (the caller holds `busy`); returns how many run. */
static int tj_start_workers(int count)
{
    if (!atfork_installed) {
        if (pthread_atfork(tj_before_fork, tj_after_fork_parent, tj_after_fork_child) != 0)
            return n_started;
        atfork_installed = 1;
    }
    while (n_started < count) {
        tj_worker *w = &workers[n_started + 1];
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&w->thread, &attr, tj_worker_main, w);
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        n_started++;
    }
    return n_started;
}

int tj_pool_parallel(tj_task_fn fn, void *ctx, int64_t n, int64_t grain, int64_t align)
{
    if (grain < 1)
        grain = 1;
    if (align < 1)
        align = 1;
    int parts = __atomic_load_n(&n_wanted, __ATOMIC_RELAXED);
    if (n / grain < parts)
        parts = (int)(n / grain);
    if (parts <= 1 || pthread_mutex_trylock(&busy) != 0) {
        fn(ctx, 0, n, 0);
        return 1;
    }
    if (tj_start_workers(parts - 1) < parts - 1)
        parts = n_started + 1;
    int64_t per = (n + parts - 1) / parts;
    per = (per + align - 1) / align * align;
    parts = (int)((n + per - 1) / per);  /* rounding up to `align` may leave fewer */
    if (parts <= 1) {
        pthread_mutex_unlock(&busy);
        fn(ctx, 0, n, 0);
        return 1;
    }
    __atomic_store_n(&remaining, parts - 1, __ATOMIC_RELAXED);
    for (int k = 1; k < parts; k++) {
        tj_worker *w = &workers[k];
        w->fn = fn;
        w->ctx = ctx;
        w->lo = k * per;
        w->hi = (k + 1) * per < n ? (k + 1) * per : n;
        w->part = k;
        if (++next_ticket == 0)
            next_ticket = 1;
        __atomic_store_n(&w->ticket, next_ticket, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&sleep_lock);  /* wakes workers that stopped spinning */
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleep_lock);
    fn(ctx, 0, per, 0);
    for (int spins = 0; __atomic_load_n(&remaining, __ATOMIC_ACQUIRE) != 0; spins++) {
        if (spins < tj_spin) {
            tj_relax();
            continue;
        }
        pthread_mutex_lock(&sleep_lock);
        while (__atomic_load_n(&remaining, __ATOMIC_ACQUIRE) != 0)
            pthread_cond_wait(&done, &sleep_lock);
        pthread_mutex_unlock(&sleep_lock);
    }
    pthread_mutex_unlock(&busy);
    return parts;
}

/* Threads per kernel from now on (the caller included), 1 .. TJ_MAX_THREADS. */
int tj_pool_set_threads(int count)
{
    if (count < 1)
        count = 1;
    if (count > TJ_MAX_THREADS)
        count = TJ_MAX_THREADS;
    __atomic_store_n(&n_wanted, count, __ATOMIC_RELAXED);
    return count;
}

int tj_pool_threads(void) { return __atomic_load_n(&n_wanted, __ATOMIC_RELAXED); }

/* Polls before a waiting thread sleeps (0: sleep at once); returns the previous value. */
int tj_pool_set_spin(int polls)
{
    int old = tj_spin;
    tj_spin = polls < 0 ? 0 : polls;
    return old;
}
