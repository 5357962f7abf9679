/* cpu/cpu_col_reduce.c — the chunked column reduction of the CPU backend,
 * written once for the weight (and bias) gradients of LayerNorm, RMSNorm
 * and qk-norm (cpu_norm.c); cuda/cuda_col_reduce.cu is its GPU counterpart.
 *
 * The rows are cut into chunks of MT_COL_CHUNK (core/scalar_math.h); the
 * chunks run over the OpenMP threads (static schedule), each adding its
 * rows' column partials, in row order, into its own zeroed block of the
 * workspace (the family's callback, which computes the per-row outputs of
 * those rows in the same pass); after the barrier every column sums the
 * chunks in chunk order (mt_col_chunks_reduce, shared with cuda/). Bitwise
 * independent of the thread count. */
#include "cpu_internal.h"

void cpu_col_chunks(mt_backend *be, int par, int64_t rows, int64_t cols, int k, float *const *out,
                    cpu_chunk_fn fn, const void *ctx) {
  const int64_t nchunk = (rows + MT_COL_CHUNK - 1) / MT_COL_CHUNK, blk = (int64_t)k * cols;
  /* part[c] = k blocks of `cols` partials of rows [c*32, c*32+32) */
  float *part = cpu_workspace(be, (size_t)(nchunk * blk) * sizeof(float));
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nchunk; c++) {
      float *p = part + c * blk;
      for (int64_t j = 0; j < blk; j++) p[j] = 0.0f;
      const int64_t r0 = c * MT_COL_CHUNK;
      const int64_t r1 = r0 + MT_COL_CHUNK < rows ? r0 + MT_COL_CHUNK : rows;
      fn(ctx, r0, r1, p);
    }
    /* implicit barrier; reduce partials in chunk order */
#pragma omp for schedule(static)
    for (int64_t j = 0; j < cols; j++) mt_col_chunks_reduce(out, k, part, nchunk, cols, j);
  }
}
