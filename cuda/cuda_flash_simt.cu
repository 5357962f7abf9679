/* cuda/cuda_flash_simt.cu — fused causal attention on the CUDA cores (fp32
 * FFMA), any storage dtype, head dims up to FA_SIMT_MAX_HN, and a value
 * width hv != hn (multi-latent attention; V, ctx and dctx tiles are [rows]
 * [hv | 1], the per-lane columns cover max(hn, hv)): the fp32 path
 * (its results stay within the fp32 op-case tolerances of cpu/, which TF32
 * tensor cores would not) and the bf16 fallback for head dims above
 * FA_MMA_MAX_HN. Same algorithm as cuda_flash_mma.cu (FlashAttention-2,
 * arXiv:2307.08691), natural-log domain, expf/logf.
 *
 * Blocks of 4 warps. Tiles live in shared memory as fp32 [rows][HS] with HS
 * = hn | 1 (odd, so a lane-per-row dot product is conflict-free). A warp
 * works on one row of its own at a time:
 *   forward / dQ: each warp owns 4 query rows of a 16-row block; per 32-key
 *     tile lane j scores key j (dot over hn), the row's online softmax runs
 *     through warp reductions, and lane j's probability is broadcast by
 *     shuffles into the output columns d = lane + 32c that each lane owns;
 *   dK/dV: each warp owns 4 keys of a 16-key block and loops over the
 *     group's query heads and 32-query tiles in order (lane i scores query
 *     i), accumulating dK and dV of its keys in registers.
 * Document masking (mt_attn_desc.doc_start, fa_qdoc): a key before the
 * query's document start is masked like a future one.
 * Deterministic: every output has one owner and a fixed summation order. */
#include <limits.h>

#include "cuda_flash.cuh"

