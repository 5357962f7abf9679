/* planner/plan_internal.h — derived sizes shared by the planner's files. */
#ifndef MT_PLANNER_PLAN_INTERNAL_H
#define MT_PLANNER_PLAN_INTERNAL_H

#include "planner/plan.h"

/* Model and layout sizes as doubles (products of large ints overflow int). */
typedef struct {
  double b, s, h, a, f, L, Vp, maxpos; /* micro-batch, seq, hidden, heads, ffn, layers, vocab */
  double V;                            /* unpadded vocabulary */
  /* block options (docs/planner.md "Model options"): query groups ng (= a
   * without GQA), channels per head hn, g = 2 fc1 halves with SwiGLU else 1;
   * flags: RMSNorm (no bias, no mean), learned position table, linear
   * biases, qk_layernorm */
  double ng, hn, g;
  int rms, pos_table, bias, qkln, swiglu;
  double t, p, v, d;                   /* tp, pp, virtual stages, dp */
  /* context parallelism: cp ranks share each sequence; a rank holds
   * s_loc = s / cp tokens of it (2 chunks of s/(2cp)); token-local sizes
   * use s_loc, attention spans the whole s (docs/planner.md "Context
   * parallelism") */
  double c, s_loc;
  double m;                            /* micro-batches per iteration per pipeline */
  double e;                            /* bytes per stored element (2 bf16, 4 fp32) */
  int sp, recompute, rc_layers, zero, untied, prefetch;
  /* MoE: E experts (0 = dense), top-k, expert ffn, every `freq`-th layer, ep, etp,
   * edp = world / (etp ep pp) (the expert generator's data parallelism,
   * parallel/topology.h), shared-expert width S (0 = none), cap = the
   * capacity C rows per expert when padding to capacity (0 = no padding) */
  double E, topk, fm, freq, ep, etp, edp, S, cap;
  /* MoE rows received without padding (mt_plan_moe_rows): capacity per
   * expert when moe_expert_capacity_factor drops tokens (0 = dropless); the
   * routing assumption: load factor lf, or the rows given (r_fix received
   * when r_given, rx_fix seen by the experts when rx_given), or worst = 1
   * (every token of the EP group routed to this rank) */
  double cap_drop, lf, r_fix, rx_fix;
  int worst, r_given, rx_given;
  double n_moe_layers;                 /* MoE layers of the whole model */
  uint8_t moe_layer[MT_MAX_LAYERS];    /* 1 = layer l is MoE (moe_layer_freq integer or list) */
  double bucket;                       /* ddp_bucket_size, elements */
  /* multi-token prediction: depths D (model.mtp_num_layers) on the last
   * stage, MoE layers when mtp_moe (the last layer's kind) */
  double mtp;
  int mtp_moe;
  /* multi-latent attention (model.multi_latent_attention): q_lora_rank qr
   * (0: one linear_q_proj), kv_lora_rank kr, qk_head_dim dn,
   * qk_pos_emb_head_dim dr, v_head_dim dv */
  int mla;
  double qr, kr, dn, dr, dv;
} mt_plan_dims;

void mt_plan_dims_from(const mt_config *cfg, int world, mt_plan_dims *d);
/* Apply the MoE routing assumption of opt (NULL: the default load factor). */
void mt_plan_dims_moe_opts(mt_plan_dims *d, const mt_plan_options *opt);

/* Parameters held by one rank of pipeline stage `stage` (before ZeRO). */
double mt_plan_stage_params(const mt_plan_dims *d, int stage);
/* Parameters of the whole (unsharded) model, tied output counted once;
 * the padded vocabulary when `padded`, else the tokenizer's. */
double mt_plan_total_params(const mt_plan_dims *d, int padded);
/* Elements of a norm's parameters per channel: 2 (LayerNorm weight + bias)
 * or 1 (RMSNorm weight). */
double mt_plan_norm_width(const mt_plan_dims *d);
/* Layers of stage `stage` that are MoE layers (fractional average). */
double mt_plan_stage_moe_layers(const mt_plan_dims *d);
/* Expert parameters of one rank holding n_moe MoE layers: E/ep experts of
 * each, fc1 [g F / etp, h] (+ bias) and fc2 [h, F / etp] (+ bias). */
double mt_plan_stage_expert_params(const mt_plan_dims *d, double n_moe);
/* Transformer layers of pipeline stage r (all its model chunks, uneven
 * first/last stages as configured) and how many of them are MoE layers
 * (planner/plan_stage.c, model/gpt.c assign_chunks). */
void mt_plan_stage_layer_counts(const mt_config *cfg, const mt_plan_dims *d, int r, int *n_layers,
                                int *n_moe);

/* ---- MoE sizes (planner/plan_moe.c; docs/moe_parallel.md "Memory and communication
 * formulas") ---- */

