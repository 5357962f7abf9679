/* cuda/cuda_flash_mma.cu — fused causal attention on tensor cores for bf16
 * storage (FlashAttention-2, Dao 2023, arXiv:2307.08691, Algorithms 1 and
 * 2): mma.sync.m16n8k16 with bf16 operands and fp32 accumulators (sm_80 and
 * sm_90), head dims up to FA_MMA_MAX_HN (padded with zeros to HD = 16, 32,
 * 64 or 128).
 *
 * Blocks are 4 warps; each warp owns 16 rows of the tile (queries in the
 * forward and dQ kernels, keys in the dK/dV kernel). Shared-memory tiles are
 * row-major bf16 [rows][HD + 8] (the 8-element pad makes every fragment
 * load below conflict-free). Fragment layouts of m16n8k16 (PTX ISA, "Matrix
 * Fragments for mma.m16n8k16"; g = lane / 4, t = lane % 4):
 *   A 16x16 (row-major): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..),
 *     a3 (g+8, 2t+8..);
 *   B 16x8 (k x n): b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g);
 *   C 16x8: c0, c1 (g, 2t..2t+1), c2, c3 (g+8, 2t..2t+1).
 * Two adjacent C tiles (columns 0-7, 8-15) are exactly one A fragment over
 * those 16 columns, so the probabilities P (and dS) feed the next product
 * from registers without a trip through shared memory.
 *
 * Forward (k_fa_fwd): per (batch row, head, 64-query tile): S = Q K^T per
 * 64-key tile, online softmax in the log2 domain (scores times scale *
 * log2 e), O += dropout(P~) V; fully masked key tiles are skipped; lse =
 * ln 2 * (m + log2 l). Backward, deterministic without atomics, as two
 * kernels that each own their outputs:
 *   k_fa_dq:  per query tile, over key tiles: P = exp(S - lse), dP =
 *             dropout'(dO V^T), dS = P (dP - D), dQ += dS K;
 *   k_fa_dkv: per (batch row, query group, 64-key tile), over the group's
 *             query heads and query tiles in order: S^T = K Q^T, dP^T =
 *             V dO^T, dV += dropout(P)^T dO, dK += dS^T Q (the shared K/V of
 *             grouped-query attention read once, summed in a fixed order).
 * Rounding: P and dS enter the second products as bf16 (as the unfused
 * path's bf16 probs and dS); everything else is fp32 until the output.
 * Document masking (mt_attn_desc.doc_start, fa_qdoc): a key before the
 * query's document start is masked like a future one (per element; the
 * tile skipping stays causal). */
#include <limits.h>

#include "cuda_flash_mma.cuh" /* FA_THREADS, fragment loads, tile loads, dropout */

namespace {

/* ---------------------------------------------------------------- forward */
template <int HD>
__global__ void __launch_bounds__(FA_THREADS)
    k_fa_fwd(fa_args a, int vec, const bf16 *__restrict__ qkv, const bf16 *__restrict__ kvs,
             bf16 *__restrict__ ctx, float *__restrict__ lse) {
  constexpr int BM = 64, BN = 64, ST = HD + 8, KS = HD / 16, NT = BN / 8, DT = HD / 8;
  __shared__ __align__(16) uint16_t sK[BN * ST];
  __shared__ __align__(16) uint16_t sV[BN * ST];
  const int pair = blockIdx.x, bi = pair / a.np, n = pair - bi * a.np, g = n / a.npg;
  const int q0 = (int)(gridDim.y - 1 - blockIdx.y) * BM; /* heavy (late) tiles first */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const bf16 *kb = kvs + fa_kv_base(a, bi, g) + a.koff, *vb = kvs + fa_kv_base(a, bi, g) + a.voff;

  /* Q fragments of this warp's 16 rows, staged through sK */
  uint32_t qf[KS][4];
  load_tile<BM, HD>(sK, qkv + fa_q_base(a, bi, n), a.ldq, q0, a.sq, a.hn, vec);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < KS; kk++) lda<ST>(qf[kk], sK, warp * 16, kk * 16, gq, tq);
  __syncthreads();

