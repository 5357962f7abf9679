/* cuda/cuda_flash_mma.cuh — the device helpers of the tensor-core fused
 * attention kernels (cuda_flash_mma.cu, the only includer; split off to keep
 * each file under 600 lines): bf16 packing, the mma.sync.m16n8k16 wrapper
 * (the host emulation's MT_EMU_MMA16816 hook replaces it), fragment loads
 * of the shared-memory tiles, tile loads, output stores and the dropout
 * masks of a fragment (four values per Philox call). Fragment layouts: the
 * comment of cuda_flash_mma.cu. Everything is in an anonymous namespace, as
 * the kernels are. */
#ifndef MT_CUDA_FLASH_MMA_CUH
#define MT_CUDA_FLASH_MMA_CUH

#include <limits.h>

#include "cuda_flash.cuh"

namespace {

constexpr int FA_THREADS = 128;

__device__ __forceinline__ uint32_t pk2(float lo, float hi) {
  return (uint32_t)f2bf_bits(lo) | ((uint32_t)f2bf_bits(hi) << 16);
}
__device__ __forceinline__ uint32_t pk16(uint16_t lo, uint16_t hi) {
  return (uint32_t)lo | ((uint32_t)hi << 16);
}
__device__ __forceinline__ uint32_t ld32(const uint16_t *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

/* c += a b (m16n8k16, bf16 in, fp32 accumulate). */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(MT_EMU_MMA16816) /* the host emulation (tests/cuda_emu/) */
  MT_EMU_MMA16816(c, a, b0, b1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)c, (void)a, (void)b0, (void)b1;
  __trap(); /* the Makefile builds sm_80 / sm_90 only */
#endif
}

/* A fragment of rows r0..r0+15, columns k0..k0+15 of a [rows][ST] tile. */
template <int ST>
__device__ __forceinline__ void lda(uint32_t a[4], const uint16_t *t, int r0, int k0, int g,
                                    int tq) {
  const uint16_t *p = t + (r0 + g) * ST + k0 + 2 * tq;
  a[0] = ld32(p);
  a[1] = ld32(p + 8 * ST);
  a[2] = ld32(p + 8);
  a[3] = ld32(p + 8 * ST + 8);
}
/* B fragment (k x n = 16 x 8) from a tile stored [n][k]: n rows n0..n0+7,
 * k columns k0..k0+15 (the "col" operand, e.g. K for S = Q K^T). */
template <int ST>
__device__ __forceinline__ void ldb_nk(uint32_t &b0, uint32_t &b1, const uint16_t *t, int n0,
                                       int k0, int g, int tq) {
  const uint16_t *p = t + (n0 + g) * ST + k0 + 2 * tq;
  b0 = ld32(p);
  b1 = ld32(p + 8);
}
/* B fragment from a tile stored [k][n]: k rows k0..k0+15, n columns
 * n0..n0+7 (e.g. V for O = P V). */
template <int ST>
__device__ __forceinline__ void ldb_kn(uint32_t &b0, uint32_t &b1, const uint16_t *t, int k0,
                                       int n0, int g, int tq) {
  const uint16_t *p = t + (k0 + 2 * tq) * ST + n0 + g;
  b0 = pk16(p[0], p[ST]);
  b1 = pk16(p[8 * ST], p[9 * ST]);
}
/* A fragment over columns 16kc..16kc+15 from the C tiles 2kc and 2kc+1. */
__device__ __forceinline__ void c2a(uint32_t a[4], const float c0[4], const float c1[4]) {
  a[0] = pk2(c0[0], c0[1]);
  a[1] = pk2(c0[2], c0[3]);
  a[2] = pk2(c1[0], c1[1]);
  a[3] = pk2(c1[2], c1[3]);
}

/* Rows [r0, r0 + R) of a strided bf16 source (row stride ld; rows < nrows
 * and columns < hn exist) into the tile [R][HD + 8], zeros elsewhere. vec:
 * hn % 8 == 0 and 16-byte aligned rows -> 16-byte loads. */
template <int R, int HD>
__device__ __forceinline__ void load_tile(uint16_t *t, const bf16 *src, int64_t ld, int r0,
                                          int nrows, int hn, int vec) {
  constexpr int ST = HD + 8;
  if (vec) {
    constexpr int C8 = HD / 8;
    for (int idx = threadIdx.x; idx < R * C8; idx += FA_THREADS) {
      const int r = idx / C8, c = (idx - r * C8) * 8;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (r0 + r < nrows && c < hn)
        v = *reinterpret_cast<const uint4 *>(src + (int64_t)(r0 + r) * ld + c);
      *reinterpret_cast<uint4 *>(t + r * ST + c) = v;
    }
  } else {
    for (int idx = threadIdx.x; idx < R * HD; idx += FA_THREADS) {
      const int r = idx / HD, c = idx - r * HD;
      uint16_t v = 0;
      if (r0 + r < nrows && c < hn) v = src[(int64_t)(r0 + r) * ld + c].x;
      t[r * ST + c] = v;
    }
  }
}

/* Store (or add to) one bf16 output element. */
__device__ __forceinline__ void put(bf16 *dst, float v, int acc) {
  if (acc) v += to_f(*dst);
  *dst = from_f<bf16>(v);
}

/* Apply the dropout keep mask to the element pair (e, e+1) of C tile c
 * (row r = e / 2; columns are keys at positions kp0, kp1 of the same query
 * row with counter base cb): c[e] *= keep / (1 - p). */
__device__ __forceinline__ void drop_pair(const fa_args &a, float c[4], int e, uint64_t cb,
                                          int kp0, int kp1) {
  bool k0, k1;
  fa_keep2(a, cb + (uint64_t)kp0, cb + (uint64_t)kp1, k0, k1);
  c[e] = k0 ? c[e] * a.inv_keep : 0.0f;
  c[e + 1] = k1 ? c[e + 1] * a.inv_keep : 0.0f;
}

/* Dropout of n-tile fragment c (rows gq, gq + 8 with counter bases cb[0],
 * cb[1] and positions qp[0], qp[1]; columns 2tq, 2tq + 1 = keys kb + 2tq +
 * {0, 1}), four mask values per Philox call: the lane pair (tq, tq ^ 1)
 * holds keys kb + 4 (tq / 2) + 0..3 of both rows. When a row's four
 * counters fill one Philox block, the lane with tq & 1 == r draws row r's
 * block (mt_rng_uniform4, the word mapping of mt_rng_uniform) and the pair
 * swaps halves by shuffle; otherwise (unaligned counters, a position split
 * inside the four, keys past sk) the lane draws its own pair (drop_pair).
 * gate: the values whose non-zero entries need the mask (P). Bitwise cpu/'s
 * mask either way. Every lane of the warp must call it (shuffles). */
__device__ __forceinline__ void drop_frag(const fa_args &a, float c[4], const float gate[4],
                                          const uint64_t cb[2], const int qp[2], int kb,
                                          int tq) {
  const int j0 = kb + 4 * (tq >> 1), own = tq & 1;
  int kq[4];
#pragma unroll
  for (int t = 0; t < 4; t++) kq[t] = j0 + t < a.sk ? fa_kpos(a, j0 + t) : INT_MAX;
  const bool contig =
      kq[3] != INT_MAX && kq[1] == kq[0] + 1 && kq[2] == kq[0] + 2 && kq[3] == kq[0] + 3;
  bool fast[2];
#pragma unroll
  for (int r = 0; r < 2; r++) fast[r] = contig && ((cb[r] + (uint64_t)kq[0]) & 3) == 0;
  float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (fast[own] && kq[0] <= qp[own]) mt_rng_uniform4(a.key, (cb[own] + (uint64_t)kq[0]) >> 2, u);
  /* the even lane sends row 0's words 2, 3; the odd lane row 1's words 0, 1 */
  const float x = __shfl_xor_sync(0xffffffffu, own ? u[0] : u[2], 1);
  const float y = __shfl_xor_sync(0xffffffffu, own ? u[1] : u[3], 1);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    if (gate[2 * r] == 0.0f && gate[2 * r + 1] == 0.0f) continue;
    if (!fast[r]) {
      drop_pair(a, c, 2 * r, cb[r], kq[2 * own], kq[2 * own + 1]);
      continue;
    }
    const float w0 = r == own ? fa_word(u, 2 * own) : x;
    const float w1 = r == own ? fa_word(u, 2 * own + 1) : y;
    c[2 * r] = w0 >= a.p ? c[2 * r] * a.inv_keep : 0.0f;
    c[2 * r + 1] = w1 >= a.p ? c[2 * r + 1] * a.inv_keep : 0.0f;
  }
}