namespace {

constexpr int FS_THREADS = 128, FS_RW = 4; /* 4 warps, 4 rows per warp */
constexpr int FS_BM = 16, FS_BN = 32;      /* query rows per block, keys per tile */
constexpr int FS_BK = 16, FS_BQ = 32;      /* keys per block, queries per tile (dK/dV) */

/* rows [r0, r0+R) of a strided source into fp32 [R][hs] (zeros past nrows). */
template <typename T>
__device__ __forceinline__ void fs_load(float *t, const T *src, int64_t ld, int r0, int R,
                                        int nrows, int hn, int hs) {
  for (int idx = threadIdx.x; idx < R * hn; idx += FS_THREADS) {
    const int r = idx / hn, c = idx - r * hn;
    t[r * hs + c] = r0 + r < nrows ? to_f(src[(int64_t)(r0 + r) * ld + c]) : 0.0f;
  }
}

__device__ __forceinline__ float fs_dot(const float *x, const float *y, int hn) {
  float acc = 0.0f;
  for (int d = 0; d < hn; d++) acc = fmaf(x[d], y[d], acc);
  return acc;
}

template <typename T>
__device__ __forceinline__ void fs_put(T *dst, float v, int acc) {
  if (acc) v += to_f(*dst);
  *dst = from_f<T>(v);
}

/* ------------------------------------------------------------- forward */
template <typename T, int HC>
__global__ void __launch_bounds__(FS_THREADS)
    k_fs_fwd(fa_args a, const T *__restrict__ qkv, const T *__restrict__ kvs, T *__restrict__ ctx,
             float *__restrict__ lse) {
  MT_DYN_SMEM(float, fsm);
  const int hn = a.hn, hs = hn | 1, hv = a.hv, hsv = hv | 1;
  float *sK = fsm, *sV = sK + FS_BN * hs, *sQ = sV + FS_BN * hsv;
  const int pair = blockIdx.x, bi = pair / a.np, n = pair - bi * a.np, g = n / a.npg;
  const int q0 = (int)(gridDim.y - 1 - blockIdx.y) * FS_BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T *kb = kvs + fa_kv_base(a, bi, g) + a.koff, *vb = kvs + fa_kv_base(a, bi, g) + a.voff;
  fs_load(sQ, qkv + fa_q_base(a, bi, n), a.ldq, q0, FS_BM, a.sq, hn, hs);

  int qi[FS_RW], qp[FS_RW], qd[FS_RW];
  uint64_t cb[FS_RW];
  float m[FS_RW], l[FS_RW], o[FS_RW][HC];
#pragma unroll
  for (int r = 0; r < FS_RW; r++) {
    qi[r] = q0 + warp * FS_RW + r;
    qp[r] = qi[r] < a.sq ? fa_qpos(a, qi[r]) : INT_MIN;
    qd[r] = fa_qdoc(a, bi, qp[r]);
    cb[r] = (a.p > 0.0f && qi[r] < a.sq) ? fa_row_counter(a, bi, n, qp[r]) : 0;
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < HC; c++) o[r][c] = 0.0f;
  }
  const int qmax_blk = fa_qmax(a, q0, min(q0 + FS_BM, a.sq));
  for (int k0 = 0; k0 < a.sk; k0 += FS_BN) {
    const int nk = min(FS_BN, a.sk - k0);
    if (fa_kmin(a, k0, k0 + nk) > qmax_blk) continue;
    __syncthreads(); /* previous tile's readers are done */
    fs_load(sK, kb, a.ldk, k0, FS_BN, a.sk, hn, hs);
    fs_load(sV, vb, a.ldk, k0, FS_BN, a.sk, hv, hsv);
    __syncthreads();
    const int kj = k0 + lane, kp = lane < nk ? fa_kpos(a, kj) : INT_MAX;
#pragma unroll
    for (int r = 0; r < FS_RW; r++) {
      if (qi[r] >= a.sq) continue; /* warp-uniform */
      const bool vis = kp <= qp[r] && kp >= qd[r];
      const float sc = vis ? fs_dot(sQ + (warp * FS_RW + r) * hs, sK + lane * hs, hn) * a.scale
                           : -INFINITY;
      const float mn = fmaxf(m[r], warp_max(sc));
      const float alpha = mn == -INFINITY ? 1.0f : expf(m[r] - mn);
      float pv = vis ? expf(sc - mn) : 0.0f;
      l[r] = l[r] * alpha + warp_sum(pv);
      m[r] = mn;
      if (a.p > 0.0f) { /* warp-uniform */
        const bool keep = fa_keep_row(a, cb[r], k0, nk, lane, pv != 0.0f);
        pv = keep ? pv * a.inv_keep : 0.0f;
      }
#pragma unroll
      for (int c = 0; c < HC; c++) o[r][c] *= alpha;
      for (int jj = 0; jj < nk; jj++) {
        const float pj = __shfl_sync(0xffffffffu, pv, jj);
#pragma unroll
        for (int c = 0; c < HC; c++) {
          const int d = lane + 32 * c;
          if (d < hv) o[r][c] = fmaf(pj, sV[jj * hsv + d], o[r][c]);
        }
      }
    }
  }
  T *cp = ctx + fa_c_base(a, bi, n);
#pragma unroll
  for (int r = 0; r < FS_RW; r++) {
    if (qi[r] >= a.sq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int c = 0; c < HC; c++) {
      const int d = lane + 32 * c;
      if (d < hv) cp[(int64_t)qi[r] * a.ldc + d] = from_f<T>(o[r][c] * inv);
    }
    if (lane == 0)
      lse[((int64_t)bi * a.np + n) * a.sq + qi[r]] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

/* ------------------------------------------------------------------ dQ */
template <typename T, int HC>
__global__ void __launch_bounds__(FS_THREADS)
    k_fs_dq(fa_args a, const T *__restrict__ qkv, const T *__restrict__ kvs,
            const T *__restrict__ dctx, const float *__restrict__ lse, const float *__restrict__ D,
            T *__restrict__ dq, int acc) {
  MT_DYN_SMEM(float, fsm);
  const int hn = a.hn, hs = hn | 1, hv = a.hv, hsv = hv | 1;
  float *sK = fsm, *sV = sK + FS_BN * hs, *sQ = sV + FS_BN * hsv, *sO = sQ + FS_BM * hs;
  const int pair = blockIdx.x, bi = pair / a.np, n = pair - bi * a.np, g = n / a.npg;
  const int q0 = (int)(gridDim.y - 1 - blockIdx.y) * FS_BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T *kb = kvs + fa_kv_base(a, bi, g) + a.koff, *vb = kvs + fa_kv_base(a, bi, g) + a.voff;
  fs_load(sQ, qkv + fa_q_base(a, bi, n), a.ldq, q0, FS_BM, a.sq, hn, hs);
  fs_load(sO, dctx + fa_c_base(a, bi, n), a.ldc, q0, FS_BM, a.sq, hv, hsv);

  const int64_t row0 = ((int64_t)bi * a.np + n) * a.sq;
  int qi[FS_RW], qp[FS_RW], qd[FS_RW];
  float ls[FS_RW], Dr[FS_RW], dqa[FS_RW][HC];
  uint64_t cb[FS_RW];
#pragma unroll
  for (int r = 0; r < FS_RW; r++) {
    qi[r] = q0 + warp * FS_RW + r;
    const bool in = qi[r] < a.sq;
    ls[r] = in ? lse[row0 + qi[r]] : -INFINITY;
    Dr[r] = in ? D[row0 + qi[r]] : 0.0f;
    qp[r] = in && ls[r] != -INFINITY ? fa_qpos(a, qi[r]) : INT_MIN;
    qd[r] = fa_qdoc(a, bi, qp[r]);
    cb[r] = (a.p > 0.0f && in) ? fa_row_counter(a, bi, n, fa_qpos(a, qi[r])) : 0;
#pragma unroll
    for (int c = 0; c < HC; c++) dqa[r][c] = 0.0f;
  }
  const int qmax_blk = fa_qmax(a, q0, min(q0 + FS_BM, a.sq));
  for (int k0 = 0; k0 < a.sk; k0 += FS_BN) {
    const int nk = min(FS_BN, a.sk - k0);
    if (fa_kmin(a, k0, k0 + nk) > qmax_blk) continue;
    __syncthreads();
    fs_load(sK, kb, a.ldk, k0, FS_BN, a.sk, hn, hs);
    fs_load(sV, vb, a.ldk, k0, FS_BN, a.sk, hv, hsv);
    __syncthreads();
    const int kp = lane < nk ? fa_kpos(a, k0 + lane) : INT_MAX;
#pragma unroll
    for (int r = 0; r < FS_RW; r++) {
      if (qi[r] >= a.sq) continue;
      float ds = 0.0f;
      const bool vis = kp <= qp[r] && kp >= qd[r];
      const bool keep = a.p > 0.0f ? fa_keep_row(a, cb[r], k0, nk, lane, vis) : true;
      if (vis) {
        const float *qrow = sQ + (warp * FS_RW + r) * hs, *orow = sO + (warp * FS_RW + r) * hsv;
        const float P = expf(fs_dot(qrow, sK + lane * hs, hn) * a.scale - ls[r]);
        float dP = fs_dot(orow, sV + lane * hsv, hv);
        if (a.p > 0.0f) dP = keep ? dP * a.inv_keep : 0.0f;
        ds = P * (dP - Dr[r]);
      }
      for (int jj = 0; jj < nk; jj++) {
        const float dj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
        for (int c = 0; c < HC; c++) {
          const int d = lane + 32 * c;
          if (d < hn) dqa[r][c] = fmaf(dj, sK[jj * hs + d], dqa[r][c]);
        }
      }
    }
  }
  T *qo = dq + fa_q_base(a, bi, n);
#pragma unroll
  for (int r = 0; r < FS_RW; r++) {
    if (qi[r] >= a.sq) continue;
#pragma unroll
    for (int c = 0; c < HC; c++) {
      const int d = lane + 32 * c;
      if (d < hn) fs_put(qo + (int64_t)qi[r] * a.ldq + d, dqa[r][c] * a.scale, acc);
    }
  }
}

/* ------------------------------------------------------------- dK, dV */
template <typename T, int HC>
__global__ void __launch_bounds__(FS_THREADS)
    k_fs_dkv(fa_args a, const T *__restrict__ qkv, const T *__restrict__ kvs,
             const T *__restrict__ dctx, const float *__restrict__ lse,
             const float *__restrict__ D, T *__restrict__ dk, T *__restrict__ dv, int acc) {
  MT_DYN_SMEM(float, fsm);
  const int hn = a.hn, hs = hn | 1, hv = a.hv, hsv = hv | 1;
  float *sK = fsm, *sV = sK + FS_BK * hs, *sQ = sV + FS_BK * hsv, *sO = sQ + FS_BQ * hs;
  float *sL = sO + FS_BQ * hsv, *sD = sL + FS_BQ;
  const int grp = blockIdx.x, bi = grp / a.ng, g = grp - bi * a.ng;
  const int k0 = (int)blockIdx.y * FS_BK;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kvb = fa_kv_base(a, bi, g);
  fs_load(sK, kvs + kvb + a.koff, a.ldk, k0, FS_BK, a.sk, hn, hs);
  fs_load(sV, kvs + kvb + a.voff, a.ldk, k0, FS_BK, a.sk, hv, hsv);

  int kj[FS_RW], kp[FS_RW];
  float dka[FS_RW][HC], dva[FS_RW][HC];
#pragma unroll
  for (int r = 0; r < FS_RW; r++) {
    kj[r] = k0 + warp * FS_RW + r;
    kp[r] = kj[r] < a.sk ? fa_kpos(a, kj[r]) : INT_MAX;
#pragma unroll
    for (int c = 0; c < HC; c++) dka[r][c] = dva[r][c] = 0.0f;
  }
  const int kmin_blk = fa_kmin(a, k0, min(k0 + FS_BK, a.sk));
  for (int j = 0; j < a.npg; j++) {
    const int n = g * a.npg + j;
    const T *qb = qkv + fa_q_base(a, bi, n), *ob = dctx + fa_c_base(a, bi, n);
    const int64_t row0 = ((int64_t)bi * a.np + n) * a.sq;
    for (int q0 = 0; q0 < a.sq; q0 += FS_BQ) {
      const int nq = min(FS_BQ, a.sq - q0);
      if (fa_qmax(a, q0, q0 + nq) < kmin_blk) continue;
      __syncthreads();
      fs_load(sQ, qb, a.ldq, q0, FS_BQ, a.sq, hn, hs);
      fs_load(sO, ob, a.ldc, q0, FS_BQ, a.sq, hv, hsv);
      for (int r = threadIdx.x; r < FS_BQ; r += FS_THREADS) {
        sL[r] = q0 + r < a.sq ? lse[row0 + q0 + r] : -INFINITY;
        sD[r] = q0 + r < a.sq ? D[row0 + q0 + r] : 0.0f;
      }
      __syncthreads();
      const int qi = q0 + lane;
      const int qpos = lane < nq && sL[lane] != -INFINITY ? fa_qpos(a, qi) : INT_MIN;
      const int qdoc = fa_qdoc(a, bi, qpos);
      const uint64_t cb = (a.p > 0.0f && lane < nq) ? fa_row_counter(a, bi, n, fa_qpos(a, qi)) : 0;
      uint64_t ublk = UINT64_MAX; /* keys kj[r] have consecutive counters */
      float u4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < FS_RW; r++) {
        if (kj[r] >= a.sk) continue; /* warp-uniform */
        float pd = 0.0f, ds = 0.0f;
        if (kp[r] <= qpos && kp[r] >= qdoc) {
          const float *krow = sK + (warp * FS_RW + r) * hs, *vrow = sV + (warp * FS_RW + r) * hsv;
          const float P = expf(fs_dot(sQ + lane * hs, krow, hn) * a.scale - sL[lane]);
          float dP = fs_dot(sO + lane * hsv, vrow, hv);
          pd = P;
          if (a.p > 0.0f) {
            const bool keep = fa_keep_cached(a, cb + (uint64_t)kp[r], ublk, u4);
            pd = keep ? P * a.inv_keep : 0.0f;
            dP = keep ? dP * a.inv_keep : 0.0f;
          }
          ds = P * (dP - sD[lane]);
        }
        for (int jj = 0; jj < nq; jj++) {
          const float pj = __shfl_sync(0xffffffffu, pd, jj), dj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
          for (int c = 0; c < HC; c++) {
            const int d = lane + 32 * c;
            if (d < hv) dva[r][c] = fmaf(pj, sO[jj * hsv + d], dva[r][c]);
            if (d < hn) dka[r][c] = fmaf(dj, sQ[jj * hs + d], dka[r][c]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < FS_RW; r++) {
    if (kj[r] >= a.sk) continue;
#pragma unroll
    for (int c = 0; c < HC; c++) {
      const int d = lane + 32 * c;
      const int64_t off = kvb + (int64_t)kj[r] * a.ldk + d;
      if (d < hn) fs_put(dk + off, dka[r][c] * a.scale, acc);
      if (d < hv) fs_put(dv + off, dva[r][c], acc);
    }
  }
}

/* Dynamic shared memory above the 48 KiB default needs an opt-in per kernel. */
void fs_smem(const void *kernel, size_t bytes) {
  if (bytes > 48u * 1024u)
    MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)bytes));
}

template <typename T, int HC>
void fwd_t(cudaStream_t st, const fa_args &a, const void *q, const void *kvs, void *ctx,
           float *lse) {
  const size_t hs = (size_t)(a.hn | 1), hsv = (size_t)(a.hv | 1);
  const size_t bytes = ((FS_BN + FS_BM) * hs + FS_BN * hsv) * sizeof(float);
  const auto kern = k_fs_fwd<T, HC>;
  fs_smem((const void *)kern, bytes);
  const dim3 grid =
      grid_2d_checked((int64_t)a.b * a.np, (a.sq + FS_BM - 1) / FS_BM, "flash_attn_fwd (fp32)");
  MT_LAUNCH(kern, grid, FS_THREADS, bytes, st)(a, (const T *)q, (const T *)kvs, (T *)ctx, lse);
  MT_CUDA_LAUNCHED();
}

template <typename T, int HC>
void bwd_t(cudaStream_t st, const fa_args &a, const void *q, const void *kvs, const void *dctx,
           const float *lse, const float *D, void *dq, int dq_acc, void *dk, void *dv,
           int dkv_acc) {
  const size_t hs = (size_t)(a.hn | 1), hsv = (size_t)(a.hv | 1);
  const size_t bq = (FS_BN + FS_BM) * (hs + hsv) * sizeof(float);
  const auto kq = k_fs_dq<T, HC>;
  fs_smem((const void *)kq, bq);
  const dim3 gq =
      grid_2d_checked((int64_t)a.b * a.np, (a.sq + FS_BM - 1) / FS_BM, "flash_attn_bwd dq (fp32)");
  MT_LAUNCH(kq, gq, FS_THREADS, bq, st)(
      a, (const T *)q, (const T *)kvs, (const T *)dctx, lse, D, (T *)dq, dq_acc);
  MT_CUDA_LAUNCHED();
  if (a.sk <= 0) return;
  const size_t bk = ((FS_BK + FS_BQ) * (hs + hsv) + 2 * FS_BQ) * sizeof(float);
  const auto kk = k_fs_dkv<T, HC>;
  fs_smem((const void *)kk, bk);
  const dim3 gk =
      grid_2d_checked((int64_t)a.b * a.ng, (a.sk + FS_BK - 1) / FS_BK, "flash_attn_bwd dkv (fp32)");
  MT_LAUNCH(kk, gk, FS_THREADS, bk, st)(
      a, (const T *)q, (const T *)kvs, (const T *)dctx, lse, D, (T *)dk, (T *)dv, dkv_acc);
  MT_CUDA_LAUNCHED();
}

} /* namespace */

#define FS_BY_HC(hn, call)                  \
  do {                                      \
    if ((hn) <= 32) {                       \
      constexpr int HC = 1;                 \
      call;                                 \
    } else if ((hn) <= 64) {                \
      constexpr int HC = 2;                 \
      call;                                 \
    } else if ((hn) <= 128) {               \
      constexpr int HC = 4;                 \
      call;                                 \
    } else {                                \
      constexpr int HC = 8;                 \
      call;                                 \
    }                                       \
  } while (0)

void fa_simt_fwd(cudaStream_t st, mt_dtype t, const fa_args &a, const void *q, const void *kvs,
                 void *ctx, float *lse) {
  MT_DISPATCH(t, FS_BY_HC(a.hn > a.hv ? a.hn : a.hv, (fwd_t<T, HC>(st, a, q, kvs, ctx, lse))));
}

void fa_simt_bwd(cudaStream_t st, mt_dtype t, const fa_args &a, const void *q, const void *kvs,
                 const void *dctx, const float *lse, const float *D, void *dq, int dq_acc,
                 void *dk, void *dv, int dkv_acc) {
  MT_DISPATCH(t, FS_BY_HC(a.hn > a.hv ? a.hn : a.hv, (bwd_t<T, HC>(st, a, q, kvs, dctx, lse, D, dq, dq_acc, dk, dv,
                                              dkv_acc))));
}