  int qi[2], qp[2], qd[2];
  uint64_t cb[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    qi[r] = q0 + warp * 16 + gq + 8 * r;
    qp[r] = qi[r] < a.sq ? fa_qpos(a, qi[r]) : INT_MIN;
    qd[r] = fa_qdoc(a, bi, qp[r]);
    cb[r] = (a.p > 0.0f && qi[r] < a.sq) ? fa_row_counter(a, bi, n, qp[r]) : 0;
  }
  const int qmax_blk = fa_qmax(a, q0, min(q0 + BM, a.sq));
  const int wq0 = q0 + warp * 16, wq1 = min(wq0 + 16, a.sq);
  const int qmax_w = wq0 < wq1 ? fa_qmax(a, wq0, wq1) : INT_MIN;
  const float sl2 = a.scale * FA_LOG2E;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; dt++) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;

  for (int k0 = 0; k0 < a.sk; k0 += BN) {
    const int kmin = fa_kmin(a, k0, min(k0 + BN, a.sk));
    if (kmin > qmax_blk) continue; /* every key of the tile is in every row's future */
    load_tile<BN, HD>(sK, kb, a.ldk, k0, a.sk, a.hn, vec);
    load_tile<BN, HD>(sV, vb, a.ldk, k0, a.sk, a.hn, vec);
    __syncthreads();
    if (kmin <= qmax_w) {
      float s[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
          uint32_t b0, b1;
          ldb_nk<ST>(b0, b1, sK, nt * 8, kk * 16, gq, tq);
          mma16816(s[nt], qf[kk], b0, b1);
        }
      }
      /* causal mask, scale, row maxima (over the quad sharing the rows) */
      float mx[2] = {-INFINITY, -INFINITY};
      int kp[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
#pragma unroll
        for (int c = 0; c < 2; c++) {
          const int kj = k0 + nt * 8 + 2 * tq + c;
          kp[nt][c] = kj < a.sk ? fa_kpos(a, kj) : INT_MAX;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = e >> 1;
          const int k = kp[nt][e & 1];
          s[nt][e] = k <= qp[r] && k >= qd[r] ? s[nt][e] * sl2 : -INFINITY;
          mx[r] = fmaxf(mx[r], s[nt][e]);
        }
      }
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mn = fmaxf(m[r], mx[r]);
        alpha[r] = mn == -INFINITY ? 1.0f : exp2f(m[r] - mn);
        m[r] = mn;
        l[r] *= alpha[r];
      }
#pragma unroll
      for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[dt][e] *= alpha[e >> 1];
      /* P~ = exp2(s - m); l sums it before dropout; then the keep mask */
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = e >> 1;
          const float pv = s[nt][e] == -INFINITY ? 0.0f : exp2f(s[nt][e] - m[r]);
          l[r] += pv;
          s[nt][e] = pv;
        }
        if (a.p > 0.0f) drop_frag(a, s[nt], s[nt], cb, qp, k0 + nt * 8, tq);
      }
      /* O += P V */
#pragma unroll
      for (int kc = 0; kc < BN / 16; kc++) {
        uint32_t pa[4];
        c2a(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
          uint32_t b0, b1;
          ldb_kn<ST>(b0, b1, sV, kc * 16, dt * 8, gq, tq);
          mma16816(o[dt], pa, b0, b1);
        }
      }
    }
    __syncthreads();
  }

  bf16 *cp = ctx + fa_c_base(a, bi, n);
  float inv[2], ls[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    ls[r] = l[r] > 0.0f ? (m[r] + log2f(l[r])) * FA_LN2 : -INFINITY;
  }
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = e >> 1, d = dt * 8 + 2 * tq + (e & 1);
      if (qi[r] < a.sq && d < a.hn) cp[(int64_t)qi[r] * a.ldc + d] = from_f<bf16>(o[dt][e] * inv[r]);
    }
  if (tq == 0)
