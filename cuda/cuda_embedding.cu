/* cuda/cuda_embedding.cu — the embeddings of the CUDA backend, op-table
 * entries included: the (vocab-parallel) token embedding and the learned
 * position embedding, forward and backward (specs: core/backend.h;
 * reference semantics: cpu/cpu_embedding.c).
 *
 * Determinism without float atomics:
 *  - embedding_bwd: per-row ownership. Block t handles token t only if t is
 *    the first occurrence of its id; it then adds the dout rows of every
 *    occurrence in token order into dw (one thread per column), so every dw
 *    element has one writer and the order equals cpu/'s (bitwise equal in
 *    fp32); a 256-token chunk without a match (one __syncthreads_or)
 *    skips the column loop;
 *  - pos_embedding_bwd: one thread per (position, column) sums bi in order.
 */
#include "cuda_dev.cuh"

#define TPB 256

/* ---- embeddings ---- */

template <typename T>
__global__ void k_emb_fwd(T *out, const int32_t *tokens, int64_t n, const T *w, int64_t v_start,
                          int64_t v_end, int64_t h) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * h;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t t = i / h, c = i - t * h, id = tokens[t];
    out[i] = (id >= v_start && id < v_end) ? w[(id - v_start) * h + c] : from_f<T>(0.0f);
  }
}

extern "C" void cuda_embedding_fwd(mt_backend *be, void *out, const int32_t *tokens, int64_t n,
                                   const void *w, int64_t v_start, int64_t v_end, int64_t h) {
  if (n <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_emb_fwd<T>, grid_for(n * h, TPB), TPB, 0, st)(
                     (T *)out, tokens, n, (const T *)w, v_start, v_end, h)));
  MT_CUDA_LAUNCHED();
}

/* Block t (TPB threads): owner of id = tokens[t] iff no earlier token has
 * that id; the owner walks tokens [t, n) in chunks of TPB, compacts the
 * matches of a chunk in order (warp ballots), and adds their rows. */
template <typename T>
__global__ void k_emb_bwd(float *dw, const int32_t *tokens, int64_t n, const T *dout,
                          int64_t v_start, int64_t v_end, int64_t h) {
  __shared__ int list[TPB];
  __shared__ int wcnt[TPB / 32];
  const int64_t t = blockIdx.x;
  const int64_t id = tokens[t];
  if (id < v_start || id >= v_end) return; /* uniform over the block */
  for (int64_t base = 0; base < t; base += TPB) {
    const int64_t j = base + threadIdx.x;
    if (__syncthreads_or(j < t && tokens[j] == id)) return; /* not the first: uniform */
  }
  float *row = dw + (id - v_start) * h;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  for (int64_t base = t; base < n; base += TPB) {
    const int64_t j = base + threadIdx.x;
    const int match = j < n && tokens[j] == id;
    /* a chunk without a match (uniform over the block) skips the column loop */
    if (!__syncthreads_or(match)) continue;
    const unsigned bal = __ballot_sync(0xffffffffu, match);
    if (lane == 0) wcnt[wid] = __popc(bal);
    __syncthreads();
    int off = 0, total = 0;
    for (int w = 0; w < TPB / 32; w++) {
      if (w < wid) off += wcnt[w];
      total += wcnt[w];
    }
    if (match) list[off + __popc(bal & ((1u << lane) - 1u))] = (int)threadIdx.x;
    __syncthreads();
    for (int64_t c = threadIdx.x; c < h; c += TPB) {
      float acc = row[c];
      for (int q = 0; q < total; q++) acc += to_f(dout[(base + list[q]) * h + c]);
      row[c] = acc;
    }
    __syncthreads(); /* list and wcnt are rewritten by the next chunk */
  }
}

extern "C" void cuda_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                                   const void *dout, int64_t v_start, int64_t v_end, int64_t h) {
  if (n <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_emb_bwd<T>, grid_x_checked(n, "embedding_bwd"), TPB, 0, st)(
                     dw, tokens, n, (const T *)dout, v_start, v_end, h)));
  MT_CUDA_LAUNCHED();
}

template <typename T>
__global__ void k_pos_fwd(T *x, const T *wpe, int64_t s, int64_t b, int64_t h, int64_t s_offset) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < s * b * h;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / h, c = i - r * h, si = r / b;
    x[i] = from_f<T>(to_f(x[i]) + to_f(wpe[(s_offset + si) * h + c]));
  }
}

template <typename T>
__global__ void k_pos_bwd(float *dwpe, const T *dout, int64_t s, int64_t b, int64_t h,
                          int64_t s_offset) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < s * h;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t si = i / h, c = i - si * h;
    float *dst = dwpe + (s_offset + si) * h + c;
    float acc = *dst;
    for (int64_t bi = 0; bi < b; bi++) acc += to_f(dout[(si * b + bi) * h + c]);
    *dst = acc;
  }
}

extern "C" void cuda_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s,
                                       int64_t b, int64_t h, int64_t s_offset) {
  if (s <= 0 || b <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_pos_fwd<T>, grid_for(s * b * h, TPB), TPB, 0, st)(
                     (T *)x, (const T *)wpe, s, b, h, s_offset)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s,
                                       int64_t b, int64_t h, int64_t s_offset) {
  if (s <= 0 || b <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_pos_bwd<T>, grid_for(s * h, TPB), TPB, 0, st)(dwpe, (const T *)dout,
                                                                            s, b, h, s_offset)));
  MT_CUDA_LAUNCHED();
}
