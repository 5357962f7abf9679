/* model/gpt_internal.h — private state of the GPT model shared by
 * model/gpt.c (construction), model/gpt_slots.c (activation slots),
 * model/gpt_block.c (one layer) and model/gpt_forward.c (chunk passes). */
#ifndef MT_MODEL_GPT_INTERNAL_H
#define MT_MODEL_GPT_INTERNAL_H

#include "model/context_parallel.h"
#include "model/gpt.h"
#include "model/gpt_tensors.h"
#include "model/tensor_parallel.h"

/* The model's switches resolved from the model section's strings
 * (mt_gpt_create). model.recompute_granularity: activation recomputation
 * (Korthikanti et al. 2022 §5): none; selective
 * (Megatron's "core_attn": the fused attention forward is re-run before each
 * layer's backward, so its [b, np, s] log-sum-exp is one buffer shared by all
 * layers instead of one per layer; with the fused op nothing s x s is stored
 * in any mode, docs/attention.md); full (each chunk of
 * recompute_num_layers layers stores only its input and is re-run before its
 * backward; Megatron's "uniform" method). All are bit-identical in results. */
enum { MT_RECOMPUTE_NONE = 0, MT_RECOMPUTE_SELECTIVE = 1, MT_RECOMPUTE_FULL = 2 };
/* model.position_embedding_type */
enum { MT_POS_LEARNED = 0, MT_POS_ROPE = 1, MT_POS_NONE = 2 };

/* Activations one layer saves for its backward pass (one micro-batch).
 * s below is this CP rank's sequence s/cp (context parallelism; = s
 * without); sl = s / tp under sequence parallelism, else s; np, ng, hl = np·hn, fl
 * are this TP rank's query heads, query groups, attention width and ffn
 * width; qkvl = (np + 2 ng)·hn; g = 2 with SwiGLU, else 1. Means are NULL
 * with RMSNorm. */
typedef struct {
  void *ln1;                 /* [sl, b, h]  input_layernorm output            */
  float *ln1_mean, *ln1_rstd; /* [sl*b]                                       */
  void *qkv_lin;             /* [s, b, qkvl] linear_qkv output (qk_layernorm only) */
  float *qk_mean, *qk_rstd;  /* [s*b*(np+ng)] q/k norm statistics (qk_layernorm only) */
  void *qkv;                 /* [s, b, ng, np/ng + 2, hn] attention input (after
                                qk norm and RoPE)                              */
  float *lse;                /* [b, np, s] fp32 log-sum-exp of the fused attention (shared
                                under selective recompute: rebuilt before the backward);
                                with context parallelism two [b, np, s/2] halves, one per
                                local chunk (the ring's) */
  void *ctx;                 /* [s, b, hl]  attention context                 */
  void *x1;                  /* [sl, b, h]  residual after attention          */
  void *ln2;                 /* [sl, b, h]  pre_mlp_layernorm output          */
  float *ln2_mean, *ln2_rstd;
  void *fc1;                 /* [s, b, g·fl] fc1 output (GELU / SwiGLU input) */
  void *act;                 /* [s, b, fl]  activation output (fc2 input)     */
  mt_moe_acts *moe;          /* MoE layers: router / dispatch state (model/moe_layer.h) */
  void *sh_fc1, *sh_act;     /* shared expert: [s, b, g·S/tp], [s, b, S/tp]
                                (model/moe_shared_experts.h; NULL without) */
  /* multi-latent attention (model/gpt_mla.c; NULL without): the latents of
   * this rank's rows, the up projections' inputs and, with qk_layernorm,
   * the norms' inputs and statistics (q_c = q_cn, kv_c = kv_cn without) */
  void *q_c, *q_cn;          /* [sl, b, q_lora_rank] (q_lora_rank only) */
  float *q_mean, *q_rstd;    /* [sl·b] */
  void *kv_c, *kv_cn;        /* [sl, b, kv_lora_rank] */
  float *kv_mean, *kv_rstd;  /* [sl·b] */
} mt_layer_acts;

