/* The C backend's worker threads: one pool per process, shared by every kernel.
 *
 * A kernel splits its work with tj_pool_parallel(fn, ctx, n, grain, align): [0, n) is cut
 * into at most `threads` parts of at least `grain` items (boundaries multiples of
 * `align`), the calling thread runs part 0 and one worker each of the others, and the call
 * returns when all are done. How [0, n) is cut depends only on n, grain, align and the
 * thread count; when the pool is busy (two Python threads calling kernels at once; a
 * kernel inside a kernel), its workers asleep and the work small, or a worker can not be
 * started, the caller runs the parts itself, one after the other. So a result never
 * depends on whether workers ran, only on the thread count (reductions combine
 * per-part results in part order).
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

#define TJ_MAX_THREADS 256 /* parts never exceed it: parallel.py's TJ_MAX_PARTS */
/* Polls of a mailbox (or of the parts left) before sleeping, about 20 us (a pause is
   ~30 ns here, AMD EPYC): long enough for back-to-back kernels of one program, short
   enough not to hold a core that BLAS's own workers need for the product that follows
   (with ~110 us, a softmax before a GEMM slowed the GEMM). */
#define TJ_SPIN 700

typedef void (*tj_task_fn)(void *ctx, int64_t lo, int64_t hi, int part);

typedef struct {
    pthread_t thread;
    unsigned ticket;           /* set by the caller (release) when a part is posted */
    int asleep;                /* stopped spinning, waits on `wake` (atomic) */
    tj_task_fn fn;
    void *ctx;
    int64_t lo, hi;
    int part;
} tj_worker;

static tj_worker workers[TJ_MAX_THREADS];
static int n_started = 0;      /* workers running: workers[1 .. n_started] */
static int n_wanted = 1;       /* threads per kernel, the caller included */
static int remaining = 0;      /* posted parts not finished (atomic) */
/* A sleeping worker costs ~10-50 us to wake (and its 20 us of spinning afterwards can
   hold a core BLAS's workers want): it is only woken for parts of at least this many
   grains. Work that small runs on the caller instead; spinning workers take any part. */
#define TJ_WAKE_GRAINS 8

static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;  /* held while a job runs */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int atfork_installed = 0;
static int create_failed = 0;  /* pthread_create failed once: no more attempts */

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
            if (++spins < TJ_SPIN) {
                tj_relax();
                continue;
            }
            pthread_mutex_lock(&sleep_lock);
            __atomic_store_n(&w->asleep, 1, __ATOMIC_RELAXED);
            while (__atomic_load_n(&w->ticket, __ATOMIC_ACQUIRE) == seen)
                pthread_cond_wait(&wake, &sleep_lock);
            __atomic_store_n(&w->asleep, 0, __ATOMIC_RELAXED);
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

/* The BLAS's library-wide thread count while pool parts make products, where the BLAS
   has no per-thread count (linalg/blas_threads.py): the first call in flight sets it to
   1, the last puts back the count it found, or the one config set meanwhile
   (tj_pool_blas_count); a fork waits until no call is in flight, so a child never
   inherits the 1. One state for every kernel library: the count is the process's. */
typedef void (*tj_blas_set_fn)(int);
typedef int (*tj_blas_get_fn)(void);
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t blas_idle = PTHREAD_COND_INITIALIZER;
static int blas_in_flight = 0;
static int blas_saved = 0; /* the count to put back when the last call ends */

/* fork: the child has none of the parent's workers; it starts new ones when needed.
   Locks in this order (a call in flight takes `busy` only by trylock, never while
   holding blas_lock). */
