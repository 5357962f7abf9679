/* config/config_check.c — derived defaults, per-key ranges and the
 * cross-key consistency rules of a config (Megatron's validate_args()
 * checks that apply to megatrain). Each failure writes one message naming
 * the key and returns 2. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "core/util.h"

static int clamp_int(int64_t v) { return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v; }

/* tp x pp x cp when it divides world_size and all are >= 1, else 0. */
static int data_parallel(const mt_config *cfg, int world) {
  const mt_parallel_config *p = &cfg->parallel;
  if (p->tensor_model_parallel_size < 1 || p->pipeline_model_parallel_size < 1 ||
      p->context_parallel_size < 1)
    return 0;
  int64_t mp = (int64_t)p->tensor_model_parallel_size * p->pipeline_model_parallel_size *
               p->context_parallel_size;
  return world % mp == 0 ? (int)(world / mp) : 0;
}

/* Fields that are 0 after the walk were absent, null or 0: derive them. */
void mt_cfg_derive(mt_config *cfg, int world) {
  if (world < 1) world = 1;
  mt_model_config *m = &cfg->model;
  mt_parallel_config *p = &cfg->parallel;
  mt_training_config *t = &cfg->training;
  /* Megatron's arguments.py: with swiglu int((4h * 2/3) / 64) * 64, which is
   * exactly (h / 24) * 64 in integers (keeps the parameters near 4h's). */
  if (m->ffn_hidden_size == 0)
    m->ffn_hidden_size = clamp_int(m->swiglu ? (int64_t)(m->hidden_size / 24) * 64
                                             : 4 * (int64_t)m->hidden_size);
  if (m->max_position_embeddings == 0) m->max_position_embeddings = m->seq_length;
  if (m->kv_channels == 0 && m->num_attention_heads > 0)
    m->kv_channels = m->hidden_size / m->num_attention_heads;
  /* Megatron: --num-query-groups defaults to 1 and is used only with
   * --group-query-attention; without it every head is its own group. */
  if (m->num_query_groups == 0)
    m->num_query_groups = m->group_query_attention ? 1 : m->num_attention_heads;
  if (m->moe_ffn_hidden_size == 0) m->moe_ffn_hidden_size = m->ffn_hidden_size;
  if (p->virtual_pipeline_model_parallel_size == 0) p->virtual_pipeline_model_parallel_size = 1;
  if (p->expert_tensor_parallel_size == 0)
    p->expert_tensor_parallel_size = p->tensor_model_parallel_size;
  if (!p->distributed_backend[0])
    snprintf(p->distributed_backend, sizeof p->distributed_backend, "%s",
             strcmp(cfg->device, "cuda") ? "mpi" : "nccl");
  if (t->global_batch_size == 0) {
    int dp = data_parallel(cfg, world);
    /* With an invalid layout the consistency check reports the layout. */
    t->global_batch_size = clamp_int((int64_t)t->micro_batch_size * (dp > 0 ? dp : 1));
  }
  /* Megatron's update_train_iters (no batch ramp-up) and
   * get_optimizer_param_scheduler's defaults */
  if (t->train_samples > 0 && t->train_iters == 0 && t->global_batch_size > 0)
    t->train_iters = t->train_samples / t->global_batch_size;
  if (t->lr_decay_iters == 0) t->lr_decay_iters = t->train_iters;
  if (t->lr_decay_samples == 0) t->lr_decay_samples = t->train_samples;
}

static double numeric(const mt_config *cfg, int k) {
  const void *p = mt_cfg_cfield(cfg, k);
  switch (mt_cfg_keys[k].type) {
    case MT_CT_INT:
    case MT_CT_LAYER_FREQ: return *(const int *)p;
    case MT_CT_I64: return (double)*(const int64_t *)p;
    case MT_CT_U64: return (double)*(const uint64_t *)p;
    case MT_CT_FLOAT: return *(const float *)p;
    default: return 0;
  }
}

