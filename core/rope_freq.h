/* core/rope_freq.h — the RoPE frequency of channel pair i and the cos/sin
 * factor, one definition for cpu/ and cuda/ (MT_HD, core/hd.h), with the
 * frequency scalings megatrain takes (mt_rope_desc.scaling, core/backend.h):
 *
 *   plain  inv_i = base^(−2i/d) (Su et al. 2021, RoFormer §3.4)
 *   llama3 Llama-3.1's (Megatron's RotaryEmbedding._apply_scaling, factor f,
 *          low/high frequency factors 1 and 4, old context 8192): with
 *          λ = 2π / inv_i, λ < 8192/4 keeps inv_i, λ > 8192/1 gives inv_i / f,
 *          in between (1 − σ) inv_i / f + σ inv_i with σ = (8192/λ − 1) / (4 − 1)
 *   yarn   YaRN (Peng et al. 2023 §3.2 "NTK-by-parts"; DeepSeek-V2 §2.1.3;
 *          Megatron's YarnRotaryEmbedding): with the correction range
 *          [lo, hi] = [⌊c(β_fast)⌋, ⌈c(β_slow)⌉] clamped to [0, d − 1],
 *          c(r) = d · ln(L / (2π r)) / (2 ln base), L the original context,
 *          and the ramp ρ_i = clamp((i − lo) / (hi − lo), 0, 1) (hi += 0.001
 *          when equal): inv_i = ρ_i · base^(−2i/d) / f + (1 − ρ_i) · base^(−2i/d)
 *          — fast-turning pairs keep their frequency, slow ones are
 *          interpolated by f;
 *          cos and sin are multiplied by the attention factor
 *          m(f, mscale) / m(f, mscale_all_dim), m(f, x) = 0.1 x ln f + 1 for
 *          f > 1, else 1 (mt_yarn_mscale).
 *
 * Everything in double; the caller rounds cos/sin to float. */
#ifndef MT_CORE_ROPE_FREQ_H
#define MT_CORE_ROPE_FREQ_H

#include <math.h>

#include "hd.h"

enum { MT_ROPE_PLAIN = 0, MT_ROPE_LLAMA3 = 1, MT_ROPE_YARN = 2 };

/* The frequency parameters of one call (mt_rope_freq_of fills it from a
 * descriptor's fields; plain: only base and dim). */
typedef struct {
  int kind;            /* MT_ROPE_* */
  double base, dim;    /* rotary base, rotated channels d */
  double factor;       /* llama3 / yarn factor f */
  double lo, hi;       /* yarn ramp bounds (hi > lo) */
} mt_rope_freq;

/* DeepSeek's yarn_get_mscale / Megatron's _yarn_get_mscale. */
MT_HD double mt_yarn_mscale(double f, double m) { return f <= 1.0 ? 1.0 : 0.1 * m * log(f) + 1.0; }

/* Inverse frequency of pair i. */
MT_HD double mt_rope_inv_freq(const mt_rope_freq *p, int i) {
  const double inv = pow(p->base, -2.0 * (double)i / p->dim);
  if (p->kind == MT_ROPE_LLAMA3) {
    const double pi2 = 6.283185307179586476925286766559, old = 8192.0;
    const double wl = pi2 / inv;
    if (wl < old / 4.0) return inv;
    if (wl > old / 1.0) return inv / p->factor;
    const double sm = (old / wl - 1.0) / (4.0 - 1.0);
    return (1.0 - sm) * inv / p->factor + sm * inv;
  }
  if (p->kind == MT_ROPE_YARN) {
    double r = ((double)i - p->lo) / (p->hi - p->lo);
    r = r < 0.0 ? 0.0 : r > 1.0 ? 1.0 : r;
    return r * (inv / p->factor) + (1.0 - r) * inv;
  }
  return inv;
}

/* YaRN's correction range for d rotated channels (Megatron's
 * _yarn_find_correction_range with round_to_int, then the ramp's guard). */
static inline void mt_yarn_range(double beta_fast, double beta_slow, double d, double base,
                                 double original_max, double *lo, double *hi) {
  const double pi2 = 6.283185307179586476925286766559;
  double l = floor(d * log(original_max / (beta_fast * pi2)) / (2.0 * log(base)));
  double h = ceil(d * log(original_max / (beta_slow * pi2)) / (2.0 * log(base)));
  if (l < 0.0) l = 0.0;
  if (h > d - 1.0) h = d - 1.0;
  if (l == h) h += 0.001;
  *lo = l, *hi = h;
}

/* The parameters of a call with scaling kind `scaling` (MT_ROPE_*), rotary
 * base and rot_dim rotated channels (host side). */
static inline mt_rope_freq mt_rope_freq_make(int scaling, double base, int rot_dim, double factor,
                                             int original_max, double beta_fast,
                                             double beta_slow) {
  mt_rope_freq p = {scaling, base, (double)rot_dim, factor, 0.0, 1.0};
  if (scaling == MT_ROPE_YARN)
    mt_yarn_range(beta_fast, beta_slow, (double)rot_dim, base, (double)original_max, &p.lo, &p.hi);
  return p;
}

#endif
