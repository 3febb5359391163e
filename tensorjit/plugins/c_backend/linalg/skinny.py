"""C kernels for matrix products with few columns (``n <= SKINNY_MAX_N``), included in
the BLAS library of ``blas.py`` and tried first by its ``tj_gemm``.

A classifier's layer multiplies a minibatch ``X`` (m x k, a few MB) by a weight with a
handful of columns, and its gradient is ``X^T G``. These products are bound by reading
``X``, but a BLAS GEMM packs ``X`` into blocks first, a second pass over it: OpenBLAS
takes about three times as long as one read of ``X`` (logistic regression's 600 x 784 x
10 products, float64). These kernels read ``X`` once, in blocks of rows that stay in the
L1 cache while every column is done:

- ``C = X B`` (X with contiguous rows): B is copied once into rows padded to 16; a few
  rows of X at a time accumulate all their outputs in registers, each element of X
  multiplied by a row of B (vectorised along the row).
- ``C = X^T G`` (the same X, read as the transpose): the result is accumulated
  transposed (n rows of length k, contiguous) by axpys of X's rows, eight rows at a time,
  then scaled into C.

Both return 1 (nothing done) when the shapes or layouts are not theirs; the caller then
uses BLAS. ``blas.py`` uses them for float64 only: float32 sums in another order than
sgemm's differ from it (and from ``Op.perform``) by more than DebugMode's float32
tolerance on outputs near zero, and the float32 products gained least (5-30%).
"""

from __future__ import annotations

SKINNY_MAX_N = 16
SKINNY_MIN_WORK = 1 << 15  # m * k below this: BLAS's call overhead is no issue
SKINNY_MAX_LEN = 1 << 16  # m, k above this: the kernels' k x 16 copies grow past 8 MiB

XTG_CHUNK = 128  # X^T G: eight rows of 128 float64 (8 KiB) and their sums stay in L1

XB_TEMPLATE = r"""
/* C (m x n) = alpha * X (m x k) . B (k x n) + beta * C, X's rows contiguous, for n up to
   {V} vectors of columns. B is copied once into rows of {V} vectors (zero-padded,
   aligned); {R} rows of X at a time accumulate into {R} x {V} vectors of sums held in
   registers (GCC vector extensions: the auto-vectoriser picked the wrong loop here),
   each element of X times a row of B. */
static int tj_skinny_xb_{p}{V}(const char *x, long long m, long long k, long long xs0,
                               const char *b, long long n, long long bs0, long long bs1,
                               char *c, long long cs0, long long cs1, {T} alpha, {T} beta)
{
    enum { NP = {V} * sizeof(tj_vec_{p}) / sizeof({T}) };
    size_t bytes = (size_t)(k * NP) * sizeof({T});
    {T} *bp = aligned_alloc(32, (bytes + 31) / 32 * 32);
    if (bp == NULL)
        return 1;
    memset(bp, 0, bytes);
    for (long long q = 0; q < k; q++)
        for (long long j = 0; j < n; j++)
            bp[q * NP + j] = *(const {T} *)(b + q * bs0 + j * bs1);
    for (long long i = 0; i < m; i += {R}) {
        int rows = m - i < {R} ? (int)(m - i) : {R};
        tj_vec_{p} acc[{R}][{V}];
        const {T} *xr[{R}];
        for (int r = 0; r < {R}; r++) {
            xr[r] = (const {T} *)(x + (i + (r < rows ? r : 0)) * xs0);
            for (int v = 0; v < {V}; v++)
                acc[r][v] = (tj_vec_{p}){0};
        }
        if (rows == {R}) {
            for (long long q = 0; q < k; q++) {
                const tj_vec_{p} *bq = (const tj_vec_{p} *)(bp + q * NP);
                for (int r = 0; r < {R}; r++) {
                    const {T} xv = xr[r][q];
                    for (int v = 0; v < {V}; v++)
                        acc[r][v] += bq[v] * xv;
                }
            }
        } else {
            for (long long q = 0; q < k; q++) {
                const tj_vec_{p} *bq = (const tj_vec_{p} *)(bp + q * NP);
                for (int r = 0; r < rows; r++)
                    for (int v = 0; v < {V}; v++)
                        acc[r][v] += bq[v] * xr[r][q];
            }
        }
        for (int r = 0; r < rows; r++) {
            {T} sums[NP];
            memcpy(sums, acc[r], sizeof(sums));
            for (long long j = 0; j < n; j++) {
                {T} *out = ({T} *)(c + (i + r) * cs0 + j * cs1);
                *out = beta == 0 ? alpha * sums[j] : alpha * sums[j] + beta * *out;
            }
        }
    }
    free(bp);
    return 0;
}

"""

