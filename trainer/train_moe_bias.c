/* trainer/train_moe_bias.c — the MoE side of the trainer: the summary line
 * at start-up, the step's MoE statistics for the log, and after every
 * training step the tokens-per-
 * expert counts of the whole global batch (for the log) and the expert-bias
 * update of aux-loss-free balancing (model/gpt.h, docs/moe.md "Expert
 * bias"); the bias records of the JSONL and the replica check of the bias. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/util.h"
#include "trainer/train_internal.h"

void mt_trainer_moe_bias_step(mt_trainer *t) {
  const mt_moe_stats *st = mt_gpt_moe_stats(t->model);
  const int L = mt_gpt_num_moe_layers(mt_gpt_get_config(t->model));
  if (!st || L <= 0) return;
  const int E = st->E;
  const size_t n = (size_t)L * E;
  MT_ASSERT(st->n_layers >= L);
  if (!t->moe_tokens_per_expert) t->moe_tokens_per_expert = mt_xcalloc(2 * n, sizeof(int64_t));
  int64_t *v = t->moe_tokens_per_expert; /* [routed L·E | kept L·E] */
  memcpy(v, st->routed, n * sizeof(int64_t));
  memcpy(v + n, st->kept, n * sizeof(int64_t));
  /* micro-batches of other data x context parallel ranks (CP rank 0 recorded
   * each once) and layers of other stages; TP ranks hold the same counts */
  mt_allreduce(t->dp_group, v, (int64_t)(2 * n), MT_I64, MT_OP_SUM);
  mt_allreduce(t->ps->pp, v, (int64_t)(2 * n), MT_I64, MT_OP_SUM);
  mt_gpt_moe_update_expert_bias(t->model, v + n);
}

void mt_trainer_moe_log_fields(mt_trainer *t, mt_log_record *rec) {
  const mt_moe_stats *st = mt_gpt_moe_stats(t->model);
  const int L = mt_gpt_num_moe_layers(mt_gpt_get_config(t->model));
  if (!st || L <= 0 || !t->moe_tokens_per_expert) return;
  rec->moe_list_layers = L;
  rec->moe_E = st->E;
  rec->tokens_per_expert = t->moe_tokens_per_expert;
  rec->expert_bias = mt_gpt_moe_expert_bias(t->model, 0); /* all layers, contiguous */
}

int mt_trainer_check_expert_bias(mt_trainer *t, char *err, size_t errlen) {
  const int L = mt_gpt_num_moe_layers(mt_gpt_get_config(t->model));
  const float *b = L > 0 ? mt_gpt_moe_expert_bias(t->model, 0) : NULL;
  const int64_t *cnt = L > 0 ? mt_gpt_moe_bias_counts(t->model, 0) : NULL;
  if ((!b && !cnt) || !t->world || mt_group_size(t->world) < 2) return 0;
  const size_t n = (size_t)L * mt_gpt_get_config(t->model)->model.num_experts;
  /* every rank holds every layer's state: one hash over the world */
  uint64_t h = MT_FNV1A64_INIT;
  if (b) h = mt_fnv1a64(h, b, n * sizeof(float));
  if (cnt) h = mt_fnv1a64(h, cnt, n * sizeof(int64_t));
  int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
  mt_allreduce(t->world, &v[0], 1, MT_I64, MT_OP_MAX);
  mt_allreduce(t->world, &v[1], 1, MT_I64, MT_OP_MAX);
  if (v[0] != -v[1]) {
    snprintf(err, errlen, "the MoE expert biases (decoder.layers.L.mlp.router.expert_bias) or "
                          "the last global batch's tokens per expert differ across ranks "
                          "(hashes differ)");
    return -1;
  }
  return 0;
}

int mt_trainer_moe_ckpt_buffers(mt_trainer *t, mt_ckpt_buffer **out) {
  *out = NULL;
  const int L = mt_gpt_num_moe_layers(mt_gpt_get_config(t->model));
  const int E = mt_gpt_get_config(t->model)->model.num_experts;
  if (L <= 0 || !mt_gpt_moe_bias_counts(t->model, 0)) return 0;
  mt_ckpt_buffer *b = mt_xcalloc((size_t)2 * L, sizeof *b);
  int n = 0;
  for (int i = 0; i < L; i++) {
    const int l = mt_gpt_moe_layer_is_local(t->model, i);
    if (l < 0) continue;
    char pre[64]; /* decoder.layers.L or mtp.layers.K.mtp_model_layer */
    mt_gpt_layer_name(mt_gpt_get_config(t->model), l, pre, sizeof pre);
    if (mt_gpt_moe_expert_bias(t->model, i)) {
      snprintf(b[n].name, sizeof b[n].name, "%s.mlp.router.expert_bias", pre);
      b[n].data = mt_gpt_moe_expert_bias(t->model, i);
      b[n].numel = E;
      b[n++].dtype = MT_F32;
    }
    snprintf(b[n].name, sizeof b[n].name, "%s.mlp.router.tokens_per_expert", pre);
    b[n].data = mt_gpt_moe_bias_counts(t->model, i);
    b[n].numel = E;
    b[n++].dtype = MT_I64;
  }
  *out = b;
  return n;
}