/* "an integer >= 1", "a number in [0, 1)", ... */
static const char *expected(const mt_cfg_key *kd, char *buf, size_t n) {
  const char *what = kd->type == MT_CT_FLOAT ? "a number" : "an integer";
  unsigned f = kd->flags;
  int has_lo = (f & (MT_CK_GE | MT_CK_GT)) != 0, has_hi = (f & (MT_CK_LE | MT_CK_LT)) != 0;
  if (has_lo && has_hi)
    snprintf(buf, n, "%s in %c%g, %g%c", what, (f & MT_CK_GE) ? '[' : '(', kd->lo, kd->hi,
             (f & MT_CK_LE) ? ']' : ')');
  else if (has_lo)
    snprintf(buf, n, "%s %s %g", what, (f & MT_CK_GE) ? ">=" : ">", kd->lo);
  else if (has_hi)
    snprintf(buf, n, "%s %s %g", what, (f & MT_CK_LE) ? "<=" : "<", kd->hi);
  else
    snprintf(buf, n, "%s", what);
  return buf;
}

static int check_ranges(mt_cfg_ctx *c, const mt_config *cfg) {
  char buf[64];
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    unsigned f = kd->flags;
    if (!(f & (MT_CK_GE | MT_CK_GT | MT_CK_LE | MT_CK_LT))) continue;
    double v = numeric(cfg, k);
    /* null (or absent with default 0): off; an explicit 0 is range-checked */
    if ((f & MT_CK_NULLABLE) && v == 0 && c->present[k] != 1) continue;
    if (kd->type == MT_CT_LAYER_FREQ && cfg->model.moe_layer_pattern_len > 0) continue; /* list */
    int bad = ((f & MT_CK_GE) && !(v >= kd->lo)) || ((f & MT_CK_GT) && !(v > kd->lo)) ||
              ((f & MT_CK_LE) && !(v <= kd->hi)) || ((f & MT_CK_LT) && !(v < kd->hi));
    if (bad)
      return mt_cfg_fail(c, k, "%g is out of range (expected %s%s)", v, expected(kd, buf, sizeof buf),
                         (f & MT_CK_DERIVED) ? "; absent, null or 0 = derived" : "");
  }
  return 0;
}

/* data.split: up to three non-negative weights separated by ',' or '/',
 * summing to > 0 (Megatron's --split). */
static int check_split(mt_cfg_ctx *c, const char *split) {
  int k = mt_cfg_find_key(4, "split");
  const char *q = split;
  double sum = 0;
  int n = 0, ok = 1;
  while (ok) {
    char *end;
    double w = strtod(q, &end);
    if (end == q || !isfinite(w) || w < 0 || ++n > 3) ok = 0;
    sum += w;
    q = end;
    while (*q == ' ') q++;
    if (*q == '\0') break;
    if (*q != ',' && *q != '/') ok = 0;
    q++;
  }
  if (!ok || !(sum > 0))
    return mt_cfg_fail(c, k,
                       "\"%s\" is not a valid split (expected up to three non-negative "
                       "train,valid,test weights with a positive sum, like \"969,30,1\")",
                       split);
  return 0;
}

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

/* Tokenizer keys (Megatron's build_tokenizer): tokenizer_model is what
 * HuggingFaceTokenizer and SentencePieceTokenizer read and GPT2BPETokenizer
 * ignores; vocab_file/merge_file the reverse. A blend surplus without a
 * weighted blend does nothing. */
static int check_data_keys(mt_cfg_ctx *c, const mt_data_config *d) {
  const int gpt2 = !strcmp(d->tokenizer_type, "GPT2BPETokenizer");
  if (gpt2 && d->tokenizer_model[0])
    return mt_cfg_fail(c, key("data.tokenizer_model"),
                       "has no effect with tokenizer_type GPT2BPETokenizer (it reads "
                       "data.vocab_file and data.merge_file; expected tokenizer_type "
                       "HuggingFaceTokenizer or SentencePieceTokenizer)");
  if (!gpt2 && !d->tokenizer_model[0])
    return mt_cfg_fail(c, key("data.tokenizer_type"),
                       "%s needs data.tokenizer_model (the %s)", d->tokenizer_type,
                       strcmp(d->tokenizer_type, "SentencePieceTokenizer")
                           ? "tokenizer.json or the folder holding it"
                           : "SentencePiece tokenizer.model file");
  for (int i = 0; i < 2 && !gpt2; i++) {
    const char *k = i ? "data.merge_file" : "data.vocab_file";
    if ((i ? d->merge_file : d->vocab_file)[0])
      return mt_cfg_fail(c, key(k), "has no effect with tokenizer_type %s (expected it only "
                         "with GPT2BPETokenizer)", d->tokenizer_type);
  }
  if (d->mid_level_dataset_surplus != 0.005f && !d->weighted) /* not the default */
    return mt_cfg_fail(c, key("data.mid_level_dataset_surplus"),
                       "has no effect without the weighted data_path form (expected "
                       "[w1, \"prefix1\", w2, \"prefix2\", ...]: Megatron builds a "
                       "surplus only for weighted blends)");
  return 0;
}

