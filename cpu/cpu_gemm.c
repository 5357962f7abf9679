/* cpu/cpu_gemm.c — GEMM through OpenBLAS cblas_sgemm (row-major), fp32 and
 * bf16 storage (cuda/cuda_gemm.c is the GPU counterpart; the grouped GEMM is
 * cpu_gemm_grouped.c, the bias gradient cpu_gemm_bias.c).
 *
 * Threading (cpu_impl.gemm_omp, default on): OpenBLAS runs single-threaded
 * and large products are split into column (or row) slabs whose bounds
 * depend on the shape only (cpu_gemm_slabs), handed to the OpenMP threads. One thread pool for every op avoids OpenMP and OpenBLAS worker
 * threads spinning against each other on a small machine. With
 * MEGATRAIN_CPU_GEMM=blas the whole product goes to OpenBLAS's own threads. */
#include <cblas.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_bf16.h"

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

/* ---- bf16 storage ---- */

/* Elements from the first to one past the last of a strided batch of
 * row-major [r, c] matrices with leading dimension ld (0 when empty). */
static int64_t bf16_span(int batch, int64_t stride, int64_t r, int64_t c, int64_t ld) {
  if (r <= 0 || c <= 0) return 0;
  return (int64_t)(batch - 1) * stride + (r - 1) * ld + c;
}

/* The C rows of d between the fp32 copy f and the bf16 C (to_bf16: narrow,
 * else widen), touching only the [m, n] blocks (not the ld / stride gaps). */
static void bf16_c_rows(mt_backend *be, const mt_gemm_desc *d, float *f, int to_bf16) {
  uint16_t *c = (uint16_t *)d->c;
  const int contiguous = d->ldc == d->n && (d->batch == 1 || d->stride_c == (int64_t)d->m * d->n);
  const int64_t nrow = contiguous ? 1 : (int64_t)d->batch * d->m;
  const int64_t len = contiguous ? (int64_t)d->batch * d->m * d->n : d->n;
  for (int64_t r = 0; r < nrow; r++) {
    const int64_t off = contiguous ? 0 : (r / d->m) * d->stride_c + (r % d->m) * d->ldc;
    if (to_bf16)
      bf_narrow(be, c + off, f + off, len);
    else
      bf_widen(be, f + off, c + off, len);
  }
}

/* a, b (and the bias) bf16, c bf16 or fp32; or everything fp32 (as cuda/
 * accepts on a bf16 backend): the fp32 op. */
void cpu_bf16_gemm(mt_backend *be, const mt_gemm_desc *d) {
  if (d->a_type == MT_F32 && d->b_type == MT_F32 && d->c_type == MT_F32) {
    cpu_gemm(be, d);
    return;
  }
  MT_ASSERT(d->a_type == MT_BF16 && d->b_type == MT_BF16);
  MT_ASSERT(d->c_type == MT_BF16 || d->c_type == MT_F32);
  MT_ASSERT(d->batch >= 1 && d->m >= 0 && d->n >= 0 && d->k >= 0);
  if (d->m == 0 || d->n == 0) return;
  const int64_t na = d->trans_a ? bf16_span(d->batch, d->stride_a, d->k, d->m, d->lda)
                                : bf16_span(d->batch, d->stride_a, d->m, d->k, d->lda);
  const int64_t nb = d->trans_b ? bf16_span(d->batch, d->stride_b, d->n, d->k, d->ldb)
                                : bf16_span(d->batch, d->stride_b, d->k, d->n, d->ldb);
  const int cb = d->c_type == MT_BF16;
  const int64_t nc = cb ? bf16_span(d->batch, d->stride_c, d->m, d->n, d->ldc) : 0;
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){na, nb, nc, d->bias ? d->n : 0}, p);
  bf_widen(be, p[0], d->a, na);
  bf_widen(be, p[1], d->b, nb);
  bf_widen(be, p[3], d->bias, d->bias ? d->n : 0);
  mt_gemm_desc f = *d;
  f.a = p[0];
  f.b = p[1];
  f.bias = d->bias ? p[3] : NULL;
  f.a_type = f.b_type = f.c_type = MT_F32;
  if (cb) {
    f.c = p[2];
    if (d->beta != 0.0f) bf16_c_rows(be, d, p[2], 0); /* C read: alpha AB + beta C, one rounding */
  }
  cpu_gemm(be, &f);
  if (cb) bf16_c_rows(be, d, p[2], 1);
}