/* Dropout uniforms of the dK/dV kernel's transposed fragment, four per
 * Philox call: value e = 2r + q is key wk0 + gq + 8r, query qi0 + q
 * (qi0 = q-tile column 2tq). The four lanes of equal tq and gq / 4 hold the
 * four consecutive keys wk0 + 8r + 4 (gq / 4) + 0..3 of each (r, q): four
 * Philox blocks when their counters are aligned; lane i = gq % 4 draws
 * block e = i and three shuffle rounds hand every lane word i of the other
 * three (round t: lane i reads lane (i + t) % 4, which sends its word
 * (i' - t) % 4). fast[e]: ue[e] holds value e's uniform (bitwise
 * mt_rng_uniform); otherwise the caller uses fa_keep. Every lane of the
 * warp must call it (shuffles). */
__device__ __forceinline__ void dkv_uniforms(const fa_args &a, int bi, int n, int qi0, int wk0,
                                             int gq, int lane, float ue[4], bool fast[4]) {
  const int i = gq & 3, kq0 = wk0 + 4 * (gq >> 2);
  uint64_t cbq[2];
  int qpq[2], k4[2][4];
  bool contig[2];
#pragma unroll
  for (int q = 0; q < 2; q++) {
    const int qi = qi0 + q;
    qpq[q] = qi < a.sq ? fa_qpos(a, qi) : INT_MIN;
    cbq[q] = qi < a.sq ? fa_row_counter(a, bi, n, qpq[q]) : 0;
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
#pragma unroll
    for (int t = 0; t < 4; t++) {
      const int kj = kq0 + 8 * r + t;
      k4[r][t] = kj < a.sk ? fa_kpos(a, kj) : INT_MAX;
    }
    contig[r] = k4[r][3] != INT_MAX && k4[r][1] == k4[r][0] + 1 && k4[r][2] == k4[r][0] + 2 &&
                k4[r][3] == k4[r][0] + 3;
  }
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const int r = e >> 1, q = e & 1;
    fast[e] = contig[r] && qpq[q] != INT_MIN && ((cbq[q] + (uint64_t)k4[r][0]) & 3) == 0;
  }
  float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  {
    const int r = i >> 1, q = i & 1;
    const bool mine = i == 0 ? fast[0] : i == 1 ? fast[1] : i == 2 ? fast[2] : fast[3];
    if (mine && k4[r][0] <= qpq[q])
      mt_rng_uniform4(a.key, (cbq[q] + (uint64_t)k4[r][0]) >> 2, u);
  }
#pragma unroll
  for (int e = 0; e < 4; e++) ue[e] = 0.0f;
  const float own = fa_word(u, i);
#pragma unroll
  for (int e = 0; e < 4; e++)
    if (e == i) ue[e] = own;
#pragma unroll
  for (int t = 1; t < 4; t++) {
    const int src = (i + t) & 3;
    const float v = __shfl_sync(0xffffffffu, fa_word(u, (i - t) & 3), lane + 4 * (src - i));
#pragma unroll
    for (int e = 0; e < 4; e++)
      if (e == src) ue[e] = v;
  }
}

} /* namespace */

#endif