#pragma unroll
    for (int r = 0; r < 2; r++)
      if (qi[r] < a.sq) lse[((int64_t)bi * a.np + n) * a.sq + qi[r]] = ls[r];
}

/* --------------------------------------------------------------- dQ */
template <int HD, int BN>
__global__ void __launch_bounds__(FA_THREADS)
    k_fa_dq(fa_args a, int vec, const bf16 *__restrict__ qkv, const bf16 *__restrict__ kvs,
            const bf16 *__restrict__ dctx, const float *__restrict__ lse,
            const float *__restrict__ D, bf16 *__restrict__ dq, int acc) {
  constexpr int BM = 64, ST = HD + 8, KS = HD / 16, NT = BN / 8, DT = HD / 8;
  static_assert(2 * BN >= BM, "Q staging needs 2*BN rows");
  __shared__ __align__(16) uint16_t sm[2 * BN * ST];
  uint16_t *sK = sm, *sV = sm + BN * ST;
  const int pair = blockIdx.x, bi = pair / a.np, n = pair - bi * a.np, g = n / a.npg;
  const int q0 = (int)(gridDim.y - 1 - blockIdx.y) * BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const bf16 *kb = kvs + fa_kv_base(a, bi, g) + a.koff, *vb = kvs + fa_kv_base(a, bi, g) + a.voff;

  uint32_t qf[KS][4], of[KS][4];
  load_tile<BM, HD>(sm, qkv + fa_q_base(a, bi, n), a.ldq, q0, a.sq, a.hn, vec);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < KS; kk++) lda<ST>(qf[kk], sm, warp * 16, kk * 16, gq, tq);
  __syncthreads();
  load_tile<BM, HD>(sm, dctx + fa_c_base(a, bi, n), a.ldc, q0, a.sq, a.hn, vec);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < KS; kk++) lda<ST>(of[kk], sm, warp * 16, kk * 16, gq, tq);
  __syncthreads();

  const int64_t row0 = ((int64_t)bi * a.np + n) * a.sq;
  int qi[2], qp[2], qd[2];
  float l2[2], Dr[2];
  uint64_t cb[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    qi[r] = q0 + warp * 16 + gq + 8 * r;
    const bool in = qi[r] < a.sq;
    l2[r] = in ? lse[row0 + qi[r]] * FA_LOG2E : -INFINITY;
    qp[r] = in && l2[r] != -INFINITY ? fa_qpos(a, qi[r]) : INT_MIN;
    qd[r] = fa_qdoc(a, bi, qp[r]);
    Dr[r] = in ? D[row0 + qi[r]] : 0.0f;
    cb[r] = (a.p > 0.0f && in) ? fa_row_counter(a, bi, n, fa_qpos(a, qi[r])) : 0;
  }
  const int qmax_blk = fa_qmax(a, q0, min(q0 + BM, a.sq));
  const int wq0 = q0 + warp * 16, wq1 = min(wq0 + 16, a.sq);
  const int qmax_w = wq0 < wq1 ? fa_qmax(a, wq0, wq1) : INT_MIN;
  const float sl2 = a.scale * FA_LOG2E;
  float dqa[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; dt++) dqa[dt][0] = dqa[dt][1] = dqa[dt][2] = dqa[dt][3] = 0.0f;

  for (int k0 = 0; k0 < a.sk; k0 += BN) {
    const int kmin = fa_kmin(a, k0, min(k0 + BN, a.sk));
    if (kmin > qmax_blk) continue;
    load_tile<BN, HD>(sK, kb, a.ldk, k0, a.sk, a.hn, vec);
    load_tile<BN, HD>(sV, vb, a.ldk, k0, a.sk, a.hn, vec);
    __syncthreads();
    if (kmin <= qmax_w) {
      float s[NT][4], dp[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
#pragma unroll
        for (int e = 0; e < 4; e++) s[nt][e] = dp[nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
          uint32_t b0, b1;
          ldb_nk<ST>(b0, b1, sK, nt * 8, kk * 16, gq, tq);
          mma16816(s[nt], qf[kk], b0, b1);
          ldb_nk<ST>(b0, b1, sV, nt * 8, kk * 16, gq, tq);
          mma16816(dp[nt], of[kk], b0, b1);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        int kp[2];
#pragma unroll
        for (int c = 0; c < 2; c++) {
          const int kj = k0 + nt * 8 + 2 * tq + c;
          kp[c] = kj < a.sk ? fa_kpos(a, kj) : INT_MAX;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = e >> 1;
          const int k = kp[e & 1];
          s[nt][e] = k <= qp[r] && k >= qd[r] ? exp2f(s[nt][e] * sl2 - l2[r]) : 0.0f; /* P */
        }
        if (a.p > 0.0f) drop_frag(a, dp[nt], s[nt], cb, qp, k0 + nt * 8, tq);
#pragma unroll
        for (int e = 0; e < 4; e++) s[nt][e] *= dp[nt][e] - Dr[e >> 1]; /* dS */
      }
#pragma unroll
      for (int kc = 0; kc < BN / 16; kc++) {
        uint32_t da[4];
        c2a(da, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
          uint32_t b0, b1;
          ldb_kn<ST>(b0, b1, sK, kc * 16, dt * 8, gq, tq);
          mma16816(dqa[dt], da, b0, b1);
        }
      }
    }
    __syncthreads();
  }
  bf16 *qp_out = dq + fa_q_base(a, bi, n);
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = e >> 1, d = dt * 8 + 2 * tq + (e & 1);
      if (qi[r] < a.sq && d < a.hn) put(qp_out + (int64_t)qi[r] * a.ldq + d, dqa[dt][e] * a.scale, acc);
    }
}

