/* planner/plan_time.c — step-time model of one iteration (docs/planner.md).
 *
 * Per micro-batch and pipeline stage, one GPU:
 *  - GEMMs: 2 M N K FLOPs at peak * eff(M, N, K), eff = gemm_max / (1 + c/M +
 *    c/N + c/K): a saturating curve in each GEMM dimension (tile and wave
 *    quantisation make small dimensions inefficient; NVIDIA "Matrix
 *    Multiplication Background User's Guide"); gemm_max and c are fitted
 *    (docs/throughput.md). Backward = 2x forward (data + weight gradients).
 *  - Attention (no flash attention, as Megatron 2021-22 and model/): the
 *    batched QK^T and PV GEMMs plus softmax and dropout passes over
 *    [b, a/t, s, s] counted as bytes over HBM bandwidth.
 *  - Elementwise: LayerNorm, bias+GeLU, bias+dropout+residual passes as bytes
 *    over HBM bandwidth (10 residual-stream tensors + 2 ffn tensors forward,
 *    twice that backward); SP divides the residual-stream ones by t.
 *  - TP: 2 all-reduces forward and 2 backward (SP: all-gather +
 *    reduce-scatter pairs, the same bytes), ring alpha-beta over NVLink when
 *    the TP group is inside a node (tp varies fastest in the rank order).
 *    Backward collectives overlap the weight-gradient GEMMs (Megatron's
 *    async TP all-reduce): only the excess is exposed.
 *  - Recomputation: selective repeats the attention core forward; full
 *    repeats the whole layer forward (including its TP collectives).
 *  - Pipeline: iteration = m * (slowest stage) + (p - 1)/v * (mean stage)
 *    (bubble (p-1)/(v m), 2104.04473 §2.2), plus 2 v send/recv per
 *    micro-batch per stage of b s h / t elements (scatter/gather).
 *  - Context parallelism (cp > 1): every token-local piece runs on the
 *    rank's b s/cp tokens; the attention of a rank is cp ring steps of an
 *    [s/cp x s/cp] block (1/cp of the cp = 1 work in total). Step i's K/V
 *    transfer (one block, s/cp b ng/t 2 hn elements, point-to-point to the
 *    next CP rank) is posted before block i is computed, so per step only
 *    max(0, transfer - block compute) is exposed: forward cp-1 K/V steps;
 *    backward cp-1 steps moving a K/V and a dK/dV block each behind a block
 *    backward (2x the forward), plus the last dK/dV hop home unhidden. The
 *    CP group is inside a node when tp x cp GPUs are (cp stride tp).
 *  - MoE layers (docs/moe_parallel.md "Memory and communication formulas"): router
 *    GEMM and the TP all-gather of its logits, experts as E/ep grouped GEMMs
 *    of the ETP group's rows (balanced routing), the shared expert as a
 *    dense MLP, EP all-to-alls split between NVLink and the network by the
 *    EP ranks per node (stride etp under parallel folding), ETP
 *    all-gather/reduce-scatter; each stage with its own MoE layer count.
 *  - DP/ZeRO: gradient all-reduce over dp x cp (experts over edp) (ZeRO-1/2: reduce-scatter +
 *    parameter all-gather; ZeRO-3 also gathers parameters per micro-batch),
 *    exposed unless overlap_grad_reduce, then only what the last backward
 *    cannot hide.
 *  - Optimizer: bytes of the Adam update, norm and grad zeroing over HBM.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "planner/plan_internal.h"
#include "model/gpt_flops.h"

static const char *k_time_names[MT_PT_N] = {
    "gemm", "attention", "elementwise", "recompute", "tp_comm", "cp_comm", "ep_comm",
    "pp_comm", "pipeline_bubble", "dp_comm", "optimizer", "other"};
const char *mt_plan_time_name(int c) { return c >= 0 && c < MT_PT_N ? k_time_names[c] : "?"; }

typedef struct {
  const mt_hardware *hw;
  double peak;  /* FLOP/s */
  double hbm;   /* bytes/s achievable */
  int shared_overlap; /* moe_shared_expert_overlap */
  /* FP8 linears (planner/plan_fp8.c; 0 / 1 for a bf16 layer): r_fd, r_w
   * scale the linears' bf16 GEMM time of fprop + dgrad and of wgrad
   * (peak_bf16 / peak_fp8, the same efficiency curve); qa, qw bytes per
   * element of a quantization of an activation or gradient and of a weight
   * (once per iteration: TE keeps a weight's FP8 copy over the micro-batches,
   * Megatron's is_first_microbatch); m micro-batches per iteration */
  int fp8;
  double r_fd, r_w, qa, qw, m;
} ctx_t;

