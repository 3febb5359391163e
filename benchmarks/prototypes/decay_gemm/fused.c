/* A prototype, outside the project's kernels: an L2-penalised weight's update in one pass
   over the weight, against what the project runs today (the ScaleWithSquareSum pass,
   then OpenBLAS's GEMM accumulating into its result). See run.py and RESULTS.md
   ("The penalised weight's update in one kernel: measured, not adopted").

   fused(): out = beta * c + alpha * a . b, returning sum(c * c); a: m x k (any element
   strides), b: k x n with contiguous rows, c and out: m x n with contiguous rows (out
   may be c). b is packed into 16-column panels; six rows of c at a time get their
   products in 6 x 16 register tiles of FMAs, then are decayed, squared and written in
   one pass, while the next six rows are prefetched. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float vec __attribute__((vector_size(32)));
typedef double dvec __attribute__((vector_size(32)));
enum { LANES = 8, ROWS = 6, WIDTH = 2 * LANES };

static inline vec fma8(vec a, vec b, vec c) { return __builtin_ia32_vfmaddps256(a, b, c); }
static inline vec load8(const float *p) { vec v; memcpy(&v, p, sizeof(v)); return v; }
static inline void store8(float *p, vec v) { memcpy(p, &v, sizeof(v)); }

static double fused(const float *a, long m, long k, long as0, long as1, const float *b,
                    long n, long bs0, const float *c, long cs0, float *out, long os0,
                    float alpha, float beta, int products_only)
{
    const long panels = (n + WIDTH - 1) / WIDTH, full = n / WIDTH;
    float *packed = aligned_alloc(64, (size_t)(panels * k * WIDTH) * sizeof(float) + 64);
    float *sums = aligned_alloc(64, (size_t)(ROWS * panels * WIDTH) * sizeof(float) + 64);
    for (long t = 0; t < panels; t++) {
        long cols = n - t * WIDTH < WIDTH ? n - t * WIDTH : WIDTH;
        for (long p = 0; p < k; p++) {
            float *dst = packed + (t * k + p) * WIDTH;
            memcpy(dst, b + p * bs0 + t * WIDTH, (size_t)cols * sizeof(float));
            for (long q = cols; q < WIDTH; q++)
                dst[q] = 0;
        }
    }
    const vec va = {alpha, alpha, alpha, alpha, alpha, alpha, alpha, alpha};
    const vec vb = {beta, beta, beta, beta, beta, beta, beta, beta};
    double total = 0;
    for (long i = 0; i < m; i += ROWS) {
        const int rows = m - i < ROWS ? (int)(m - i) : ROWS;
        const float *arow[ROWS];
        for (int r = 0; r < ROWS; r++)
            arow[r] = a + (i + (r < rows ? r : 0)) * as0;
        const char *next_c = (const char *)(c + (i + ROWS) * cs0);
        const char *next_out = (const char *)(out + (i + ROWS) * os0);
        const long lines = i + 2 * ROWS <= m ? ROWS * cs0 * (long)sizeof(float) / 64 : 0;
        const long per_panel = (lines + panels - 1) / panels;
        for (long t = 0; t < panels; t++) {
            for (long q = t * per_panel; q < (t + 1) * per_panel && q < lines; q++) {
                __builtin_prefetch(next_c + q * 64, 0, 3);
                __builtin_prefetch(next_out + q * 64, 1, 3);
            }
            vec acc[ROWS][2];
            for (int r = 0; r < ROWS; r++)
                acc[r][0] = acc[r][1] = (vec){0};
            const float *bp = packed + t * k * WIDTH;
            for (long p = 0; p < k; p++) {
                const vec b0 = load8(bp + p * WIDTH), b1 = load8(bp + p * WIDTH + LANES);
                for (int r = 0; r < ROWS; r++) {
                    const float s = arow[r][p * as1];
                    const vec sv = {s, s, s, s, s, s, s, s};
                    acc[r][0] = fma8(sv, b0, acc[r][0]);
                    acc[r][1] = fma8(sv, b1, acc[r][1]);
                }
            }
            for (int r = 0; r < ROWS; r++) {
                store8(sums + r * panels * WIDTH + t * WIDTH, acc[r][0]);
                store8(sums + r * panels * WIDTH + t * WIDTH + LANES, acc[r][1]);
            }
            __asm__ volatile("" ::"r"(sums) : "memory"); /* keep the products */
        }
        if (products_only)
            continue;
        vec q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};
        for (int r = 0; r < rows; r++) {
            const float *crow = c + (i + r) * cs0, *srow = sums + r * panels * WIDTH;
            float *orow = out + (i + r) * os0;
            long j = 0;
            for (; j + WIDTH <= full * WIDTH; j += WIDTH) {
                const vec c0 = load8(crow + j), c1 = load8(crow + j + LANES);
                if (r & 1) {
                    q2 = fma8(c0, c0, q2);
                    q3 = fma8(c1, c1, q3);
                } else {
                    q0 = fma8(c0, c0, q0);
                    q1 = fma8(c1, c1, q1);
                }
                store8(orow + j, fma8(va, load8(srow + j), vb * c0));
                store8(orow + j + LANES, fma8(va, load8(srow + j + LANES), vb * c1));
            }
            for (; j < n; j++) {
                const float cv = crow[j];
                total += (double)(cv * cv);
                orow[j] = __builtin_fmaf(alpha, srow[j], beta * cv);
            }
        }
        const vec q = (q0 + q1) + (q2 + q3);
        for (int l = 0; l < LANES; l++)
            total += q[l];
    }
    free(packed);
    free(sums);
    return total;
}

