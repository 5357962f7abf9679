/* cuda/cuda_flash.cuh — what the fused-attention kernels share
 * (FlashAttention-2, Dao 2023, arXiv:2307.08691): the resolved geometry of
 * one flash_attn_fwd/bwd call (fa_args), global positions of the two-range
 * query/key blocks (mt_attn_desc of core/backend.h), the attention-dropout
 * keep test with the counter of mt_attn_desc, and the launchers of the two
 * kernel families:
 *   cuda_flash_mma.cu   bf16 storage, head dim <= 128: tensor-core
 *                       mma.sync m16n8k16 (bf16 in, fp32 accumulate);
 *   cuda_flash_simt.cu  any storage dtype, head dim <= 256: fp32 FFMA (the
 *                       fp32 path, exact to the fp32 tolerances).
 * Both families compute the same thing; cuda_flash_attn.cu picks one.
 *
 * Layouts (core/backend.h): qkv [sq, b, ng, npg + 2, hn] (npg = np / ng
 * query heads per group, then the group's K head, then its V head), kv
 * [sk, b, ng, 2, hn] when K/V come from another block, ctx [sq, b, np, hn],
 * lse and D [b, np, sq] fp32. Query head n reads group g = n / npg. With a
 * value width hv != hn (mt_attn_desc.hv, multi-latent attention) a group of
 * qkv is [npg * hn | hn | hv], of kv [hn | hv], and ctx is [sq, b, np, hv];
 * only the FFMA kernels take it (cuda_flash_attn.cu routes it there). */
#ifndef MT_CUDA_FLASH_CUH
#define MT_CUDA_FLASH_CUH

#include <limits.h>

#include "cuda_dev.cuh"

/* The dynamic shared memory of the FFMA kernels is MT_DYN_SMEM and every
 * launch MT_LAUNCH (cuda_dev.cuh); the tensor-core product goes through
 * mma16816 (cuda_flash_mma.cu), which the emulation's MT_EMU_MMA16816 hook
 * replaces (tests/cuda_emu/). */

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

/* One call, resolved on the host (cuda_flash_attn.cu: fa_args_of). */
struct fa_args {
  int sq, sk, b, np, ng, npg, hn;
  int hv;              /* value head width (= hn unless MLA)                 */
  int64_t qgrp;        /* elements of one group of qkv: (npg+1)*hn + hv      */
  int64_t ldq;         /* row stride of qkv / dqkv: b*ng*qgrp                */
  int64_t ldk;         /* row stride of the K/V source: ldq or b*ng*(hn+hv)  */
  int64_t kgrp;        /* elements between two groups in the K/V source      */
  int64_t koff, voff;  /* K and V head offsets inside a group of the source  */
  int64_t ldc;         /* row stride of ctx / dctx: b*np*hv                  */
  int q_pos0, q_pos1, q_split; /* global positions of query rows            */
  int k_pos0, k_pos1, k_split; /* ... of key rows (= the query's for kv NULL) */
  uint64_t s_full, n_heads_total, head_offset;
  float scale, p, inv_keep;
  mt_rng_key_t key;
  const int64_t *ids;  /* device sample ids [b]; NULL when p == 0           */
  const int32_t *ds;   /* document starts [b, s_full] (mt_attn_desc.doc_start),
                          NULL without document masking                     */
};

/* Global position of row i of a two-range block (mt_attn_desc). */
__device__ __forceinline__ int fa_pos(int p0, int p1, int split, int i) {
  return (split > 0 && i >= split) ? p1 + (i - split) : p0 + i;
}
/* Smallest / largest global position of rows [i0, i1), i1 > i0 (each range
 * is increasing; the two need not be ordered). */