/* One multi-token prediction depth k (1-based; model/gpt_mtp.c) of one
 * micro-batch on the last stage: what its backward needs. Rows as the head
 * ([sl, b, h] shards, [s_loc·b] tokens). */
typedef struct {
  void *emb;                 /* [sl, b, h] embedding of the shifted tokens (after dropout) */
  void *en, *hn;             /* [sl, b, h] enorm(emb), hnorm(h_{k-1}) */
  float *en_mean, *en_rstd, *hn_mean, *hn_rstd;
  void *resid[2];            /* [sl, b, h] eh_proj output (layer input), layer output */
  mt_layer_acts set;         /* its transformer layer (own set, also under full recompute) */
  void *lnf;                 /* [sl, b, h] final_layernorm output h_k (head input) */
  float *lnf_mean, *lnf_rstd;
  void *logits;              /* [s·b, vl], reused in place for dlogits */
  float *row_max, *stats, *loss; /* [s·b], [2, s·b], [s·b] */
  int32_t *tokens, *targets; /* [s·b] device: inputs shifted by k, targets shifted by k */
  float *mask;               /* [s·b] device: the loss mask shifted by k (0 past the end) */
  int32_t *pos_ids;          /* [sl, b] shifted positions (learned position table only) */
  int64_t count_local;       /* unmasked shifted targets of this rank's rows */
  int64_t count_mb;          /* ... of the whole micro-batch (every CP rank the same) */
} mt_mtp_acts;

/* One model chunk: a contiguous range of global layers on this rank, with the
 * embedding when it is the model's first chunk (Megatron's pre_process) and
 * the head when it is the last (post_process). */
typedef struct {
  int first_layer;           /* global index of its first layer */
  int n_layers;
  int pre, post;
  int layer_base;            /* local index of its first layer (m->w.layers[layer_base]) */
} mt_chunk;

/* Everything one micro-batch keeps alive in one chunk between its forward
 * and its backward (allocated on first use, reused afterwards). */
typedef struct {
  int in_use, mb;
  void **resid;              /* [n_layers + 1] x [sl, b, h]; resid[0] = chunk input */
  mt_layer_acts *sets;       /* [n_layers]; NULL under full recompute */
  void *lnf;                 /* post: [sl, b, h] */
  float *lnf_mean, *lnf_rstd;
  void *logits;              /* post: [s*b, vl]; reused in place for dlogits */
  float *row_max, *stats, *loss; /* post: [s*b], [2, s*b], [s*b] */
  int32_t *tokens, *targets; /* pre/post: [s*b] device, [s, b] order */
  /* documents (model/gpt_docs.c; NULL when off): doc_start [b, s] device
   * (reset_attention_mask, every chunk with layers), pos_ids [sl, b]
   * (reset_position_ids, the embedding's shard rows), loss_mask [s*b] fp32
   * (eod_mask_loss, post) */
  int32_t *doc_start, *pos_ids;
  float *loss_mask;
  int64_t loss_tokens;       /* unmasked targets of the micro-batch (whole sequence) */
  int64_t *sample_ids;       /* [b] host */
  int train;
  mt_mtp_acts *mtp;          /* [n_mtp] on the last chunk with MTP, else NULL */
} mt_slot;

/* The model's parameters: the registry (names, shapes, shards, flat-buffer
 * offsets, in registration order: embedding, layers, head; model/params.h),
 * the flat buffers, the named weights (T) and gradients (fp32) they are
 * bound to (model/gpt_tensors.h), and each hook part's index range
 * (mt_gpt_layer_param_range; [first, last], last < first: none here). */
typedef struct {
  mt_param_list list;
  mt_param_ref *ref;         /* [list.n] the fields of w and g parameter i is bound to */
  void *buf;                 /* flat, T */
  float *grad_buf;           /* flat, fp32 */
  int embedding[2], head[2];
  int (*layers)[2];          /* [local layers] */
} mt_gpt_params_state;