static void note(mt_cfg_ctx *c, const char *msg) {
  size_t used = strlen(c->notes);
  snprintf(c->notes + used, sizeof c->notes - used, "%s%s", used ? "\n" : "", msg);
}

/* Context parallelism (Megatron's validate_args and its CP attention):
 * cp_comm_type "p2p" only; seq_length a multiple of 2·cp (the load-balanced
 * chunks), and of 2·cp·tp with sequence parallelism (each chunk is cut
 * again over tp). Megatron asserts the first; the second is its SP rule
 * (seq_length % tp) applied to the chunks. */
static int check_context_parallel(mt_cfg_ctx *c, const mt_config *cfg) {
  const mt_parallel_config *p = &cfg->parallel;
  const int cp = p->context_parallel_size, tp = p->tensor_model_parallel_size;
  const int s = cfg->model.seq_length;
  if (strcmp(p->cp_comm_type, "p2p") != 0)
    return mt_cfg_fail(c, key("parallel.cp_comm_type"),
                       "\"%s\" is not implemented (expected \"p2p\": K/V blocks travel around "
                       "the context-parallel ring; Megatron's a2a, allgather and a2a+p2p are not "
                       "available)",
                       p->cp_comm_type);
  if (cp == 1) return 0;
  if (s % (2 * cp))
    return mt_cfg_fail(c, key("model.seq_length"),
                       "%d is not divisible by 2 x context_parallel_size = %d (expected a multiple: "
                       "each sequence is cut into 2·cp chunks, CP rank r holds chunks r and "
                       "2cp-1-r)",
                       s, 2 * cp);
  if (p->sequence_parallel && tp > 1 && s % (2 * cp * tp))
    return mt_cfg_fail(c, key("model.seq_length"),
                       "%d is not divisible by 2 x context_parallel_size x "
                       "tensor_model_parallel_size = %d (expected a multiple with "
                       "sequence_parallel: the two chunks of s/(2·cp) tokens of a CP rank are split "
                       "further over tp)",
                       s, 2 * cp * tp);
  return 0;
}

/* kv_given: model.kv_channels was set (then hidden_size need not be a
 * multiple of num_attention_heads, as in Megatron). */