/* --------------------------------------------------------------- dK, dV */
template <int HD, int BQ>
__global__ void __launch_bounds__(FA_THREADS)
    k_fa_dkv(fa_args a, int vec, const bf16 *__restrict__ qkv, const bf16 *__restrict__ kvs,
             const bf16 *__restrict__ dctx, const float *__restrict__ lse,
             const float *__restrict__ D, bf16 *__restrict__ dk, bf16 *__restrict__ dv, int acc) {
  constexpr int BK = 64, ST = HD + 8, KS = HD / 16, NT = BQ / 8, DT = HD / 8;
  __shared__ __align__(16) uint16_t sK[BK * ST];
  __shared__ __align__(16) uint16_t sV[BK * ST];
  __shared__ __align__(16) uint16_t sQ[BQ * ST];
  __shared__ __align__(16) uint16_t sO[BQ * ST];
  __shared__ float sL[BQ], sD[BQ];
  __shared__ int sQd[BQ]; /* the tile's queries' document starts (fa_qdoc) */
  const int grp = blockIdx.x, bi = grp / a.ng, g = grp - bi * a.ng;
  const int k0 = (int)blockIdx.y * BK; /* early keys have the most queries: first */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int64_t kvb = fa_kv_base(a, bi, g);
  load_tile<BK, HD>(sK, kvs + kvb + a.koff, a.ldk, k0, a.sk, a.hn, vec);
  load_tile<BK, HD>(sV, kvs + kvb + a.voff, a.ldk, k0, a.sk, a.hn, vec);

  int kj[2], kp[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    kj[r] = k0 + warp * 16 + gq + 8 * r;
    kp[r] = kj[r] < a.sk ? fa_kpos(a, kj[r]) : INT_MAX;
  }
  const int kmin_blk = fa_kmin(a, k0, min(k0 + BK, a.sk));
  const int wk0 = k0 + warp * 16, wk1 = min(wk0 + 16, a.sk);
  const int kmin_w = wk0 < wk1 ? fa_kmin(a, wk0, wk1) : INT_MAX;
  const float sl2 = a.scale * FA_LOG2E;
  float dka[DT][4], dva[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
#pragma unroll
    for (int e = 0; e < 4; e++) dka[dt][e] = dva[dt][e] = 0.0f;

  for (int j = 0; j < a.npg; j++) {
    const int n = g * a.npg + j;
    const bf16 *qb = qkv + fa_q_base(a, bi, n), *ob = dctx + fa_c_base(a, bi, n);
    const int64_t row0 = ((int64_t)bi * a.np + n) * a.sq;
    for (int q0 = 0; q0 < a.sq; q0 += BQ) {
      const int qmax = fa_qmax(a, q0, min(q0 + BQ, a.sq));
      if (qmax < kmin_blk) continue; /* every query of the tile precedes every key */
      __syncthreads();                /* previous tile's readers are done */
      load_tile<BQ, HD>(sQ, qb, a.ldq, q0, a.sq, a.hn, vec);
      load_tile<BQ, HD>(sO, ob, a.ldc, q0, a.sq, a.hn, vec);
      for (int r = threadIdx.x; r < BQ; r += FA_THREADS) {
        const int qi = q0 + r;
        sL[r] = qi < a.sq ? lse[row0 + qi] * FA_LOG2E : -INFINITY;
        sD[r] = qi < a.sq ? D[row0 + qi] : 0.0f;
        sQd[r] = qi < a.sq ? fa_qdoc(a, bi, fa_qpos(a, qi)) : INT_MIN;
      }
      __syncthreads();
      if (qmax < kmin_w) continue; /* warp-uniform; the next sync is at the loop top */
      float s[NT][4], dp[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[nt][e] = dp[nt][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KS; kk++) {
        uint32_t ka[4], va[4];
        lda<ST>(ka, sK, warp * 16, kk * 16, gq, tq);
        lda<ST>(va, sV, warp * 16, kk * 16, gq, tq);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
          uint32_t b0, b1;
          ldb_nk<ST>(b0, b1, sQ, nt * 8, kk * 16, gq, tq);
          mma16816(s[nt], ka, b0, b1); /* S^T = K Q^T */
          ldb_nk<ST>(b0, b1, sO, nt * 8, kk * 16, gq, tq);
          mma16816(dp[nt], va, b0, b1); /* dP^T = V dO^T */
        }
      }
      /* rows: keys kj[e / 2]; columns: queries q0 + c */
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        float ue[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        bool fast[4] = {false, false, false, false};
        if (a.p > 0.0f) dkv_uniforms(a, bi, n, q0 + nt * 8 + 2 * tq, wk0, gq, lane, ue, fast);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = e >> 1, c = nt * 8 + 2 * tq + (e & 1), qi = q0 + c;
          const int qpos = qi < a.sq ? fa_qpos(a, qi) : INT_MIN;
          const bool vis = sL[c] != -INFINITY && kp[r] <= qpos && kp[r] >= sQd[c];
          const float P = vis ? exp2f(s[nt][e] * sl2 - sL[c]) : 0.0f;
          float dP = dp[nt][e], Pd = P;
          if (a.p > 0.0f && P != 0.0f) {
            const bool keep =
                fast[e] ? ue[e] >= a.p
                        : fa_keep(a, fa_row_counter(a, bi, n, qpos) + (uint64_t)kp[r]);
            Pd = keep ? P * a.inv_keep : 0.0f;
            dP = keep ? dP * a.inv_keep : 0.0f;
          }
          s[nt][e] = Pd;                 /* dropout(P)^T */
          dp[nt][e] = P * (dP - sD[c]); /* dS^T */
        }
      }
#pragma unroll
      for (int qc = 0; qc < BQ / 16; qc++) {
        uint32_t pa[4], da[4];
        c2a(pa, s[2 * qc], s[2 * qc + 1]);
        c2a(da, dp[2 * qc], dp[2 * qc + 1]);
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
          uint32_t b0, b1;
          ldb_kn<ST>(b0, b1, sO, qc * 16, dt * 8, gq, tq);
          mma16816(dva[dt], pa, b0, b1); /* dV += dropout(P)^T dO */
          ldb_kn<ST>(b0, b1, sQ, qc * 16, dt * 8, gq, tq);
          mma16816(dka[dt], da, b0, b1); /* dK += dS^T Q */
        }
      }
    }
  }
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = e >> 1, d = dt * 8 + 2 * tq + (e & 1);
      if (kj[r] < a.sk && d < a.hn) {
        const int64_t off = kvb + (int64_t)kj[r] * a.ldk + d;
        put(dk + off, dka[dt][e] * a.scale, acc);
        put(dv + off, dva[dt][e], acc);
      }
    }
}