/* Activation storage (allocated on first use, grown on demand). */
typedef struct {
  mt_slot ***slots;          /* [n_chunks][n_slots[c]] per chunk and micro-batch in flight */
  int *n_slots;
  mt_layer_acts *rc_sets;    /* full recompute: recompute_num_layers shared sets */
  int n_rc_sets;
  float *lse_shared;         /* selective recompute: one [b, np, s] fp32 buffer */
} mt_gpt_acts;

/* Workspace reused by every layer (MT_MEM_WORKSPACE; s, sl, qkvl, hl, fl,
 * g as for mt_layer_acts). */
typedef struct {
  void *tmp_h;               /* [sl, b, h] */
  void *dresid, *dtmp_h;     /* [sl, b, h]; dresid also passes gradients between stages */
  void *dqkv, *dctx, *dffn;  /* [s, b, qkvl], [s, b, hl], [s, b, g·fl] */
  void *dqkv2;               /* [s, b, qkvl] qk_layernorm input gradient (else NULL) */
  void *dact;                /* [s, b, fl] SwiGLU output gradient (else NULL); dffn and
                                dact are max(fl, shl) wide */
  void *sh_out;              /* [sl, b, h] shared-expert output (NULL without) */
  void *gather_ws, *grad_ws; /* [s, b, h] (tp ctx workspaces; NULL when tp 1) */
  int32_t *host_tokens, *host_targets; /* [s*b] host staging of the token upload */
  int32_t *host_docs, *host_pos; /* gpt_docs.c staging: [b, s], [sl, b] (NULL until used) */
  float *host_mask;          /* [s*b] */
  /* multi-token prediction (NULL without): [sl, b, h] gradient buffers of the
   * MTP backward (carry: dL/dh_{k-1} from depth k, added to the main head's) */
  void *mtp_carry, *mtp_dl, *mtp_de, *mtp_dh;
  void *mtp_cat, *mtp_dcat;  /* FP8 only: eh_proj's input [e; h] and its gradient, [rows_l, 2h] */
  float *mtp_host_mask;      /* [s*b] host staging of the shifted masks */
} mt_gpt_workspace;

/* The micro-batch being processed (set by the chunk functions). */
typedef struct {
  const int64_t *sample_ids; /* [b] global sample ids: key the dropout RNG */
  const int32_t *doc_start;  /* its slot's document starts (NULL: no document masking) */
  int64_t loss_tokens;       /* its slot's unmasked targets (mt_slot.loss_tokens) */
  int train;                 /* dropout on, routing statistics recorded */
  int recomputing;           /* full recompute re-running a forward (no statistics) */
  float loss_scale;          /* of the backward in progress (MoE auxiliary losses) */
} mt_gpt_pass;

/* Mixture of experts (all NULL for a dense model). */
typedef struct {
  mt_moe *ctx;               /* router, dispatcher, experts (model/moe_layer.h) */
  const void **wp;           /* [4 · E/ep] scratch pointer tables (mt_moe_weights) */
  float **gp;                /* [4 · E/ep] (mt_moe_grads) */
  /* aux-loss-free balancing (model/gpt_moe.c): fp32 expert bias and the
   * tokens-per-expert counts of the last global batch, [n_moe · E] each, for
   * EVERY MoE layer of the model (not only this stage's); the bias NULL when
   * moe_router_enable_expert_bias is off, the counts NULL unless the bias or
   * global_aux_loss needs them */
  float *bias;
  int64_t *bias_counts;
  /* FP8 experts (training.fp8_format): the routed experts' FP8 linears, amax
   * reduced over the ETP group (model/moe_experts.h); NULL without FP8 */
  struct mt_fp8_linear *fp8;
} mt_gpt_moe_state;

struct mt_gpt {
  mt_backend *be;
  mt_gpt_config cfg;
  mt_gpt_hooks hooks;

  mt_gpt_params_state params;
  mt_gpt_tensors w, g;       /* named weights and gradients (model/gpt_tensors.h) */
  int head_shares_embedding; /* tied output layer on the stage holding the embedding */

