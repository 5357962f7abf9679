/* cuda/cuda_cross_entropy.cu — the pieces of Megatron's
 * vocab_parallel_cross_entropy on the CUDA backend (row max, sum of exps and
 * target logit, loss, in-place gradient), op-table entries included (specs:
 * core/backend.h; reference semantics: cpu/cpu_cross_entropy.c). One block
 * per row with fixed block reductions (cuda_dev.cuh): deterministic. */
#include "cuda_dev.cuh"

#define TPB 256

/* ---- cross-entropy pieces: one block per row ---- */

template <typename T>
__global__ void k_xent_max(float *row_max, const T *logits, int64_t vl, int64_t valid) {
  __shared__ float sh[32];
  const T *row = logits + (int64_t)blockIdx.x * vl;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += TPB) mx = fmaxf(mx, to_f(row[j]));
  mx = block_max(mx, sh);
  if (threadIdx.x == 0) row_max[blockIdx.x] = mx;
}

template <typename T>
__global__ void k_xent_stats(float *sumexp, float *tgt_logit, const T *logits,
                             const float *row_max, const int32_t *targets, int64_t vl,
                             int64_t valid, int64_t v_start) {
  __shared__ float sh[32];
  const int64_t i = blockIdx.x;
  const T *row = logits + i * vl;
  const float mx = row_max[i];
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < valid; j += TPB) acc += expf(to_f(row[j]) - mx);
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) {
    sumexp[i] = acc;
    int64_t t = (int64_t)targets[i] - v_start;
    tgt_logit[i] = (t >= 0 && t < valid) ? to_f(row[t]) : 0.0f;
  }
}

__global__ void k_xent_loss(float *loss, const float *row_max, const float *sumexp,
                            const float *tgt_logit, int64_t n, const float *mask) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float w = mask ? mask[i] : 1.0f;
    loss[i] = w == 0.0f ? 0.0f : w * (logf(sumexp[i]) + row_max[i] - tgt_logit[i]);
  }
}

/* The target's "- scale" is applied before rounding (one rounding in bf16). */
template <typename T>
__global__ void k_xent_bwd(T *logits, const float *row_max, const float *sumexp,
                           const int32_t *targets, int64_t vl, int64_t valid, int64_t v_start,
                           float scale, const float *mask) {
  const int64_t i = blockIdx.x;
  T *row = logits + i * vl;
  const float sc = mask ? scale * mask[i] : scale; /* 0: a masked row, all 0 */
  const float mx = row_max[i], f = sc / sumexp[i];
  const int64_t tg = (int64_t)targets[i] - v_start;
  for (int64_t j = threadIdx.x; j < vl; j += TPB) {
    float v = 0.0f;
    if (j < valid && sc != 0.0f) {
      v = f * expf(to_f(row[j]) - mx);
      if (j == tg) v -= sc;
    }
    row[j] = from_f<T>(v);
  }
}

extern "C" void cuda_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n,
                              int64_t vl, int64_t valid) {
  MT_ASSERT(valid <= vl);
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_xent_max<T>, grid_x_checked(n, "xent_max"), TPB, 0, st)(
                     row_max, (const T *)logits, vl, valid)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit,
                                const void *logits, const float *row_max, const int32_t *targets,
                                int64_t n, int64_t vl, int64_t valid, int64_t v_start) {
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_xent_stats<T>, grid_x_checked(n, "xent_stats"), TPB, 0, st)(
                     sumexp, tgt_logit, (const T *)logits, row_max, targets, vl, valid, v_start)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_xent_loss(mt_backend *be, float *loss, const float *row_max,
                               const float *sumexp, const float *tgt_logit, int64_t n,
                               const float *loss_mask) {
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_LAUNCH(k_xent_loss, grid_for(n, TPB), TPB, 0, st)(loss, row_max, sumexp, tgt_logit, n,
                                                        loss_mask);
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_xent_bwd(mt_backend *be, void *logits, const float *row_max,
                              const float *sumexp, const int32_t *targets, int64_t n, int64_t vl,
                              int64_t valid, int64_t v_start, float scale,
                              const float *loss_mask) {
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_xent_bwd<T>, grid_x_checked(n, "xent_bwd"), TPB, 0, st)(
                     (T *)logits, row_max, sumexp, targets, vl, valid, v_start, scale,
                     loss_mask)));
  MT_CUDA_LAUNCHED();
}