int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

template <int HD>
void fwd_hd(cudaStream_t st, const fa_args &a, int vec, const void *q, const void *kvs, void *ctx,
            float *lse) {
  const dim3 grid = grid_2d_checked((int64_t)a.b * a.np, (a.sq + 63) / 64, "flash_attn_fwd");
  const auto kern = k_fa_fwd<HD>;
  MT_LAUNCH(kern, grid, FA_THREADS, 0, st)(a, vec, (const bf16 *)q, (const bf16 *)kvs,
                                          (bf16 *)ctx, lse);
  MT_CUDA_LAUNCHED();
}

template <int HD>
void bwd_hd(cudaStream_t st, const fa_args &a, int vec, const void *q, const void *kvs,
            const void *dctx, const float *lse, const float *D, void *dq, int dq_acc, void *dk,
            void *dv, int dkv_acc) {
  constexpr int BN = HD >= 128 ? 32 : 64, BQ = HD >= 128 ? 16 : 64;
  const dim3 gq = grid_2d_checked((int64_t)a.b * a.np, (a.sq + 63) / 64, "flash_attn_bwd dq");
  const auto kq = k_fa_dq<HD, BN>;
  MT_LAUNCH(kq, gq, FA_THREADS, 0, st)(a, vec, (const bf16 *)q, (const bf16 *)kvs,
                                       (const bf16 *)dctx, lse, D, (bf16 *)dq, dq_acc);
  MT_CUDA_LAUNCHED();
  if (a.sk <= 0) return;
  const dim3 gk = grid_2d_checked((int64_t)a.b * a.ng, (a.sk + 63) / 64, "flash_attn_bwd dkv");
  const auto kk = k_fa_dkv<HD, BQ>;
  MT_LAUNCH(kk, gk, FA_THREADS, 0, st)(a, vec, (const bf16 *)q, (const bf16 *)kvs,
                                       (const bf16 *)dctx, lse, D, (bf16 *)dk, (bf16 *)dv,
                                       dkv_acc);
  MT_CUDA_LAUNCHED();
}

} /* namespace */