static int check_layout(mt_cfg_ctx *c, mt_config *cfg, int world, int kv_given) {
  mt_model_config *m = &cfg->model;
  mt_parallel_config *p = &cfg->parallel;
  mt_training_config *t = &cfg->training;
  int tp = p->tensor_model_parallel_size, pp = p->pipeline_model_parallel_size;
  int vpp = p->virtual_pipeline_model_parallel_size;
  int cp = p->context_parallel_size;
  int dp = data_parallel(cfg, world);
  if (dp == 0 && cp > 1)
    return mt_cfg_fail(c, key("parallel.context_parallel_size"),
                       "tensor_model_parallel_size (%d) x context_parallel_size (%d) x "
                       "pipeline_model_parallel_size (%d) = %lld does not divide the world size %d "
                       "(expected the number of ranks to be a multiple of tp x cp x pp; "
                       "data-parallel size = world / (tp x cp x pp))",
                       tp, cp, pp, (long long)tp * cp * pp, world);
  if (dp == 0)
    return mt_cfg_fail(c,
                       key(tp == 1 ? "parallel.pipeline_model_parallel_size"
                                   : "parallel.tensor_model_parallel_size"),
                       "tensor_model_parallel_size (%d) x pipeline_model_parallel_size (%d) = %lld "
                       "does not divide the world size %d (expected the number of ranks to be a "
                       "multiple of tp x pp; data-parallel size = world / (tp x pp))",
                       tp, pp, (long long)tp * pp, world);
  if (check_context_parallel(c, cfg)) return 2;
  if (!kv_given && m->hidden_size % m->num_attention_heads)
    return mt_cfg_fail(c, key("model.num_attention_heads"),
                       "hidden_size (%d) is not divisible by num_attention_heads (%d) (expected a "
                       "divisor of hidden_size, or model.kv_channels set explicitly)",
                       m->hidden_size, m->num_attention_heads);
  if (m->num_attention_heads % tp)
    return mt_cfg_fail(c, key("model.num_attention_heads"),
                       "%d heads cannot be split over tensor_model_parallel_size %d (expected a "
                       "multiple of tp)",
                       m->num_attention_heads, tp);
  if (m->ffn_hidden_size % tp)
    return mt_cfg_fail(c, key("model.ffn_hidden_size"),
                       "%d is not divisible by tensor_model_parallel_size %d (expected a multiple "
                       "of tp)",
                       m->ffn_hidden_size, tp);
  int nf = p->num_layers_in_first_pipeline_stage, nl = p->num_layers_in_last_pipeline_stage;
  if ((nf > 0 || nl > 0) && pp == 1)
    return mt_cfg_fail(c, key(nf > 0 ? "parallel.num_layers_in_first_pipeline_stage"
                                     : "parallel.num_layers_in_last_pipeline_stage"),
                       "needs pipeline_model_parallel_size > 1");
  if ((nf > 0 || nl > 0) && vpp > 1)
    return mt_cfg_fail(c, key(nf > 0 ? "parallel.num_layers_in_first_pipeline_stage"
                                     : "parallel.num_layers_in_last_pipeline_stage"),
                       "uneven pipeline stages are not supported with the interleaved schedule "
                       "(expected virtual_pipeline_model_parallel_size 1)");
  if (nf > 0 || nl > 0) {
    /* stages without an explicit count share the remaining layers equally */
    int n_free = pp - (nf > 0) - (nl > 0);
    int rest = m->num_layers - (nf > 0 ? nf : 0) - (nl > 0 ? nl : 0);
    if (rest < 0 || (n_free == 0 && rest != 0) || (n_free > 0 && (rest % n_free || rest == 0)))
      return mt_cfg_fail(c, key(nf > 0 ? "parallel.num_layers_in_first_pipeline_stage"
                                       : "parallel.num_layers_in_last_pipeline_stage"),
                         "first %d + last %d layers leave %d of num_layers %d for %d other "
                         "stage(s) (expected an equal positive share per stage)",
                         nf, nl, rest, m->num_layers, n_free);
  } else if (m->num_layers % pp)
    return mt_cfg_fail(c, key("model.num_layers"),
                       "%d layers cannot be split over pipeline_model_parallel_size %d (expected "
                       "a multiple of pp, or parallel.num_layers_in_first/last_pipeline_stage)",
                       m->num_layers, pp);
  if (vpp > 1 && pp == 1)
    return mt_cfg_fail(c, key("parallel.virtual_pipeline_model_parallel_size"),
                       "%d needs pipeline_model_parallel_size > 1 (expected 1 without pipelining)",
                       vpp);
  if (nf == 0 && nl == 0 && m->num_layers % ((int64_t)pp * vpp))
    return mt_cfg_fail(c, key("parallel.virtual_pipeline_model_parallel_size"),
                       "num_layers (%d) is not divisible by pipeline_model_parallel_size (%d) x "
                       "virtual_pipeline_model_parallel_size (%d) (expected equal chunks)",
                       m->num_layers, pp, vpp);
  /* a limit of the trainer, checked here so that `megatrain plan` / --sweep
   * and `megatrain topology` refuse the same layouts training refuses */
  if (p->zero_stage >= 2 && pp > 1)
    return mt_cfg_fail(c, key("parallel.zero_stage"),
                       "zero_stage %d with pipeline parallelism is not implemented yet "
                       "(pipeline_model_parallel_size %d): use zero_stage 0 or 1 with pipelines",
                       p->zero_stage, pp);
  if (m->seq_length > m->max_position_embeddings)
    return mt_cfg_fail(c, key("model.seq_length"),
                       "%d is larger than max_position_embeddings %d (expected seq_length <= "
                       "max_position_embeddings)",
                       m->seq_length, m->max_position_embeddings);
  if (p->sequence_parallel && tp == 1) {
    p->sequence_parallel = 0;
    note(c, "parallel.sequence_parallel: ignored because tensor_model_parallel_size is 1 "
            "(as in Megatron)");
  }
  if (p->sequence_parallel && m->seq_length % tp)
    return mt_cfg_fail(c, key("parallel.sequence_parallel"),
                       "seq_length (%d) is not divisible by tensor_model_parallel_size (%d) "
                       "(expected a multiple of tp with sequence parallelism)",
                       m->seq_length, tp);
  int64_t per_step = (int64_t)t->micro_batch_size * dp;
  if (t->global_batch_size % per_step)
    return mt_cfg_fail(c, key("training.global_batch_size"),
                       "%d is not divisible by micro_batch_size (%d) x data-parallel size (%d) = "
                       "%lld (expected a multiple of it)",
                       t->global_batch_size, t->micro_batch_size, dp, (long long)per_step);
  int64_t n_micro = t->global_batch_size / per_step;
  if (vpp > 1 && n_micro % pp)
    return mt_cfg_fail(c, key("training.global_batch_size"),
                       "gives %lld micro-batches per step, which the interleaved schedule "
                       "(virtual_pipeline_model_parallel_size %d) needs to be a multiple of "
                       "pipeline_model_parallel_size %d",
                       (long long)n_micro, vpp, pp);
  if (m->recompute_granularity[0] && strcmp(m->recompute_granularity, "full") == 0 &&
      m->recompute_num_layers > m->num_layers / pp)
    return mt_cfg_fail(c, key("model.recompute_num_layers"),
                       "%d is more than the %d layers of a pipeline stage (expected 1..%d)",
                       m->recompute_num_layers, m->num_layers / pp, m->num_layers / pp);
  return 0;
}

