/* cpu/cpu_flash_kernel.c — the small register-blocked GEMM of the fused
 * attention tiles (cpu_flash_attn.c) and the tile transpose it packs K and
 * V with.
 *
 * The tile products are at most 64 x 64 x hn with every operand in L1/L2;
 * OpenBLAS spends a large part of such a call packing both operands (its
 * incopy/oncopy) and in per-call set-up. This kernel packs nothing: C rows
 * are held in MR x NV 16-float vector accumulators (6 x 4 = 24 registers
 * with AVX-512), each step broadcasts MR entries of A and loads NV vectors of
 * one row of B. A is read through (row, column) strides, so A and A^T are
 * the same kernel; B must be row-major (K^T and V^T tiles are packed by
 * cpu_fa_transpose once per key tile). Columns beyond the last full 16-wide
 * vector take a scalar loop. GCC vector extensions, contracted to FMA
 * (fp-contract=fast for this file): AVX-512 with -march=native on the dev
 * machine, 2 x AVX2 or SSE elsewhere. Deterministic: the k loop runs in
 * order, one accumulator per output. bench/bench_ops compares it with
 * OpenBLAS (MEGATRAIN_CPU_FLASH_GEMM=blas). */
#pragma GCC optimize("fp-contract=fast")

#include "cpu_internal.h"

typedef float fa_v16 __attribute__((vector_size(64), aligned(4), may_alias));

#define FA_MR 6 /* rows per micro-tile */
#define FA_NV 4 /* 16-float vectors per micro-tile row */

/* C[mr x 16 nv] = beta C + alpha A B over k, mr and nv constants after
 * inlining. */
static inline __attribute__((always_inline)) void fa_micro(int mr, int nv, int k, float alpha,
                                                           const float *A, int64_t rsa,
                                                           int64_t csa, const float *B,
                                                           int64_t ldb, float beta, float *C,
                                                           int64_t ldc) {
  fa_v16 acc[FA_MR][FA_NV];
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int t = 0; t < nv; t++) acc[r][t] = (fa_v16){0};
  for (int kk = 0; kk < k; kk++) {
    const float *b = B + (int64_t)kk * ldb;
    fa_v16 bv[FA_NV];
#pragma GCC unroll 4
    for (int t = 0; t < nv; t++) bv[t] = *(const fa_v16 *)(b + 16 * t);
    const float *a = A + (int64_t)kk * csa;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      const float x = a[r * rsa];
      const fa_v16 av = {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; /* broadcast */
#pragma GCC unroll 4
      for (int t = 0; t < nv; t++) acc[r][t] += av * bv[t];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int t = 0; t < nv; t++) {
      fa_v16 *c = (fa_v16 *)(C + r * ldc + 16 * t);
      if (beta == 0.0f)
        *c = acc[r][t] * alpha;
      else
        *c = *c * beta + acc[r][t] * alpha;
    }
}

/* Columns [0, n) of mr rows (mr constant after inlining): 64-wide blocks,
 * then one block of the remaining full vectors, then a scalar tail. */
static inline __attribute__((always_inline)) void fa_cols(int mr, int n, int k, float alpha,
                                                          const float *A, int64_t rsa,
                                                          int64_t csa, const float *B,
                                                          int64_t ldb, float beta, float *C,
                                                          int64_t ldc) {
  int j = 0;
  for (; j + 64 <= n; j += 64) fa_micro(mr, 4, k, alpha, A, rsa, csa, B + j, ldb, beta, C + j, ldc);
  switch ((n - j) / 16) {
    case 3: fa_micro(mr, 3, k, alpha, A, rsa, csa, B + j, ldb, beta, C + j, ldc); break;
    case 2: fa_micro(mr, 2, k, alpha, A, rsa, csa, B + j, ldb, beta, C + j, ldc); break;
    case 1: fa_micro(mr, 1, k, alpha, A, rsa, csa, B + j, ldb, beta, C + j, ldc); break;
    default: break;
  }
  j += (n - j) / 16 * 16;
  for (int i = 0; i < mr; i++) /* the last n % 16 columns */
    for (int jj = j; jj < n; jj++) {
      float s = 0.0f;
      for (int kk = 0; kk < k; kk++) s += A[i * rsa + kk * csa] * B[(int64_t)kk * ldb + jj];
      float *c = C + (int64_t)i * ldc + jj;
      *c = beta == 0.0f ? alpha * s : beta * *c + alpha * s;
    }
}

