/* cuda/cuda_col_reduce.cuh — the first half of the CUDA backend's chunked
 * column reduction (core/scalar_math.h MT_COL_CHUNK), shared by the bias
 * gradient (cuda_gemm_bias.cu) and the weight/bias gradients of LayerNorm,
 * RMSNorm and qk-norm (cuda_norm.cu): the per-chunk partial sums, formed
 * inside each family's own partial kernel (one thread per column, chunks
 * over gridDim.y). The second half, the in-order sum over the chunks, is
 * one kernel for all of them: cuda_col_reduce (cuda_col_reduce.cu). cpu/'s
 * counterpart is cpu/cpu_col_reduce.c (same chunks, same order). */
#ifndef MT_CUDA_COL_REDUCE_CUH
#define MT_CUDA_COL_REDUCE_CUH

#include "cuda_dev.cuh"

/* For column j (the calling thread's): every chunk c of MT_COL_CHUNK rows
 * with c = blockIdx.y, blockIdx.y + gridDim.y, ... (so any chunk count
 * fits the grid): K partials acc[0..K), each from 0.0f, over the chunk's rows
 * in row order (add_row(r, acc) adds row r's terms), then
 * part[c * stride_c + t * cols + j] = acc[t]. */
template <int K, typename F>
__device__ __forceinline__ void col_chunk_partials(float *part, int64_t stride_c, int64_t rows,
                                                   int64_t cols, int64_t j, F add_row) {
  const int64_t nch = (rows + MT_COL_CHUNK - 1) / MT_COL_CHUNK;
  for (int64_t c = blockIdx.y; c < nch; c += gridDim.y) {
    const int64_t r0 = c * MT_COL_CHUNK;
    const int64_t r1 = r0 + MT_COL_CHUNK < rows ? r0 + MT_COL_CHUNK : rows;
    float acc[K];
#pragma unroll
    for (int t = 0; t < K; t++) acc[t] = 0.0f;
    for (int64_t r = r0; r < r1; r++) add_row(r, acc);
#pragma unroll
    for (int t = 0; t < K; t++) part[c * stride_c + t * cols + j] = acc[t];
  }
}

#endif
