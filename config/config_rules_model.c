/* config/config_rules_model.c — the consistency rules of the model options
 * (Llama-style block, docs/model.md), of MoE (docs/moe.md) and of the
 * training schedule, as rows of the rule table that config_check.c runs
 * after the layout rules and docs/config.md lists (config_doc.c). Keys that
 * only need another setting to have an effect are not here: their `needs`
 * column in config_table.c is one rule (config_needs.c). */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"
#include "core/util.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

/* ---- the Llama-style block ---- */

/* Megatron's RotaryEmbedding: dim = int(kv_channels * rotary_percent) when
 * rotary_percent < 1; it rotates dim / 2 channel pairs. */
static int r_rotary_dim(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (strcmp(m->position_embedding_type, "rope") != 0 || m->multi_latent_attention) return 0;
  const int d = mt_rotary_dim(m->kv_channels, m->rotary_percent);
  const char *k = m->rotary_percent < 1.0f ? "model.rotary_percent" : "model.kv_channels";
  if (d < 2 || d % 2)
    return mt_cfg_fail(c, key(k),
                       "kv_channels (%d) x rotary_percent (%g) gives %d rotated channels "
                       "(expected an even number >= 2: RoPE turns channel pairs)",
                       m->kv_channels, (double)m->rotary_percent, d);
  return 0;
}

static int r_groups_divide(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int np = cfg->model.num_attention_heads, ng = cfg->model.num_query_groups;
  if (ng > np || np % ng)
    return mt_cfg_fail(c, key("model.num_query_groups"),
                       "%d does not divide num_attention_heads %d (expected a divisor: each K/V "
                       "group serves num_attention_heads / num_query_groups query heads)",
                       ng, np);
  return 0;
}

static int r_groups_tp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int ng = cfg->model.num_query_groups, tp = cfg->parallel.tensor_model_parallel_size;
  if (ng % tp)
    return mt_cfg_fail(c, key("model.num_query_groups"),
                       "%d K/V group(s)%s cannot be split over tensor_model_parallel_size %d "
                       "(expected a multiple of tp: each rank holds whole groups; replicating "
                       "K/V heads over ranks is not implemented)",
                       ng, c->present[key("model.num_query_groups")] ? "" : " (the default: MQA)",
                       tp);
  return 0;
}

static int r_qk_norm(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (cfg->model.qk_layernorm && !cfg->model.multi_latent_attention && cfg->model.kv_channels < 2)
    return mt_cfg_fail(c, key("model.qk_layernorm"),
                       "needs kv_channels >= 2 (got %d: normalising a single channel makes "
                       "every query and key a constant)",
                       cfg->model.kv_channels);
  return 0;
}

/* ---- MoE (each applies with model.num_experts > 0) ---- */

static int r_moe_topk(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->num_experts > 0 && m->moe_router_topk > m->num_experts)
    return mt_cfg_fail(c, key("model.moe_router_topk"),
                       "%d is more than num_experts %d (expected 1..num_experts)",
                       m->moe_router_topk, m->num_experts);
  return 0;
}

static int r_moe_ep(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int E = cfg->model.num_experts, ep = cfg->parallel.expert_model_parallel_size;
  if (E > 0 && E % ep)
    return mt_cfg_fail(c, key("parallel.expert_model_parallel_size"),
                       "%d does not divide num_experts %d (expected a divisor of num_experts)", ep,
                       E);
  return 0;
}

static int r_moe_world(mt_cfg_ctx *c, mt_config *cfg, int world) {
  const mt_parallel_config *p = &cfg->parallel;
  const int etp = p->expert_tensor_parallel_size, ep = p->expert_model_parallel_size;
  const int pp = p->pipeline_model_parallel_size;
  const int64_t egroup = (int64_t)etp * ep * pp;
  if (cfg->model.num_experts > 0 && world % egroup)
    return mt_cfg_fail(c, key("parallel.expert_model_parallel_size"),
                       "expert_tensor_parallel_size (%d) x expert_model_parallel_size (%d) x "
                       "pipeline_model_parallel_size (%d) = %lld does not divide the world size "
                       "%d (expected a divisor)",
                       etp, ep, pp, (long long)egroup, world);
  return 0;
}

