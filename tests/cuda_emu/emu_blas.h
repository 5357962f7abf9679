/* tests/cuda_emu/emu_blas.h — shared by the stand-in cuBLAS (emu_blas.cpp)
 * and cuBLASLt (emu_blaslt.cpp): the element types, one GEMM problem, the
 * queued op that runs the products, and cuBLAS's argument checks (the
 * definitions at emu_blas.cpp's head). */
#ifndef MT_CUDA_EMU_BLAS_H
#define MT_CUDA_EMU_BLAS_H

#include <stdio.h>
#include <string.h>

#include <memory>

#include "cublas_v2.h"
#include "emu.h"

namespace emu {

inline bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }
inline size_t tsize(cudaDataType_t t) {
  return is_fp8(t) ? 1 : t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : 4;
}
inline const char *tname(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
    case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
  }
  return "?";
}

/* The value of an fp8 code, from the formats' definitions (OCP FP8: e4m3
 * bias 7, no infinities, S.1111.111 NaN, subnormals m 2^-9; e5m2 bias 15,
 * IEEE-like, subnormals m 2^-16), written here independently of core/fp8.h
 * (the code under test). */
inline float fp8_value(uint8_t c, bool e5m2) {
  const int mb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int e = (c & 0x7F) >> mb, m = c & ((1 << mb) - 1);
  const float s = c & 0x80 ? -1.0f : 1.0f;
  if (e5m2 && e == 31) return m ? __builtin_nanf("") : s * __builtin_inff();
  if (!e5m2 && e == 15 && m == 7) return __builtin_nanf("");
  if (e == 0) return s * __builtin_ldexpf((float)m, 1 - bias - mb);
  return s * __builtin_ldexpf((float)((1 << mb) + m), e - bias - mb);
}

inline float ld_elem(const char *p, cudaDataType_t t, size_t i) {
  if (t == CUDA_R_32F) return ((const float *)p)[i];
  if (is_fp8(t)) return fp8_value(((const uint8_t *)p)[i], t == CUDA_R_8F_E5M2);
  uint16_t b = ((const uint16_t *)p)[i];
  return __builtin_bit_cast(float, (uint32_t)b << 16);
}
inline uint16_t to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
inline float to_tf32(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7F800000u) == 0x7F800000u) return f;
  u += 0xFFFu + ((u >> 13) & 1u);
  return __builtin_bit_cast(float, u & ~0x1FFFu);
}

/* One problem: C[m x n] = alpha op(A) op(B) + beta C, column-major. */
struct Gemm {
  int ta, tb, m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const char *A, *B;
  char *C;
};

