/* cuda/cuda_nn.cu — LayerNorm, GELU, bias gradient, embeddings and the
 * cross-entropy pieces for the CUDA backend (specs: core/backend.h;
 * reference semantics: cpu/cpu_norm_act.c, cpu_gemm.c, cpu_embed_xent.c).
 *
 * Determinism without float atomics:
 *  - LayerNorm dw/db and bias_grad: per-chunk partials over CUDA_LN_CHUNK
 *    consecutive rows (rows summed in order), then a second kernel sums the
 *    chunks in order per column — the same chunking as cpu/ for LayerNorm;
 *    small blocks (CUDA_COL_TPB / CUDA_COL_RED_TPB threads, cuda_dev.cuh)
 *    so large h gets enough blocks, chunks looped over gridDim.y (any row
 *    count);
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
#define ROWS_PER_BLOCK 4 /* warp-per-row kernels: 4 warps per block */

/* ---- LayerNorm (Ba et al. 2016), fp32 statistics, two-pass variance ---- */

template <typename T>
__global__ void k_ln_fwd(T *out, float *mean, float *rstd, const T *in, const T *w, const T *b,
                         int64_t rows, int64_t h, float eps) {
  const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const T *x = in + r * h;
  T *y = out + r * h;
  float s = 0.0f;
  for (int64_t j = lane; j < h; j += 32) s += to_f(x[j]);
  const float mu = warp_sum(s) / (float)h;
  float v = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float t = to_f(x[j]) - mu;
    v += t * t;
  }
  const float rs = 1.0f / sqrtf(warp_sum(v) / (float)h + eps);
  for (int64_t j = lane; j < h; j += 32)
    y[j] = from_f<T>((to_f(x[j]) - mu) * rs * to_f(w[j]) + to_f(b[j]));
  if (lane == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

static unsigned rows_grid(int64_t rows) {
  return grid_x_checked((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, "a warp-per-row kernel");
}

extern "C" void cudak_layernorm_fwd(cudaStream_t st, mt_dtype t, void *out, float *mean,
                                    float *rstd, const void *in, const void *w, const void *b,
                                    int64_t rows, int64_t h, float eps) {
  if (rows <= 0 || h <= 0) return;
  MT_DISPATCH(t,
              (MT_LAUNCH(k_ln_fwd<T>, rows_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                  (T *)out, mean, rstd, (const T *)in, (const T *)w, (const T *)b, rows, h, eps)));
  MT_CUDA_LAUNCHED();
}

/* din (accumulate), one warp per row. */
template <typename T>
__global__ void k_ln_bwd_dx(T *din, const T *dout, const T *in, const T *w, const float *mean,
                            const float *rstd, int64_t rows, int64_t h) {
  const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const T *x = in + r * h, *g = dout + r * h;
  T *dx = din + r * h;
  const float mu = mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs, gw = to_f(g[j]) * to_f(w[j]);
    sg += gw;
    sgx += gw * xh;
  }
  const float mg = warp_sum(sg) / (float)h, mgx = warp_sum(sgx) / (float)h;
  for (int64_t j = lane; j < h; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs;
    dx[j] = from_f<T>(to_f(dx[j]) + rs * (to_f(g[j]) * to_f(w[j]) - mg - xh * mgx));
  }
}

/* part[c] = {dw partial [h], db partial [h]} over rows of chunk c. */
template <typename T>
__global__ void k_ln_bwd_part(float *part, const T *dout, const T *in, const float *mean,
                              const float *rstd, int64_t rows, int64_t h) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= h) return;
  const int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  for (int64_t c = blockIdx.y; c < nch; c += gridDim.y) {
    const int64_t r0 = c * CUDA_LN_CHUNK;
    const int64_t r1 = r0 + CUDA_LN_CHUNK < rows ? r0 + CUDA_LN_CHUNK : rows;
    float pw = 0.0f, pb = 0.0f;
    for (int64_t r = r0; r < r1; r++) {
      float g = to_f(dout[r * h + j]);
      float xh = (to_f(in[r * h + j]) - mean[r]) * rstd[r];
      pw += g * xh;
      pb += g;
    }
    part[c * 2 * h + j] = pw;
    part[c * 2 * h + h + j] = pb;
  }
}