/* norm_epsilon and its older name layernorm_epsilon: the one given wins,
 * both given must agree; afterwards both fields hold the value. */
static int resolve_norm_epsilon(mt_cfg_ctx *c, mt_model_config *m) {
  int kn = key("model.norm_epsilon"), kl = key("model.layernorm_epsilon");
  if (c->present[kn] && c->present[kl] && m->norm_epsilon != m->layernorm_epsilon)
    return mt_cfg_fail(c, kl,
                       "%g differs from norm_epsilon %g (expected only one of the two: "
                       "layernorm_epsilon is the older name of norm_epsilon)",
                       (double)m->layernorm_epsilon, (double)m->norm_epsilon);
  if (c->present[kl] && !c->present[kn]) m->norm_epsilon = m->layernorm_epsilon;
  m->layernorm_epsilon = m->norm_epsilon;
  return 0;
}

/* A RoPE-only key holding another value than its default without
 * position_embedding_type "rope": refused (Megatron ignores it silently). */
static int rope_only(mt_cfg_ctx *c, const mt_model_config *m, const char *name, double v) {
  int k = key(name);
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  if (v == (double)(float)kd->def) return 0;
  char got[32], def[32];
  snprintf(got, sizeof got, "%g", v);
  snprintf(def, sizeof def, "%g", kd->def);
  if (kd->type == MT_CT_BOOL) {
    snprintf(got, sizeof got, "%s", v != 0 ? "true" : "false");
    snprintf(def, sizeof def, "%s", kd->def != 0 ? "true" : "false");
  }
  return mt_cfg_fail(c, k,
                     "%s has no effect with position_embedding_type \"%s\" (expected "
                     "position_embedding_type \"rope\", or the default %s)",
                     got, m->position_embedding_type, def);
}

/* The Llama-style block options (docs/model.md): Megatron's rules, and
 * refusals of settings that would silently change nothing. */
