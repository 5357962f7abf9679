/* core/fp8.h — the FP8 number formats and the scale rules of Transformer
 * Engine's recipes, one definition that cpu/ and cuda/ both compile (MT_HD,
 * core/hd.h). Pure per-element / per-block arithmetic on fp32, no state.
 *
 * Formats (OCP FP8, Micikevicius et al. 2022, "FP8 formats for deep
 * learning"):
 *   e4m3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; max 448
 *         (code 0x7E); no infinity; S.1111.111 (0x7F / 0xFF) is NaN.
 *   e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; max 57344
 *         (0x7B); 0x7C is infinity, 0x7D-0x7F NaN (IEEE-like).
 *   e8m0: the MX block scale: 8 exponent bits, bias 127, value 2^(e-127);
 *         0xFF is NaN.
 * Encoding (fp32 -> fp8) is what CUDA's __nv_cvt_float_to_fp8(x,
 * __NV_SATFINITE, fmt) computes (the conversion TE's cast kernels use):
 * round to nearest, ties to even, from the exact fp32 value, subnormals
 * kept; magnitudes that round above the maximum (infinity included)
 * saturate to ±max; NaN gives 0x7F (e4m3) or 0x7E | the top two mantissa
 * bits of the input (e5m2), with the input's sign bit; -0 and negative
 * underflow give 0x80.
 *
 * Scale rules (scale multiplies the high-precision value before encoding;
 * the GEMM multiplies by scale_inv = 1/scale after):
 *   current (tensorwise and blockwise; TE's compute_scale_from_amax):
 *     amax < eps -> eps; amax inf or 0 -> 1; else max/amax, inf -> FLT_MAX,
 *     NaN -> 1; pow2: the mantissa bits cleared (rounds down to 2^k).
 *   delayed (TE's DelayedScaling update): amax = max of the history or its
 *     most recent entry; finite amax > 0: (max / amax) / 2^margin, inf ->
 *     FLT_MAX; otherwise the previous scale is kept.
 *   mxfp8: e8m0 = the exponent of amax · (1/max) rounded UP (TE's
 *     float_to_e8m0); the data multiplier is TE's exp2f_rcp: the fp32 with
 *     exponent field 254 - e, i.e. 2^(127-e), except 1 when e = 0 and +0
 *     when e = 254 (amax infinite or within 2^127 · max of FLT_MAX). */
#ifndef MT_CORE_FP8_H
#define MT_CORE_FP8_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hd.h"

typedef enum { MT_FP8_E4M3 = 0, MT_FP8_E5M2 = 1 } mt_fp8_format;

#define MT_FP8_E4M3_MAX 448.0f
#define MT_FP8_E5M2_MAX 57344.0f

MT_HD uint32_t mt_fp8_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
MT_HD float mt_fp8_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Largest finite magnitude of the format (448 or 57344). */
MT_HD float mt_fp8_max(mt_fp8_format fmt) {
  return fmt == MT_FP8_E4M3 ? MT_FP8_E4M3_MAX : MT_FP8_E5M2_MAX;
}

/* fp32 -> fp8 code (rules in the header comment). */
MT_HD uint8_t mt_fp8_encode(float x, mt_fp8_format fmt) {
  const int mbits = fmt == MT_FP8_E4M3 ? 3 : 2;
  const int bias = fmt == MT_FP8_E4M3 ? 7 : 15;
  const uint32_t maxcode = fmt == MT_FP8_E4M3 ? 0x7Eu : 0x7Bu;
  const int emin = 1 - bias; /* exponent of the smallest normal */
  const uint32_t u = mt_fp8_f2u(x);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) /* NaN */
    return (uint8_t)(sign | (fmt == MT_FP8_E4M3 ? 0x7Fu : (0x7Eu | ((a >> 21) & 3u))));
  if (a < 0x00800000u) return sign; /* fp32 zero or subnormal: far below fp8's half quantum */
  const int e = (int)(a >> 23) - 127;
  if (e > bias + 1) return (uint8_t)(sign | maxcode); /* infinity and beyond 2^(emax+1) */
  const uint32_t sig = (a & 0x7FFFFFu) | 0x800000u; /* value = sig · 2^(e-23) */
  const int eq = e > emin ? e : emin;               /* binade of the target quantum */
  const int shift = 23 - mbits + (eq - e);          /* fp32 bits below the fp8 quantum */
  if (shift > 25) return sign;                      /* below half the smallest subnormal */
  uint32_t n = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (n & 1u))) n++;
  /* n quanta of 2^(eq - mbits); n in [2^mbits, 2^(mbits+1)] for normals, a
   * carry to 2^(mbits+1) lands on the next binade's code */
  uint32_t code = ((uint32_t)(eq + bias - 1) << mbits) + n;
  if (code > maxcode) code = maxcode;
  return (uint8_t)(sign | code);
}