static void tj_before_fork(void)
{
    pthread_mutex_lock(&busy);
    pthread_mutex_lock(&blas_lock);
    while (blas_in_flight)
        pthread_cond_wait(&blas_idle, &blas_lock);
}
static void tj_after_fork_parent(void)
{
    pthread_mutex_unlock(&blas_lock);
    pthread_mutex_unlock(&busy);
}
static void tj_after_fork_child(void)
{
    n_started = 0;
    remaining = 0;
    memset(workers, 0, sizeof workers);
    pthread_mutex_init(&busy, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&done, NULL);
    blas_in_flight = 0;
    pthread_mutex_init(&blas_lock, NULL);
    pthread_cond_init(&blas_idle, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void tj_install_atfork(void)
{
    atfork_installed =
        pthread_atfork(tj_before_fork, tj_after_fork_parent, tj_after_fork_child) == 0;
}
/* Installed when the library loads, before any kernel can reach the guard: glibc (2.36
   on) runs at a fork only the handlers registered when it began, and lets
   pthread_atfork return while it runs them, so a first guard call installing the
   handler then setting the count to 1 could reach a fork already begun (a child with
   1). The pthread_once calls below then find it done. */
__attribute__((constructor)) static void tj_pool_loaded(void)
{
    pthread_once(&atfork_once, tj_install_atfork);
}

/* enter 1: a call whose parts make products begins; 0: it ends. `set` and `get` are the
   BLAS's library-wide count setter and getter. */
int tj_pool_blas_guard(void *set, void *get, int enter)
{
    pthread_once(&atfork_once, tj_install_atfork); /* a fork must wait for the call */
    pthread_mutex_lock(&blas_lock);
    if (enter) {
        if (blas_in_flight++ == 0) {
            blas_saved = ((tj_blas_get_fn)get)();
            if (blas_saved > 1)
                ((tj_blas_set_fn)set)(1);
        }
    } else if (--blas_in_flight == 0) {
        if (blas_saved > 1)
            ((tj_blas_set_fn)set)(blas_saved);
        pthread_cond_broadcast(&blas_idle);
    }
    pthread_mutex_unlock(&blas_lock);
    return enter;
}

/* config's BLAS count: set now, or, while calls are in flight, when the last ends. */
void tj_pool_blas_count(void *set, int count)
{
    pthread_mutex_lock(&blas_lock);
    if (blas_in_flight)
        blas_saved = count > 1 ? count : 1;
    else
        ((tj_blas_set_fn)set)(count);
    pthread_mutex_unlock(&blas_lock);
}

/* The BLAS's count as config sees it: while calls are in flight (the count at 1), the
   one the last of them will put back. */
int tj_pool_blas_threads(void *get)
{
    pthread_mutex_lock(&blas_lock);
    const int count = blas_in_flight ? blas_saved : ((tj_blas_get_fn)get)();
    pthread_mutex_unlock(&blas_lock);
    return count;
}

/* Start workers up to `count` (the caller holds `busy`); returns how many run. */
static int tj_start_workers(int count)
{
    pthread_once(&atfork_once, tj_install_atfork);
    if (!atfork_installed)
        return n_started;
    while (n_started < count && !create_failed) {
        tj_worker *w = &workers[n_started + 1];
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&w->thread, &attr, tj_worker_main, w);
        pthread_attr_destroy(&attr);
        if (failed) {
            create_failed = 1;
            break;
        }
        n_started++;
    }
    return n_started;
}

static inline int64_t tj_part_end(int64_t k, int64_t per, int64_t n)
{
    return (k + 1) * per < n ? (k + 1) * per : n;
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
    int64_t per = parts > 1 ? (n + parts - 1) / parts : n;
    per = (per + align - 1) / align * align;
    if (parts <= 1 || per >= n) {
        fn(ctx, 0, n, 0);
        return 1;
    }
    parts = (int)((n + per - 1) / per); /* rounding up to `align` may leave fewer */
    /* The parts are fixed now, whoever runs them: a reduction combines the same values
       whether workers ran them or the caller did, one after the other. */
    int helpers = parts - 1;
    if (n / grain < (int64_t)parts * TJ_WAKE_GRAINS) {
        for (int k = 1; k <= helpers && k <= n_started; k++)
            if (__atomic_load_n(&workers[k].asleep, __ATOMIC_RELAXED))
                helpers = 0;
    }
    if (helpers && pthread_mutex_trylock(&busy) != 0)
        helpers = 0;
    else if (helpers && tj_start_workers(helpers) < helpers) {
        helpers = n_started;
        if (helpers == 0)
            pthread_mutex_unlock(&busy);
    }
    if (helpers == 0) {
        for (int k = 0; k < parts; k++)
            fn(ctx, k * per, tj_part_end(k, per, n), k);
        return parts;
    }
    __atomic_store_n(&remaining, helpers, __ATOMIC_RELAXED);
    for (int k = 1; k <= helpers; k++) {
        tj_worker *w = &workers[k];
        w->fn = fn;
        w->ctx = ctx;
        w->lo = k * per;
        w->hi = tj_part_end(k, per, n);
        w->part = k;
        unsigned ticket = w->ticket + 1; /* only this caller (holding busy) writes it */
        __atomic_store_n(&w->ticket, ticket ? ticket : 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&sleep_lock); /* wakes workers that stopped spinning */
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleep_lock);
    fn(ctx, 0, per, 0);
    for (int k = helpers + 1; k < parts; k++) /* parts no worker could take */
        fn(ctx, k * per, tj_part_end(k, per, n), k);
    for (int spins = 0; __atomic_load_n(&remaining, __ATOMIC_ACQUIRE) != 0; spins++) {
        if (spins < TJ_SPIN) {
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