static double gemm(const ctx_t *c, double M, double N, double K, double batch) {
  double cc = c->hw->gemm_dim_half;
  double eff = c->hw->gemm_eff_max / (1 + cc / M + cc / N + cc / K);
  return 2 * M * N * K * batch / (c->peak * eff);
}

static double mem(const ctx_t *c, double bytes) { return bytes / c->hbm; }

/* A linear layer's GEMM (Y [M, N] = X [M, K] W^T, `batch` of them), as
 * gemm(); acc[0] sums its time, acc[1..3] the elements of X, W and dY that
 * an FP8 layer quantizes. */
static double lin(const ctx_t *c, double *acc, double M, double N, double K, double batch) {
  const double g = gemm(c, M, N, K, batch);
  acc[0] += g;
  acc[1] += M * K * batch;
  acc[2] += N * K * batch;
  acc[3] += M * N * batch;
  return g;
}

enum { C_AR = MT_PLAN_AR, C_AG = MT_PLAN_AG, C_RS = MT_PLAN_RS, C_A2A = MT_PLAN_A2A,
       C_P2P = MT_PLAN_P2P };


static double coll(const mt_hardware *hw, int kind, double n, double bytes, int intra) {
  return mt_plan_coll(hw, kind, n, bytes, intra);
}

/* All-to-all of `bytes` (everything one rank sends, its own share
 * included) over n ranks of which n_in share a node (the rest on other
 * nodes): the (n_in - 1)/n share crosses NVLink, the (n - n_in)/n share the
 * network, concurrently on the two links; each peer costs one latency. */
static double a2a(const mt_hardware *hw, double n, double bytes, double n_in) {
  if (n <= 1) return 0;
  if (n_in > n) n_in = n;
  if (n_in < 1) n_in = 1;
  const double le = hw->link_eff;
  const double t_in = (n_in - 1) / n * bytes / (hw->intra_node_gbs * 1e9 * le) +
                      (n_in - 1) * hw->intra_latency_us * 1e-6;
  const double t_out = (n - n_in) / n * bytes / (hw->inter_node_gbs * 1e9 * le) +
                       (n - n_in) * hw->inter_latency_us * 1e-6;
  return fmax(t_in, t_out);
}

/* Per micro-batch pieces of one pass, seconds. */
typedef struct {
  double gemm, attn, elem, tp, cp, ep, rc; /* fwd + bwd + recompute, exposed comm */
  double fwd, bwd;                         /* totals of the two passes */
  double tpt, cpt, ept;                    /* communication, all of it (hidden or not) */
  double q8, q8_bytes, lin8;               /* FP8: quantization seconds (in elem) and
                                              bytes, the FP8 linears' GEMM seconds */
} piece;

static void add(piece *a, const piece *b, double k) {
  a->gemm += k * b->gemm; a->attn += k * b->attn; a->elem += k * b->elem;
  a->tp += k * b->tp; a->cp += k * b->cp; a->ep += k * b->ep; a->rc += k * b->rc;
  a->fwd += k * b->fwd; a->bwd += k * b->bwd;
  a->tpt += k * b->tpt; a->cpt += k * b->cpt; a->ept += k * b->ept;
  a->q8 += k * b->q8; a->q8_bytes += k * b->q8_bytes; a->lin8 += k * b->lin8;
}

/* The context-parallel ring of one layer and micro-batch (cp > 1; zeros
 * otherwise): K/V block KV = s_loc b (ng/t) 2 hn elements; forward cp-1
 * hops of KV, backward cp-1 hops of K/V + dK/dV and the last dK/dV hop home
 * (model/context_parallel.h: (cp-1) KV forward, (2cp-1) KV backward sent
 * per rank). blk_s: compute time of one forward block. */
static mt_plan_cp_ring cp_ring(const mt_hardware *hw, const mt_plan_dims *d, double blk_s,
                               int cp_intra) {
  mt_plan_cp_ring r;
  memset(&r, 0, sizeof r);
  const double cp = d->c;
  if (cp <= 1) return r;
  const double kv = d->s_loc * d->b * (d->ng / d->t) * 2 * d->hn * d->e;
  const double hop = coll(hw, C_P2P, 2, kv, cp_intra), hop2 = coll(hw, C_P2P, 2, 2 * kv, cp_intra);
  r.fwd_bytes = (cp - 1) * kv;
  r.bwd_bytes = (2 * cp - 1) * kv;
  r.transfer_s = (cp - 1) * (hop + hop2) + hop;
  r.block_s = blk_s;
  r.exposed_fwd_s = (cp - 1) * fmax(0, hop - blk_s);
  r.exposed_bwd_s = (cp - 1) * fmax(0, hop2 - 2 * blk_s) + hop;
  return r;
}

