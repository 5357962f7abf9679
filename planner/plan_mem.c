/* planner/plan_mem.c — per-rank memory by allocator category (docs/planner.md).
 *
 * Model state: parameters in the storage dtype (fp32 or bf16), fp32
 * gradients, Adam m and v in fp32 plus an fp32 master copy under bf16
 * (optimizer/optimizer.h; the master copy is counted as optimizer state like
 * the allocator does). ZeRO stage 1 shards the optimizer state over dp,
 * stage 2 also the gradients, stage 3 also the parameters (Rajbhandari et
 * al. 2020, arXiv:1910.02054 §5).
 *
 * The per-stage figures come from plan_stage.c, which follows this
 * implementation's allocations exactly (flat buffers with aligned offsets,
 * the ZeRO shard layout and stage-2/3 residency, activation slots per
 * micro-batch in flight per chunk from the pipeline schedule, shared
 * recomputation buffers, workspaces); they are checked against the CPU
 * allocator by tests/integration/test_plan_memory.sh. In the paper's terms
 * a layer keeps sbh(4/t_sp + 12/t) + as^2 b/t elements (docs/memory.md), the
 * Korthikanti et al. 2022 (arXiv:2205.05198 Table 2) sharding.
 */
#include <math.h>
#include <string.h>

#include "planner/plan_internal.h"

static const char *k_mem_names[MT_PM_N] = {"parameters", "gradients", "optimizer",
                                           "activations", "communication", "workspace"};
const char *mt_plan_mem_name(int cat) { return cat >= 0 && cat < MT_PM_N ? k_mem_names[cat] : "?"; }

void mt_plan_dims_from(const mt_config *cfg, int world, mt_plan_dims *d) {
  const mt_model_config *mc = &cfg->model;
  const mt_parallel_config *pc = &cfg->parallel;
  memset(d, 0, sizeof *d);
  d->b = cfg->training.micro_batch_size;
  d->s = mc->seq_length;
  d->h = mc->hidden_size;
  d->a = mc->num_attention_heads;
  d->f = mc->ffn_hidden_size;
  d->L = mc->num_layers;
  d->Vp = (double)mt_config_padded_vocab(cfg);
  d->V = mc->vocab_size;
  d->ng = mc->group_query_attention && mc->num_query_groups > 0 ? mc->num_query_groups : d->a;
  d->hn = mc->kv_channels > 0 ? mc->kv_channels : (d->a > 0 ? d->h / d->a : d->h);
  d->swiglu = mc->swiglu != 0;
  d->g = d->swiglu ? 2 : 1;
  d->rms = !strcmp(mc->normalization, "RMSNorm");
  d->pos_table = !strcmp(mc->position_embedding_type, "learned_absolute") ||
                 !mc->position_embedding_type[0];
  d->bias = mc->add_bias_linear != 0;
  d->qkln = mc->qk_layernorm != 0;
  d->maxpos = mc->max_position_embeddings;
  d->t = pc->tensor_model_parallel_size;
  d->p = pc->pipeline_model_parallel_size;
  d->v = pc->virtual_pipeline_model_parallel_size > 0 ? pc->virtual_pipeline_model_parallel_size : 1;
  d->c = pc->context_parallel_size > 0 ? pc->context_parallel_size : 1;
  d->s_loc = d->s / d->c;
  int dp = mt_config_data_parallel_size(cfg, world);
  d->d = dp > 0 ? dp : 1;
  d->m = cfg->training.global_batch_size / (d->b * d->d);
  d->e = strcmp(cfg->training.precision, "bf16") ? 4.0 : 2.0;
  d->sp = pc->sequence_parallel && pc->tensor_model_parallel_size > 1;
  d->recompute = !strcmp(mc->recompute_granularity, "selective") ? 1
                 : !strcmp(mc->recompute_granularity, "full")    ? 2
                                                                  : 0;
  d->rc_layers = mc->recompute_num_layers > 0 ? mc->recompute_num_layers : 1;
  d->zero = pc->zero_stage;
  d->untied = mc->untie_embeddings_and_output_weights;
  d->prefetch = pc->zero_prefetch_layers;
  d->bucket = (double)pc->ddp_bucket_size;
  d->E = mc->num_experts;
  d->topk = mc->moe_router_topk > 0 ? mc->moe_router_topk : 1;
  d->fm = mc->moe_ffn_hidden_size > 0 ? mc->moe_ffn_hidden_size : mc->ffn_hidden_size;
  d->freq = mc->moe_layer_freq > 0 ? mc->moe_layer_freq : 1;
  d->ep = pc->expert_model_parallel_size > 0 ? pc->expert_model_parallel_size : 1;
  d->etp = pc->expert_tensor_parallel_size > 0 ? pc->expert_tensor_parallel_size : d->t;
  d->edp = world / (d->etp * d->ep * d->p);
  if (d->edp < 1) d->edp = 1;
  d->S = d->E > 0 && mc->moe_shared_expert_intermediate_size > 0
             ? mc->moe_shared_expert_intermediate_size : 0;
  /* model/moe_router.c mt_moe_capacity over the micro-batch's b s tokens */
  d->cap = d->E > 0 && mc->moe_pad_expert_input_to_capacity && mc->moe_expert_capacity_factor > 0
               ? ceil(d->b * d->s * d->topk / d->E * (double)mc->moe_expert_capacity_factor - 1e-9)
               : 0;
  d->cap_drop = d->E > 0 && !d->cap && mc->moe_expert_capacity_factor > 0
                    ? ceil(d->b * d->s * d->topk / d->E * (double)mc->moe_expert_capacity_factor -
                           1e-9)
                    : 0;
  d->lf = MT_PLAN_MOE_LOAD_FACTOR;
  /* Megatron's moe_layer_freq = k: layers 0, k, 2k, ... are MoE; or the list form */
  d->n_moe_layers = 0;
  for (int l = 0; l < mc->num_layers && l < MT_MAX_LAYERS; l++) {
    d->moe_layer[l] = (uint8_t)mt_config_is_moe_layer(cfg, l);
    d->n_moe_layers += d->moe_layer[l];
  }
  d->mtp = mc->mtp_num_layers > 0 ? mc->mtp_num_layers : 0;
  d->mtp_moe = mc->num_layers > 0 && mt_config_is_moe_layer(cfg, mc->num_layers - 1);
  d->mla = mc->multi_latent_attention != 0;
  if (d->mla) {
    d->qr = mc->q_lora_rank > 0 ? mc->q_lora_rank : 0;
    d->kr = mc->kv_lora_rank;
    d->dn = mc->qk_head_dim;
    d->dr = mc->qk_pos_emb_head_dim;
    d->dv = mc->v_head_dim;
  }
}