static int r_moe_ffn_etp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int f = cfg->model.moe_ffn_hidden_size, etp = cfg->parallel.expert_tensor_parallel_size;
  if (cfg->model.num_experts > 0 && f % etp)
    return mt_cfg_fail(c, key("model.moe_ffn_hidden_size"),
                       "%d is not divisible by expert_tensor_parallel_size %d (expected a "
                       "multiple)",
                       f, etp);
  return 0;
}

static int r_moe_bias_etp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int etp = cfg->parallel.expert_tensor_parallel_size;
  if (cfg->model.num_experts > 0 && etp > 1 && cfg->model.add_bias_linear)
    return mt_cfg_fail(c, key("model.add_bias_linear"),
                       "true is not supported with MoE and expert_tensor_parallel_size %d "
                       "(expected false: as in Megatron, expert biases need "
                       "expert_tensor_parallel_size 1)",
                       etp);
  return 0;
}

/* Megatron requires SP for ep > 1 with tp > 1; this build also for ep = 1,
 * since each TP rank routes and dispatches its own sequence shard */
static int r_moe_sp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int tp = cfg->parallel.tensor_model_parallel_size;
  if (cfg->model.num_experts > 0 && tp > 1 && !cfg->parallel.sequence_parallel)
    return mt_cfg_fail(c, key("parallel.sequence_parallel"),
                       "must be true for MoE (model.num_experts %d) with "
                       "tensor_model_parallel_size %d (expected true: each TP rank routes its "
                       "own sequence shard; Megatron requires it when expert_model_parallel_size "
                       "> 1 too)",
                       cfg->model.num_experts, tp);
  return 0;
}

static int r_moe_pattern(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->num_experts > 0 && m->moe_layer_pattern_len > 0 &&
      m->moe_layer_pattern_len != m->num_layers)
    return mt_cfg_fail(c, key("model.moe_layer_freq"),
                       "list has %d entries but num_layers is %d (expected one 0/1 entry per "
                       "layer)",
                       m->moe_layer_pattern_len, m->num_layers);
  return 0;
}

static int r_moe_groups_pair(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->num_experts > 0 && m->moe_router_num_groups && !m->moe_router_group_topk)
    return mt_cfg_fail(c, key("model.moe_router_num_groups"),
                       "%d needs model.moe_router_group_topk (expected both set for "
                       "group-limited routing, or both null)",
                       m->moe_router_num_groups);
  return 0;
}

static int r_moe_groups_divide(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int E = cfg->model.num_experts, ng = cfg->model.moe_router_num_groups;
  if (E > 0 && ng && E % ng)
    return mt_cfg_fail(c, key("model.moe_router_num_groups"),
                       "%d does not divide num_experts %d (expected equal-sized expert groups)",
                       ng, E);
  return 0;
}

static int r_moe_group_topk(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int ng = cfg->model.moe_router_num_groups, gk = cfg->model.moe_router_group_topk;
  if (cfg->model.num_experts > 0 && ng && gk > ng)
    return mt_cfg_fail(c, key("model.moe_router_group_topk"),
                       "%d is more than moe_router_num_groups %d (expected 1..num_groups)", gk,
                       ng);
  return 0;
}

static int r_moe_topk_groups(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  const int E = m->num_experts, k = m->moe_router_topk;
  const int ng = m->moe_router_num_groups, gk = m->moe_router_group_topk;
  if (E > 0 && ng && (k < gk || k > gk * (E / ng)))
    return mt_cfg_fail(c, key("model.moe_router_topk"),
                       "%d cannot be picked from moe_router_group_topk %d group(s) of %d "
                       "experts (expected group_topk <= topk <= group_topk x "
                       "num_experts / num_groups = %d)",
                       k, gk, E / ng, gk * (E / ng));
  return 0;
}