/* One strip of mr <= FA_MR rows. */
static void fa_strip(int mr, int n, int k, float alpha, const float *A, int64_t rsa, int64_t csa,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  switch (mr) {
    case 6: fa_cols(6, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc); break;
    case 5: fa_cols(5, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc); break;
    case 4: fa_cols(4, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc); break;
    case 3: fa_cols(3, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc); break;
    case 2: fa_cols(2, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc); break;
    case 1: fa_cols(1, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc); break;
    default: break;
  }
}

void cpu_fa_gemm(int m, int n, int k, float alpha, const float *A, int64_t rsa, int64_t csa,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int tri) {
  for (int i = 0; i < m; i += FA_MR) {
    const int mr = m - i < FA_MR ? m - i : FA_MR;
    int kb = 0, ke = k, ne = n;
    if (tri == FA_TRI_KLOW) {
      ke = i + mr < k ? i + mr : k;
    } else if (tri == FA_TRI_KHIGH) {
      kb = i < k ? i : k;
    } else if (tri == FA_TRI_NLOW) {
      ne = (i + mr + 15) & ~15;
      ne = ne < n ? ne : n;
    }
    float *c = C + (int64_t)i * ldc;
    fa_strip(mr, ne, ke - kb, alpha, A + i * rsa + kb * csa, rsa, csa, B + (int64_t)kb * ldb, ldb,
             beta, c, ldc);
    for (int r = 0; r < mr && ne < n; r++) /* NLOW: the columns right of the strip */
      for (int j = ne; j < n; j++) {
        float *x = c + (int64_t)r * ldc + j;
        *x = beta == 0.0f ? 0.0f : *x * beta;
      }
  }
}

typedef int fa_i16 __attribute__((vector_size(64)));

/* Swap the off-diagonal h x h blocks of every 2h x 2h block of the 16 x 16
 * block held in rows R[0..15]; h = 8, 4, 2, 1 in turn transposes it. */
#define FA_SWAP(h, MA, MB)                                   \
  do {                                                       \
    for (int r = 0; r < 16; r++)                             \
      if (!(r & (h))) {                                      \
        fa_v16 a = R[r], b = R[r + (h)];                     \
        R[r] = __builtin_shuffle(a, b, MA);                  \
        R[r + (h)] = __builtin_shuffle(a, b, MB);            \
      }                                                      \
  } while (0)

/* dst[j * ldd + i] = src[i * lds + j], i, j < 16. */
static inline void fa_t16(const float *src, int64_t lds, float *dst, int64_t ldd) {
  static const fa_i16 a8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  static const fa_i16 b8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
  static const fa_i16 a4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
  static const fa_i16 b4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
  static const fa_i16 a2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  static const fa_i16 b2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
  static const fa_i16 a1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30};
  static const fa_i16 b1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
  fa_v16 R[16];
  for (int r = 0; r < 16; r++) R[r] = *(const fa_v16 *)(src + r * lds);
  FA_SWAP(8, a8, b8);
  FA_SWAP(4, a4, b4);
  FA_SWAP(2, a2, b2);
  FA_SWAP(1, a1, b1);
  for (int r = 0; r < 16; r++) *(fa_v16 *)(dst + r * ldd) = R[r];
}

void cpu_fa_transpose(int rows, int cols, const float *src, int64_t lds, float *dst, int64_t ldd) {
  const int r16 = rows / 16 * 16, c16 = cols / 16 * 16;
  for (int i0 = 0; i0 < r16; i0 += 16)
    for (int j0 = 0; j0 < c16; j0 += 16)
      fa_t16(src + (int64_t)i0 * lds + j0, lds, dst + (int64_t)j0 * ldd + i0, ldd);
  for (int i = 0; i < rows; i++) /* the edges */
    for (int j = i < r16 ? c16 : 0; j < cols; j++) dst[(int64_t)j * ldd + i] = src[(int64_t)i * lds + j];
}