void mt_trainer_moe_bias_after_load(mt_trainer *t) {
  const int L = mt_gpt_num_moe_layers(mt_gpt_get_config(t->model));
  const int E = mt_gpt_get_config(t->model)->model.num_experts;
  int64_t *cnt = L > 0 ? mt_gpt_moe_bias_counts(t->model, 0) : NULL;
  float *b = L > 0 ? mt_gpt_moe_expert_bias(t->model, 0) : NULL;
  if (!cnt || !t->ps->pp || mt_group_size(t->ps->pp) < 2) return;
  for (int i = 0; i < L; i++)
    if (mt_gpt_moe_layer_is_local(t->model, i) < 0) {
      if (b) memset(b + (size_t)i * E, 0, sizeof(float) * (size_t)E);
      memset(cnt + (size_t)i * E, 0, sizeof(int64_t) * (size_t)E);
    }
  /* each layer lives on one stage: x + 0 = x exactly */
  if (b) mt_allreduce(t->ps->pp, b, (int64_t)L * E, MT_F32, MT_OP_SUM);
  mt_allreduce(t->ps->pp, cnt, (int64_t)L * E, MT_I64, MT_OP_SUM);
}

/* MoE routing statistics of the step: per-layer dropped and routed slots,
 * balance and z losses summed over the data x context-parallel ranks
 * (different tokens) and the pipeline stages (different layers); TP ranks
 * hold identical copies. The tokens per expert come already reduced from
 * mt_trainer_moe_bias_step (t->moe_tokens_per_expert, routed part), which
 * runs first. Collective over dp x cp and pp. */
void mt_trainer_moe_step_stats(mt_trainer *t, mt_step_result *r) {
  const mt_moe_stats *st = mt_gpt_moe_stats(t->model);
  if (!st) return;
  const int L = st->n_layers, E = st->E;
  const int64_t *routed = t->moe_tokens_per_expert; /* [L·E], NULL without MoE layers */
  const size_t n = 5 * (size_t)L;
  double *v = mt_xcalloc(n, sizeof(double));
  for (int l = 0; l < L; l++) {
    double *w = v + 5 * (size_t)l;
    w[0] = (double)st->dropped[l];
    w[1] = (double)st->slots[l];
    w[2] = st->lb[l];
    w[3] = st->z[l];
    w[4] = (double)st->n_mb[l];
  }
  mt_allreduce(t->dp_group, v, (int64_t)n, MT_F64, MT_OP_SUM);
  mt_allreduce(t->ps->pp, v, (int64_t)n, MT_F64, MT_OP_SUM);
  double dropped = 0, slots = 0;
  r->n_moe_layers = L < 64 ? L : 64;
  for (int l = 0; l < L; l++) {
    const double *w = v + 5 * (size_t)l;
    double mx = 0;
    for (int e = 0; e < E && routed; e++)
      mx = (double)routed[(size_t)l * E + e] > mx ? (double)routed[(size_t)l * E + e] : mx;
    if (l < 64) {
      r->tokens_per_expert_max[l] = mx;
      r->tokens_per_expert_mean[l] = w[1] / E;
    }
    dropped += w[0];
    slots += w[1];
    if (w[4] > 0) {
      r->load_balancing_loss += w[2] / w[4];
      r->z_loss += w[3] / w[4];
    }
  }
  /* mean over the MoE layers, as Megatron's MoE metrics tracker reports them */
  if (L > 0) {
    r->load_balancing_loss /= L;
    r->z_loss /= L;
  }
  r->dropped_tokens = (int64_t)dropped;
  r->dropped_fraction = slots > 0 ? dropped / slots : 0.0;
  free(v);
}

/* One line describing the MoE layers (docs/moe.md). */
void mt_trainer_print_moe_summary(const mt_trainer *t) {
  const mt_model_config *m = &t->cfg->model;
  int n_moe = 0;
  for (int l = 0; l < m->num_layers; l++) n_moe += mt_config_is_moe_layer(t->cfg, l);
  mt_trainer_say(t, "> MoE: %d experts (top-%d, ffn %d) in %d of %d layers, %s scores", m->num_experts,
      m->moe_router_topk, m->moe_ffn_hidden_size, n_moe, m->num_layers,
      m->moe_router_score_function);
  if (m->moe_router_enable_expert_bias)
    mt_trainer_say(t, " + expert bias (rate %g)", (double)m->moe_router_bias_update_rate);
  if (m->moe_router_num_groups)
    mt_trainer_say(t, ", %d groups pick %d", m->moe_router_num_groups, m->moe_router_group_topk);
  mt_trainer_say(t, ", %s (coeff %g), z-loss coeff %g, ", m->moe_router_load_balancing_type,
      (double)m->moe_aux_loss_coeff, (double)m->moe_z_loss_coeff);
  if (m->moe_expert_capacity_factor > 0)
    mt_trainer_say(t, "capacity factor %g%s", (double)m->moe_expert_capacity_factor,
        m->moe_pad_expert_input_to_capacity ? " (padded)" : "");
  else
    mt_trainer_say(t, "dropless");
  if (m->moe_shared_expert_intermediate_size)
    mt_trainer_say(t, ", shared expert %d", m->moe_shared_expert_intermediate_size);
  mt_trainer_say(t, "%s\n", m->moe_grouped_gemm ? ", grouped GEMM" : "");
}