  /* the model section's enumerated options, resolved (mt_gpt_create) */
  int pos;                   /* MT_POS_* (position_embedding_type) */
  int rmsnorm;               /* normalization "RMSNorm" (else LayerNorm) */
  int recompute;             /* MT_RECOMPUTE_* (recompute_granularity) */
  int moe_lb_type;           /* MT_MOE_LB_* (moe_router_load_balancing_type) */

  /* model chunks on this rank (pipeline stages, interleaved) */
  mt_chunk *chunks;          /* [n_chunks] */
  int n_chunks;
  int n_local_layers;        /* over all chunks */

  /* this rank's sizes */
  int np, ng, hn;            /* local query heads, local query groups, head dim (kv_channels) */
  int64_t hl, fl;            /* local attention width np*hn, local ffn width */
  int64_t shl;               /* local shared-expert width S/tp (0 without shared experts) */
  int64_t qkvl;              /* local linear_qkv width (np + 2 ng)·hn */
  int glu;                   /* 2 with SwiGLU (fc1 gives gate and up), else 1 */
  int64_t vl, v_start, v_valid; /* local vocab slice [v_start, v_start+vl), real columns */
  int64_t sl, rows, rows_l;  /* SP shard of s_loc, s_loc*b, sl*b */
  int64_t s_loc;             /* this CP rank's sequence s/cp (= s without CP) */

  /* tensor and context parallelism */
  mt_tp_ctx tp;
  int fp8_l;                 /* global layer of the running block forward / backward (the
                                FP8 keys of its linears, mt_gpt_fp8_select) */
  mt_cp_layout cpl;          /* CP token layout (identity when cp_size 1) */
  mt_cp_attn *cp_attn;       /* ring attention (NULL when cp_size 1) */

  /* multi-token prediction (model/gpt_mtp.c): depths on this rank (D on the
   * model's last chunk, else 0) and the training losses since the last
   * reset, per depth: sum of masked shifted-token losses and their count */
  int n_mtp;
  double *mtp_loss_sum;
  int64_t *mtp_loss_count;

  struct mt_gpt_mla *mla;    /* multi-latent attention (model/gpt_mla.c); NULL without */

  mt_gpt_acts acts;
  mt_gpt_workspace ws;
  mt_gpt_pass pass;
  mt_gpt_moe_state moe;
};

/* The MoE context's config of this model for its training micro-batch
 * (model/gpt.c: routing options, token rows, groups); inference
 * (model/gpt_infer.c) changes the rows and groups. */
void mt_gpt_moe_ctx_config(const mt_gpt *m, mt_moe_config *mc);
/* Pointer tables of MoE layer li's router and local experts (NULL biases
 * without add_bias_linear), in the struct-of-arrays form of model/moe_layer.h
 * (model/gpt_block.c; valid until the next call: m->moe.wp). */
mt_moe_weights mt_gpt_moe_weights(mt_gpt *m, int li);
/* Allocate the expert-bias state (zeros) when moe_router_enable_expert_bias
 * is on, the counts also for global_aux_loss (model/gpt_moe.c; called
 * by create_moe). */
void mt_gpt_moe_bias_init(mt_gpt *m);

/* Register this rank's parameters and bind them to m->w / m->g
 * (model/gpt_register.c; needs the chunks and local sizes); the tensors'
 * release. */
void mt_gpt_register_params(mt_gpt *m);
void mt_gpt_tensors_free(mt_gpt *m);

/* Register parameter `name` (mt_params_add: global [rows, cols], this rank's
 * [lrows, lcols] at (r0, c0)) and bind it to the named fields *w (inside
 * m->w) and *g (the same path inside m->g). Returns its registry entry for
 * the remaining flags (valid until the next registration). */
mt_param *mt_gpt_add_param(mt_gpt *m, void **w, void **g, const char *name, int64_t rows,
                           int64_t cols, int64_t lrows, int64_t lcols, int64_t r0, int64_t c0,
                           mt_init_kind init, int no_weight_decay, int tp_replicated);