void mt_plan_dims_moe_opts(mt_plan_dims *d, const mt_plan_options *opt) {
  if (!opt) return;
  if (opt->moe_load_factor > 0) d->lf = opt->moe_load_factor;
  d->r_given = opt->moe_rows_given & 1;
  d->rx_given = (opt->moe_rows_given & 2) != 0;
  d->r_fix = (double)opt->moe_recv_rows;
  d->rx_fix = (double)opt->moe_expert_rows;
}

double mt_plan_stage_moe_layers(const mt_plan_dims *d) { return d->n_moe_layers / d->p; }

double mt_plan_norm_width(const mt_plan_dims *d) { return d->rms ? 1 : 2; }

/* Multi-latent attention's projections on one TP rank of t (Megatron-core
 * MLASelfAttention; no biases on them, with `qk_layernorm` the latent
 * RMSNorm/LayerNorms): linear_q_proj [n (dn + dr) / t, h], or
 * linear_q_down_proj [qr, h] (replicated), q_layernorm [qr] (replicated),
 * linear_q_up_proj [n (dn + dr) / t, qr]; linear_kv_down_proj [kr + dr, h]
 * (replicated), kv_layernorm [kr] (replicated), linear_kv_up_proj
 * [n (dn + dv) / t, kr]; linear_proj [h, n dv / t] (its bias is the
 * caller's). */
static double mla_params(const mt_plan_dims *d, double t) {
  const double h = d->h, n = d->a, nw = mt_plan_norm_width(d), hq = d->dn + d->dr;
  const double q = d->qr > 0 ? d->qr * h + d->qkln * nw * d->qr + n * hq * d->qr / t : n * hq * h / t;
  return q + (d->kr + d->dr) * h + d->qkln * nw * d->kr + n * (d->dn + d->dv) * d->kr / t +
         h * n * d->dv / t;
}