/* Today's pass: the project's own kernel (c_backend/decay.py), built by run.py. */
double tj_decay_s(const float *x, float *out, int64_t n, double beta);

/* OpenBLAS's CBLAS sgemm (its name in NumPy's wheel: run.py passes -DCBLAS_SGEMM=...). */
void CBLAS_SGEMM(int, int, int, long, long, long, float, const float *, long, const float *,
                 long, float, float *, long);
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    /* The tutorial MLP's W1 update: W (784 x 500) decays and accumulates X^T G, X a
       20-row minibatch of a 12,000-row data set, G (20 x 500). */
    const long m = 784, n = argc > 1 ? atol(argv[1]) : 500, k = 20, rows = 12000;
    const int calls = argc > 2 ? atoi(argv[2]) : 2000;
    float *x = malloc(sizeof(float) * rows * m), *g = malloc(sizeof(float) * k * n);
    float *w = malloc(sizeof(float) * m * n), *out = malloc(sizeof(float) * m * n);
    float *ref = malloc(sizeof(float) * m * n);
    srand(1);
    for (long i = 0; i < rows * m; i++) x[i] = rand() / (float)RAND_MAX - 0.5f;
    for (long i = 0; i < k * n; i++) g[i] = rand() / (float)RAND_MAX - 0.5f;
    for (long i = 0; i < m * n; i++) w[i] = rand() / (float)RAND_MAX - 0.5f;
    const float alpha = -0.01f, beta = 0.999f;
    double s1 = fused(x, m, k, 1, m, g, n, n, w, n, out, n, alpha, beta, 0);
    double s2 = tj_decay_s(w, ref, m * n, beta);
    CBLAS_SGEMM(ROW_MAJOR, TRANS, NO_TRANS, m, n, k, alpha, x, m, g, n, 1.0f, ref, n);
    double worst = 0;
    long same = 0;
    for (long i = 0; i < m * n; i++) {
        double d = out[i] > ref[i] ? out[i] - ref[i] : ref[i] - out[i];
        worst = d > worst ? d : worst;
        same += out[i] == ref[i];
    }
    printf("m %ld n %ld k %ld: largest difference %.3g, %ld of %ld bitwise equal; sums %.9g "
           "%.9g\n", m, n, k, worst, same, m * n, s1, s2);
    const char *names[] = {"fused, into a new array", "fused, in place (beta 1)",
                           "decay pass + OpenBLAS", "OpenBLAS alone (beta 1)",
                           "fused's products alone"};
    double *t = malloc(sizeof(double) * calls * 5), sink = 0;
    for (int call = 0; call < calls; call++)
        for (int v = 0; v < 5; v++) {
            const float *xb = x + (call % 600) * k * m; /* the next minibatch */
            double start = now();
            if (v == 0) sink += fused(xb, m, k, 1, m, g, n, n, w, n, out, n, alpha, beta, 0);
            if (v == 1) sink += fused(xb, m, k, 1, m, g, n, n, w, n, w, n, alpha, 1.0f, 0);
            if (v == 2) {
                sink += tj_decay_s(w, ref, m * n, beta);
                CBLAS_SGEMM(ROW_MAJOR, TRANS, NO_TRANS, m, n, k, alpha, xb, m, g, n, 1.0f,
                            ref, n);
            }
            if (v == 3)
                CBLAS_SGEMM(ROW_MAJOR, TRANS, NO_TRANS, m, n, k, alpha, xb, m, g, n, 1.0f,
                            ref, n);
            if (v == 4) sink += fused(xb, m, k, 1, m, g, n, n, w, n, out, n, alpha, beta, 1);
            t[v * calls + call] = now() - start;
        }
    printf("%-28s %9s %9s %9s  (us a call, %d calls each, round-robin)\n", "", "min", "p10",
           "median", calls);
    for (int v = 0; v < 5; v++) {
        qsort(t + v * calls, calls, sizeof(double), by_value);
        printf("%-28s %9.1f %9.1f %9.1f\n", names[v], t[v * calls] * 1e6,
               t[v * calls + calls / 10] * 1e6, t[v * calls + calls / 2] * 1e6);
    }
    return sink == 12345.0; /* (keeps the sums computed) */
}
