/* cuda/cuda_gemm_bias.cu — the bias of a linear layer on the CUDA backend:
 * the bias rows added after a cuBLAS product (cudak_bias_rows, called by
 * cuda_gemm.c and cuda_gemm_grouped.c) and the bias gradient op, db[n] +=
 * the column sums of dout [rows, n] by the chunked column reduction
 * (cuda_col_reduce.cuh; cpu/'s counterpart: cpu_gemm_bias.c, cpu_gemm.c). */
#include "cuda_col_reduce.cuh"

#define TPB 256

/* ---- GEMM bias rows ---- */

template <typename CT, typename BT>
__global__ void k_bias_rows(CT *c, const BT *bias, int64_t m, int64_t n, int64_t ldc,
                            int64_t stride, int batch, int fill) {
  const int64_t per = m * n, total = per * batch;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t bt = i / per, rem = i - bt * per, r = rem / n, col = rem - r * n;
    CT *p = c + bt * stride + r * ldc + col;
    float bv = to_f(bias[col]);
    *p = from_f<CT>(fill ? bv : to_f(*p) + bv);
  }
}

extern "C" void cudak_bias_rows(cudaStream_t st, mt_dtype c_t, mt_dtype bias_t, void *c,
                                const void *bias, int64_t m, int64_t n, int64_t ldc,
                                int64_t stride, int batch, int fill) {
  const int64_t total = m * n * batch;
  if (total <= 0) return;
  const unsigned g = grid_for(total, TPB);
  if (c_t == MT_F32 && bias_t == MT_F32)
    MT_LAUNCH((k_bias_rows<float, float>), g, TPB, 0, st)
    ((float *)c, (const float *)bias, m, n, ldc, stride, batch, fill);
  else if (c_t == MT_BF16 && bias_t == MT_BF16)
    MT_LAUNCH((k_bias_rows<bf16, bf16>), g, TPB, 0, st)
    ((bf16 *)c, (const bf16 *)bias, m, n, ldc, stride, batch, fill);
  else if (c_t == MT_F32 && bias_t == MT_BF16)
    MT_LAUNCH((k_bias_rows<float, bf16>), g, TPB, 0, st)((float *)c, (const bf16 *)bias, m, n, ldc,
                                                stride, batch, fill);
  else
    mt_fatal("cuda gemm bias: unsupported C %s with bias %s", mt_dtype_name(c_t),
             mt_dtype_name(bias_t));
  MT_CUDA_LAUNCHED();
}

/* The one rounding of a bf16 GEMM with a bias and beta != 0 (cuda_gemm.c):
 * c = round(tmp + beta c + bias), tmp the fp32 product. */
template <typename BT>
__global__ void k_bias_axpby(bf16 *c, const float *tmp, float beta, const BT *bias, int64_t m,
                             int64_t n, int64_t ldc, int64_t stride, int batch) {
  const int64_t per = m * n, total = per * batch;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t bt = i / per, rem = i - bt * per, r = rem / n, col = rem - r * n;
    bf16 *p = c + bt * stride + r * ldc + col;
    *p = from_f<bf16>(tmp[i] + beta * to_f(*p) + to_f(bias[col]));
  }
}

extern "C" void cudak_bias_axpby_bf16(cudaStream_t st, void *c, const float *tmp, float beta,
                                      const void *bias, mt_dtype bias_t, int64_t m, int64_t n,
                                      int64_t ldc, int64_t stride, int batch) {
  const int64_t total = m * n * batch;
  if (total <= 0) return;
  const unsigned g = grid_for(total, TPB);
  if (bias_t == MT_BF16)
    MT_LAUNCH(k_bias_axpby<bf16>, g, TPB, 0, st)((bf16 *)c, tmp, beta, (const bf16 *)bias, m, n,
                                                ldc, stride, batch);
  else if (bias_t == MT_F32)
    MT_LAUNCH(k_bias_axpby<float>, g, TPB, 0, st)((bf16 *)c, tmp, beta, (const float *)bias, m,
                                                 n, ldc, stride, batch);
  else
    mt_fatal("cuda gemm bias: unsupported bias %s", mt_dtype_name(bias_t));
  MT_CUDA_LAUNCHED();
}

/* ---- bias gradient: the chunked column reduction (cuda_col_reduce.cuh) ---- */

template <typename T>
__global__ void k_bias_grad_part(float *part, const T *dout, int64_t rows, int64_t n) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  col_chunk_partials<1>(part, n, rows, n, j,
                        [&](int64_t r, float *acc) { acc[0] += to_f(dout[r * n + j]); });
}

extern "C" void cuda_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows,
                               int64_t n) {
  if (rows <= 0 || n <= 0) return;
  int64_t nch;
  float *part = cuda_col_part(be, rows, 1, n, &nch);
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_bias_grad_part<T>, dim3(col_blocks(n, CUDA_COL_TPB), grid_y_for(nch)),
                            CUDA_COL_TPB, 0, st)(part, (const T *)dout, rows, n)));
  MT_CUDA_LAUNCHED();
  float *const out[1] = {db};
  cuda_col_reduce(st, out, 1, part, nch, n);
}