__global__ void k_ln_bwd_reduce(float *dw, float *db, const float *part, int64_t nch, int64_t h) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= h) return;
  mt_layernorm_dwdb_reduce(dw, db, part, nch, h, j);
}

extern "C" void cudak_layernorm_bwd(cudaStream_t st, mt_dtype t, void *din, float *dw, float *db,
                                    const void *dout, const void *in, const void *w,
                                    const float *mean, const float *rstd, int64_t rows, int64_t h,
                                    float *part) {
  if (rows <= 0 || h <= 0) return;
  const int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  MT_DISPATCH(t, (MT_LAUNCH(k_ln_bwd_dx<T>, rows_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                     (T *)din, (const T *)dout, (const T *)in, (const T *)w, mean, rstd, rows, h)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(t, (MT_LAUNCH(k_ln_bwd_part<T>, dim3(col_blocks(h, CUDA_COL_TPB), grid_y_for(nch)),
                            CUDA_COL_TPB, 0, st)(part, (const T *)dout, (const T *)in, mean, rstd,
                                                 rows, h)));
  MT_CUDA_LAUNCHED();
  MT_LAUNCH(k_ln_bwd_reduce, col_blocks(h, CUDA_COL_RED_TPB), CUDA_COL_RED_TPB, 0, st)(
      dw, db, part, nch, h);
  MT_CUDA_LAUNCHED();
}

/* ---- GELU, tanh form: mt_gelu_tanh / mt_gelu_tanh_grad (core/scalar_math.h),
 * shared with cpu/; on the device their exp is CUDA's expf ---- */

template <typename T> __global__ void k_gelu_fwd(T *out, const T *in, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = from_f<T>(mt_gelu_tanh(to_f(in[i])));
}

template <typename T> __global__ void k_gelu_bwd(T *din, const T *in, const T *dout, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    din[i] = from_f<T>(mt_gelu_tanh_grad(to_f(in[i]), to_f(dout[i])));
}

extern "C" void cudak_gelu_fwd(cudaStream_t st, mt_dtype t, void *out, const void *in, int64_t n) {
  if (n <= 0) return;
  MT_DISPATCH(t,
              (MT_LAUNCH(k_gelu_fwd<T>, grid_for(n, TPB), TPB, 0, st)((T *)out, (const T *)in, n)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cudak_gelu_bwd(cudaStream_t st, mt_dtype t, void *din, const void *in,
                               const void *dout, int64_t n) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_gelu_bwd<T>, grid_for(n, TPB), TPB, 0, st)((T *)din, (const T *)in,
                                                                         (const T *)dout, n)));
  MT_CUDA_LAUNCHED();
}

/* ---- bias gradient: chunk partials, then chunks summed in order ---- */

template <typename T>
__global__ void k_bias_grad_part(float *part, const T *dout, int64_t rows, int64_t n) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  for (int64_t c = blockIdx.y; c < nch; c += gridDim.y) {
    const int64_t r0 = c * CUDA_LN_CHUNK;
    const int64_t r1 = r0 + CUDA_LN_CHUNK < rows ? r0 + CUDA_LN_CHUNK : rows;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; r++) acc += to_f(dout[r * n + j]);
    part[c * n + j] = acc;
  }
}

__global__ void k_bias_grad_reduce(float *db, const float *part, int64_t nch, int64_t n) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float acc = 0.0f;
  for (int64_t c = 0; c < nch; c++) acc += part[c * n + j];
  db[j] += acc;
}

extern "C" void cudak_bias_grad(cudaStream_t st, mt_dtype t, float *db, const void *dout,
                                int64_t rows, int64_t n, float *part) {
  if (rows <= 0 || n <= 0) return;
  const int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  MT_DISPATCH(t, (MT_LAUNCH(k_bias_grad_part<T>, dim3(col_blocks(n, CUDA_COL_TPB), grid_y_for(nch)),
                            CUDA_COL_TPB, 0, st)(part, (const T *)dout, rows, n)));
  MT_CUDA_LAUNCHED();
  MT_LAUNCH(k_bias_grad_reduce, col_blocks(n, CUDA_COL_RED_TPB), CUDA_COL_RED_TPB, 0, st)(
      db, part, nch, n);
  MT_CUDA_LAUNCHED();
}

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

