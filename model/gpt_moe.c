/* model/gpt_moe.c — the model's MoE bookkeeping: which layers are MoE
 * layers and their MoE-layer index, and the expert-bias state of
 * aux-loss-free load balancing with the last global batch's tokens per
 * expert (see model/gpt.h "aux-loss-free load balancing"; docs/moe.md
 * "Expert bias"). */
#include <stdlib.h>

#include "core/util.h"
#include "model/gpt.h"
#include "model/gpt_internal.h"
#include "model/moe_router.h"

/* The MTP depths' layers (global indices num_layers .. num_layers + D - 1)
 * are of the last decoder layer's kind, as Megatron builds them from the
 * decoder's last layer spec. */
int mt_gpt_is_moe_layer(const mt_gpt_config *c, int l) {
  const int L = c->model.num_layers;
  if (l >= L && l < L + c->model.mtp_num_layers) return mt_model_is_moe_layer(&c->model, L - 1);
  return mt_model_is_moe_layer(&c->model, l);
}

int mt_gpt_moe_layer_index(const mt_gpt_config *c, int l) {
  if (!mt_gpt_is_moe_layer(c, l)) return -1;
  int n = 0;
  for (int j = 0; j < l; j++) n += mt_gpt_is_moe_layer(c, j);
  return n;
}

int mt_gpt_num_moe_layers(const mt_gpt_config *c) {
  int n = 0;
  for (int l = 0; l < c->model.num_layers + c->model.mtp_num_layers; l++)
    n += mt_gpt_is_moe_layer(c, l);
  return n;
}

void mt_gpt_moe_bias_init(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  if (c->model.num_experts <= 0) return;
  const int L = mt_gpt_num_moe_layers(c);
  const size_t n = (size_t)(L > 0 ? L : 1) * (size_t)c->model.num_experts;
  if (c->model.moe_router_enable_expert_bias) m->moe.bias = mt_xcalloc(n, sizeof(float));
  if (c->model.moe_router_enable_expert_bias || m->moe_lb_type == MT_MOE_LB_GLOBAL_AUX)
    m->moe.bias_counts = mt_xcalloc(n, sizeof(int64_t));
}

float *mt_gpt_moe_expert_bias(mt_gpt *m, int moe_layer) {
  if (!m->moe.bias || moe_layer < 0 || moe_layer >= mt_gpt_num_moe_layers(&m->cfg)) return NULL;
  return m->moe.bias + (size_t)moe_layer * m->cfg.model.num_experts;
}

int64_t *mt_gpt_moe_bias_counts(mt_gpt *m, int moe_layer) {
  if (!m->moe.bias_counts || moe_layer < 0 || moe_layer >= mt_gpt_num_moe_layers(&m->cfg))
    return NULL;
  return m->moe.bias_counts + (size_t)moe_layer * m->cfg.model.num_experts;
}

void mt_gpt_moe_update_expert_bias(mt_gpt *m, const int64_t *counts) {
  if (!m->moe.bias_counts) return;
  const int L = mt_gpt_num_moe_layers(&m->cfg), E = m->cfg.model.num_experts;
  const float rate = m->cfg.model.moe_router_bias_update_rate;
  for (int l = 0; l < L; l++) {
    const int64_t *n = counts + (size_t)l * E;
    for (int e = 0; e < E; e++) m->moe.bias_counts[(size_t)l * E + e] = n[e];
    if (!m->moe.bias) continue;
    float *b = m->moe.bias + (size_t)l * E;
    int64_t sum = 0;
    for (int e = 0; e < E; e++) sum += n[e];
    for (int e = 0; e < E; e++) {
      /* sign(sum/E − n_e) exactly, in integers (Megatron: fp32 mean) */
      const int64_t off = sum - (int64_t)E * n[e];
      const float sgn = off > 0 ? 1.0f : off < 0 ? -1.0f : 0.0f;
      const float step = sgn * rate;
      b[e] = b[e] + step;
    }
  }
}

int mt_gpt_moe_layer_is_local(const mt_gpt *m, int moe_layer) {
  for (int k = 0; k < m->n_chunks; k++)
    for (int l = m->chunks[k].first_layer; l < m->chunks[k].first_layer + m->chunks[k].n_layers;
         l++)
      if (mt_gpt_moe_layer_index(&m->cfg, l) == moe_layer) return l;
  for (int k = 0; k < m->n_mtp; k++) /* the MTP depths' layers (last stage) */
    if (mt_gpt_moe_layer_index(&m->cfg, m->cfg.model.num_layers + k) == moe_layer)
      return m->cfg.model.num_layers + k;
  return -1;
}