/* Node placement of the MoE groups (expert generator, rank = etp_rank +
 * etp (ep_rank + ep (edp_rank + edp pp_rank))): the ETP group is etp
 * consecutive ranks; the EP group has stride etp, so ep_in = min(ep,
 * max(1, G / etp)) of its members share a node of G GPUs. */
typedef struct {
  int tp_intra, cp_intra, etp_intra;
  double ep_in;
} place_t;

/* The MoE layer's communication per micro-batch, forward + backward (see
 * mt_plan_moe_comm): EP all-to-alls of s_rows h es bytes (dispatch, combine;
 * their gradients), the counts all-to-all without padding, the ETP
 * all-gather + reduce-scatter of the etp r_rows rows per pass, and the
 * shared expert's TP all-gather + reduce-scatter forward, 2 all-gathers + 1
 * reduce-scatter backward. */
static void moe_comm(const mt_hardware *hw, const mt_plan_dims *d, const place_t *pl,
                     mt_plan_moe_comm *o) {
  memset(o, 0, sizeof *o);
  if (d->E <= 0) return;
  const double h = d->h, e = d->e, etp = d->etp > 1 ? d->etp : 1, t = d->t;
  double s_rows, r_rows;
  mt_plan_moe_rows(d, &s_rows, &r_rows);
  if (d->cap <= 0) r_rows = s_rows;
  const double rx = etp * r_rows, counts = d->cap > 0 ? 0 : d->E * 8;
  o->a2a_bytes = d->ep > 1 ? 4 * s_rows * h * e + counts : 0;
  o->a2a_s = 4 * a2a(hw, d->ep, s_rows * h * e, pl->ep_in) + a2a(hw, d->ep, counts, pl->ep_in);
  if (etp > 1) {
    o->etp_bytes = 4 * (etp - 1) / etp * rx * h * e + (etp - 1) * d->E * 8;
    o->etp_s = 2 * (coll(hw, C_AG, etp, rx * h * e, pl->etp_intra) +
                    coll(hw, C_RS, etp, rx * h * e, pl->etp_intra)) +
               coll(hw, C_AG, etp, etp * d->E * 8, pl->etp_intra);
  }
  if (d->S > 0 && t > 1) {
    const double x = d->b * d->s_loc * h * e;
    o->shared_tp_bytes = 5 * (t - 1) / t * x;
    o->shared_tp_s = 3 * coll(hw, C_AG, t, x, pl->tp_intra) + 2 * coll(hw, C_RS, t, x, pl->tp_intra);
  }
}

/* One transformer layer (dense or MoE) for one micro-batch. A MoE layer
 * (docs/moe_parallel.md "Memory and communication formulas"): the router GEMM on the
 * rank's n_loc tokens (its SP shard) and the all-gather of the [n_loc, E]
 * fp32 logits over TP; dispatch and combine all-to-alls of the rank's
 * s_rows = n_loc k rows (E C padded) forward and backward over EP; with
 * etp > 1 an all-gather and a reduce-scatter of the etp r_rows received rows
 * over ETP per pass; the experts' GEMMs as E/ep groups of etp r_rows / (E/ep)
 * rows (balanced routing) and F/etp columns; the shared expert as a dense
 * MLP of width S (its TP all-gather / reduce-scatter pair like the dense
 * MLP's; a MoE layer without one has only the attention's pair). */
