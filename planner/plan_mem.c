/* planner/plan_mem.c — per-rank memory by allocator category (docs/planner.md).
 *
 * Model state: parameters in the storage dtype (fp32 or bf16), fp32
 * gradients, Adam m and v in fp32 plus an fp32 master copy under bf16
 * (trainer/optimizer.h; the master copy is counted as optimizer state like
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

void mt_plan_memory_stage(const mt_config *cfg, int world, int stage, double bytes[MT_PM_N]) {
  mt_plan_dims d;
  mt_plan_stage_info info;
  mt_plan_dims_from(cfg, world, &d);
  mt_plan_stage_memory(cfg, &d, stage, bytes, &info);
}

void mt_plan_memory_compute(const mt_config *cfg, int world, const mt_hardware *hw,
                            mt_plan_memory *mem) {
  mt_plan_dims d;
  mt_plan_dims_from(cfg, world, &d);
  memset(mem, 0, sizeof *mem);
  double best = -1;
  for (int k = 0; k < (int)d.p; k++) {
    /* the middle stages hold stage 1's parameters and fewer micro-batches:
     * only the first, second and last stages can be the maximum */
    if (k > 1 && k < (int)d.p - 1) continue;
    double c[MT_PM_N], tot = 0;
    mt_plan_stage_info info;
    mt_plan_stage_memory(cfg, &d, k, c, &info);
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
  mem->params_total = (int64_t)llround(mt_plan_total_params(&d));
  mem->capacity = hw ? (hw->hbm_gib - hw->reserved_gib) * 1073741824.0 : INFINITY;
  mem->fits = mem->total <= mem->capacity;
}