static int check_block(mt_cfg_ctx *c, const mt_config *cfg) {
  const mt_model_config *m = &cfg->model;
  const int tp = cfg->parallel.tensor_model_parallel_size;
  const int np = m->num_attention_heads, ng = m->num_query_groups, hn = m->kv_channels;
  if (strcmp(m->position_embedding_type, "rope") != 0) {
    if (rope_only(c, m, "model.rotary_base", m->rotary_base) ||
        rope_only(c, m, "model.rotary_percent", m->rotary_percent) ||
        rope_only(c, m, "model.rotary_interleaved", m->rotary_interleaved))
      return 2;
  } else {
    /* Megatron's RotaryEmbedding: dim = int(kv_channels * rotary_percent)
     * when rotary_percent < 1; it rotates dim / 2 channel pairs. */
    int d = mt_rotary_dim(hn, m->rotary_percent);
    const char *k = m->rotary_percent < 1.0f ? "model.rotary_percent" : "model.kv_channels";
    if (d < 2 || d % 2)
      return mt_cfg_fail(c, key(k),
                         "kv_channels (%d) x rotary_percent (%g) gives %d rotated channels "
                         "(expected an even number >= 2: RoPE turns channel pairs)",
                         hn, (double)m->rotary_percent, d);
  }
  if (!m->group_query_attention && ng != np)
    return mt_cfg_fail(c, key("model.num_query_groups"),
                       "%d needs model.group_query_attention true (expected num_attention_heads "
                       "%d without it: every head has its own K/V; Megatron would ignore the key)",
                       ng, np);
  if (ng > np || np % ng)
    return mt_cfg_fail(c, key("model.num_query_groups"),
                       "%d does not divide num_attention_heads %d (expected a divisor: each K/V "
                       "group serves num_attention_heads / num_query_groups query heads)",
                       ng, np);
  if (ng % tp)
    return mt_cfg_fail(c, key("model.num_query_groups"),
                       "%d K/V group(s)%s cannot be split over tensor_model_parallel_size %d "
                       "(expected a multiple of tp: each rank holds whole groups; replicating "
                       "K/V heads over ranks is not implemented)",
                       ng, c->present[key("model.num_query_groups")] ? "" : " (the default: MQA)",
                       tp);
  if (m->qk_layernorm && hn < 2)
    return mt_cfg_fail(c, key("model.qk_layernorm"),
                       "needs kv_channels >= 2 (got %d: normalising a single channel makes "
                       "every query and key a constant)",
                       hn);
  return 0;
}

/* Router options that would silently do nothing (docs/moe.md "Router
 * options"); the group-limited routing sizes are checked in check_moe. */
static int check_moe_router(mt_cfg_ctx *c, const mt_model_config *m) {
  const int sigmoid = !strcmp(m->moe_router_score_function, "sigmoid");
  if (sigmoid && m->moe_router_pre_softmax)
    return mt_cfg_fail(c, key("model.moe_router_pre_softmax"),
                       "has no effect with moe_router_score_function \"sigmoid\" (expected false: "
                       "the sigmoid scores are always taken before the top-k)");
  /* a rate other than the default: the canonical JSON of a resolved config
   * (mt_config.json: checkpoints, `plan --sweep`) carries the default 1e-3,
   * and must load again */
  if (!m->moe_router_enable_expert_bias && c->present[key("model.moe_router_bias_update_rate")] &&
      m->moe_router_bias_update_rate != 1e-3f)
    return mt_cfg_fail(c, key("model.moe_router_bias_update_rate"),
                       "has no effect without model.moe_router_enable_expert_bias (expected "
                       "moe_router_enable_expert_bias true, or no update rate)");
  if (!strcmp(m->moe_router_load_balancing_type, "none") && m->moe_aux_loss_coeff > 0)
    return mt_cfg_fail(c, key("model.moe_aux_loss_coeff"),
                       "%g has no effect with moe_router_load_balancing_type \"none\" (expected 0, "
                       "or aux_loss|seq_aux_loss|global_aux_loss)",
                       (double)m->moe_aux_loss_coeff);
  return 0;
}