static piece layer(const ctx_t *c, const mt_plan_dims *d, int moe, const place_t *pl) {
  const mt_hardware *hw = c->hw;
  const int tp_intra = pl->tp_intra, cp_intra = pl->cp_intra;
  double b = d->b, s = d->s_loc, h = d->h, t = d->t, e = d->e, M = b * s, cp = d->c;
  double x = M * h, xs = d->sp ? x / t : x;
  /* linear_qkv [h -> (a + 2 ng) hn / t], linear_proj [a hn / t -> h] (MLA: below) */
  double q = d->a * d->hn, qkv = (d->a + 2 * d->ng) * d->hn;
  double L8[4] = {0, 0, 0, 0}; /* the linears' GEMM seconds, X / W / dY elements */
  double g_attn_lin = lin(c, L8, M, qkv / t, h, 1) + lin(c, L8, M, h, q / t, 1);
  if (d->mla) { /* down projections on the rank's rows, up projections and linear_proj by heads */
    const double Ml = d->sp ? M / t : M, npl = d->a / t, hq = d->dn + d->dr;
    memset(L8, 0, sizeof L8);
    g_attn_lin = (d->qr > 0 ? lin(c, L8, Ml, d->qr, h, 1) + lin(c, L8, M, npl * hq, d->qr, 1)
                            : lin(c, L8, M, npl * hq, h, 1)) +
                 lin(c, L8, Ml, d->kr + d->dr, h, 1) +
                 lin(c, L8, M, npl * (d->dn + d->dv), d->kr, 1) + lin(c, L8, M, h, npl * d->dv, 1);
  }
  double g_mlp, mlp_elem, ep_f = 0, tp_blocks = 2, tp_extra = 0, shared_f = 0;
  /* fc1 has g = 2 halves with SwiGLU; the activation reads g + (bias) and
   * writes one [M, f/t] tensor */
  if (!moe) {
    g_mlp = lin(c, L8, M, d->g * d->f / t, h, 1) + lin(c, L8, M, h, d->f / t, 1);
    mlp_elem = (d->g + 1) * M * d->f / t * e;
  } else {
    const double n_loc = d->sp ? M / t : M, etp = d->etp > 1 ? d->etp : 1, El = d->E / d->ep;
    double s_rows, r_rows;
    mt_plan_moe_rows(d, &s_rows, &r_rows);
    if (d->cap <= 0) r_rows = s_rows; /* balanced: a rank receives what it sends */
    const double rx = etp * r_rows, Fx = d->fm / etp;
    g_mlp = gemm(c, n_loc, d->E, h, 1) + lin(c, L8, rx / El, d->g * Fx, h, El) +
            lin(c, L8, rx / El, h, Fx, El); /* the router GEMM stays bf16 */
    mlp_elem = (d->g + 1) * rx * Fx * e + 2 * n_loc * d->topk * h * e;
    mt_plan_moe_comm mc;
    moe_comm(hw, d, pl, &mc);
    ep_f = (mc.a2a_s + mc.etp_s) / 2; /* forward half; backward the same */
    tp_blocks = 1;
    if (d->S > 0) {
      const double gs = lin(c, L8, M, d->g * d->S / t, h, 1) + lin(c, L8, M, h, d->S / t, 1);
      shared_f = (c->fp8 ? gs * c->r_fd : gs) + mem(c, (d->g + 1) * M * d->S / t * e);
      g_mlp += gs;
      mlp_elem += (d->g + 1) * M * d->S / t * e;
      tp_blocks = 2;
    }
    if (d->sp) tp_extra = coll(hw, C_AG, t, M * d->E * 4, tp_intra); /* router logits */
  }
  /* cp ring steps of an [s_loc x s_loc] block (cp = 1: the whole s x s) */
  /* MLA: Q K^T over dn + dr channels, P V over dv */
  double hd = d->mla ? d->dn + d->dr : d->hn, hv = d->mla ? d->dv : d->hn, heads = b * d->a / t;
  double attn_g = cp * (gemm(c, s, s, hd, heads) + gemm(c, s, hv, s, heads));
  double S = cp * heads * s * s;
  double attn_m = mem(c, 4 * S * e); /* scale-mask-softmax r/w + dropout r/w */
  mt_plan_cp_ring ring = cp_ring(hw, d, (attn_g + attn_m) / cp, cp_intra);
  double cp_f = ring.exposed_fwd_s, cp_b = ring.exposed_bwd_s;
  double elem_f = mem(c, 10 * xs * e + mlp_elem);
  double tp_f = 0, tp_b = 0;
  if (t > 1) {
    if (d->sp) {
      tp_f = tp_blocks * (coll(hw, C_AG, t, x * e, tp_intra) + coll(hw, C_RS, t, x * e, tp_intra));
      tp_b = tp_f + tp_blocks * coll(hw, C_AG, t, x * e, tp_intra); /* re-gather LN outputs */
      tp_f += tp_extra;
    } else {
      tp_f = tp_blocks * coll(hw, C_AR, t, x * e, tp_intra);
      tp_b = tp_f;
    }
  }
  double gf = g_attn_lin + g_mlp, gw = gf;
  piece p;
  memset(&p, 0, sizeof p);
  p.gemm = 3 * gf;
  p.attn = 3 * attn_g + 3 * attn_m;
  p.elem = 3 * elem_f;
  if (c->fp8) {
    /* FP8 linears: fprop and dgrad (and wgrad with fp8_wgrad) at the FP8
     * peak; forward quantizes X (and W, once per iteration), backward dY */
    const double dfd = L8[0] * (c->r_fd - 1), dw = L8[0] * (c->r_w - 1);
    const double qf_b = c->qa * L8[1] + c->qw * L8[2] / c->m, qb_b = c->qa * L8[3];
    p.q8 = mem(c, qf_b) + mem(c, qb_b);
    p.q8_bytes = qf_b + qb_b;
    p.lin8 = L8[0] * (2 * c->r_fd + c->r_w);
    p.gemm = 3 * gf + 2 * dfd + dw;
    p.elem += p.q8;
    gw = gf + dw;
    gf += dfd;
    elem_f += mem(c, qf_b);
  }
  p.tp = tp_f + fmax(0, tp_b - gw); /* backward collectives hide behind wgrad GEMMs */
  p.cp = cp_f + cp_b;
  p.ep = 2 * ep_f;
  p.tpt = tp_f + tp_b;
  p.cpt = ring.transfer_s;
  p.ept = 2 * ep_f;
  /* moe_shared_expert_overlap: the all-to-alls of a pass run while the
   * shared expert computes (backward: twice the forward's work) */
  if (c->shared_overlap && shared_f > 0)
    p.ep = fmax(0, ep_f - shared_f) + fmax(0, ep_f - 2 * shared_f);
  if (d->recompute == 1) p.rc = attn_g + attn_m;
  else if (d->recompute == 2) p.rc = gf + attn_g + attn_m + elem_f + tp_f + cp_f + ep_f;
  p.fwd = gf + attn_g + attn_m + elem_f + tp_f + cp_f + ep_f;
  p.bwd = p.gemm + p.attn + p.elem + p.tp + p.cp + p.ep + p.rc - p.fwd;
  return p;
}