/* The output layer's weight in t (&m->w or &m->g): word_embeddings when the
 * head shares it on this stage (tied, pp 1), else output_layer. */
static inline void *mt_gpt_output_weight(const mt_gpt *m, const mt_gpt_tensors *t) {
  return m->head_shares_embedding ? t->word_embeddings.weight : t->output_layer.weight;
}

#define MT_HOOK(m, which, layer) \
  do { if ((m)->hooks.which) (m)->hooks.which((m)->hooks.ctx, (layer)); } while (0)

/* Slot of (chunk, mb): acquire a free one (allocating on first use) or find
 * the one in use. */
mt_slot *mt_gpt_slot_acquire(mt_gpt *m, int chunk, int mb);
mt_slot *mt_gpt_slot_find(mt_gpt *m, int chunk, int mb);
void mt_gpt_slot_release(mt_gpt *m, mt_slot *s);
void mt_gpt_slots_free(mt_gpt *m);
void mt_gpt_alloc_layer_acts(mt_gpt *m, mt_layer_acts *a, int with_lse);

/* Documents inside packed sequences (gpt_docs.c): the slot's buffers for
 * chunk ch (alloc), their values for the micro-batch's samples tokens
 * [b, s + 1] (load; also sl->loss_tokens), release. */
void mt_gpt_docs_alloc(mt_gpt *m, mt_slot *sl, const mt_chunk *ch);
void mt_gpt_docs_load(mt_gpt *m, mt_slot *sl, const int32_t *tokens);
void mt_gpt_docs_free_slot(mt_gpt *m, mt_slot *sl);
void mt_gpt_docs_free(mt_gpt *m);
void mt_gpt_free_layer_acts(mt_gpt *m, mt_layer_acts *a);

/* Activation set of local layer lc of chunk c in slot s. */
mt_layer_acts *mt_gpt_layer_acts(mt_gpt *m, mt_slot *s, int lc);

/* Normalisation of the model's kind (LayerNorm or RMSNorm; mean and b are
 * unused with RMSNorm): out [rows, h] from in; backward accumulates into din,
 * dw, db. */
void mt_gpt_norm_fwd(mt_gpt *m, void *out, float *mean, float *rstd, const void *in,
                     const void *w, const void *b, int64_t rows);
void mt_gpt_norm_bwd(mt_gpt *m, void *din, float *dw, float *db, const void *dout, const void *in,
                     const void *w, const float *mean, const float *rstd, int64_t rows);

/* This rank's [sl, b, h] shard as runs of consecutive global positions
 * (context parallelism: the two chunks; sequence parallelism: the TP rank's
 * slice of them); returns their number (1 or 2). */
int mt_gpt_shard_runs(const mt_gpt *m, mt_cp_run runs[2]);
/* dropout_add_fwd / dropout_bwd of the backend on this rank's [sl, b, h]
 * shard, one call per run so the RNG counters use global positions (d:
 * the descriptor of the whole shard; its s and s_offset are set per run). */
void mt_gpt_dropout_add_fwd(mt_gpt *m, const mt_dropout_desc *d, void *out, const void *x,
                            const void *residual);
void mt_gpt_dropout_bwd(mt_gpt *m, const mt_dropout_desc *d, void *dx, const void *dout);

/* The frequency scaling of the model's RoPE into d (core/rope_freq.h):
 * Llama-3.1's with model.use_rope_scaling (factor rope_scaling_factor),
 * else plain. YaRN (rope_type "yarn")
 * belongs to multi-latent attention's decoupled channels. */
void mt_gpt_rope_scaling(const mt_model_config *mc, mt_rope_desc *d);

/* One transformer layer of global index l (keys dropout and MoE state; an
 * MTP depth's layer is num_layers + k - 1) with the tensors
 * m->w.layers[li] and the activation set a: resid[0] -> resid[1]. Backward:
 * m->ws.dresid holds dL/d resid[1] on entry and dL/d resid[0] on exit. */