struct BlasOp : Op {
  const char *api;
  cudaDataType_t at, bt, ct;
  bool tf32;
  std::vector<Gemm> g;
  const void *const *ptr_arrays[3] = {nullptr, nullptr, nullptr}; /* grouped: read at run */
  std::vector<int> group_of;
  const char *bias = nullptr; /* cuBLASLt's bias epilogue: bias[i] added to row i */
  cudaDataType_t biast = CUDA_R_32F;
  /* cuBLASLt's A and B scale pointers (device fp32 scalars; FP8), read when
   * the stream reaches the op: D = (alpha (scale_A scale_B)) sum + ... */
  const char *scale[2] = {nullptr, nullptr};
  float sab = 1.0f;
  std::string name() const override {
    char b[160];
    snprintf(b, sizeof b, "%s (%zu product%s, %s x %s -> %s)", api, g.size(),
             g.size() == 1 ? "" : "s", tname(at), tname(bt), tname(ct));
    return b;
  }
  Access operand(const char *which, const char *p, int rows, int cols, int ld, size_t es,
                 bool write, size_t i) {
    size_t bytes = rows && cols ? ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * es : 0;
    std::string why;
    Alloc *a = bytes ? device_range(p, bytes, &why) : nullptr;
    if (bytes && !a)
      fault("%s, product %zu: %s (%d x %d, ld %d, %zu bytes at %p): %s", name().c_str(), i,
            which, rows, cols, ld, bytes, (const void *)p, why.c_str());
    return Access{a, a ? (uint64_t)(p - a->base) : 0, a ? (uint64_t)(p - a->base + bytes) : 0,
                  write};
  }
  bool start() override {
    if (ptr_arrays[0]) { /* grouped: the device pointer arrays, in stream order */
      for (size_t i = 0; i < g.size(); i++) {
        g[i].A = (const char *)ptr_arrays[0][i];
        g[i].B = (const char *)ptr_arrays[1][i];
        g[i].C = (char *)ptr_arrays[2][i];
      }
    }
    std::vector<Access> acc;
    for (int q = 0; ptr_arrays[0] && q < 3; q++) {
      const size_t pb = g.size() * sizeof(void *);
      std::string why;
      Alloc *a = device_range(ptr_arrays[q], pb, &why);
      if (!a) fault("%s: pointer array %c: %s", name().c_str(), "ABC"[q], why.c_str());
      const uint64_t lo = (uint64_t)((const char *)ptr_arrays[q] - a->base);
      acc.push_back(Access{a, lo, lo + pb, false});
    }
    for (size_t i = 0; i < g.size(); i++) {
      const Gemm &p = g[i];
      if (!p.m || !p.n) continue;
      Access a = operand("A", p.A, p.ta ? p.k : p.m, p.ta ? p.m : p.k, p.lda, tsize(at), false, i);
      Access b = operand("B", p.B, p.tb ? p.n : p.k, p.tb ? p.k : p.n, p.ldb, tsize(bt), false, i);
      Access c = operand("C", p.C, p.m, p.n, p.ldc, tsize(ct), true, i);
      for (const Access *x : {&a, &b})
        if (x->a && x->a == c.a && x->lo < c.hi && c.lo < x->hi)
          fault("%s, product %zu: C overlaps %s (cuBLAS needs a separate output)",
                name().c_str(), i, x == &a ? "A" : "B");
      if (a.a) acc.push_back(a);
      if (b.a) acc.push_back(b);
      if (bias) acc.push_back(operand("bias", bias, p.m, 1, p.m, tsize(biast), false, i));
      acc.push_back(c);
      if (p.beta != 0.0f) acc.push_back(Access{c.a, c.lo, c.hi, false});
    }
    for (int q = 0; q < 2; q++)
      if (scale[q]) acc.push_back(operand(q ? "B scale" : "A scale", scale[q], 1, 1, 1, 4, false, 0));
    check_and_record(this, acc.data(), (int)acc.size());
    sab = (scale[0] ? *(const float *)scale[0] : 1.0f) * (scale[1] ? *(const float *)scale[1] : 1.0f);
    for (const Gemm &p : g) run(p);
    profile_add(api, now() - t_start);
    return true;
  }
  void run(const Gemm &p) {
    if (!p.m || !p.n) return;
    const int m = p.m, n = p.n, k = p.k;
    std::unique_ptr<float[]> Ap(new float[(size_t)m * k + 1]), Bp(new float[(size_t)n * k + 1]);
    for (int i = 0; i < m; i++)
      for (int l = 0; l < k; l++) {
        float v = ld_elem(p.A, at, p.ta ? (size_t)l + (size_t)i * p.lda : (size_t)i + (size_t)l * p.lda);
        Ap[(size_t)i * k + l] = tf32 ? to_tf32(v) : v;
      }
    for (int j = 0; j < n; j++)
      for (int l = 0; l < k; l++) {
        float v = ld_elem(p.B, bt, p.tb ? (size_t)j + (size_t)l * p.ldb : (size_t)l + (size_t)j * p.ldb);
        Bp[(size_t)j * k + l] = tf32 ? to_tf32(v) : v;
      }
    const int IB = 64;
    for (int i0 = 0; i0 < m; i0 += IB) {
      const int i1 = i0 + IB < m ? i0 + IB : m;
      for (int j = 0; j < n; j++) {
        const float *b = &Bp[(size_t)j * k];
        for (int i = i0; i < i1; i++) {
          const float *a = &Ap[(size_t)i * k];
          float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int l = 0;
          for (; l + 8 <= k; l += 8)
            for (int q = 0; q < 8; q++) s[q] += a[l + q] * b[l + q];
          for (int q = 0; l < k; l++, q++) s[q] += a[l] * b[l];
          const float acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
          const size_t ci = (size_t)i + (size_t)j * p.ldc;
          float c = (p.alpha * sab) * acc;
          if (p.beta != 0.0f) c += p.beta * ld_elem(p.C, ct, ci);
          if (bias) c += ld_elem(bias, biast, (size_t)i);
          if (ct == CUDA_R_32F) ((float *)p.C)[ci] = c;
          else ((uint16_t *)p.C)[ci] = to_bf16(c);
        }
      }
    }
  }
};

cublasStatus_t bad(const char *api, cublasStatus_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The checks of one problem, in cuBLAS's order. */
cublasStatus_t check_dims(const char *api, int ta, int tb, int m, int n, int k, int lda, int ldb,
                          int ldc);
/* A type combination cuBLAS has a kernel for (FP8 A/B only through cuBLASLt: emu_blaslt.cpp). */
cublasStatus_t check_types(const char *api, cudaDataType_t a, cudaDataType_t b, cudaDataType_t c,
                           cublasComputeType_t ct, bool grouped);

} /* namespace emu */

#endif
