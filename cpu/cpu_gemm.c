/* cpu/cpu_gemm.c — GEMM through OpenBLAS cblas_sgemm (row-major) and the
 * bias gradient (column sums).
 *
 * Threading (cpu_impl.gemm_omp, default on): OpenBLAS runs single-threaded
 * and large products are split into column (or row) slabs whose bounds
 * depend on the shape only (cpu_gemm_slabs), handed to the OpenMP threads. One thread pool for every op avoids OpenMP and OpenBLAS worker
 * threads spinning against each other on a small machine. With
 * MEGATRAIN_CPU_GEMM=blas the whole product goes to OpenBLAS's own threads. */
#include <cblas.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_internal.h"

/* One block C[m0:m1, n0:n1] of the product (rows of op(A), columns of
 * op(B)), with the bias pre-fill when beta == 0. */
void cpu_gemm_block(const mt_gemm_desc *d, const float *a, const float *b, float *c, int m0,
                    int m1, int n0, int n1) {
  const int64_t lda = d->lda, ldb = d->ldb, ldc = d->ldc;
  const float *ap = d->trans_a ? a + m0 : a + (int64_t)m0 * lda;
  const float *bp = d->trans_b ? b + (int64_t)n0 * ldb : b + n0;
  float *cp = c + (int64_t)m0 * ldc + n0;
  const float *bias = d->bias ? (const float *)d->bias + n0 : NULL;
  const int m = m1 - m0, n = n1 - n0;
  float beta = d->beta;
  if (m <= 0 || n <= 0) return;
  if (bias && beta == 0.0f) {
    /* pre-fill with the bias and accumulate the product onto it */
    for (int i = 0; i < m; i++) memcpy(cp + (int64_t)i * ldc, bias, (size_t)n * sizeof(float));
    beta = 1.0f;
    bias = NULL;
  }
  if (d->k == 0) {
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++)
        cp[(int64_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * cp[(int64_t)i * ldc + j];
  } else if (m == 1) {
    /* one row (a decode step of `megatrain generate`): OpenBLAS's sgemm
     * packs the whole of B for it, ~10x slower than the matrix-vector
     * product; op(A) row 0 has stride lda when A is transposed */
    const blasint inc = d->trans_a ? (blasint)lda : 1;
    if (d->trans_b)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, d->k, d->alpha, bp, (blasint)ldb, ap, inc, beta,
                  cp, 1);
    else
      cblas_sgemv(CblasRowMajor, CblasTrans, d->k, n, d->alpha, bp, (blasint)ldb, ap, inc, beta,
                  cp, 1);
  } else {
    cblas_sgemm(CblasRowMajor, d->trans_a ? CblasTrans : CblasNoTrans,
                d->trans_b ? CblasTrans : CblasNoTrans, m, n, d->k, d->alpha, ap, (blasint)lda,
                bp, (blasint)ldb, beta, cp, (blasint)ldc);
  }
  if (bias)
    for (int i = 0; i < m; i++) {
      float *row = cp + (int64_t)i * ldc;
#pragma omp simd
      for (int j = 0; j < n; j++) row[j] += bias[j];
    }
}

/* Products below this many multiply-adds run as one single-threaded call. */
#define GEMM_PAR_MIN (1 << 20)

int cpu_gemm_nthreads(mt_backend *be) {
  return cpu_impl_of(be)->gemm_omp ? omp_get_max_threads() : 1;
}

/* Fixed slabs of C (columns when n >= m, else rows; edges on multiples of
 * 16) whose bounds depend only on the shape and MEGATRAIN_CPU_GEMM_SLABS,
 * never on the thread count: OpenBLAS's result for an element depends on
 * the shape of the call that computes it (its blocking and edge kernels
 * change with m and n; seen with the Haswell kernels on an AMD EPYC: rows
 * 0-63 of a 150-row product differ in the last bit from a 64-row product
 * over the same rows), so a thread-count-dependent cut would make results
 * depend on OMP_NUM_THREADS. With one thread the slabs run one after the
 * other. */
int cpu_gemm_slabs(mt_backend *be, int m, int n, int k, int *split_n, int *per) {
  const int64_t work = (int64_t)m * n * (k ? k : 1);
  *split_n = n >= m;
  const int len = *split_n ? n : m;
  if (!cpu_impl_of(be)->gemm_omp || work < GEMM_PAR_MIN) {
    *per = len;
    return 1;
  }
  const int nslab = cpu_impl_of(be)->gemm_slabs;
  int p = (int)mt_round_up((len + nslab - 1) / nslab, 16);
  if (p < 64) p = 64;
  *per = p;
  return (len + p - 1) / p;
}

void cpu_gemm_slab(const mt_gemm_desc *d, const float *a, const float *b, float *c, int split_n,
                   int per, int sl) {
  const int len = split_n ? d->n : d->m;
  int lo = sl * per, hi = lo + per < len ? lo + per : len;
  if (split_n)
    cpu_gemm_block(d, a, b, c, 0, d->m, lo, hi);
  else
    cpu_gemm_block(d, a, b, c, lo, hi, 0, d->n);
}

void cpu_gemm(mt_backend *be, const mt_gemm_desc *d) {
  MT_ASSERT(d->a_type == MT_F32 && d->b_type == MT_F32 && d->c_type == MT_F32);
  MT_ASSERT(d->batch >= 1 && d->m >= 0 && d->n >= 0 && d->k >= 0);
  if (d->m == 0 || d->n == 0) return;
  const int nthr = cpu_gemm_nthreads(be);
  int split_n, per;
  const int nslab = cpu_gemm_slabs(be, d->m, d->n, d->k, &split_n, &per);
  for (int bt = 0; bt < d->batch; bt++) {
    const float *a = (const float *)d->a + (int64_t)bt * d->stride_a;
    const float *b = (const float *)d->b + (int64_t)bt * d->stride_b;
    float *c = (float *)d->c + (int64_t)bt * d->stride_c;
    if (nslab == 1) {
      cpu_gemm_block(d, a, b, c, 0, d->m, 0, d->n);
      continue;
    }
    /* each slab one single-threaded sgemm, handed out dynamically so a
     * thread that the OS preempts does not stall the others; each C element
     * is computed by one slab, so results are deterministic. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr) if (nthr > 1)
    for (int sl = 0; sl < nslab; sl++) cpu_gemm_slab(d, a, b, c, split_n, per, sl);
  }
}

/* Columns are split into blocks; each block sums the rows in order, so the
 * result is independent of the thread count. */
#define BG_COLS 64
void cpu_bias_grad(mt_backend *be, float *db, const void *dout_, int64_t rows, int64_t n) {
  (void)be;
  const float *dout = (const float *)dout_;
  int64_t nblk = (n + BG_COLS - 1) / BG_COLS;
#pragma omp parallel for schedule(static) if (rows * n >= cpu_par_min(be))
  for (int64_t blk = 0; blk < nblk; blk++) {
    int64_t j0 = blk * BG_COLS, nj = n - j0 < BG_COLS ? n - j0 : BG_COLS;
    float acc[BG_COLS] = {0};
    for (int64_t r = 0; r < rows; r++) {
      const float *row = dout + r * n + j0;
#pragma omp simd
      for (int64_t j = 0; j < nj; j++) acc[j] += row[j];
    }
    for (int64_t j = 0; j < nj; j++) db[j0 + j] += acc[j];
  }
}
