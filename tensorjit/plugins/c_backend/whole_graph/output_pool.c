/* The output memory of whole-graph programs, included by program.c.
 *
 * Large outputs get their memory through a NumPy memory handler that keeps a few freed
 * blocks for reuse: a function called in a loop gets back the memory of the arrays its
 * earlier calls returned, once those are freed, instead of fresh pages from the OS,
 * which the kernel zeroes on first touch (for 10^7 doubles that costs about as much as
 * the computation). The arrays own their data as usual; NumPy calls the handler's free
 * when they die. Blocks are matched by exact size; at most TJ_POOL_BLOCKS blocks and
 * TJ_POOL_BYTES bytes are kept, the most recently freed; the GIL serialises all of it.
 *
 * Large blocks are mapped by themselves, aligned to 2 MiB and marked for transparent
 * huge pages: a kernel streaming through an output of several MiB then misses the TLB
 * once per 2 MiB instead of once per 4 KiB page. Every block's data follows a header
 * saying how it was obtained, so free, realloc and the pool need not trust the sizes
 * NumPy passes.
 */
#include <sys/mman.h>
#include <unistd.h>

#define TJ_POOL_MIN ((size_t)128 << 10)
#define TJ_POOL_BLOCKS 16
#define TJ_POOL_BYTES ((size_t)256 << 20)
#define TJ_HUGE_PAGE ((size_t)2 << 20)
#define TJ_HEADER 64 /* bytes before the data, the header's place */

enum { TJ_BLOCK_HEAP = 1, TJ_BLOCK_MAPPED = 2 };

typedef struct {
    int kind;         /* TJ_BLOCK_* */
    size_t size;      /* bytes asked for */
    size_t mapped;    /* TJ_BLOCK_MAPPED: length of the mapping */
    void *start;      /* TJ_BLOCK_MAPPED: where the mapping starts */
} tj_block_header;

_Static_assert(sizeof(tj_block_header) <= TJ_HEADER, "header too large");

static struct {
    void *ptr;
    size_t size;
    unsigned long long age; /* tj_pool_clock when kept */
} tj_pool[TJ_POOL_BLOCKS];
static size_t tj_pool_bytes;
static unsigned long long tj_pool_clock;
static PyObject *tj_pool_handler; /* the "mem_handler" capsule, never freed */

static tj_block_header *tj_header(void *data)
{
    return (tj_block_header *)((char *)data - TJ_HEADER);
}

/* A mapping of one page plus size bytes, starting on a huge-page boundary when it spans
   one (the slack around it is unmapped again). The data starts on the second page, the
   header ends the first: page-aligned data keeps a kernel's stores from aliasing the
   loads just ahead of them (same address modulo 4 KiB) in inputs NumPy allocated,
   whose data start 16 bytes into a page. Fresh mappings read as zeros. */
static void *tj_block_map(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t length = page + (size + page - 1) / page * page;
    size_t slack = length >= TJ_HUGE_PAGE ? TJ_HUGE_PAGE : 0;
    char *raw = mmap(NULL, length + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *base = raw;
    if (slack) {
        base = (char *)(((uintptr_t)raw + TJ_HUGE_PAGE - 1) & ~(uintptr_t)(TJ_HUGE_PAGE - 1));
        if (base > raw)
            munmap(raw, (size_t)(base - raw));
        if (raw + slack > base)
            munmap(base + length, (size_t)(raw + slack - base));
#ifdef MADV_HUGEPAGE
        madvise(base, length, MADV_HUGEPAGE); /* advice only: ignore a refusal */
#endif
    }
    char *data = base + page;
    tj_block_header *header = tj_header(data);
    header->kind = TJ_BLOCK_MAPPED;
    header->size = size;
    header->mapped = length;
    header->start = base;
    return data;
}

static void *tj_block_heap(size_t size, int zeroed)
{
    char *base = zeroed ? calloc(1, size + TJ_HEADER) : malloc(size + TJ_HEADER);
    if (base == NULL)
        return NULL;
    tj_block_header *header = (tj_block_header *)base;
    header->kind = TJ_BLOCK_HEAP;
    header->size = size;
    header->mapped = 0;
    header->start = NULL;
    return base + TJ_HEADER;
}

static void tj_block_release(void *data)
{
    tj_block_header *header = tj_header(data);
    if (header->kind == TJ_BLOCK_MAPPED)
        munmap(header->start, header->mapped);
    else
        free(header);
}

static void *tj_pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size < TJ_POOL_MIN)
        return tj_block_heap(size, 0);
    for (int i = 0; i < TJ_POOL_BLOCKS; i++)
        if (tj_pool[i].ptr != NULL && tj_pool[i].size == size) {
            void *block = tj_pool[i].ptr;
            tj_pool[i].ptr = NULL;
            tj_pool_bytes -= size;
            return block;
        }
    return tj_block_map(size);
}