/* The attention half of a layer on one TP rank of t (model/gpt.c
 * register_params): input norm (replicated), column-parallel linear_qkv
 * [(a + 2 ng) hn / t, h] (+ bias), q/k norms [hn] (replicated), row-parallel
 * linear_proj [h, a hn / t] (+ replicated bias), and the pre-MLP norm. */
static double attn_params(const mt_plan_dims *d, double t) {
  const double h = d->h, nw = mt_plan_norm_width(d);
  if (d->mla) return mla_params(d, t) + d->bias * h + 2 * nw * h;
  const double qkv = (d->a + 2 * d->ng) * d->hn, q = d->a * d->hn;
  return (qkv * h + d->bias * qkv + h * q) / t + d->bias * h + 2 * nw * h +
         d->qkln * 2 * nw * d->hn;
}

/* A dense MLP on one TP rank: linear_fc1 [g f / t, h] (+ bias; with SwiGLU
 * the gate and up slices), linear_fc2 [h, f / t] (+ replicated bias). */
static double mlp_params(const mt_plan_dims *d, double t) {
  const double h = d->h, f = d->f;
  return (d->g * f * h + d->bias * d->g * f + h * f) / t + d->bias * h;
}

/* Router (replicated) + local experts: E/ep experts of fc1 [g F, h] (+ bias)
 * and fc2 [h, F] split by etp, fc2 bias replicated; + the shared expert, a
 * dense MLP of width S split by t (fc1 [g S / t, h], fc2 [h, S / t]). */
static double moe_mlp_params(const mt_plan_dims *d, double ep, double etp, double t) {
  const double h = d->h, F = d->fm, S = d->S;
  return d->E * h +
         (d->E / ep) * ((d->g * F * h + d->bias * d->g * F + h * F) / etp + d->bias * h) +
         (S > 0 ? (d->g * S * h + d->bias * d->g * S + h * S) / t + d->bias * h : 0);
}

double mt_plan_stage_expert_params(const mt_plan_dims *d, double n_moe) {
  const double h = d->h, F = d->fm;
  if (d->E <= 0) return 0;
  return n_moe * (d->E / d->ep) *
         ((d->g * F * h + d->bias * d->g * F + h * F) / d->etp + d->bias * h);
}

double mt_plan_stage_params(const mt_plan_dims *d, int stage) {
  double per_stage_layers = d->L / d->p;
  double moe = mt_plan_stage_moe_layers(d);
  double n = per_stage_layers * attn_params(d, d->t) + (per_stage_layers - moe) * mlp_params(d, d->t) +
             moe * moe_mlp_params(d, d->ep, d->etp, d->t);
  if (stage == 0) n += d->Vp * d->h / d->t + d->pos_table * d->maxpos * d->h;
  if (stage == (int)d->p - 1) {
    n += mt_plan_norm_width(d) * d->h; /* final norm */
    /* untied output layer, or Megatron's copy of the word embeddings on the
     * last stage when it is not the first */
    if (d->untied || d->p > 1) n += d->Vp * d->h / d->t;
  }
  return n;
}

/* The multi-token prediction depths, unsharded (model/gpt_mtp.c): per depth
 * enorm, hnorm and final_layernorm, eh_proj [h, 2h] and one layer of the
 * last decoder layer's kind (its copy of the word embedding on a later
 * stage is not counted, like the tied output layer's). */
static double mtp_params(const mt_plan_dims *d) {
  const double h = d->h;
  return d->mtp * (attn_params(d, 1) + (d->mtp_moe ? moe_mlp_params(d, 1, 1, 1) : mlp_params(d, 1)) +
                   3 * mt_plan_norm_width(d) * h + 2 * h * h);
}

double mt_plan_total_params(const mt_plan_dims *d, int padded) {
  const double h = d->h, V = padded ? d->Vp : d->V;
  double n = d->L * attn_params(d, 1) + (d->L - d->n_moe_layers) * mlp_params(d, 1) +
             d->n_moe_layers * moe_mlp_params(d, 1, 1, 1);
  n += V * h + d->pos_table * d->maxpos * h + mt_plan_norm_width(d) * h;
  if (d->untied) n += V * h;
  return n + mtp_params(d);
}

/* The routed experts a token does not pick (E − k) in n_moe MoE layers. */
static double unpicked_experts(const mt_plan_dims *d, double n_moe) {
  const double h = d->h, F = d->fm;
  const double expert = d->g * F * h + d->bias * d->g * F + h * F + d->bias * h;
  return d->E > 0 ? n_moe * (d->E - d->topk) * expert : 0;
}