void fa_mma_fwd(cudaStream_t st, const fa_args &a, const void *q, const void *kvs, void *ctx,
                float *lse) {
  const int vec = a.hn % 8 == 0 && aligned16(q) && aligned16(kvs);
  if (a.hn <= 16) fwd_hd<16>(st, a, vec, q, kvs, ctx, lse);
  else if (a.hn <= 32) fwd_hd<32>(st, a, vec, q, kvs, ctx, lse);
  else if (a.hn <= 64) fwd_hd<64>(st, a, vec, q, kvs, ctx, lse);
  else fwd_hd<128>(st, a, vec, q, kvs, ctx, lse);
}

void fa_mma_bwd(cudaStream_t st, const fa_args &a, const void *q, const void *kvs,
                const void *dctx, const float *lse, const float *D, void *dq, int dq_acc,
                void *dk, void *dv, int dkv_acc) {
  const int vec = a.hn % 8 == 0 && aligned16(q) && aligned16(kvs) && aligned16(dctx);
  if (a.hn <= 16) bwd_hd<16>(st, a, vec, q, kvs, dctx, lse, D, dq, dq_acc, dk, dv, dkv_acc);
  else if (a.hn <= 32) bwd_hd<32>(st, a, vec, q, kvs, dctx, lse, D, dq, dq_acc, dk, dv, dkv_acc);
  else if (a.hn <= 64) bwd_hd<64>(st, a, vec, q, kvs, dctx, lse, D, dq, dq_acc, dk, dv, dkv_acc);
  else bwd_hd<128>(st, a, vec, q, kvs, dctx, lse, D, dq, dq_acc, dk, dv, dkv_acc);
}