static int r_moe_shared_tp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int s = cfg->model.moe_shared_expert_intermediate_size;
  const int tp = cfg->parallel.tensor_model_parallel_size;
  if (cfg->model.num_experts > 0 && s % tp)
    return mt_cfg_fail(c, key("model.moe_shared_expert_intermediate_size"),
                       "%d is not divisible by tensor_model_parallel_size %d (expected a "
                       "multiple: the shared expert is split over TP like the dense MLP)",
                       s, tp);
  return 0;
}

/* moe_shared_expert_overlap hides the shared expert behind the token
 * all-to-alls of the EP group: without one it would change nothing. */
static int r_moe_shared_overlap(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int ep = cfg->parallel.expert_model_parallel_size;
  if (cfg->model.moe_shared_expert_overlap && cfg->model.num_experts > 0 &&
      cfg->model.moe_shared_expert_intermediate_size > 0 && ep <= 1)
    return mt_cfg_fail(c, key("model.moe_shared_expert_overlap"),
                       "true has no effect with parallel.expert_model_parallel_size %d: there is "
                       "no token all-to-all to overlap (expected expert_model_parallel_size > 1, "
                       "or the key left out)",
                       ep);
  return 0;
}

/* ---- the training schedule ---- */

static int r_finetune(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (cfg->training.finetune && !cfg->checkpoint.load[0])
    mt_cfg_note(c, "training.finetune is true but checkpoint.load is not set: finetune has no "
                   "effect, the model trains from scratch (as in Megatron)");
  return 0;
}

static int r_min_lr(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (t->min_lr > t->lr)
    return mt_cfg_fail(c, key("training.min_lr"), "%g is larger than lr %g (expected min_lr <= lr)",
                       (double)t->min_lr, (double)t->lr);
  return 0;
}

static int r_sched_flags(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (t->override_opt_param_scheduler && t->use_checkpoint_opt_param_scheduler)
    return mt_cfg_fail(c, key("training.override_opt_param_scheduler"),
                       "true together with training.use_checkpoint_opt_param_scheduler true "
                       "(expected at most one of the two: override = this config's LR schedule "
                       "wins on resume, use_checkpoint = the checkpoint's; Megatron asserts the "
                       "same)");
  return 0;
}

static int r_warmup(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (t->lr_warmup_iters > t->lr_decay_iters)
    return mt_cfg_fail(c, key("training.lr_warmup_iters"),
                       "%lld is larger than lr_decay_iters %lld (expected warmup <= decay iters)",
                       (long long)t->lr_warmup_iters, (long long)t->lr_decay_iters);
  return 0;
}


/* ---- multi-latent attention and RoPE scaling (docs/attention.md, docs/model.md) ---- */

/* MLA rotates its decoupled qk_pos_emb_head_dim channels: Megatron builds
 * its RotaryEmbedding / YarnRotaryEmbedding inside the attention. */
static int r_mla_pos(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->multi_latent_attention && strcmp(m->position_embedding_type, "rope"))
    return mt_cfg_fail(c, key("model.multi_latent_attention"),
                       "needs position_embedding_type \"rope\" (got \"%s\": MLA rotates its "
                       "qk_pos_emb_head_dim channels with RoPE or YaRN, rope_type)",
                       m->position_embedding_type);
  return 0;
}

/* Megatron: "Group query attention is mutually exclusive with multi latent
 * attention". */
static int r_mla_gqa(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (cfg->model.multi_latent_attention && cfg->model.group_query_attention)
    return mt_cfg_fail(c, key("model.group_query_attention"),
                       "true cannot go with multi_latent_attention true (expected one of the "
                       "two: MLA's keys and values come from one latent for every head, as "
                       "Megatron asserts)");
  return 0;
}

