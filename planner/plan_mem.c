/* planner/plan_mem.c — per-rank memory by allocator category (docs/planner.md).
 *
 * Model state: parameters in the storage dtype (fp32 or bf16), fp32
 * gradients, Adam m and v in fp32 plus an fp32 master copy under bf16
 * (trainer/optimizer.h; the master copy is counted as optimizer state like
 * the allocator does). ZeRO stage 1 shards the optimizer state over dp,
 * stage 2 also the gradients, stage 3 also the parameters (Rajbhandari et
 * al. 2020, arXiv:1910.02054 §5).
 *
 * Activations: exactly the buffers model/gpt.c alloc_buffers keeps per layer
 * for one micro-batch — layer input (residual stream), ln1 + mean/rstd, qkv,
 * probs [b, a/t, s, s], ctx, x1, ln2 + mean/rstd, fc1, gelu — with the
 * sharding of 2205.05198 Table 2: tensor parallelism divides qkv, probs, ctx,
 * fc1, gelu by t; sequence parallelism also divides the residual/LayerNorm
 * tensors. Dropout masks are regenerated from the counter-based RNG, so no
 * mask bytes. Selective recomputation keeps one probs buffer shared by all
 * layers; full recomputation keeps only each layer's input plus
 * recompute_num_layers full sets shared by all chunks. Pipeline stage k holds min(p - k, m) micro-batches (1F1B) or
 * (p - k - 1) * 2 + (v - 1) * p + 1 model chunks (interleaved, Megatron's
 * warm-up count; stage 0 gives 2205.05198's L (1 + (p-1)/(p v))).
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
  d->maxpos = mc->max_position_embeddings;
  d->t = pc->tensor_model_parallel_size;
  d->p = pc->pipeline_model_parallel_size;
  d->v = pc->virtual_pipeline_model_parallel_size > 0 ? pc->virtual_pipeline_model_parallel_size : 1;
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
  /* Megatron's moe_layer_freq = k: layers 0, k, 2k, ... are MoE */
  d->n_moe_layers = d->E > 0 ? floor((d->L - 1) / d->freq) + 1 : 0;
}

double mt_plan_stage_moe_layers(const mt_plan_dims *d) { return d->n_moe_layers / d->p; }

/* Dense transformer layer on one TP rank: column-parallel qkv/fc1 (weights
 * and biases split), row-parallel proj/fc2 (weights split, biases and both
 * LayerNorms replicated). */
static double dense_layer_params(const mt_plan_dims *d) {
  double h = d->h, f = d->f;
  return (4 * h * h + 2 * h * f + 3 * h + f) / d->t + 6 * h;
}

/* Attention half + LayerNorms only (the MLP replaced by experts). */
static double attn_layer_params(const mt_plan_dims *d) {
  double h = d->h;
  return (4 * h * h + 3 * h) / d->t + 6 * h;
}

/* Router (replicated) + local experts: E/ep experts of fc1 [fm, h] + bias
 * and fc2 [h, fm] split by etp, fc2 bias replicated. */
static double moe_mlp_params(const mt_plan_dims *d) {
  double h = d->h, fm = d->fm;
  return d->E * h + (d->E / d->ep) * ((2 * h * fm + fm) / d->etp + h);
}

double mt_plan_stage_params(const mt_plan_dims *d, int stage) {
  double per_stage_layers = d->L / d->p;
  double moe = mt_plan_stage_moe_layers(d);
  double n = (per_stage_layers - moe) * dense_layer_params(d) +
             moe * (attn_layer_params(d) + moe_mlp_params(d));
  if (stage == 0) n += d->Vp * d->h / d->t + d->maxpos * d->h;
  if (stage == (int)d->p - 1) {
    n += 2 * d->h; /* final LayerNorm */
    /* untied output layer, or Megatron's copy of the word embeddings on the
     * last stage when it is not the first */
    if (d->untied || d->p > 1) n += d->Vp * d->h / d->t;
  }
  return n;
}

double mt_plan_total_params(const mt_plan_dims *d) {
  double h = d->h, f = d->f;
  double dense = 4 * h * h + 2 * h * f + 3 * h + f + 6 * h;
  double moe = 4 * h * h + 3 * h + 6 * h + d->E * h + d->E * (2 * h * d->fm + d->fm + h);
  double n = (d->L - d->n_moe_layers) * dense + d->n_moe_layers * moe;
  n += d->Vp * h + d->maxpos * h + 2 * h;
  if (d->untied) n += d->Vp * h;
  return n;
}

/* Bytes one layer keeps for one micro-batch (no recomputation). */
static double layer_act_bytes(const mt_plan_dims *d, int moe, int recompute) {
  double e = d->e, x = d->b * d->s * d->h, t = d->t;
  double xs = d->sp ? x / t : x;           /* residual-stream tensors */
  double rows = d->sp ? d->b * d->s / t : d->b * d->s;
  double probs = d->b * (d->a / t) * d->s * d->s * e;
  double mlp = 2 * d->b * d->s * d->f / t * e;
  if (moe) /* routed copies of the tokens: fc1 + gelu of topk experts + dispatched input */
    mlp = d->b * d->s * d->topk * (2 * d->fm / d->etp + d->h) * e + d->b * d->s * d->E * 4;
  double full = 4 * xs * e + 4 * rows * 4 + 3 * x / t * e + probs + x / t * e + mlp;
  if (recompute == 1) return full - probs;
  return full;
}