extern "C" void cudak_embedding_fwd(cudaStream_t st, mt_dtype t, void *out, const int32_t *tokens,
                                    int64_t n, const void *w, int64_t v_start, int64_t v_end,
                                    int64_t h) {
  if (n <= 0 || h <= 0) return;
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

extern "C" void cudak_embedding_bwd(cudaStream_t st, mt_dtype t, float *dw, const int32_t *tokens,
                                    int64_t n, const void *dout, int64_t v_start, int64_t v_end,
                                    int64_t h) {
  if (n <= 0 || h <= 0) return;
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

extern "C" void cudak_pos_embedding_fwd(cudaStream_t st, mt_dtype t, void *x, const void *wpe,
                                        int64_t s, int64_t b, int64_t h, int64_t s_offset) {
  if (s <= 0 || b <= 0 || h <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_pos_fwd<T>, grid_for(s * b * h, TPB), TPB, 0, st)(
                     (T *)x, (const T *)wpe, s, b, h, s_offset)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cudak_pos_embedding_bwd(cudaStream_t st, mt_dtype t, float *dwpe,
                                        const void *dout, int64_t s, int64_t b, int64_t h,
                                        int64_t s_offset) {
  if (s <= 0 || b <= 0 || h <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_pos_bwd<T>, grid_for(s * h, TPB), TPB, 0, st)(dwpe, (const T *)dout,
                                                                            s, b, h, s_offset)));
  MT_CUDA_LAUNCHED();
}

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
                            const float *tgt_logit, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    loss[i] = logf(sumexp[i]) + row_max[i] - tgt_logit[i];
}

/* The target's "- scale" is applied before rounding (one rounding in bf16). */
template <typename T>
__global__ void k_xent_bwd(T *logits, const float *row_max, const float *sumexp,
                           const int32_t *targets, int64_t vl, int64_t valid, int64_t v_start,
                           float scale) {
  const int64_t i = blockIdx.x;
  T *row = logits + i * vl;
  const float mx = row_max[i], f = scale / sumexp[i];
  const int64_t tg = (int64_t)targets[i] - v_start;
  for (int64_t j = threadIdx.x; j < vl; j += TPB) {
    float v = 0.0f;
    if (j < valid) {
      v = f * expf(to_f(row[j]) - mx);
      if (j == tg) v -= scale;
    }
    row[j] = from_f<T>(v);
  }
}

extern "C" void cudak_xent_max(cudaStream_t st, mt_dtype t, float *row_max, const void *logits,
                               int64_t n, int64_t vl, int64_t valid) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_xent_max<T>, grid_x_checked(n, "xent_max"), TPB, 0, st)(
                     row_max, (const T *)logits, vl, valid)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cudak_xent_stats(cudaStream_t st, mt_dtype t, float *sumexp, float *tgt_logit,
                                 const void *logits, const float *row_max,
                                 const int32_t *targets, int64_t n, int64_t vl, int64_t valid,
                                 int64_t v_start) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_xent_stats<T>, grid_x_checked(n, "xent_stats"), TPB, 0, st)(
                     sumexp, tgt_logit, (const T *)logits, row_max, targets, vl, valid, v_start)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cudak_xent_loss(cudaStream_t st, float *loss, const float *row_max,
                                const float *sumexp, const float *tgt_logit, int64_t n) {
  if (n <= 0) return;
  MT_LAUNCH(k_xent_loss, grid_for(n, TPB), TPB, 0, st)(loss, row_max, sumexp, tgt_logit, n);
  MT_CUDA_LAUNCHED();
}

extern "C" void cudak_xent_bwd(cudaStream_t st, mt_dtype t, void *logits, const float *row_max,
                               const float *sumexp, const int32_t *targets, int64_t n, int64_t vl,
                               int64_t valid, int64_t v_start, float scale) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_xent_bwd<T>, grid_x_checked(n, "xent_bwd"), TPB, 0, st)(
                     (T *)logits, row_max, sumexp, targets, vl, valid, v_start, scale)));
  MT_CUDA_LAUNCHED();
}
