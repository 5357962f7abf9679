/* cpu/cpu_gemm_bias.c — the bias gradient of a linear layer on the CPU
 * backend: db[n] += the column sums of dout [rows, n], fp32 and bf16
 * storage (the bias itself is added in the GEMM, cpu_gemm_block; cuda/'s
 * cuda_gemm_bias.cu holds both). Not the chunked column reduction of the
 * norms (cpu_col_reduce.c): here every column block sums all rows in order,
 * which is already independent of the thread count. */
#include "core/util.h"
#include "cpu_bf16.h"

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

/* ---- bf16 storage ---- */

void cpu_bf16_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){rows * n}, p);
  bf_widen(be, p[0], dout, rows * n);
  cpu_bias_grad(be, db, p[0], rows, n);
}