void mt_gpt_block_forward(mt_gpt *m, int l, int li, mt_layer_acts *a, void *const *resid);
void mt_gpt_block_backward(mt_gpt *m, int l, int li, mt_layer_acts *a, void *const *resid);

/* Multi-token prediction (model/gpt_mtp.c). register: the depths' parameters
 * (last stage, after the head's, inside its hook part; called after
 * mt_gpt_register_params); create: workspaces and statistics; destroy: them
 * and the slots' per-depth buffers (before mt_gpt_slots_free); load: for
 * the last chunk, the slot's per-depth buffers (on first use) and the
 * shifted tokens, targets and masks of the micro-batch's samples tokens
 * [b, s + 1]; forward: the depths after the main head (training only; adds
 * to the statistics); backward: the depths in reverse, leaving in
 * m->ws.mtp_carry dL/d(final_layernorm output) for the main head. */
void mt_gpt_mtp_register(mt_gpt *m);
void mt_gpt_mtp_create(mt_gpt *m);
void mt_gpt_mtp_destroy(mt_gpt *m);
void mt_gpt_mtp_load(mt_gpt *m, int chunk, mt_slot *sl, const int32_t *tokens);
void mt_gpt_mtp_forward(mt_gpt *m, mt_slot *sl);
void mt_gpt_mtp_backward(mt_gpt *m, mt_slot *sl, float loss_scale);
/* Register transformer layer l (local index li) under the name prefix
 * `prefix` ("decoder.layers.L" or "mtp.layers.K.mtp_model_layer";
 * model/gpt_register.c). */
void mt_gpt_register_layer(mt_gpt *m, int li, int l, const char *prefix);

/* Multi-latent attention (model/gpt_mla.c; Megatron's MLASelfAttention,
 * DeepSeek-V2 §2.1). sizes: m->hn, hl, qkvl of the fused attention
 * (before the buffers); create / destroy: its workspaces and index tables
 * (after local_sizes); alloc_acts / free_acts: a layer's latents;
 * (parameters: model/gpt_register.c register_mla); attn_desc: the
 * fused attention's head widths and softmax scale into d; forward: ln1
 * [sl, b, h] -> a->qkv (the fused attention's input, RoPE applied);
 * backward: m->ws.dqkv (dL/d a->qkv, overwritten as scratch) -> dln1
 * [sl, b, h] (overwrite) and the parameter gradients. */
void mt_gpt_mla_sizes(mt_gpt *m);
void mt_gpt_mla_create(mt_gpt *m);
void mt_gpt_mla_destroy(mt_gpt *m);
void mt_gpt_mla_alloc_acts(mt_gpt *m, mt_layer_acts *a);
void mt_gpt_mla_free_acts(mt_gpt *m, mt_layer_acts *a);
void mt_gpt_mla_attn_desc(const mt_gpt *m, mt_attn_desc *d);
/* The next FP8 linear call on m->tp (when its layer runs in FP8) takes the
 * delayed-scaling state of linear k (MT_GPT_FP8_*) of global layer l
 * (model/gpt_fp8.c; mt_gpt_fp8_key). */
static inline void mt_gpt_fp8_select(mt_gpt *m, int l, int k) {
  if (m->tp.fp8 && m->tp.fp8_on) mt_fp8_linear_select(m->tp.fp8, mt_gpt_fp8_key(l, k));
}
void mt_gpt_mla_forward(mt_gpt *m, int li, mt_layer_acts *a);
void mt_gpt_mla_backward(mt_gpt *m, int li, mt_layer_acts *a, void *dln1);

/* One transformer layer: local layer lc of chunk c for slot s,
 * s->resid[lc] -> s->resid[lc + 1]. */
void mt_gpt_layer_forward(mt_gpt *m, int c, mt_slot *s, int lc);
/* Backward of that layer: m->dresid holds dL/d resid[lc+1] on entry and
 * dL/d resid[lc] on exit; parameter gradients accumulate. */
void mt_gpt_layer_backward(mt_gpt *m, int c, mt_slot *s, int lc);

#endif