/* Embedding (first stage) or final LN + logits + cross-entropy (last stage). */
static piece ends(const ctx_t *c, const mt_plan_dims *d, int first, int last, int tp_intra) {
  const mt_hardware *hw = c->hw;
  double b = d->b, s = d->s_loc, h = d->h, t = d->t, e = d->e, M = b * s;
  double x = M * h, xs = d->sp ? x / t : x;
  piece p;
  memset(&p, 0, sizeof p);
  double fwd = 0, bwd = 0;
  if (first) {
    double f_el = mem(c, 3 * xs * e), b_el = mem(c, 2 * x * 4);
    double f_tp = coll(hw, d->sp ? C_RS : C_AR, t, x * e, tp_intra);
    p.elem += f_el + b_el;
    p.tp += f_tp;
    fwd += f_el + f_tp;
    bwd += b_el;
  }
  if (last) {
    double g = gemm(c, M, d->Vp / t, h, 1);
    double ce = mem(c, 2 * M * d->Vp / t * e);
    double ln = mem(c, 2 * xs * e);
    double f_tp = d->sp ? coll(hw, C_AG, t, x * e, tp_intra) : 0;
    double small = 3 * coll(hw, C_AR, t, M * 4, tp_intra); /* vocab-parallel CE */
    p.gemm += 3 * g;
    p.elem += 2 * ce + 3 * ln;
    p.tp += f_tp + small; /* backward collective hides behind the wgrad GEMM */
    fwd += g + ce + ln + f_tp + small;
    bwd += 2 * g + ce + 2 * ln;
  }
  p.fwd = fwd;
  p.bwd = bwd;
  p.tpt = p.tp;
  return p;
}

/* The model shape of cfg for model/gpt_flops.h: the model section is the
 * model's config (mt_gpt_config.model), so the trainer's FLOPs function
 * reads it as is. */
static mt_flops_shape flops_shape(const mt_config *cfg) {
  mt_gpt_config g;
  memset(&g, 0, sizeof g);
  g.model = cfg->model;
  g.padded_vocab_size = mt_config_padded_vocab(cfg);
  mt_flops_shape fs = mt_gpt_flops_shape(&g, cfg->training.global_batch_size);
  /* logging.flops_formula: configs/papers ask for the papers' (full s x s);
   * documents are not known here: sum L_i^2 = B s^2 */
  fs.formula = mt_flops_formula_from_name(cfg->logging.flops_formula);
  return fs;
}

double mt_plan_hw_flops(const mt_config *cfg) {
  const mt_flops_shape fs = flops_shape(cfg);
  const double model = mt_flops_per_iteration(&fs);
  mt_flops_parts fw;
  mt_flops_forward_parts(&fs, &fw);
  if (!strcmp(cfg->model.recompute_granularity, "selective")) return model + fw.attn_core;
  if (!strcmp(cfg->model.recompute_granularity, "full"))
    return model + fw.attn_linear + fw.attn_core + fw.mlp;
  return model;
}