SKINNY_TEMPLATE = r"""
#include <stdlib.h>
#include <string.h>

typedef {T} tj_vec_{p} __attribute__((vector_size(32)));

{XB}/* C (k x n) = alpha * X^T (k x m) . G (m x n) + beta * C, X (m x k) with contiguous rows. */
static int tj_skinny_xtg_{p}(const char *x, long long m, long long k, long long xs0,
                             const char *g, long long n, long long gs0, long long gs1,
                             char *c, long long cs0, long long cs1, {T} alpha, {T} beta)
{
    {T} *ct = calloc((size_t)(n * k), sizeof({T}));
    if (ct == NULL)
        return 1;
    long long i = 0;
    for (; i + 8 <= m; i += 8) {
        const {T} *r[8];
        {T} w[{MAX_N}][8];
        for (int u = 0; u < 8; u++)
            r[u] = (const {T} *)(x + (i + u) * xs0);
        for (long long j = 0; j < n; j++)
            for (int u = 0; u < 8; u++)
                w[j][u] = *(const {T} *)(g + (i + u) * gs0 + j * gs1);
        /* q in chunks whose eight rows stay in the L1 cache while every column is done */
        for (long long q0 = 0; q0 < k; q0 += {CHUNK}) {
            long long q1 = q0 + {CHUNK} < k ? q0 + {CHUNK} : k;
            for (long long j = 0; j < n; j++) {
                const {T} *wj = w[j];
                {T} *cj = ct + j * k;
                for (long long q = q0; q < q1; q++)
                    cj[q] += ((wj[0] * r[0][q] + wj[1] * r[1][q]) +
                              (wj[2] * r[2][q] + wj[3] * r[3][q])) +
                             ((wj[4] * r[4][q] + wj[5] * r[5][q]) +
                              (wj[6] * r[6][q] + wj[7] * r[7][q]));
            }
        }
    }
    for (; i < m; i++) {  /* the last rows, one at a time */
        const {T} *r0 = (const {T} *)(x + i * xs0);
        for (long long j = 0; j < n; j++) {
            {T} w0 = *(const {T} *)(g + i * gs0 + j * gs1), *cj = ct + j * k;
            for (long long q = 0; q < k; q++)
                cj[q] += w0 * r0[q];
        }
    }
    for (long long q = 0; q < k; q++)
        for (long long j = 0; j < n; j++) {
            {T} *out = ({T} *)(c + q * cs0 + j * cs1);
            *out = beta == 0 ? alpha * ct[j * k + q] : alpha * ct[j * k + q] + beta * *out;
        }
    free(ct);
    return 0;
}

/* The skinny kernels where they apply (see skinny.py): 0 done, 1 not applicable. */
static int tj_skinny_{p}(char *a, long long m, long long k, long long as0, long long as1,
                         char *b, long long n, long long bs0, long long bs1,
                         char *c, long long cs0, long long cs1, double alpha, double beta)
{
    const long long z = sizeof({T});
    if (n > {MAX_N} || m * k < {MIN_WORK} || m < 1 || k < 1 || n < 1 || alpha == 0)
        return 1;  /* (alpha 0: BLAS does not read A and B, NaNs there do not show) */
    if ((uintptr_t)a % z || (uintptr_t)b % z || (uintptr_t)c % z || as0 % z || as1 % z ||
        bs0 % z || bs1 % z || cs0 % z || cs1 % z)
        return 1;  /* misaligned elements: BLAS's path copies them first */
    /* (lengths above MAX_LEN: the copy of B or the transposed sums would be large) */
    if (as1 == z && as0 >= k * z && k <= {MAX_LEN}) {  /* A: rows of X */
        const long long lanes = sizeof(tj_vec_{p}) / z;
        switch ((n + lanes - 1) / lanes) {  /* the vectors of columns n needs */
{XB_CASES}        }
    }
    if (as0 == z && as1 >= m * z && m <= {MAX_LEN})  /* A = X^T: k rows of m elements */
        return tj_skinny_xtg_{p}(a, k, m, as1, b, n, bs0, bs1, c, cs0, cs1, ({T})alpha,
                                 ({T})beta);
    return 1;
}
"""


def skinny_source(p: str, ctype: str) -> str:
    """The skinny kernels for BLAS prefix ``p`` ("d", "s") and C type ``ctype``: one
    ``X B`` kernel per number of column vectors (4 or 8 columns each), with as many rows
    of X at a time as keep its sums, B's row and X's element in the 16 AVX registers."""
    size = 8 if ctype == "double" else 4
    n_vectors = SKINNY_MAX_N * size // 32
    kernels, cases = [], []
    for v in range(1, n_vectors + 1):
        rows = max(1, min(8, 12 // v))
        kernels.append(XB_TEMPLATE.replace("{V}", str(v)).replace("{R}", str(rows)))
        cases.append(
            f"        case {v}: return tj_skinny_xb_{{p}}{v}(a, m, k, as0, b, n, bs0, bs1, c, "
            "cs0, cs1, ({T})alpha, ({T})beta);\n"
        )
    return (
        SKINNY_TEMPLATE.replace("{XB}", "".join(kernels))
        .replace("{XB_CASES}", "".join(cases))
        .replace("{p}", p)
        .replace("{T}", ctype)
        .replace("{MAX_N}", str(SKINNY_MAX_N))
        .replace("{MIN_WORK}", str(SKINNY_MIN_WORK))
        .replace("{MAX_LEN}", str(SKINNY_MAX_LEN))
        .replace("{CHUNK}", str(XTG_CHUNK))
    )