__device__ __forceinline__ int fa_pos_min(int p0, int p1, int split, int i0, int i1) {
  if (split <= 0 || i1 <= split) return p0 + i0;
  if (i0 >= split) return p1 + (i0 - split);
  return min(p0 + i0, p1);
}
__device__ __forceinline__ int fa_pos_max(int p0, int p1, int split, int i0, int i1) {
  if (split <= 0 || i1 <= split) return p0 + i1 - 1;
  if (i0 >= split) return p1 + (i1 - 1 - split);
  return max(p0 + split - 1, p1 + (i1 - 1 - split));
}
__device__ __forceinline__ int fa_qpos(const fa_args &a, int i) {
  return fa_pos(a.q_pos0, a.q_pos1, a.q_split, i);
}
__device__ __forceinline__ int fa_kpos(const fa_args &a, int j) {
  return fa_pos(a.k_pos0, a.k_pos1, a.k_split, j);
}
/* Document start of the query at global position qp of batch row bi
 * (mt_attn_desc.doc_start): a key at kp is visible iff doc <= kp <= qp.
 * INT_MIN without document masking or for a row outside the block
 * (qp == INT_MIN). */
__device__ __forceinline__ int fa_qdoc(const fa_args &a, int bi, int qp) {
  return a.ds && qp != INT_MIN ? a.ds[(int64_t)bi * (int64_t)a.s_full + qp] : INT_MIN;
}
/* Visible-key test range helpers for tile skipping. */
__device__ __forceinline__ int fa_qmax(const fa_args &a, int i0, int i1) {
  return fa_pos_max(a.q_pos0, a.q_pos1, a.q_split, i0, i1);
}
__device__ __forceinline__ int fa_kmin(const fa_args &a, int j0, int j1) {
  return fa_pos_min(a.k_pos0, a.k_pos1, a.k_split, j0, j1);
}

/* Dropout counter of (bi, local head n, query position qp, key 0):
 * ((sample * n_heads_total + head_offset + n) * s_full + qp) * s_full; add
 * the key's global position (mt_attn_desc; equals the unfused op's counter
 * with s_full = s and positions 0..s-1). */
__device__ __forceinline__ uint64_t fa_row_counter(const fa_args &a, int bi, int n, int qp) {
  const uint64_t head = (uint64_t)a.ids[bi] * a.n_heads_total + a.head_offset + (uint64_t)n;
  return (head * a.s_full + (uint64_t)qp) * a.s_full;
}

/* Word w (0..3) of Philox block `blk` as in mt_rng_uniform (core/rng.h). */
__device__ __forceinline__ float fa_unit(const uint32_t o[4], int w) {
  const uint32_t x = w == 0 ? o[0] : w == 1 ? o[1] : w == 2 ? o[2] : o[3];
  return mt_u32_to_unit(x);
}
__device__ __forceinline__ void fa_philox(mt_rng_key_t key, uint64_t blk, uint32_t o[4]) {
  const uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 1u, 0u};
  mt_philox4x32(ctr, key, o);
}
/* keep = mt_rng_uniform(key, c) >= p, bitwise as cpu/. */
__device__ __forceinline__ bool fa_keep(const fa_args &a, uint64_t c) {
  uint32_t o[4];
  fa_philox(a.key, c >> 2, o);
  return fa_unit(o, (int)(c & 3)) >= a.p;
}
/* Two counters, one Philox block when they share it. */
__device__ __forceinline__ void fa_keep2(const fa_args &a, uint64_t c0, uint64_t c1, bool &k0,
                                         bool &k1) {
  uint32_t o[4];
  fa_philox(a.key, c0 >> 2, o);
  k0 = fa_unit(o, (int)(c0 & 3)) >= a.p;
  if ((c1 >> 2) != (c0 >> 2)) fa_philox(a.key, c1 >> 2, o);
  k1 = fa_unit(o, (int)(c1 & 3)) >= a.p;
}

/* Word w (0..3) of four uniforms, without a dynamically indexed array. */
__device__ __forceinline__ float fa_word(const float u[4], int w) {
  return w == 0 ? u[0] : w == 1 ? u[1] : w == 2 ? u[2] : u[3];
}