static int check_moe(mt_cfg_ctx *c, const mt_config *cfg, int world) {
  const mt_model_config *m = &cfg->model;
  const mt_parallel_config *p = &cfg->parallel;
  int ep = p->expert_model_parallel_size, etp = p->expert_tensor_parallel_size;
  int tp = p->tensor_model_parallel_size, pp = p->pipeline_model_parallel_size;
  if (m->num_experts == 0) {
    if (ep > 1)
      return mt_cfg_fail(c, key("parallel.expert_model_parallel_size"),
                         "%d needs model.num_experts > 0 (expected 1 for a dense model)", ep);
    return 0;
  }
  if (m->moe_router_topk > m->num_experts)
    return mt_cfg_fail(c, key("model.moe_router_topk"),
                       "%d is more than num_experts %d (expected 1..num_experts)",
                       m->moe_router_topk, m->num_experts);
  if (m->num_experts % ep)
    return mt_cfg_fail(c, key("parallel.expert_model_parallel_size"),
                       "%d does not divide num_experts %d (expected a divisor of num_experts)", ep,
                       m->num_experts);
  int64_t egroup = (int64_t)etp * ep * pp;
  if (world % egroup)
    return mt_cfg_fail(c, key("parallel.expert_model_parallel_size"),
                       "expert_tensor_parallel_size (%d) x expert_model_parallel_size (%d) x "
                       "pipeline_model_parallel_size (%d) = %lld does not divide the world size "
                       "%d (expected a divisor)",
                       etp, ep, pp, (long long)egroup, world);
  if (m->moe_ffn_hidden_size % etp)
    return mt_cfg_fail(c, key("model.moe_ffn_hidden_size"),
                       "%d is not divisible by expert_tensor_parallel_size %d (expected a "
                       "multiple)",
                       m->moe_ffn_hidden_size, etp);
  if (etp > 1 && m->add_bias_linear)
    return mt_cfg_fail(c, key("model.add_bias_linear"),
                       "true is not supported with MoE and expert_tensor_parallel_size %d "
                       "(expected false: as in Megatron, expert biases need "
                       "expert_tensor_parallel_size 1)",
                       etp);
  /* Megatron requires SP for ep > 1 with tp > 1; this build also for ep = 1,
   * since each TP rank routes and dispatches its own sequence shard */
  if (tp > 1 && !p->sequence_parallel)
    return mt_cfg_fail(c, key("parallel.sequence_parallel"),
                       "must be true for MoE (model.num_experts %d) with "
                       "tensor_model_parallel_size %d (expected true: each TP rank routes its "
                       "own sequence shard; Megatron requires it when expert_model_parallel_size "
                       "> 1 too)",
                       m->num_experts, tp);
  if (m->moe_layer_pattern_len > 0 && m->moe_layer_pattern_len != m->num_layers)
    return mt_cfg_fail(c, key("model.moe_layer_freq"),
                       "list has %d entries but num_layers is %d (expected one 0/1 entry per "
                       "layer)",
                       m->moe_layer_pattern_len, m->num_layers);
  const int E = m->num_experts, k = m->moe_router_topk;
  const int ng = m->moe_router_num_groups, gk = m->moe_router_group_topk;
  if (gk && !ng)
    return mt_cfg_fail(c, key("model.moe_router_group_topk"),
                       "%d needs model.moe_router_num_groups (expected both set for "
                       "group-limited routing, or both null)",
                       gk);
  if (ng && !gk)
    return mt_cfg_fail(c, key("model.moe_router_num_groups"),
                       "%d needs model.moe_router_group_topk (expected both set for "
                       "group-limited routing, or both null)",
                       ng);
  if (ng) {
    if (E % ng)
      return mt_cfg_fail(c, key("model.moe_router_num_groups"),
                         "%d does not divide num_experts %d (expected equal-sized expert groups)",
                         ng, E);
    if (gk > ng)
      return mt_cfg_fail(c, key("model.moe_router_group_topk"),
                         "%d is more than moe_router_num_groups %d (expected 1..num_groups)", gk,
                         ng);
    if (k < gk || k > gk * (E / ng))
      return mt_cfg_fail(c, key("model.moe_router_topk"),
                         "%d cannot be picked from moe_router_group_topk %d group(s) of %d "
                         "experts (expected group_topk <= topk <= group_topk x "
                         "num_experts / num_groups = %d)",
                         k, gk, E / ng, gk * (E / ng));
  }
  int rc = check_moe_router(c, m);
  if (rc) return rc;
  if (m->moe_shared_expert_intermediate_size % tp)
    return mt_cfg_fail(c, key("model.moe_shared_expert_intermediate_size"),
                       "%d is not divisible by tensor_model_parallel_size %d (expected a "
                       "multiple: the shared expert is split over TP like the dense MLP)",
                       m->moe_shared_expert_intermediate_size, tp);
  if (m->moe_pad_expert_input_to_capacity && !(m->moe_expert_capacity_factor > 0))
    return mt_cfg_fail(c, key("model.moe_pad_expert_input_to_capacity"),
                       "needs model.moe_expert_capacity_factor > 0 (expected false when dropless)");
  return 0;
}

