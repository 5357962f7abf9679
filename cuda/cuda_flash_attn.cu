/* cuda/cuda_flash_attn.cu — the fused-attention ops of the CUDA op table
 * (core/backend.h: flash_attn_fwd, attn_merge, flash_attn_bwd;
 * FlashAttention-2, Dao 2023, arXiv:2307.08691): resolves an mt_attn_desc
 * into the kernels' fa_args, picks the kernel family, and holds the two
 * small row kernels (D = rowsum(dctx o ctx) and the lse merge of partial
 * results for ring attention).
 *
 * Family: bf16 storage with hn <= FA_MMA_MAX_HN -> tensor cores
 * (cuda_flash_mma.cu); fp32 storage, larger heads, or env
 * MEGATRAIN_CUDA_FLASH_SIMT=1 (read at backend creation) -> the FFMA kernels
 * (cuda_flash_simt.cu); a value width hv != hn (multi-latent attention)
 * -> the FFMA kernels in either dtype. hn or hv > FA_SIMT_MAX_HN is refused
 * with a message.
 *
 * Memory: nothing of size sq x sk. The forward needs no workspace; the
 * backward uses 4 * b * np * sq bytes of the op workspace (D). Dropout: the
 * keep mask of element (bi, n, qpos, kpos) is regenerated wherever it is
 * needed from the counter of mt_attn_desc (core/rng.h Philox), so it equals
 * cpu/'s and the unfused op's mask bit for bit.
 * Determinism: no atomics; dQ and dK/dV are computed by separate kernels,
 * each owning its outputs and summing in a fixed order. */
#include "cuda_flash.cuh"

/* Resolve the block fields of mt_attn_desc (all zero = plain causal). */
static fa_args fa_args_of(const mt_attn_desc *d, int has_kv) {
  fa_args a{};
  a.sq = d->sq > 0 ? d->sq : d->s;
  a.sk = has_kv ? (d->sk > 0 ? d->sk : d->s) : a.sq;
  a.b = d->b;
  a.np = d->np;
  a.ng = d->ng > 0 ? d->ng : d->np;
  if (a.ng <= 0 || a.np % a.ng != 0)
    mt_fatal("flash attention: np = %d is not a multiple of ng = %d", a.np, a.ng);
  a.npg = a.np / a.ng;
  a.hn = d->hn;
  a.hv = d->hv > 0 ? d->hv : d->hn; /* multi-latent attention: hv != hn */
  a.qgrp = (int64_t)(a.npg + 1) * a.hn + a.hv;
  a.ldq = (int64_t)a.b * a.ng * a.qgrp;
  a.ldc = (int64_t)a.b * a.np * a.hv;
  if (has_kv) {
    a.ldk = (int64_t)a.b * a.ng * (a.hn + a.hv);
    a.kgrp = (int64_t)a.hn + a.hv;
    a.koff = 0;
    a.voff = a.hn;
  } else {
    a.ldk = a.ldq;
    a.kgrp = a.qgrp;
    a.koff = (int64_t)a.npg * a.hn;
    a.voff = (int64_t)(a.npg + 1) * a.hn;
  }
  a.q_pos0 = d->q_pos[0];
  a.q_pos1 = d->q_pos[1];
  a.q_split = d->q_split;
  if (has_kv) {
    a.k_pos0 = d->k_pos[0];
    a.k_pos1 = d->k_pos[1];
    a.k_split = d->k_split;
  } else { /* the keys are the query rows themselves */
    a.k_pos0 = a.q_pos0;
    a.k_pos1 = a.q_pos1;
    a.k_split = a.q_split;
  }
  a.s_full = (uint64_t)(d->s_full > 0 ? d->s_full : d->s > 0 ? d->s : a.sq);
  a.n_heads_total = (uint64_t)d->n_heads_total;
  a.head_offset = (uint64_t)d->head_offset;
  a.scale = d->scale;
  a.p = d->dropout_p;
  a.inv_keep = d->dropout_p > 0.0f ? 1.0f / (1.0f - d->dropout_p) : 1.0f;
  a.key = d->key;
  a.ids = NULL;
  a.ds = d->doc_start;
  return a;
}

static int fa_use_mma(mt_backend *be, const fa_args &a) {
  if (a.hn > FA_SIMT_MAX_HN || a.hv > FA_SIMT_MAX_HN)
    mt_fatal("flash attention: head dim %d (values %d) above the CUDA kernels' limit %d", a.hn,
             a.hv, FA_SIMT_MAX_HN);
  /* grid.y counts row tiles (16 rows at the least): at most 65535 of them */
  if ((int64_t)a.sq > 65535LL * 16 || (int64_t)a.sk > 65535LL * 16)
    mt_fatal("flash attention: %d query / %d key rows in one call exceed the CUDA grid limit "
             "(%lld rows)", a.sq, a.sk, 65535LL * 16);
  /* the mma family has one head width; hv != hn goes to the FFMA kernels */
  return be->dtype == MT_BF16 && a.hn <= FA_MMA_MAX_HN && a.hv == a.hn &&
         !cuda_impl_of(be)->flash_simt;
}