/* Keep test of the FFMA kernels' forward and dQ, where lane j < nk holds key
 * k0 + j of one query row (counter cb + fa_kpos(k0 + j)): the lanes whose
 * counters share a Philox block form a run of consecutive lanes; its lowest
 * lane makes the one Philox call (mt_rng_uniform4: the counter -> word
 * mapping of mt_rng_uniform, so the mask is bitwise cpu/'s) and the others
 * take their word by shuffle: four mask values per call. need: this lane's
 * value is used (skipped calls when no lane of the warp needs one). Every
 * lane of the warp must call it (shuffles). */
__device__ __forceinline__ bool fa_keep_row(const fa_args &a, uint64_t cb, int k0, int nk,
                                            int lane, bool need) {
  float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int lead = lane;
  uint64_t c = 0;
  if (lane < nk) {
    c = cb + (uint64_t)fa_kpos(a, k0 + lane);
    while (lead > 0 && ((cb + (uint64_t)fa_kpos(a, k0 + lead - 1)) >> 2) == (c >> 2)) lead--;
  }
  const bool any = warp_max(need ? 1.0f : 0.0f) > 0.0f;
  if (any && lead == lane && lane < nk) mt_rng_uniform4(a.key, c >> 2, u);
  float mine = 0.0f;
#pragma unroll
  for (int t = 0; t < 4; t++) {
    const float v = __shfl_sync(0xffffffffu, u[t], lead);
    if (t == (int)(c & 3)) mine = v;
  }
  return mine >= a.p;
}

/* Per-thread cache of one Philox block (keys of consecutive counters in one
 * thread, as the FFMA dK/dV kernel's rows): fa_keep_cached(a, c, blk, u)
 * calls Philox only when c leaves the cached block. Start with blk =
 * UINT64_MAX. */
__device__ __forceinline__ bool fa_keep_cached(const fa_args &a, uint64_t c, uint64_t &blk,
                                               float u[4]) {
  if ((c >> 2) != blk) {
    blk = c >> 2;
    mt_rng_uniform4(a.key, blk, u);
  }
  return fa_word(u, (int)(c & 3)) >= a.p;
}

/* Base offsets (elements) of head n's Q in qkv, of group g's K and V in the
 * K/V source, and of head n in ctx, for batch row bi (row 0). */
__device__ __forceinline__ int64_t fa_q_base(const fa_args &a, int bi, int n) {
  const int g = n / a.npg, j = n - g * a.npg;
  return ((int64_t)bi * a.ng + g) * a.qgrp + (int64_t)j * a.hn;
}
__device__ __forceinline__ int64_t fa_kv_base(const fa_args &a, int bi, int g) {
  return ((int64_t)bi * a.ng + g) * a.kgrp;
}
__device__ __forceinline__ int64_t fa_c_base(const fa_args &a, int bi, int n) {
  return ((int64_t)bi * a.np + n) * a.hv;
}

/* ---- launchers (stream-ordered, asynchronous) ----
 * q: qkv; kvs: the K/V source (qkv itself when kv == NULL); D: rowsum(dctx o
 * ctx) [b, np, sq]. dq_acc / dkv_acc: accumulate into dq / dk, dv instead of
 * overwriting. dk and dv point at the K / V head of group 0, row 0 of their
 * buffer (row stride a.ldk, group stride a.kgrp). */
void fa_mma_fwd(cudaStream_t st, const fa_args &a, const void *q, const void *kvs, void *ctx,
                float *lse);
void fa_mma_bwd(cudaStream_t st, const fa_args &a, const void *q, const void *kvs,
                const void *dctx, const float *lse, const float *D, void *dq, int dq_acc,
                void *dk, void *dv, int dkv_acc);
/* Largest head dim of the mma family. */
#define FA_MMA_MAX_HN 128

void fa_simt_fwd(cudaStream_t st, mt_dtype t, const fa_args &a, const void *q, const void *kvs,
                 void *ctx, float *lse);
void fa_simt_bwd(cudaStream_t st, mt_dtype t, const fa_args &a, const void *q, const void *kvs,
                 const void *dctx, const float *lse, const float *D, void *dq, int dq_acc,
                 void *dk, void *dv, int dkv_acc);
/* Largest head dim (q/k and v) of the FFMA family. */
#define FA_SIMT_MAX_HN 256

#endif
