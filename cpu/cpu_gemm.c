/* cpu/cpu_gemm.c — GEMM through OpenBLAS cblas_sgemm (row-major) and the
 * bias gradient (column sums). */
#include <cblas.h>

#include "core/util.h"
#include "cpu_internal.h"

/* C rows = bias (each of the m rows of C gets bias[0..n)). */
static void fill_rows_with_bias(float *c, int64_t ldc, const float *bias, int m, int n) {
#pragma omp parallel for schedule(static) if ((int64_t)m * n >= CPU_PAR_MIN)
  for (int i = 0; i < m; i++) memcpy(c + (int64_t)i * ldc, bias, (size_t)n * sizeof(float));
}

static void add_bias_rows(float *c, int64_t ldc, const float *bias, int m, int n) {
#pragma omp parallel for schedule(static) if ((int64_t)m * n >= CPU_PAR_MIN)
  for (int i = 0; i < m; i++) {
    float *row = c + (int64_t)i * ldc;
#pragma omp simd
    for (int j = 0; j < n; j++) row[j] += bias[j];
  }
}

void cpu_gemm(mt_backend *be, const mt_gemm_desc *d) {
  (void)be;
  MT_ASSERT(d->a_type == MT_F32 && d->b_type == MT_F32 && d->c_type == MT_F32);
  MT_ASSERT(d->batch >= 1 && d->m >= 0 && d->n >= 0 && d->k >= 0);
  if (d->m == 0 || d->n == 0) return;
  const enum CBLAS_TRANSPOSE ta = d->trans_a ? CblasTrans : CblasNoTrans;
  const enum CBLAS_TRANSPOSE tb = d->trans_b ? CblasTrans : CblasNoTrans;
  const float *bias = (const float *)d->bias;
  for (int i = 0; i < d->batch; i++) {
    const float *a = (const float *)d->a + (int64_t)i * d->stride_a;
    const float *b = (const float *)d->b + (int64_t)i * d->stride_b;
    float *c = (float *)d->c + (int64_t)i * d->stride_c;
    float beta = d->beta;
    /* With beta == 0 the bias is pre-filled and the product accumulated
     * onto it (one pass over C instead of two). */
    int bias_after = 0;
    if (bias && beta == 0.0f) {
      fill_rows_with_bias(c, d->ldc, bias, d->m, d->n);
      beta = 1.0f;
    } else if (bias) {
      bias_after = 1;
    }
    if (d->k == 0) {
      /* sgemm with k == 0 only scales C by beta. */
      if (beta != 1.0f)
        for (int r = 0; r < d->m; r++)
          for (int j = 0; j < d->n; j++)
            c[(int64_t)r * d->ldc + j] = beta == 0.0f ? 0.0f : beta * c[(int64_t)r * d->ldc + j];
    } else {
      cblas_sgemm(CblasRowMajor, ta, tb, d->m, d->n, d->k, d->alpha, a, (blasint)d->lda, b,
                  (blasint)d->ldb, beta, c, (blasint)d->ldc);
    }
    if (bias_after) add_bias_rows(c, d->ldc, bias, d->m, d->n);
  }
}

/* Columns are split into blocks; each block sums the rows in order, so the
 * result is independent of the thread count. */
#define BG_COLS 64
void cpu_bias_grad(mt_backend *be, float *db, const void *dout_, int64_t rows, int64_t n) {
  (void)be;
  const float *dout = (const float *)dout_;
  int64_t nblk = (n + BG_COLS - 1) / BG_COLS;
#pragma omp parallel for schedule(static) if (rows * n >= CPU_PAR_MIN)
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