/* What training on cfg->device needs (not applied when a config is only
 * planned, shown or converted: those may describe a GPU run). Nothing is
 * refused today: both backends train in fp32 and in bf16 (the cpu backend
 * stores bf16 too since issue 19: cpu_bf16_ops, cpu/cpu_backend.c). */
int mt_config_check_trainable(const mt_config *cfg, char *err, size_t errlen) {
  (void)cfg, (void)err, (void)errlen;
  return 0;
}

int mt_cfg_check(mt_cfg_ctx *c, mt_config *cfg, int world_size) {
  if (world_size < 1) world_size = 1;
  mt_model_config *m = &cfg->model;
  const int kv_given = m->kv_channels != 0, ffn_given = m->ffn_hidden_size != 0;
  mt_cfg_derive(cfg, world_size);
  if (resolve_norm_epsilon(c, m)) return 2;
  if (!ffn_given && m->swiglu && m->ffn_hidden_size == 0 && m->hidden_size >= 1)
    return mt_cfg_fail(c, key("model.ffn_hidden_size"),
                       "derived as 0 for swiglu with hidden_size %d (Megatron's rule "
                       "floor(8 x hidden_size / 3 / 64) x 64; expected hidden_size >= 24 or "
                       "ffn_hidden_size set explicitly)",
                       m->hidden_size);
  if (check_ranges(c, cfg) || check_split(c, cfg->data.split) ||
      check_data_keys(c, &cfg->data) || mt_cfg_check_data_paths(c, cfg))
    return 2;
  if (!strcmp(cfg->parallel.distributed_backend, "nccl") && strcmp(cfg->device, "cuda"))
    return mt_cfg_fail(c, key("parallel.distributed_backend"),
                       "\"nccl\" with device \"%s\" (NCCL runs on GPUs; expected \"mpi\", or "
                       "device \"cuda\")",
                       cfg->device);
  if (check_layout(c, cfg, world_size, kv_given) || check_block(c, cfg) ||
      check_moe(c, cfg, world_size))
    return 2;
  if (cfg->data.reset_position_ids && strcmp(m->position_embedding_type, "learned_absolute"))
    return mt_cfg_fail(c, key("data.reset_position_ids"),
                       "true has no effect with position_embedding_type \"%s\" (it resets the "
                       "learned absolute positions; expected position_embedding_type "
                       "\"learned_absolute\", or false)",
                       m->position_embedding_type);
  const mt_training_config *t = &cfg->training;
  if (t->finetune && !cfg->checkpoint.load[0])
    note(c, "training.finetune is true but checkpoint.load is not set: finetune has no effect, "
            "the model trains from scratch (as in Megatron)");
  if (t->min_lr > t->lr)
    return mt_cfg_fail(c, key("training.min_lr"), "%g is larger than lr %g (expected min_lr <= lr)",
                       (double)t->min_lr, (double)t->lr);
  if (t->override_opt_param_scheduler && t->use_checkpoint_opt_param_scheduler)
    return mt_cfg_fail(c, key("training.override_opt_param_scheduler"),
                       "true together with training.use_checkpoint_opt_param_scheduler true "
                       "(expected at most one of the two: override = this config's LR schedule "
                       "wins on resume, use_checkpoint = the checkpoint's; Megatron asserts the "
                       "same)");
  if (t->lr_warmup_iters > t->lr_decay_iters)
    return mt_cfg_fail(c, key("training.lr_warmup_iters"),
                       "%lld is larger than lr_decay_iters %lld (expected warmup <= decay iters)",
                       (long long)t->lr_warmup_iters, (long long)t->lr_decay_iters);
  return mt_cfg_check_schedule(c, cfg);
}