/* Rows of one MoE layer's dispatcher buffers on one rank: sent s_max =
 * n_loc k (E C with padding) and received r_max (E C with padding; else
 * the routing assumption of d: the rows given, or ceil(lf n_loc k), at
 * most the worst case ep n_loc k and, when a capacity factor drops
 * tokens, E C), n_loc = the rank's tokens (its SP shard);
 * model/moe_token_dispatcher.c, model/moe_rowbuf.h. */
void mt_plan_moe_rows(const mt_plan_dims *d, double *s_max, double *r_max);
/* Rows the experts' buffers hold (r_max of the ETP group gathered: etp ·
 * r_max, or the rows given), and the received rows' worst case. */
double mt_plan_moe_expert_rows(const mt_plan_dims *d);
double mt_plan_moe_worst_rows(const mt_plan_dims *d);
/* Bytes of the MoE routing state and shared-expert activations of one layer
 * set (model/moe_layer.c mt_moe_acts_create, moe_shared_experts.c); 0 for a
 * dense model. */
double mt_plan_moe_set_bytes(const mt_plan_dims *d);
/* Bytes of the MoE layer's workspaces (router logits, dispatcher, experts,
 * ETP exchange, shared expert output); 0 for a dense model. */
double mt_plan_moe_workspace_bytes(const mt_plan_dims *d);
/* Width of the model's MLP gradient workspaces dffn / dact per TP rank:
 * max(ffn, S) / t (model/gpt.c alloc_buffers). */
double mt_plan_mlp_ws_width(const mt_plan_dims *d);

/* Details of one stage's exact memory (planner/plan_stage.c). */
typedef struct {
  int64_t params;          /* parameter elements on the rank (no alignment) */
  int64_t flat_numel;      /* elements of the flat parameter/gradient buffers */
  int64_t shard_numel;     /* ZeRO shard buffer elements (0 without ZeRO) */
  int64_t zero_padding;    /* ZeRO bucket padding elements */
  int n_layers;            /* transformer layers on the stage */
  double act_layer_bytes;  /* one layer, one micro-batch, incl. its input */
  double inflight_layers;  /* layer-micro-batches of slots held at the peak */
} mt_plan_stage_info;

/* Bytes by category of one rank of pipeline stage r (0..p-1) during
 * training, following the implementation's allocations exactly (see
 * plan_stage.c for what is and is not covered). */
/* One gradient bucket of a stage's rank in the trainer's layout (ZeRO:
 * parallel/zero.h mt_zero_layout_build on the trainer's segments; DDP:
 * parallel/ddp.h's cut), in the layout's order: elements reduced (ZeRO:
 * padded to the group), 1 for an expert bucket (over edp, else dp x cp), and
 * the positions of its first and last parameter (0 the embedding when on the
 * stage, then the stage's layers in order, then the head). */
typedef struct {
  double elems;
  int expert, lo_pos, hi_pos;
} mt_plan_bucket;
/* The buckets of stage r into *out (malloc'd, the caller frees) and the
 * number of positions into *n_pos; returns the count. */
int mt_plan_stage_buckets(const mt_config *cfg, const mt_plan_dims *d, int r,
                          mt_plan_bucket **out, int *n_pos);
/* planner/plan_overlap.c: the exposed seconds of n buckets (cost[k]
 * seconds each) reduced behind a backward of n_pos positions (bwd_pos[p]
 * seconds; the backward runs p = n_pos-1 .. 0) / gathered ahead of a
 * forward (fwd_pos[p]; p = 0 .. n_pos-1), with or without overlap; *total
 * gets the sum of the costs. */
/* Ring alpha-beta seconds of one collective of `bytes` (the full tensor)
 * over n ranks inside a node (intra) or across nodes (planner/plan_time.c). */
enum { MT_PLAN_AR, MT_PLAN_AG, MT_PLAN_RS, MT_PLAN_A2A, MT_PLAN_P2P };
double mt_plan_coll(const mt_hardware *hw, int kind, double n, double bytes, int intra);
/* The data-parallel communication of pipeline stage `stage` per iteration:
 * gradient buckets reduced (all-reduce, ZeRO reduce-scatter) and, with
 * ZeRO-1/2, the updated parameters gathered; ZeRO-3 gathers per
 * micro-batch for forward and backward. fwd_pos / bwd_pos: one
 * micro-batch's pass time of each of the stage's n_pos positions; intra[0]:
 * the dp x cp group inside a node, intra[1] the edp group. Sets the exposed
 * and the total seconds (opt: overlap_grad_reduce, overlap_param_gather), and
 * (gather_bytes, may be NULL) the bytes of the parameter all-gathers per
 * iteration, the full gathered buffers (plan_fp8.c with fp8_param_gather). */
void mt_plan_dp_overlap(const mt_config *cfg, const mt_plan_dims *d, const mt_hardware *hw,
                        const mt_plan_options *opt, int stage, const double *fwd_pos,
                        const double *bwd_pos, int n_pos, const int intra[2], double *exposed,
                        double *total, double *gather_bytes);
