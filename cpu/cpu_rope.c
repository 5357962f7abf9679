/* cpu/cpu_rope.c — rotary position embedding (Su et al. 2021, RoFormer §3.4;
 * Megatron-core rotary_pos_embedding.py), forward and backward, in place on
 * the query and key heads of the GQA qkv layout [s, b, ng, np/ng + 2, hn]
 * (mt_rope_desc, core/backend.h).
 *
 * The cos/sin table [s, rot_dim/2] is computed once per call from
 * double-precision angles theta_i = pos * inv_i (pos = the global position
 * s_offset + si; inv_i = base^(-2i / rot_dim) or its Llama-3.1 / YaRN
 * scaling, core/rope_freq.h), times YaRN's attention factor, and rounded to
 * float; each rotation is then
 * two fp32 multiplies and an add per channel. The backward applies the
 * inverse rotation (angle -theta), the exact transpose of the forward.
 * Every element is written by one thread: results do not depend on the
 * thread count. bf16 storage: widen, the fp32 op, round once (cpu_bf16.h).
 * cuda/cuda_rope.cu is the GPU counterpart.
 */
#include <math.h>
#include <omp.h>

#include "core/rope_freq.h"
#include "core/util.h"
#include "cpu_bf16.h"

/* tab = {cos [s, half], sin [s, half]} of the rows of d (half = rot_dim/2),
 * frequencies and factor of core/rope_freq.h. */
static void rope_table(const mt_rope_desc *d, float *tab) {
  const int half = d->rot_dim / 2;
  float *cs = tab, *sn = tab + (int64_t)d->s * half;
  const mt_rope_freq fp = mt_rope_freq_make(d->scaling, (double)d->base, d->rot_dim,
                                            (double)d->factor, d->original_max,
                                            (double)d->beta_fast, (double)d->beta_slow);
  const double m = d->attn_factor != 0.0f ? (double)d->attn_factor : 1.0;
  for (int i = 0; i < half; i++) {
    double inv_freq = mt_rope_inv_freq(&fp, i);
    for (int si = 0; si < d->s; si++) {
      double th = (double)(d->s_offset + si) * inv_freq;
      cs[(int64_t)si * half + i] = (float)(cos(th) * m);
      sn[(int64_t)si * half + i] = (float)(sin(th) * m);
    }
  }
}

/* Rotate every q/k head of x by sign * theta (sign = +1 forward, -1 the
 * inverse used by the backward). */
static void rope_apply(mt_backend *be, const mt_rope_desc *d, float *x, float sign) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  const int npg = d->np / ng, hn = d->hn, half = d->rot_dim / 2;
  MT_ASSERT(d->np % ng == 0 && d->rot_dim % 2 == 0 && d->rot_dim >= 0 && d->rot_dim <= hn);
  if (half == 0) return;
  float *tab = cpu_workspace(be, (size_t)(2 * (int64_t)d->s * half) * sizeof(float));
  rope_table(d, tab);
  const float *cs = tab, *sn = tab + (int64_t)d->s * half;
  const int64_t units = (int64_t)d->s * d->b * ng; /* (si, bi, g) */
  const int64_t stride_a = d->interleaved ? 2 : 1, off_b = d->interleaved ? 1 : half;
#pragma omp parallel for schedule(static) if (units * (npg + 1) * hn >= cpu_par_min(be))
  for (int64_t u = 0; u < units; u++) {
    const int64_t si = u / ((int64_t)d->b * ng);
    const float *c = cs + si * half, *sv = sn + si * half;
    for (int slot = 0; slot <= npg; slot++) { /* the group's q heads, then its k head */
      float *hx = x + (u * (npg + 2) + slot) * hn;
#pragma omp simd
      for (int i = 0; i < half; i++) {
        float *pa = hx + i * stride_a, *pb = pa + off_b;
        float a = *pa, bv = *pb, sg = sign * sv[i];
        *pa = a * c[i] - bv * sg;
        *pb = bv * c[i] + a * sg;
      }
    }
  }
}

void cpu_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv) {
  rope_apply(be, d, (float *)qkv, 1.0f);
}

void cpu_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv) {
  rope_apply(be, d, (float *)dqkv, -1.0f);
}

/* ---- bf16 storage (in place) ---- */

static void bf16_rope(mt_backend *be, const mt_rope_desc *d, void *x, int bwd) {
  const int64_t n = bf_qkv_elems((int64_t)d->s * d->b, d->np, d->ng, d->hn);
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n}, p);
  bf_widen(be, p[0], x, n);
  if (bwd)
    cpu_rope_bwd(be, d, p[0]);
  else
    cpu_rope_fwd(be, d, p[0]);
  bf_narrow(be, x, p[0], n);
}

void cpu_bf16_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv) {
  bf16_rope(be, d, qkv, 0);
}

void cpu_bf16_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv) {
  bf16_rope(be, d, dqkv, 1);
}
