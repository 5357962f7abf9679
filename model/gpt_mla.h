/* model/gpt_mla.h — private state of multi-latent attention
 * (model/gpt_mla.c passes, model/gpt_mla_setup.c construction).
 *
 * Head packing. The projections give, for this rank's rows (s·b tokens of
 * this CP rank's sequence) and np local heads:
 *   Q   [rows, np, hq]       per head dn "nope" channels then dr rotated ones
 *   KV  [rows, np, dn + dv]  per head dn key channels then dv value channels
 *   KPE [rows, dr]           the decoupled RoPE key, one for all heads
 * in one staging buffer W = [Q | KV | KPE | R'] (elements at 0, off_kv,
 * off_kpe, off_r). The rotated parts are gathered into
 *   R'  [rows, np, 3, dr]    per head q_pe, k_pe (a copy), an unused slot
 * which the backend's rope op turns as a qkv tensor of np groups of one
 * query head, one key head and one (untouched) value head of width dr; then
 * the fused attention's input P = a->qkv [rows, np, (dn, dr, dn, dr, dv)]
 * (q = [q_nope, q_pe], k = [k_nope, k_pe], v; mt_attn_desc with hn = hq and
 * hv = dv) is gathered from W. Every gather moves units of u = gcd(dn, dr,
 * dv) channels (moe_gather_rows through index tables built once).
 * Backward: G = m->ws.dqkv = [dP | dR'] (dR' at off_gr); dR' <- dP's
 * rotated slots, rope_bwd on it, then [dQ | dKV] <- G (into W) and
 * dKPE [rows, dr] = the sum over the heads of dR''s k_pe slots
 * (moe_combine_fwd, fixed head order).
 *
 * MLA's RoPE pairs channels (2i, 2i + 1) of the dr rotated ones: Megatron's
 * rope_utils reorders them [even | odd] and rotates halves, which is the
 * interleaved rotation up to a permutation shared by queries and keys (so
 * q·k is the same). */
#ifndef MT_MODEL_GPT_MLA_H
#define MT_MODEL_GPT_MLA_H

#include <stdint.h>

typedef struct mt_gpt_mla {
  int yarn;                  /* rope_type yarn (null: yes, MLA's default) */
  int qr, kr, dn, dr, dv, hq, slot; /* slot = 2·hq + dv */
  int64_t u;                 /* gather unit gcd(dn, dr, dv) */
  int64_t off_kv, off_kpe, off_r, off_gr;
  int64_t n_r, n_p, n_w;     /* units of R', of P, of [Q | KV] */
  void *stage;               /* W (forward); [dQ | dKV] in the backward */
  void *dkpe;                /* [rows, dr] */
  void *kpe_l;               /* [sl·b, dr] this rank's k_pe rows (sequence parallel) */
  void *d_qcn, *d_qc;        /* [sl·b, qr] */
  void *d_kvcn, *d_kvc;      /* [sl·b, kr] */
  int32_t *idx_r, *idx_dr, *idx_p, *idx_dw, *slot_kpe;
  /* FP8 (cfg.fp8): linear_kv_down_proj as one FP8 linear over its whole
   * weight: its output / output gradient [sl·b, kr + dr] and input
   * gradient [sl·b, h]; NULL without FP8 */
  void *f8_kv, *f8_dx;
  float softmax_scale, attn_factor;
} mt_gpt_mla;

/* Extra elements per row m->ws.dqkv needs for dR' (0 without MLA), and the
 * widest input of a column-parallel linear (the TP workspaces' width). */
struct mt_gpt;
int64_t mt_gpt_mla_dqkv_extra(const struct mt_gpt *m);
int64_t mt_gpt_mla_gather_width(const struct mt_gpt *m);

#endif