/* MLA's head widths are qk_head_dim + qk_pos_emb_head_dim and v_head_dim. */
static int r_mla_kv_channels(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (cfg->model.multi_latent_attention && c->kv_given)
    return mt_cfg_fail(c, key("model.kv_channels"),
                       "%d has no effect with multi_latent_attention true (expected the key "
                       "left out: MLA's heads are qk_head_dim + qk_pos_emb_head_dim wide for "
                       "queries and keys, v_head_dim for values)",
                       cfg->model.kv_channels);
  return 0;
}

static int r_mla_rotary(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (!m->multi_latent_attention) return 0;
  if (m->rotary_percent < 1.0f)
    return mt_cfg_fail(c, key("model.rotary_percent"),
                       "%g cannot go with multi_latent_attention true (expected 1: MLA rotates "
                       "all qk_pos_emb_head_dim channels; a part of them is not implemented)",
                       (double)m->rotary_percent);
  if (m->rotary_interleaved)
    return mt_cfg_fail(c, key("model.rotary_interleaved"),
                       "true cannot go with multi_latent_attention true (expected false: "
                       "Megatron's MLA fixes its own pairing, channels (2i, 2i + 1) of the "
                       "qk_pos_emb_head_dim ones, and its YaRN refuses the flag)");
  if (m->use_rope_scaling)
    return mt_cfg_fail(c, key("model.use_rope_scaling"),
                       "true has no effect with multi_latent_attention true (expected false: "
                       "MLA scales its RoPE with rope_type \"yarn\", Megatron's MLA ignores "
                       "the Llama-3.1 scaling)");
  return 0;
}

static int r_mla_pe_even(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->multi_latent_attention && m->qk_pos_emb_head_dim % 2)
    return mt_cfg_fail(c, key("model.qk_pos_emb_head_dim"),
                       "%d is odd (expected an even number: RoPE turns channel pairs)",
                       m->qk_pos_emb_head_dim);
  return 0;
}

/* Megatron (argument_utils.py): "Common attention only support
 * rope_type=rope". */
static int r_yarn_mla(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (mt_model_yarn(m) && !m->multi_latent_attention)
    return mt_cfg_fail(c, key("model.rope_type"),
                       "\"yarn\" needs multi_latent_attention true (expected \"rope\" for "
                       "standard attention, as Megatron asserts)");
  return 0;
}

/* YaRN's correction range [dim(beta_fast), dim(beta_slow)] is increasing
 * only when beta_fast > beta_slow. */
static int r_yarn_betas(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (mt_model_yarn(m) && !(m->beta_fast > m->beta_slow))
    return mt_cfg_fail(c, key("model.beta_fast"),
                       "%g is not larger than beta_slow %g (expected beta_fast > beta_slow: "
                       "faster-turning channels keep their frequency, slower ones are "
                       "interpolated)",
                       (double)m->beta_fast, (double)m->beta_slow);
  return 0;
}

/* The YaRN-only keys under MLA with rope_type "rope" (their `needs` is MLA:
 * rope_type's null default means YaRN there). A saved config (c->saved)
 * lists every key: there they are reset to the default, not refused. */
static int r_yarn_keys(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  static const char *const yk[] = {"model.original_max_position_embeddings", "model.beta_fast",
                                   "model.beta_slow", "model.mscale"};
  if (!cfg->model.multi_latent_attention || mt_model_yarn(&cfg->model)) return 0;
  for (int i = 0; i < 4; i++) {
    const int k = key(yk[i]);
    if (c->present[k] != 1) continue;
    if (c->saved && !c->overridden[k]) { /* a saved config lists every key: drop it */
      mt_cfg_apply_default(cfg, k);
      c->present[k] = 0;
      continue;
    }
    return mt_cfg_fail(c, k,
                       "has no effect with rope_type \"rope\" (expected model.rope_type "
                       "\"yarn\" or null for it to apply, or the key left out)");
  }
  return 0;
}

