/* config/config_check.c — derived defaults, per-key ranges, and the driver
 * of the cross-key consistency rules (Megatron's validate_args() checks that
 * apply to megatrain). Every rule is a row of a table (its check, the key
 * its message names, its text in docs/config.md and a config that breaks
 * it): the layout rules in config_rules_layout.c, the model, MoE and training rules in
 * config_rules_model.c, the data rules in config_rules_data.c and the
 * optimizer schedule rules in config_rules_train.c. docs/config.md's rules are generated from these
 * rows and tests/unit/config/test_config_rules.c runs each row's example, so the
 * page lists exactly what is checked. Each failure writes one message naming
 * the key and returns 2. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/batch_rampup.h"
#include "config/config_internal.h"
#include "core/util.h"

static int clamp_int(int64_t v) { return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v; }

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
    int dp = mt_cfg_data_parallel(cfg, world);
    /* With an invalid layout the consistency check reports the layout. */
    t->global_batch_size = clamp_int((int64_t)t->micro_batch_size * (dp > 0 ? dp : 1));
  }
  /* Megatron's update_train_iters (no batch ramp-up) and
   * get_optimizer_param_scheduler's defaults */
  if (t->train_samples > 0 && t->train_iters == 0 && t->global_batch_size > 0) {
    const mt_batch_rampup r = mt_batch_rampup_make(t->rampup_batch_size, t->global_batch_size);
    t->train_iters = mt_batch_rampup_train_iters(&r, t->train_samples);
  }
  if (t->lr_decay_iters == 0) t->lr_decay_iters = t->train_iters;
  if (t->lr_decay_samples == 0) t->lr_decay_samples = t->train_samples;
}

static double numeric(const mt_config *cfg, int k) {
  const void *p = mt_cfg_cfield(cfg, k);
  switch (mt_cfg_keys[k].type) {
    case MT_CT_INT:
    case MT_CT_LAYER_FREQ: return *(const int *)p;
    case MT_CT_I64:
    case MT_CT_I64x3: return (double)*(const int64_t *)p; /* the first: 0 = off */
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

/* The rule tables in the order they run: layout, model (and MoE), data,
 * training. A new table is one more entry here. */
typedef const mt_cfg_rule *(*rule_table_fn)(int *n);
static const rule_table_fn k_tables[] = {mt_cfg_rules_layout, mt_cfg_rules_model,
                                         mt_cfg_rules_data, mt_cfg_rules_train,
                                         mt_cfg_rules_fp8, mt_cfg_rules_mtp};
enum { N_TABLES = (int)(sizeof k_tables / sizeof k_tables[0]) };

int mt_cfg_nrules(void) {
  int total = 0;
  for (int t = 0; t < N_TABLES; t++) {
    int n;
    k_tables[t](&n);
    total += n;
  }
  return total;
}

const mt_cfg_rule *mt_cfg_rule_at(int i) {
  for (int t = 0; t < N_TABLES && i >= 0; t++) {
    int n;
    const mt_cfg_rule *rows = k_tables[t](&n);
    if (i < n) return &rows[i];
    i -= n;
  }
  return NULL;
}

/* Run the rules of one phase in order; 0 or 2 (c->rule = the failing one). */
static int run_rules(mt_cfg_ctx *c, mt_config *cfg, int world, int before_ranges) {
  const int n = mt_cfg_nrules();
  for (int i = 0; i < n; i++) {
    const mt_cfg_rule *r = mt_cfg_rule_at(i);
    if (r->before_ranges != before_ranges) continue;
    const size_t notes = strlen(c->notes);
    if (r->check(c, cfg, world)) {
      c->rule = i;
      return 2;
    }
    if (strlen(c->notes) != notes) c->rule = i; /* a note rule that noted */
  }
  return 0;
}

/* What training on cfg->device needs (not applied when a config is only
 * planned, shown or converted: those may describe a GPU run). Both backends
 * train in fp32 and in bf16 (the cpu backend stores bf16 too since issue 19:
 * cpu_bf16_ops, cpu/cpu_backend.c). Multi-latent attention (model/gpt_mla.c)
 * trains on both backends (the cuda fused attention takes hv != hn on its
 * FFMA kernels, cuda/cuda_flash_simt.cu), with FP8 projections where FP8
 * runs (the cpu backend: r_fp8_scope). Nothing is refused here today. */
int mt_config_check_trainable(const mt_config *cfg, char *err, size_t errlen) {
  (void)cfg, (void)err, (void)errlen;
  return 0;
}

int mt_cfg_check(mt_cfg_ctx *c, mt_config *cfg, int world_size) {
  if (world_size < 1) world_size = 1;
  c->rule = -1;
  /* a saved config (mt_config_load_saved) carries the derived kv_channels;
   * with MLA it cannot have been given (r_mla_kv_channels) */
  c->kv_given = cfg->model.kv_channels != 0 && !(c->saved && cfg->model.multi_latent_attention);
  c->ffn_given = cfg->model.ffn_hidden_size != 0;
  if (c->saved) mt_cfg_drop_dead(c, cfg);
  mt_cfg_derive(cfg, world_size);
  if (run_rules(c, cfg, world_size, 1)) return 2;
  if (check_ranges(c, cfg) || check_split(c, cfg->data.split)) return 2;
  return run_rules(c, cfg, world_size, 0);
}