/* fp8 code -> fp32 (exact; NaN codes give a quiet NaN with the code's sign,
 * e5m2's 0x7C/0xFC ±infinity). */
MT_HD float mt_fp8_decode(uint8_t c, mt_fp8_format fmt) {
  const int mbits = fmt == MT_FP8_E4M3 ? 3 : 2;
  const int bias = fmt == MT_FP8_E4M3 ? 7 : 15;
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  const uint32_t mag = c & 0x7Fu;
  const uint32_t eb = mag >> mbits, m = mag & ((1u << mbits) - 1u);
  if (fmt == MT_FP8_E4M3 ? mag == 0x7Fu : eb == 31u)
    return mt_fp8_u2f(sign | (fmt == MT_FP8_E5M2 && m == 0 ? 0x7F800000u : 0x7FC00000u));
  if (mag == 0) return mt_fp8_u2f(sign);
  if (eb == 0) { /* subnormal m · 2^(1-bias-mbits): normalise into fp32 */
    int sh = 0;
    uint32_t mm = m;
    while (!(mm & (1u << mbits))) { mm <<= 1; sh++; }
    const uint32_t fe = (uint32_t)(1 - bias - sh + 127);
    return mt_fp8_u2f(sign | (fe << 23) | ((mm & ((1u << mbits) - 1u)) << (23 - mbits)));
  }
  return mt_fp8_u2f(sign | ((eb - (uint32_t)bias + 127u) << 23) | (m << (23 - mbits)));
}

/* TE's current-scaling scale from an amax (Float8CurrentScaling and the
 * blocks of Float8BlockScaling). */
MT_HD float mt_fp8_scale_current(float amax, float fmt_max, int pow2, float eps) {
  if (amax < eps) amax = eps;
  if (isinf(amax) || amax == 0.0f) return 1.0f;
  float s = fmt_max / amax;
  if (isinf(s)) s = FLT_MAX;
  if (isnan(s)) s = 1.0f;
  if (pow2) s = mt_fp8_u2f(mt_fp8_f2u(s) & 0xFF800000u);
  return s;
}

/* TE's delayed-scaling update: the new scale from the amax chosen from the
 * history (see mt_fp8_history_amax) and the previous scale. */
MT_HD float mt_fp8_scale_delayed(float amax, float prev_scale, float fmt_max, int margin) {
  if (!(isfinite(amax) && amax > 0.0f)) return prev_scale;
  float s = (fmt_max / amax) / ldexpf(1.0f, margin);
  if (isinf(s)) s = FLT_MAX;
  return s;
}

/* The amax a delayed-scaling update uses: algo 0 ("max") the largest entry
 * of hist[0..len) (fmaxf: NaN entries skipped), algo 1 ("most_recent")
 * hist[0], the entry of the step just ended. */
MT_HD float mt_fp8_history_amax(const float *hist, int len, int algo) {
  if (algo == 1) return hist[0];
  float a = hist[0];
  for (int i = 1; i < len; i++) a = fmaxf(a, hist[i]);
  return a;
}

/* TE's float_to_e8m0 of v = amax · (1/max): NaN -> 0xFF, inf -> 0xFE, 0 ->
 * 0; otherwise the fp32 exponent field, plus one when the value is not an
 * exact power of two (rounded up so that amax · 2^(127-e) <= max), except
 * at 0xFE (saturated) and for fp32 subnormals up to half of 2^-126. */
MT_HD uint8_t mt_fp8_e8m0_from_f32(float v) {
  if (isnan(v)) return 0xFF;
  if (isinf(v)) return 0xFE;
  if (v == 0.0f) return 0;
  const uint32_t u = mt_fp8_f2u(v);
  uint32_t e = (u >> 23) & 0xFFu;
  const uint32_t m = u & 0x7FFFFFu;
  if (m > 0 && e != 0xFE && !(e == 0 && m <= 0x400000u)) e++;
  return (uint8_t)e;
}

/* The mxfp8 block's data multiplier: 2^(127-e) for e in [1, 253], 1 for
 * e = 0, +0 for e = 254 (TE's exp2f_rcp bit construction). */
MT_HD float mt_fp8_e8m0_rcp(uint8_t e) {
  return e == 0 ? 1.0f : mt_fp8_u2f((uint32_t)(254 - e) << 23);
}

/* The mxfp8 block's dequantization factor 2^(e-127) (e = 0: 2^-127, a fp32
 * subnormal; 0xFF: NaN). */
MT_HD float mt_fp8_e8m0_to_f32(uint8_t e) {
  if (e == 0xFF) return mt_fp8_u2f(0x7FC00000u);
  if (e == 0) return mt_fp8_u2f(0x00400000u);
  return mt_fp8_u2f((uint32_t)e << 23);
}

#endif