/* Parameters one token uses (the unpadded vocabulary, as the published
 * "activated" counts): the total less, in every MoE layer (MTP depths'
 * included), the E − k routed experts it does not pick (the router, the
 * shared expert and the k chosen experts stay). */
static double active_params(const mt_plan_dims *d) {
  return mt_plan_total_params(d, 0) - unpicked_experts(d, d->n_moe_layers + d->mtp * d->mtp_moe);
}

void mt_plan_memory_stage(const mt_config *cfg, int world, const mt_plan_options *opt, int stage,
                          double bytes[MT_PM_N]) {
  mt_plan_dims d;
  mt_plan_stage_info info;
  mt_plan_dims_from(cfg, world, &d);
  mt_plan_dims_moe_opts(&d, opt);
  mt_plan_stage_memory(cfg, &d, stage, bytes, &info);
  mt_plan_fp8_stage_memory(cfg, &d, stage, bytes); /* fp8_param_gather's 1-byte weights */
}

/* The worst rank's total with every MoE buffer at the worst case. */
static double total_worst(const mt_config *cfg, const mt_plan_dims *d0) {
  mt_plan_dims d = *d0;
  d.worst = 1;
  d.r_given = d.rx_given = 0;
  double best = 0;
  for (int k = 0; k < (int)d.p; k++) {
    double c[MT_PM_N], tot = 0;
    mt_plan_stage_info info;
    mt_plan_stage_memory(cfg, &d, k, c, &info);
    for (int i = 0; i < MT_PM_N; i++) tot += c[i];
    if (tot > best) best = tot;
  }
  return best;
}

void mt_plan_memory_compute(const mt_config *cfg, int world, const mt_hardware *hw,
                            const mt_plan_options *opt, mt_plan_memory *mem) {
  mt_plan_dims d;
  mt_plan_dims_from(cfg, world, &d);
  mt_plan_dims_moe_opts(&d, opt);
  memset(mem, 0, sizeof *mem);
  double best = -1;
  for (int k = 0; k < (int)d.p; k++) {
    /* when every stage has the same layers (dense, or all layers MoE) the
     * middle stages hold stage 1's parameters and fewer micro-batches: only
     * the first, second and last stages can be the maximum; with some dense
     * layers (moe_layer_freq > 1 or a list) any stage can be */
    const int mixed = d.E > 0 && d.n_moe_layers < d.L;
    if (k > 1 && k < (int)d.p - 1 && !mixed) continue;
    double c[MT_PM_N], tot = 0;
    mt_plan_stage_info info;
    mt_plan_stage_memory(cfg, &d, k, c, &info);
    mt_plan_fp8_stage_memory(cfg, &d, k, c); /* fp8_param_gather's 1-byte weights */
    for (int i = 0; i < MT_PM_N; i++) tot += c[i];
    if (tot > best) {
      best = tot;
      memcpy(mem->bytes, c, sizeof c);
      mem->total = tot;
      mem->worst_stage = k;
      mem->act_layer_bytes = info.act_layer_bytes;
      mem->inflight_layers = info.inflight_layers;
      mem->params_per_rank = info.params;
    }
  }
  mem->params_total = (int64_t)llround(mt_plan_total_params(&d, 1));
  mem->params_total_unpadded = (int64_t)llround(mt_plan_total_params(&d, 0));
  mem->params_active = (int64_t)llround(active_params(&d));
  mem->params_mtp = (int64_t)llround(mtp_params(&d));
  mem->params_mtp_active =
      (int64_t)llround(mtp_params(&d) - unpicked_experts(&d, d.mtp * d.mtp_moe));
  mem->total_worst = mem->total;
  if (d.E > 0) {
    double s_rows;
    mt_plan_moe_rows(&d, &s_rows, &mem->moe_recv_rows);
    mem->moe_expert_rows = mt_plan_moe_expert_rows(&d);
    mem->moe_worst_rows = mt_plan_moe_worst_rows(&d);
    const int assumed = d.cap <= 0 && !d.r_given;
    mem->moe_load_factor = assumed ? d.lf : 0;
    if (d.cap <= 0) mem->total_worst = total_worst(cfg, &d);
  }
  mem->capacity = hw ? (hw->hbm_gib - hw->reserved_gib) * 1073741824.0 : INFINITY;
  mem->fits = mem->total <= mem->capacity;
}