static void *tj_pool_calloc(void *ctx, size_t n, size_t size)
{
    (void)ctx;
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    return n * size < TJ_POOL_MIN ? tj_block_heap(n * size, 1) : tj_block_map(n * size);
}

static void *tj_pool_realloc(void *ctx, void *block, size_t size)
{
    if (block == NULL)
        return tj_pool_malloc(ctx, size);
    tj_block_header *header = tj_header(block);
    if (header->kind == TJ_BLOCK_HEAP && size < TJ_POOL_MIN) {
        char *base = realloc(header, size + TJ_HEADER);
        if (base == NULL)
            return NULL;
        ((tj_block_header *)base)->size = size;
        return base + TJ_HEADER;
    }
    void *moved = size < TJ_POOL_MIN ? tj_block_heap(size, 0) : tj_block_map(size);
    if (moved == NULL)
        return NULL;
    memcpy(moved, block, header->size < size ? header->size : size);
    tj_block_release(block);
    return moved;
}

/* Keeps a freed mapped block, evicting the longest-kept ones to make room: the block
   freed last is the likeliest to be asked for next (a loop's sizes recur; sizes seen
   once must not hold the pool). */
static void tj_pool_free(void *ctx, void *block, size_t size)
{
    (void)ctx;
    (void)size; /* the header knows */
    if (block == NULL)
        return;
    tj_block_header *header = tj_header(block);
    if (header->kind != TJ_BLOCK_MAPPED || header->size > TJ_POOL_BYTES) {
        tj_block_release(block);
        return;
    }
    for (;;) {
        int empty = -1, oldest = -1;
        for (int i = 0; i < TJ_POOL_BLOCKS; i++) {
            if (tj_pool[i].ptr == NULL)
                empty = i;
            else if (oldest < 0 || tj_pool[i].age < tj_pool[oldest].age)
                oldest = i;
        }
        if (empty >= 0 && tj_pool_bytes + header->size <= TJ_POOL_BYTES) {
            tj_pool[empty].ptr = block;
            tj_pool[empty].size = header->size;
            tj_pool[empty].age = ++tj_pool_clock;
            tj_pool_bytes += header->size;
            return;
        }
        tj_block_release(tj_pool[oldest].ptr);
        tj_pool_bytes -= tj_pool[oldest].size;
        tj_pool[oldest].ptr = NULL;
    }
}

static PyDataMem_Handler tj_pool_handler_struct = {
    "tensorjit_program_pool",
    1,
    {NULL, tj_pool_malloc, tj_pool_calloc, tj_pool_realloc, tj_pool_free},
};

/* An uninitialised C-ordered array; from the pool when it is large. */
static PyObject *tj_empty(int nd, npy_intp *dims, int typenum)
{
    npy_intp n = 1;
    for (int i = 0; i < nd; i++)
        n *= dims[i];
    PyArray_Descr *descr = PyArray_DescrFromType(typenum);
    if (descr == NULL)
        return NULL;
    if (tj_pool_handler == NULL || (size_t)n * (size_t)PyDataType_ELSIZE(descr) < TJ_POOL_MIN)
        return PyArray_Empty(nd, dims, descr, 0); /* steals descr */
    PyObject *previous = PyDataMem_SetHandler(tj_pool_handler);
    if (previous == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    PyObject *array = PyArray_Empty(nd, dims, descr, 0);
    PyObject *restored = PyDataMem_SetHandler(previous);
    Py_DECREF(previous);
    if (restored == NULL) {
        Py_XDECREF(array);
        return NULL;
    }
    Py_DECREF(restored);
    return array;
}

/* pool_info() -> (blocks kept, bytes kept), for tests and diagnostics. */
static PyObject *tj_pool_info(PyObject *self, PyObject *args)
{
    int blocks = 0;
    for (int i = 0; i < TJ_POOL_BLOCKS; i++)
        blocks += tj_pool[i].ptr != NULL;
    return Py_BuildValue("in", blocks, (Py_ssize_t)tj_pool_bytes);
}

/* release_pool(): gives the kept blocks back to the system. */
static PyObject *tj_release_pool(PyObject *self, PyObject *args)
{
    for (int i = 0; i < TJ_POOL_BLOCKS; i++) {
        if (tj_pool[i].ptr != NULL)
            tj_block_release(tj_pool[i].ptr);
        tj_pool[i].ptr = NULL;
    }
    tj_pool_bytes = 0;
    Py_RETURN_NONE;
}
