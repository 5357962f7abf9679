/* cuda/cuda_col_reduce.cu — the second half of the CUDA backend's chunked
 * column reduction (the first: cuda_col_reduce.cuh): the workspace of the
 * chunk partials and ONE kernel summing them over the chunks in chunk order
 * per column (mt_col_chunks_reduce of core/scalar_math.h, the same
 * definition cpu/cpu_col_reduce.c runs), for the bias gradient and the
 * weight/bias gradients of LayerNorm, RMSNorm and qk-norm. No atomics: one
 * thread per column, a fixed order, bitwise independent of the GPU model.
 * Small blocks (CUDA_COL_RED_TPB, cuda_dev.cuh) give large widths enough
 * blocks. */
#include "cuda_col_reduce.cuh"

/* The outputs of one reduction, passed by value (k <= CUDA_COL_MAX_OUT). */
struct col_outs {
  float *out[CUDA_COL_MAX_OUT];
  int k;
};

__global__ void k_col_reduce(col_outs o, const float *part, int64_t nch, int64_t cols) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  mt_col_chunks_reduce(o.out, o.k, part, nch, cols, j);
}

extern "C" float *cuda_col_part(mt_backend *be, int64_t rows, int k, int64_t cols, int64_t *nch) {
  *nch = (rows + MT_COL_CHUNK - 1) / MT_COL_CHUNK;
  return (float *)cuda_workspace(be, (size_t)(*nch * k * cols) * sizeof(float));
}

extern "C" void cuda_col_reduce(cudaStream_t st, float *const *out, int k, const float *part,
                                int64_t nch, int64_t cols) {
  MT_ASSERT(k >= 1 && k <= CUDA_COL_MAX_OUT);
  if (cols <= 0) return;
  col_outs o;
  for (int t = 0; t < CUDA_COL_MAX_OUT; t++) o.out[t] = t < k ? out[t] : NULL;
  o.k = k;
  MT_LAUNCH(k_col_reduce, col_blocks(cols, CUDA_COL_RED_TPB), CUDA_COL_RED_TPB, 0, st)(o, part, nch,
                                                                             cols);
  MT_CUDA_LAUNCHED();
}