/* D[(bi*np + n)*sq + i] = sum_d dctx[i, bi, n, d] * ctx[i, bi, n, d]; one
 * warp per (i, bi, n) row of [sq, b, np, hn] (hn: here the value width). */
template <typename T>
__global__ void k_fa_rowdot(float *D, const T *dctx, const T *ctx, int64_t rows, int bnp, int sq,
                            int hn) {
  const int64_t row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T *x = dctx + row * hn, *y = ctx + row * hn;
  float acc = 0.0f;
  for (int d = lane; d < hn; d += 32) acc = fmaf(to_f(x[d]), to_f(y[d]), acc);
  acc = warp_sum(acc);
  const int64_t i = row / bnp, h = row - i * bnp;
  if (lane == 0) D[h * sq + i] = acc;
}

/* Merge (ctx_b, lse_b) into (ctx, lse), one warp per (i, bi, n) row. */
template <typename T>
__global__ void k_fa_merge(T *ctx, float *lse, const T *ctx_b, const float *lse_b, int64_t rows,
                           int bnp, int sq, int hn) {
  const int64_t row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const int64_t i = row / bnp, h = row - i * bnp, li = h * sq + i;
  const float la = lse[li], lb = lse_b[li], mx = fmaxf(la, lb);
  float wa = 0.0f, wb = 0.0f, ln = -INFINITY;
  if (mx != -INFINITY) {
    ln = mx + logf(expf(la - mx) + expf(lb - mx));
    wa = expf(la - ln); /* exp(-inf) = 0 for an empty side */
    wb = expf(lb - ln);
  }
  T *x = ctx + row * hn;
  const T *y = ctx_b + row * hn;
  for (int d = lane; d < hn; d += 32) x[d] = from_f<T>(wa * to_f(x[d]) + wb * to_f(y[d]));
  __syncwarp(); /* every lane has read lse[li] */
  if (lane == 0) lse[li] = ln;
}

extern "C" void cuda_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                                    const void *qkv, const void *kv) {
  fa_args a = fa_args_of(d, kv != NULL);
  if (a.sq <= 0 || a.b <= 0 || a.np <= 0 || a.hn <= 0) return;
  const int mma = fa_use_mma(be, a);
  cudaStream_t st = cuda_impl_of(be)->stream;
  if (a.p > 0.0f) a.ids = cuda_upload_ids(be, d->sample_ids, a.b);
  const void *kvs = kv ? kv : qkv;
  if (mma) fa_mma_fwd(st, a, qkv, kvs, ctx, lse);
  else fa_simt_fwd(st, be->dtype, a, qkv, kvs, ctx, lse);
}

extern "C" void cuda_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                                const void *ctx_b, const float *lse_b) {
  const int sq = d->sq > 0 ? d->sq : d->s, bnp = d->b * d->np;
  const int64_t rows = (int64_t)sq * bnp;
  const int hv = d->hv > 0 ? d->hv : d->hn; /* ctx rows: [sq, b, np, hv] */
  if (rows <= 0 || hv <= 0) return;
  const unsigned g = grid_x_checked((rows + 3) / 4, "attn_merge");
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, do {
    const auto kern = k_fa_merge<T>;
    MT_LAUNCH(kern, g, 128, 0, st)((T *)ctx, lse, (const T *)ctx_b, lse_b, rows, bnp, sq, hv);
  } while (0));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                                    const void *dctx, const void *ctx, const float *lse,
                                    const void *qkv, const void *kv) {
  fa_args a = fa_args_of(d, kv != NULL);
  if (a.sq <= 0 || a.b <= 0 || a.np <= 0 || a.hn <= 0) return;
  if (kv && !dkv) mt_fatal("flash_attn_bwd: a separate kv block needs its dkv");
  const int mma = fa_use_mma(be, a);
  cudaStream_t st = cuda_impl_of(be)->stream;
  const size_t es = mt_dtype_size(be->dtype);
  const int64_t rows = (int64_t)a.sq * a.b * a.np;
  float *D = (float *)cuda_workspace(be, (size_t)rows * sizeof(float));
  MT_DISPATCH(be->dtype, do {
    const auto kern = k_fa_rowdot<T>;
    MT_LAUNCH(kern, grid_x_checked((rows + 3) / 4, "flash_attn_bwd rowdot"), 128, 0, st)(
        D, (const T *)dctx, (const T *)ctx, rows, a.b * a.np, a.sq, a.hv);
  } while (0));
  MT_CUDA_LAUNCHED();
  if (a.p > 0.0f) a.ids = cuda_upload_ids(be, d->sample_ids, a.b);
  const void *kvs = kv ? kv : qkv;
  /* dK, dV: the K/V heads of dqkv (overwrite) or of dkv (accumulate) */
  char *dkv_base = (char *)(kv ? dkv : dqkv);
  void *dk = dkv_base + (size_t)a.koff * es, *dv = dkv_base + (size_t)a.voff * es;
  const int acc = kv != NULL;
  if (mma) fa_mma_bwd(st, a, qkv, kvs, dctx, lse, D, dqkv, acc, dk, dv, acc);
  else fa_simt_bwd(st, be->dtype, a, qkv, kvs, dctx, lse, D, dqkv, acc, dk, dv, acc);
}