static int same_node(const mt_hardware *hw, double span) { return span <= hw->gpus_per_node; }

int mt_plan_compute(const mt_config *cfg, int world, const mt_hardware *hw,
                    const mt_plan_options *opt_in, mt_plan *out, char *err, size_t errlen) {
  /* the config's overlap keys, or the command line's flags */
  mt_plan_options ov = opt_in ? *opt_in : (mt_plan_options){0};
  ov.overlap_grad_reduce |= cfg->parallel.overlap_grad_reduce;
  ov.overlap_param_gather |= cfg->parallel.overlap_param_gather;
  ov.overlap_p2p_comm |= cfg->parallel.overlap_p2p_comm;
  ov.moe_shared_expert_overlap |= cfg->model.moe_shared_expert_overlap;
  const mt_plan_options *opt = &ov;
  mt_plan_dims d;
  mt_plan_dims_from(cfg, world, &d);
  memset(out, 0, sizeof *out);
  if (d.t * d.c * d.p * d.d != world) {
    snprintf(err, errlen, "tensor_model_parallel_size %d x context_parallel_size %d x "
             "pipeline_model_parallel_size %d does not divide the world size %d", (int)d.t,
             (int)d.c, (int)d.p, world);
    return 2;
  }
  out->world = world;
  out->tp = (int)d.t; out->pp = (int)d.p; out->vpp = (int)d.v; out->dp = (int)d.d;
  out->cp = (int)d.c;
  out->ep = (int)d.ep; out->etp = (int)d.etp; out->zero = d.zero; out->sp = d.sp;
  out->mbs = (int)d.b; out->gbs = cfg->training.global_batch_size; out->n_micro = (int)d.m;
  out->recompute = d.recompute; out->recompute_num_layers = d.rc_layers; out->bf16 = d.e < 4;
  /* rank order tp-cp-ep-dp-pp: tp stride 1, cp stride tp, dp stride tp*cp,
   * pp stride tp*cp*dp; expert generator: ep stride etp. The gradient group
   * dp x cp spans tp*cp*dp ranks. */
  out->tp_intra = same_node(hw, d.t);
  out->cp_intra = same_node(hw, d.t * d.c);
  out->dp_intra = same_node(hw, d.t * d.c * d.d);
  out->pp_intra = same_node(hw, d.t * d.c * d.d * d.p);
  const double G = hw->gpus_per_node, etp_g = d.etp > 1 ? d.etp : 1;
  place_t pl = {out->tp_intra, out->cp_intra, same_node(hw, etp_g),
                fmin(d.ep, fmax(1, floor(G / etp_g)))};
  const int edp_intra = same_node(hw, etp_g * d.ep * d.edp); /* edp stride etp ep */
  if (d.E > 0) {
    moe_comm(hw, &d, &pl, &out->moe);
    out->moe.edp = (int)d.edp;
    out->moe.ep_per_node = (int)pl.ep_in;
    out->moe.etp_intra = pl.etp_intra;
    out->moe.edp_intra = edp_intra;
  }
  mt_plan_memory_compute(cfg, world, hw, opt, &out->mem);
  out->opt = *opt;

  ctx_t c = {hw, (d.e < 4 ? hw->peak_tflops_bf16 : hw->peak_tflops_fp32) * 1e12,
             hw->hbm_gbs * 1e9 * hw->hbm_eff, opt && opt->moe_shared_expert_overlap,
             0, 1, 1, 0, 0, d.m};
  piece dense = layer(&c, &d, 0, &pl), moe;
  memset(&moe, 0, sizeof moe);
  if (d.E > 0) moe = layer(&c, &d, 1, &pl);
  /* FP8 (plan_fp8.c): the layers whose linears run in FP8 get their own
   * pieces; dense / moe above stay the bf16-kept layers' */
  const int fp8 = mt_plan_fp8_on(cfg);
  piece dense8 = dense, moe8 = moe;
  if (fp8) {
    if (!(hw->peak_tflops_fp8 > 0) || d.e != 2) {
      snprintf(err, errlen, d.e != 2 ? "training.fp8_format \"%s\" needs training.precision "
               "bf16 (expected precision bf16, or fp8_format null)"
               : "training.fp8_format \"%s\" on hardware %s (%s): it has no peak_tflops_fp8 "
               "(no FP8 tensor cores; expected a hardware file with peak_tflops_fp8)",
               cfg->training.fp8_format, hw->name, hw->source_path);
      return 2;
    }
    const mt_training_config *tc = &cfg->training;
    ctx_t c8 = c;
    c8.fp8 = 1;
    c8.r_fd = hw->peak_tflops_bf16 / hw->peak_tflops_fp8;
    c8.r_w = tc->fp8_wgrad ? c8.r_fd : 1;
    c8.qa = mt_plan_fp8_quant_bytes(tc->fp8_recipe, 0, 0);
    c8.qw = mt_plan_fp8_quant_bytes(tc->fp8_recipe, 1, tc->fp8_param_gather);
    dense8 = layer(&c8, &d, 0, &pl);
    if (d.E > 0) moe8 = layer(&c8, &d, 1, &pl);
  }
  /* pipeline p2p per micro-batch on one stage: v chunks, activation forward
   * and gradient backward, scatter/gather over the tp ranks */
  double p2p = 0;
  if (d.p > 1) {
    double bytes = d.b * d.s_loc * d.h * d.e / d.t;
    p2p = 2 * d.v * coll(hw, C_P2P, 2, bytes, out->pp_intra);
  }
  /* every stage with its own layers (uneven stages, a moe_layer_freq list) */
  double t_max = 0, t_sum = 0;
  piece worst = dense;
  int np = (int)d.p, worst_moe = 0, worst_k = 0, worst_nl = 0, worst_bd = 0, worst_bm = 0;
  for (int k = 0; k < np; k++) {
    int nl, nm, bd = 0, bm = 0;
    mt_plan_stage_layer_counts(cfg, &d, k, &nl, &nm);
    piece st, en = ends(&c, &d, k == 0, k == np - 1, out->tp_intra);
    memset(&st, 0, sizeof st);
    if (fp8) {
      mt_plan_fp8_stage_bf16_layers(cfg, &d, k, &bd, &bm);
      add(&st, &dense8, nl - nm - bd);
      add(&st, &moe8, nm - bm);
    }
    add(&st, &dense, fp8 ? bd : nl - nm);
    add(&st, &moe, fp8 ? bm : nm);
    add(&st, &en, 1);
    double tk = st.fwd + st.bwd + p2p;
    t_sum += tk;
    if (k == 0 || tk > t_max) {
      t_max = tk;
      worst = st;
      worst_moe = nm;
      worst_k = k;
      worst_nl = nl;
      worst_bd = bd;
      worst_bm = bm;
    }
  }
  double t_mean = t_sum / d.p;
  double m = d.m;
  mt_plan_time *T = &out->time;
  T->comp[MT_PT_GEMM] = m * worst.gemm;
  T->comp[MT_PT_ATTN] = m * worst.attn;
  T->comp[MT_PT_ELEMWISE] = m * worst.elem;
  T->comp[MT_PT_RECOMPUTE] = m * worst.rc;
  T->comp[MT_PT_TP_COMM] = m * worst.tp;
  T->comp[MT_PT_CP_COMM] = m * worst.cp;
  {
    double b = d.b, s = d.s_loc, heads = b * d.a / d.t, hd = d.hn;
    double blk = gemm(&c, s, s, hd, heads) + gemm(&c, s, hd, s, heads) + mem(&c, 4 * heads * s * s * d.e);
    T->cp_ring = cp_ring(hw, &d, blk, out->cp_intra);
  }
  T->comp[MT_PT_EP_COMM] = m * worst.ep;
  T->comp[MT_PT_PP_COMM] = m * p2p;
  T->comm_total[MT_PT_TP_COMM] = m * worst.tpt;
  T->comm_total[MT_PT_CP_COMM] = m * worst.cpt;
  T->comm_total[MT_PT_EP_COMM] = m * worst.ept;
  T->comm_total[MT_PT_PP_COMM] = m * p2p;
  if (d.p > 1 && opt && opt->overlap_p2p_comm) {
    /* posted early, each of the 2 v transfers per micro-batch runs behind
     * the next chunk's compute; the first receive and the last send wait */
    const double x = p2p / (2 * d.v), chunk = worst.fwd / d.v;
    T->comp[MT_PT_PP_COMM] = 2 * x + fmax(0, m * 2 * d.v - 2) * fmax(0, x - chunk);
  }
  T->comp[MT_PT_BUBBLE] = (d.p - 1) / d.v * t_mean;
  T->bubble_fraction = (d.p - 1) / (d.v * m);

  /* reduction of the worst stage's gradients: the dense ones over dp x cp
   * (Megatron's data_parallel_group_with_context_parallel), the experts over
   * edp (the expert generator's data-parallel group) */
  const double n_e = mt_plan_stage_expert_params(&d, worst_moe);
  const double n_d = mt_plan_stage_params(&d, out->mem.worst_stage) -
                     mt_plan_stage_expert_params(&d, mt_plan_stage_moe_layers(&d));
  double ndc = d.d * d.c;
  /* the worst stage's positions (embedding, layers, head) for the bucket
   * model: one micro-batch's forward and backward time of each */
  double dp_t = 0, dp_total = 0;
  {
    const int first = worst_k == 0, last = worst_k == np - 1, n_pos = first + worst_nl + last;
    double *fp = mt_xcalloc((size_t)n_pos + 1, sizeof(double));
    double *bp = mt_xcalloc((size_t)n_pos + 1, sizeof(double));
    piece lay;
    memset(&lay, 0, sizeof lay);
    if (fp8) {
      add(&lay, &dense8, worst_nl - worst_moe - worst_bd);
      add(&lay, &moe8, worst_moe - worst_bm);
    }
    add(&lay, &dense, fp8 ? worst_bd : worst_nl - worst_moe);
    add(&lay, &moe, fp8 ? worst_bm : worst_moe);
    for (int q = 0; q < n_pos; q++) {
      piece pq = lay;
      double k = 1.0 / (worst_nl > 0 ? worst_nl : 1);
      if ((first && q == 0) || (last && q == n_pos - 1)) {
        pq = ends(&c, &d, first && q == 0, last && q == n_pos - 1, out->tp_intra);
        k = 1;
      }
      fp[q] = k * pq.fwd;
      bp[q] = k * pq.bwd;
    }
    const int intra[2] = {out->dp_intra, edp_intra};
    mt_plan_dp_overlap(cfg, &d, hw, opt ? opt : &(mt_plan_options){0}, worst_k, fp, bp, n_pos,
                       intra, &dp_t, &dp_total, &T->dp_gather_bytes);
    free(fp);
    free(bp);
  }
  if (d.p > 1 && !d.untied) { /* tied embedding gradient: first + last stage */
    const double emb = coll(hw, C_AR, 2, d.Vp * d.h / d.t * 4, out->pp_intra);
    dp_t += emb;
    dp_total += emb;
  }
  T->comp[MT_PT_DP_COMM] = dp_t;
  T->comm_total[MT_PT_DP_COMM] = dp_total;
  const double n = n_d + n_e, n_sh = n_d / ndc + n_e / d.edp;
  double n_opt = d.zero >= 1 ? n_sh : n, n_grad = d.zero >= 2 ? n_sh : n;
  double opt_bytes = n_opt * (4 + 16 + 8 + (d.e < 4 ? 2 : 0) + 4) + n_grad * 4;
  T->comp[MT_PT_OPTIM] = mem(&c, opt_bytes) +
                         coll(hw, C_AR, d.t * d.p, 8, same_node(hw, d.t * d.c * d.d * d.p));
  T->comp[MT_PT_OTHER] = hw->overhead_per_iter_ms * 1e-3;
  T->t_iter = 0;
  for (int i = 0; i < MT_PT_N; i++) T->t_iter += T->comp[i];

  const mt_flops_shape fs = flops_shape(cfg);
  T->model_flops = mt_flops_per_iteration(&fs);
  T->hw_flops = mt_plan_hw_flops(cfg);
  double peak = c.peak;
  T->tflops_per_gpu = T->model_flops / T->t_iter / world / 1e12;
  T->hw_tflops_per_gpu = T->hw_flops / T->t_iter / world / 1e12;
  T->mfu = T->model_flops / T->t_iter / world / peak;
  T->hfu = T->hw_flops / T->t_iter / world / peak;
  if (fp8) { /* what the FP8 terms add up to on the worst stage (planner/plan_fp8.c) */
    mt_plan_fp8_info *f = &out->fp8;
    double w[2], nt[2];
    f->on = 1;
    f->peak_tflops = hw->peak_tflops_fp8;
    for (int l = 0; l < cfg->model.num_layers; l++) f->bf16_layers += mt_plan_fp8_layer_bf16(cfg, l);
    f->fp8_layers = cfg->model.num_layers - f->bf16_layers;
    f->gemm_s = m * worst.lin8;
    f->quant_s = m * worst.q8;
    f->quant_bytes = m * worst.q8_bytes;
    mt_plan_fp8_stage_weights(cfg, &d, worst_k, w, nt);
    f->weights = w[0] + w[1];
    f->tensors = nt[0] + nt[1];
  }
  T->tokens_per_s = cfg->training.global_batch_size * d.s / T->t_iter;
  return 0;
}
