/* model/gpt_fp8.c — the checkpoint listing of the FP8 linear
 * layers' delayed-scaling state (see gpt.h mt_gpt_fp8_meta,
 * model/fp8_linear.h). */
#include <stdio.h>

#include "model/gpt_internal.h"
#include "model/gpt_mla.h"

/* Checkpoint names of the MT_GPT_FP8_* linears under their layer prefix. */
static const char *const k_lin[MT_GPT_FP8_EH_PROJ] = {
    "self_attention.linear_qkv",        "self_attention.linear_proj",
    "mlp.linear_fc1",                   "mlp.linear_fc2",
    "mlp.shared_experts.linear_fc1",    "mlp.shared_experts.linear_fc2",
    "self_attention.linear_q_proj",     "self_attention.linear_q_down_proj",
    "self_attention.linear_q_up_proj",  "self_attention.linear_kv_down_proj",
    "self_attention.linear_kv_up_proj"};

/* One FP8 linear of this rank: its state's object and key, its name. */
typedef struct {
  mt_fp8_linear *f;
  int key, expert;
  char name[2 * MT_PARAM_NAME_MAX];
} fp8_item;

/* The linears of global layer l in the order its forward runs them; *i
 * counts down to the wanted one (found: 1, *it filled). */
static int layer_items(mt_gpt *m, int l, int *i, fp8_item *it) {
  const mt_gpt_config *c = &m->cfg;
  char pre[MT_PARAM_NAME_MAX];
  mt_gpt_layer_name(c, l, pre, sizeof pre);
  int ks[8], nk = 0;
  if (l >= c->model.num_layers) ks[nk++] = MT_GPT_FP8_EH_PROJ; /* MTP depth: eh_proj first */
  if (!m->mla) {
    ks[nk++] = MT_GPT_FP8_QKV;
  } else {
    if (m->mla->qr > 0) ks[nk++] = MT_GPT_FP8_Q_DOWN, ks[nk++] = MT_GPT_FP8_Q_UP;
    else ks[nk++] = MT_GPT_FP8_Q_PROJ;
    ks[nk++] = MT_GPT_FP8_KV_DOWN, ks[nk++] = MT_GPT_FP8_KV_UP;
  }
  ks[nk++] = MT_GPT_FP8_PROJ;
  const int moe = mt_gpt_is_moe_layer(c, l);
  if (!moe) ks[nk++] = MT_GPT_FP8_FC1, ks[nk++] = MT_GPT_FP8_FC2;
  else if (c->model.moe_shared_expert_intermediate_size > 0)
    ks[nk++] = MT_GPT_FP8_SHARED_FC1, ks[nk++] = MT_GPT_FP8_SHARED_FC2;
  if (*i < nk) {
    const int k = ks[*i];
    it->f = m->tp.fp8, it->key = mt_gpt_fp8_key(l, k), it->expert = 0;
    if (k == MT_GPT_FP8_EH_PROJ)
      snprintf(it->name, sizeof it->name, "mtp.layers.%d.eh_proj", l - c->model.num_layers);
    else
      snprintf(it->name, sizeof it->name, "%s.%s", pre, k_lin[k]);
    return 1;
  }
  *i -= nk;
  if (!moe || !m->moe.fp8) return 0;
  /* the routed experts of this rank (global index), fc1 and fc2 each */
  const int El = c->model.num_experts / c->ep_size, e0 = c->ep_rank * El;
  if (*i < 2 * El) {
    const int e = e0 + *i / 2, fc = *i % 2;
    it->f = m->moe.fp8, it->key = mt_gpt_fp8_expert_key(c, l, fc, e), it->expert = 1;
    snprintf(it->name, sizeof it->name, "%s.mlp.experts.%d.linear_fc%d", pre, e, fc + 1);
    return 1;
  }
  *i -= 2 * El;
  return 0;
}

/* The FP8 layers the chunks run (gpt_block.c fp8_layer), then the MTP
 * depths on this rank (always FP8: Megatron's global FP8 context). */
static int find_item(mt_gpt *m, int i, fp8_item *it) {
  const mt_gpt_config *c = &m->cfg;
  for (int ci = 0; ci < m->n_chunks; ci++)
    for (int j = 0; j < m->chunks[ci].n_layers; j++) {
      const int l = m->chunks[ci].first_layer + j;
      if (l < c->fp8_bf16_start || l >= c->model.num_layers - c->fp8_bf16_end) continue;
      if (layer_items(m, l, &i, it)) return 1;
    }
  for (int d = 0; d < m->n_mtp; d++)
    if (layer_items(m, c->model.num_layers + d, &i, it)) return 1;
  return 0;
}

int mt_gpt_fp8_meta(mt_gpt *m, int i, char *name, size_t n, float **data, int64_t *numel,
                    int *expert) {
  const mt_gpt_config *c = &m->cfg;
  if (!m->tp.fp8 || c->fp8_options.recipe != MT_FP8_RECIPE_DELAYED || i < 0) return 0;
  static const char *const role[3] = {"input", "weight", "grad_output"};
  fp8_item it;
  int k = i / 3;
  if (!find_item(m, k, &it)) return 0;
  snprintf(name, n, "%s.fp8_meta.%s", it.name, role[i % 3]);
  *data = mt_fp8_linear_meta(it.f, it.key, i % 3);
  *numel = mt_fp8_linear_meta_len(it.f);
  *expert = it.expert;
  return 1;
}