/* Micro-batches (in layer units of this stage) held at the peak of stage k. */
static double inflight_layers(const mt_plan_dims *d, int k) {
  double lps = d->L / d->p;
  if (d->p <= 1) return lps;
  if (d->v <= 1) return fmin(d->p - k, d->m) * lps;
  double chunks = fmin((d->p - k - 1) * 2 + (d->v - 1) * d->p + 1, d->m * d->v);
  return chunks * lps / d->v;
}

static void stage_memory(const mt_plan_dims *d, int k, double out[MT_PM_N], double *act_layer,
                         double *infl) {
  double e = d->e, x = d->b * d->s * d->h, t = d->t, dp = d->d;
  double n = mt_plan_stage_params(d, k);
  memset(out, 0, sizeof(double) * MT_PM_N);
  double layer_n = n / (d->L / d->p); /* rough per-layer share for ZeRO-3 working buffers */
  out[MT_PM_PARAM] = (d->zero >= 3 ? n / dp + (1 + d->prefetch) * layer_n : n) * e;
  out[MT_PM_GRAD] = (d->zero >= 2 ? n / dp : n) * 4;
  out[MT_PM_OPTIM] = (d->zero >= 1 ? n / dp : n) * (8 + (e < 4 ? 4 : 0));
  if (d->zero >= 1 && dp > 1) out[MT_PM_COMM] += fmin(d->bucket, n) * 4;
  if (d->p > 1) out[MT_PM_COMM] += 2 * (d->sp ? x / t : x) * e; /* send + recv */

  double moe_frac = d->E > 0 ? mt_plan_stage_moe_layers(d) / (d->L / d->p) : 0;
  double per_layer = (1 - moe_frac) * layer_act_bytes(d, 0, d->recompute) +
                     moe_frac * layer_act_bytes(d, 1, d->recompute);
  double layers = inflight_layers(d, k);
  double xs = d->sp ? x / t : x, rows = d->sp ? d->b * d->s / t : d->b * d->s;
  double probs = d->b * (d->a / t) * d->s * d->s * e;
  double act;
  if (d->recompute == 2) {
    /* layer inputs kept; recompute_num_layers full sets (without the input)
     * shared by all chunks (model/gpt.c n_act_sets) */
    double group = fmin(d->rc_layers, d->L / d->p);
    act = layers * xs * e + group * (layer_act_bytes(d, moe_frac > 0.5, 0) - xs * e);
    per_layer = xs * e;
  } else {
    act = layers * per_layer;
    if (d->recompute == 1) act += probs; /* one shared probs buffer, recomputed per layer */
  }
  if (k == (int)d->p - 1) /* stack output, final LN, logits, loss pieces, one micro-batch */
    act += xs * e + xs * e + 2 * rows * 4 + d->b * d->s * d->Vp / t * e + 4 * d->b * d->s * 4;
  if (k == 0 || k == (int)d->p - 1) act += 2 * d->b * d->s * 4; /* token ids, targets */
  out[MT_PM_ACT] = act;
  /* workspace reused by every layer: residual grads (3 xs), dqkv, dctx, dffn,
   * and with tp > 1 the gather and gradient buffers of the full sequence */
  out[MT_PM_WORKSPACE] =
      (3 * xs + 3 * x / t + x / t + d->b * d->s * d->f / t + (t > 1 ? 2 * x : 0)) * e;
  *act_layer = per_layer;
  *infl = layers;
}

void mt_plan_memory_compute(const mt_config *cfg, int world, const mt_hardware *hw,
                            mt_plan_memory *mem) {
  mt_plan_dims d;
  mt_plan_dims_from(cfg, world, &d);
  memset(mem, 0, sizeof *mem);
  double best = -1;
  for (int k = 0; k < (int)d.p; k++) {
    /* only the first, second and last stages can be the maximum */
    if (k > 1 && k < (int)d.p - 1) continue;
    double c[MT_PM_N], al, inf, tot = 0;
    stage_memory(&d, k, c, &al, &inf);
    for (int i = 0; i < MT_PM_N; i++) tot += c[i];
    if (tot > best) {
      best = tot;
      memcpy(mem->bytes, c, sizeof c);
      mem->total = tot;
      mem->worst_stage = k;
      mem->act_layer_bytes = al;
      mem->inflight_layers = inf;
      mem->params_per_rank = (int64_t)llround(mt_plan_stage_params(&d, k));
    }
  }
  mem->params_total = (int64_t)llround(mt_plan_total_params(&d));
  mem->capacity = hw ? (hw->hbm_gib - hw->reserved_gib) * 1073741824.0 : INFINITY;
  mem->fits = mem->total <= mem->capacity;
}
