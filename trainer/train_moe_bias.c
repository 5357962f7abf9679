/* trainer/train_moe_bias.c — after every training step: the tokens-per-
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
    if (mt_gpt_moe_expert_bias(t->model, i)) {
      snprintf(b[n].name, sizeof b[n].name, "decoder.layers.%d.mlp.router.expert_bias", l);
      b[n].data = mt_gpt_moe_expert_bias(t->model, i);
      b[n].numel = E;
      b[n++].dtype = MT_F32;
    }
    snprintf(b[n].name, sizeof b[n].name, "decoder.layers.%d.mlp.router.tokens_per_expert", l);
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
