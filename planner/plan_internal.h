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
  double n_moe_layers;                 /* MoE layers of the whole model */
  uint8_t moe_layer[MT_MAX_LAYERS];    /* 1 = layer l is MoE (moe_layer_freq integer or list) */
  double bucket;                       /* ddp_bucket_size, elements */
} mt_plan_dims;

void mt_plan_dims_from(const mt_config *cfg, int world, mt_plan_dims *d);

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

/* Rows of one MoE layer's dispatcher buffers on one rank for one
 * micro-batch: sent s_max = n_loc k (E C with padding) and received
 * r_max = ep n_loc k (E C with padding), n_loc = the rank's tokens (its SP
 * shard); model/moe_token_dispatcher.c. */
void mt_plan_moe_rows(const mt_plan_dims *d, double *s_max, double *r_max);
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
void mt_plan_stage_memory(const mt_config *cfg, const mt_plan_dims *d, int r, double out[MT_PM_N],
                          mt_plan_stage_info *info);

#endif
