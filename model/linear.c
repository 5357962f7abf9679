/* model/linear.c — see linear.h. */
#include "model/linear.h"

void mt_linear_gemm(mt_backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c,
                    int64_t ldc, mt_dtype c_type, const void *bias) {
  mt_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = (int)m, .n = (int)n, .k = (int)k,
                    .alpha = 1.0f, .beta = beta, .a = a, .lda = lda, .b = b, .ldb = ldb,
                    .c = c, .ldc = ldc, .a_type = be->dtype, .b_type = be->dtype,
                    .c_type = c_type, .bias = bias, .batch = 1};
  be->ops->gemm(be, &d);
}

void mt_linear_fwd(mt_backend *be, void *y, const void *x, const void *w, const void *bias,
                   int64_t M, int64_t out, int64_t in) {
  /* y[M, out] = x[M, in] @ W[out, in]^T + bias */
  mt_linear_gemm(be, 0, 1, M, out, in, x, in, w, in, 0.0f, y, out, be->dtype, bias);
}

void mt_linear_bwd(mt_backend *be, void *dx, float *dw, float *db, const void *dy, const void *x,
                   const void *w, int64_t M, int64_t out, int64_t in) {
  /* dW[out, in] += dy[M, out]^T @ x[M, in] (fp32 accumulation) */
  mt_linear_gemm(be, 1, 0, out, in, M, dy, out, x, in, 1.0f, dw, in, MT_F32, NULL);
  if (db) be->ops->bias_grad(be, db, dy, M, out);
  /* dx[M, in] = dy[M, out] @ W[out, in] */
  if (dx) mt_linear_gemm(be, 0, 0, M, in, out, dy, out, w, in, 0.0f, dx, in, be->dtype, NULL);
}