#define E8 "model.num_experts=8; "
static const mt_cfg_rule k_model[] = {
    {"model.rotary_percent model.kv_channels", r_rotary_dim,
     "with `rope`, ⌊`kv_channels` × `rotary_percent`⌋ (Megatron's rotated channels) is even and "
     "≥ 2; the message names `rotary_percent` when it is below 1, else `kv_channels`",
     "1: model.position_embedding_type=rope; model.rotary_percent=0.2", 0, 0},
    {"model.num_query_groups", r_groups_divide,
     "`model.num_query_groups` divides `num_attention_heads`",
     "1: model.group_query_attention=true; model.num_query_groups=3", 0, 0},
    {"model.num_query_groups", r_groups_tp,
     "tp divides `model.num_query_groups` (each rank holds whole K/V groups; with "
     "`group_query_attention` and no `num_query_groups` it is 1, Megatron's MQA default)",
     "2: parallel.tensor_model_parallel_size=2; model.group_query_attention=true", 0, 0},
    {"model.qk_layernorm", r_qk_norm, "`model.qk_layernorm` needs `kv_channels` ≥ 2",
     "1: model.qk_layernorm=true; model.kv_channels=1", 0, 0},
#define MLA "model.position_embedding_type=rope; model.multi_latent_attention=true; "
    {"model.multi_latent_attention", r_mla_pos,
     "MLA needs `position_embedding_type` `rope` (its decoupled channels are rotated)",
     "1: model.multi_latent_attention=true", 0, 0},
    {"model.group_query_attention", r_mla_gqa,
     "MLA and `model.group_query_attention` exclude each other (Megatron's assert)",
     "1: " MLA "model.group_query_attention=true", 0, 0},
    {"model.kv_channels", r_mla_kv_channels,
     "with MLA `model.kv_channels` is left out (the head widths are `qk_head_dim` + "
     "`qk_pos_emb_head_dim` and `v_head_dim`)",
     "1: " MLA "model.kv_channels=8", 0, 0},
    {"model.rotary_percent model.rotary_interleaved model.use_rope_scaling", r_mla_rotary,
     "with MLA: `rotary_percent` 1, `rotary_interleaved` false, `use_rope_scaling` false (the "
     "message names the key)",
     "1: " MLA "model.rotary_percent=0.5", 0, 0},
    {"model.qk_pos_emb_head_dim", r_mla_pe_even, "MLA: `model.qk_pos_emb_head_dim` is even",
     "1: " MLA "model.qk_pos_emb_head_dim=7", 0, 0},
    {"model.rope_type", r_yarn_mla,
     "`model.rope_type` `yarn` needs `multi_latent_attention` (Megatron's assert)",
     "1: model.position_embedding_type=rope; model.rope_type=yarn", 0, 0},
    {"model.beta_fast", r_yarn_betas, "YaRN: `model.beta_fast` > `beta_slow`",
     "1: " MLA "model.beta_fast=1", 0, 0},
    {"model.beta_fast model.beta_slow model.original_max_position_embeddings model.mscale",
     r_yarn_keys,
     "with MLA and `rope_type` `rope` the YaRN-only keys (`beta_fast`, `beta_slow`, "
     "`original_max_position_embeddings`, `mscale`) are left out",
     "1: " MLA "model.rope_type=rope; model.mscale=0.7", 0, 0},
    {"model.moe_router_topk", r_moe_topk, "MoE: `model.moe_router_topk` ≤ `num_experts`",
     "1: " E8 "model.moe_router_topk=9", 0, 0},
    {"parallel.expert_model_parallel_size", r_moe_ep,
     "MoE: ep (`parallel.expert_model_parallel_size`) divides `num_experts`",
     "3: " E8 "parallel.expert_model_parallel_size=3", 0, 0},
    {"parallel.expert_model_parallel_size", r_moe_world,
     "MoE: etp × ep × pp divides the world (expert parallel folding)",
     "4: " E8 "parallel.expert_model_parallel_size=4; parallel.expert_tensor_parallel_size=2", 0,
     0},
    {"model.moe_ffn_hidden_size", r_moe_ffn_etp,
     "MoE: etp (`parallel.expert_tensor_parallel_size`) divides `model.moe_ffn_hidden_size`",
     "2: " E8 "parallel.expert_tensor_parallel_size=2; model.moe_ffn_hidden_size=33", 0, 0},
    {"model.add_bias_linear", r_moe_bias_etp,
     "MoE with etp > 1 needs `model.add_bias_linear` false (as in Megatron)",
     "2: " E8 "parallel.expert_tensor_parallel_size=2", 0, 0},
    {"parallel.sequence_parallel", r_moe_sp,
     "MoE with tp > 1 needs `parallel.sequence_parallel` (every tp, not only with ep > 1 as in "
     "Megatron: each TP rank routes its own sequence shard)",
     "2: " E8 "parallel.tensor_model_parallel_size=2; parallel.expert_tensor_parallel_size=1", 0,
     0},
    {"model.moe_layer_freq", r_moe_pattern,
     "MoE: a `model.moe_layer_freq` list has one entry per layer",
     "1: " E8 "model.moe_layer_freq=[1,0,1]", 0, 0},
    {"model.moe_router_num_groups", r_moe_groups_pair,
     "MoE: `model.moe_router_num_groups` needs `moe_router_group_topk` (group-limited routing "
     "takes both)",
     "1: " E8 "model.moe_router_num_groups=4", 0, 0},
    {"model.moe_router_num_groups", r_moe_groups_divide,
     "MoE: `model.moe_router_num_groups` divides `num_experts`",
     "1: " E8 "model.moe_router_num_groups=3; model.moe_router_group_topk=1", 0, 0},
    {"model.moe_router_group_topk", r_moe_group_topk,
     "MoE: `model.moe_router_group_topk` ≤ `moe_router_num_groups`",
     "1: " E8 "model.moe_router_num_groups=4; model.moe_router_group_topk=5", 0, 0},
    {"model.moe_router_topk", r_moe_topk_groups,
     "MoE with group-limited routing: `group_topk` ≤ `model.moe_router_topk` ≤ `group_topk` × "
     "`num_experts` / `num_groups`",
     "1: " E8 "model.moe_router_num_groups=4; model.moe_router_group_topk=1; "
     "model.moe_router_topk=3",
     0, 0},
    {"model.moe_shared_expert_intermediate_size", r_moe_shared_tp,
     "MoE: tp divides `model.moe_shared_expert_intermediate_size`",
     "2: " E8 "model.moe_shared_expert_intermediate_size=33; "
     "parallel.tensor_model_parallel_size=2; parallel.sequence_parallel=true; "
     "parallel.expert_tensor_parallel_size=1",
     0, 0},
    {"model.moe_shared_expert_overlap", r_moe_shared_overlap,
     "MoE: `model.moe_shared_expert_overlap` only with `expert_model_parallel_size` > 1 (the "
     "all-to-alls it overlaps)",
     "2: " E8 "model.moe_shared_expert_intermediate_size=96; model.moe_shared_expert_overlap=true",
     0, 0},
    {"training.finetune", r_finetune,
     "`training.finetune` without `checkpoint.load` trains from scratch, with a note (as "
     "Megatron)",
     "1: training.finetune=true", 1, 0},
    {"training.min_lr", r_min_lr, "`training.min_lr` ≤ `lr`", "1: training.min_lr=1", 0, 0},
    {"training.override_opt_param_scheduler", r_sched_flags,
     "`training.override_opt_param_scheduler` and `use_checkpoint_opt_param_scheduler` are not "
     "both true (Megatron asserts the same); what they do on resume: docs/checkpoint.md",
     "1: training.override_opt_param_scheduler=true; "
     "training.use_checkpoint_opt_param_scheduler=true",
     0, 0},
    {"training.lr_warmup_iters", r_warmup, "`training.lr_warmup_iters` ≤ `lr_decay_iters`",
     "1: training.lr_warmup_iters=20", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_model(int *n) {
  *n = (int)(sizeof k_model / sizeof k_model[0]);
  return k_model;
}