double mt_plan_overlap_reduce(const mt_plan_bucket *b, const double *cost, int n,
                              const double *bwd_pos, int n_pos, int overlap, double *total);
double mt_plan_overlap_gather(const mt_plan_bucket *b, const double *cost, int n,
                              const double *fwd_pos, int n_pos, int overlap, double *total);
void mt_plan_stage_memory(const mt_config *cfg, const mt_plan_dims *d, int r, double out[MT_PM_N],
                          mt_plan_stage_info *info);

/* ---- the stage's model chunks and flat parameter layout (plan_flat.c) ---- */

/* One model chunk of a stage: its first global layer, layer count, and
 * whether it holds the embedding (pre) or the head (post). */
typedef struct {
  int first, n, pre, post;
} mt_plan_chunk;

/* One registered parameter: its aligned offset and elements in the flat
 * buffers, its ZeRO unit (0 embedding, 1.. the local layers, last the head;
 * one unit for the whole stage with pipelines: optimizer/distrib_optimizer.c
 * n_units) and its ZeRO part (1: an expert parameter, mt_param.is_expert). */
typedef struct {
  int64_t off, n;
  int unit, expert;
  int pos; /* 0 the embedding (when on the stage), then the layers, then the head */
} mt_plan_param;

/* The flat parameter/gradient buffers of one rank, parameter by parameter. */
typedef struct {
  int64_t flat;     /* elements of the flat buffers (aligned offsets) */
  int64_t numel;    /* parameter elements (no alignment) */
  mt_plan_param *p; /* [np] in registration order */
  int np, cap, n_units, has_emb, has_head;
  int unit, expert; /* of the parameters being added */
  int pos;
} mt_plan_flat;

/* Model chunks of stage r (model/gpt.c assign_chunks) into ch[] (room for
 * virtual_pipeline_model_parallel_size entries). Returns their count. */
int mt_plan_stage_chunks(const mt_config *cfg, int r, mt_plan_chunk *ch);
/* The flat buffers of chunks ch[0..nc) of one rank (model/gpt_register.c's
 * registration), into f (f->p owned by the caller: free it). */
void mt_plan_build_flat(const mt_plan_dims *d, const mt_plan_chunk *ch, int nc, mt_plan_flat *f);
/* The ZeRO segments of part k (0 dense, 1 experts) of f: bounds [2 np],
 * unit_seg [n_units + 1]; returns the count (optimizer/distrib_optimizer.c
 * part_segments). */
int mt_plan_part_segments(const mt_plan_flat *f, int k, int64_t *bounds, int *unit_seg);

/* ---- FP8 (planner/plan_fp8.c; docs/planner.md "FP8") ---- */

/* 1 when the plan runs FP8 linears (training.fp8_format set). */
int mt_plan_fp8_on(const mt_config *cfg);
/* 1 when global layer l's linears stay bf16 (FP8 off, or kept by
 * first_last_layers_bf16). */
int mt_plan_fp8_layer_bf16(const mt_config *cfg, int l);
/* Dense and MoE layers of stage r whose linears stay bf16. */
void mt_plan_fp8_stage_bf16_layers(const mt_config *cfg, const mt_plan_dims *d, int r,
                                   int *n_dense, int *n_moe);
/* Bytes moved per element by one FP8 quantization of a bf16 tensor under
 * `recipe` (weight: a weight's; param_gather: the weight is FP8 already). */
double mt_plan_fp8_quant_bytes(const char *recipe, int weight, int param_gather);
/* FP8 linear weights on one rank of stage r: elements w[] and tensors
 * (one scale each) of the dense part [0] and the experts [1]. */
void mt_plan_fp8_stage_weights(const mt_config *cfg, const mt_plan_dims *d, int r, double w[2],
                               double tensors[2]);
/* fp8_param_gather: the FP8 weights held as 1 byte + a 4-byte scale per
 * tensor in bytes[MT_PM_PARAM] of stage r. */
void mt_plan_fp8_stage_memory(const mt_config *cfg, const mt_plan_dims *d, int r,
                              double bytes[MT_PM_N]);
/* Bytes of the parameter all-gathers of part (0 dense, 1 experts) of
 * stage r that gather `elems` elements: elems e, or with fp8_param_gather
 * elems e - W8 (e - 1) + 4 T8. */
double mt_plan_fp8_gather_bytes(const mt_config *cfg, const mt_plan_dims *d, int r, int part,
                                double elems);

/* The FP8 keys the planner reads (training.fp8_format, fp8_recipe,
 * fp8_wgrad, fp8_param_gather, first_last_layers_bf16 and its two counts)
 * from src into dst (`--sweep` reloads each layout from the base's JSON,
 * which the --fp8-* flags are not in). */
void mt_plan_fp8_copy(mt_config *dst, const mt_config *src);

/* 1 when global layer l is an MoE layer. */
static inline int mt_plan_is_moe_layer(const mt_plan_dims *d, int l) {
  return l >= 0 && l < MT_MAX_LAYERS && d->moe_layer[l];
}

#endif
