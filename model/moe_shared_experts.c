/* model/moe_shared_experts.c — shared experts of an MoE layer (see
 * moe_shared_experts.h): a dense, TP-sharded MLP through the column/row
 * parallel layers of model/tensor_parallel.h. */
#include "model/moe_shared_experts.h"

#include <stdio.h>

#include "core/util.h"

enum { SH_FC1_W = 0, SH_FC1_B, SH_FC2_W, SH_FC2_B };

void mt_moe_shared_register(mt_gpt *m, int li, int l) {
  const mt_gpt_config *c = &m->cfg;
  int *ix = m->moe_shared_p[li];
  for (int j = 0; j < 4; j++) ix[j] = -1;
  if (c->moe_shared_expert_intermediate_size <= 0) return;
  mt_param_list *pl = &m->params;
  const int64_t h = c->hidden_size, S = c->moe_shared_expert_intermediate_size, Sl = m->shl;
  const int64_t g = m->glu, r0 = (int64_t)c->tp_rank * Sl;
  static const char *nm[4] = {"linear_fc1.weight", "linear_fc1.bias", "linear_fc2.weight",
                              "linear_fc2.bias"};
  /* global [rows, cols], local [rows, cols], offsets [row, col] (as the dense MLP) */
  const int64_t shp[4][6] = {{g * S, h, g * Sl, h, r0, 0},
                             {1, g * S, 1, g * Sl, 0, r0},
                             {h, S, h, Sl, 0, r0},
                             {1, h, 1, h, 0, 0}};
  const mt_init_kind init[4] = {MT_INIT_NORMAL, MT_INIT_ZEROS, MT_INIT_SCALED, MT_INIT_ZEROS};
  char name[MT_PARAM_NAME_MAX];
  for (int j = 0; j < 4; j++) {
    if ((j & 1) && c->disable_bias_linear) continue;
    snprintf(name, sizeof name, "decoder.layers.%d.mlp.shared_experts.%s", l, nm[j]);
    const int64_t *q = shp[j];
    const int replicated = q[0] == q[2] && q[1] == q[3];
    ix[j] = mt_params_add(pl, name, q[0], q[1], q[2], q[3], q[4], q[5], init[j], q[0] == 1,
                          replicated);
    pl->p[ix[j]].halves = g == 2 && j <= SH_FC1_B;
  }
}

static void *act(mt_gpt *m, int64_t n) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(m->be->dtype), MT_MEM_ACT);
}

void mt_moe_shared_alloc_acts(mt_gpt *m, mt_layer_acts *a) {
  a->sh_fc1 = a->sh_act = NULL;
  if (m->cfg.moe_shared_expert_intermediate_size <= 0) return;
  a->sh_fc1 = act(m, m->rows * m->glu * m->shl);
  a->sh_act = act(m, m->rows * m->shl);
}

void mt_moe_shared_free_acts(mt_gpt *m, mt_layer_acts *a) {
  m->be->ops->free(m->be, a->sh_fc1);
  m->be->ops->free(m->be, a->sh_act);
  a->sh_fc1 = a->sh_act = NULL;
}

#define SW(j) (ix[j] >= 0 ? mt_gpt_param_ptr(m, ix[j]) : NULL)
#define SG(j) (ix[j] >= 0 ? mt_gpt_grad_ptr(m, ix[j]) : NULL)

void mt_moe_shared_forward(mt_gpt *m, int li, mt_layer_acts *a, void *out) {
  const int *ix = m->moe_shared_p[li];
  if (ix[SH_FC1_W] < 0) return;
  mt_backend *be = m->be;
  const int64_t h = m->cfg.hidden_size, Sl = m->shl;
  mt_column_parallel_linear_fwd(&m->tp, a->sh_fc1, a->ln2, SW(SH_FC1_W), SW(SH_FC1_B),
                                m->glu * Sl, h);
  if (m->glu == 2)
    be->ops->swiglu_fwd(be, a->sh_act, a->sh_fc1, m->rows, Sl);
  else
    be->ops->gelu_fwd(be, a->sh_act, a->sh_fc1, m->rows * Sl);
  mt_row_parallel_linear_fwd(&m->tp, m->sh_out, a->sh_act, SW(SH_FC2_W), SW(SH_FC2_B), h, Sl);
  be->ops->add(be, out, out, m->sh_out, m->rows_l * h);
}

void mt_moe_shared_backward(mt_gpt *m, int li, mt_layer_acts *a, void *dy, const void *dx_routed) {
  const int *ix = m->moe_shared_p[li];
  mt_backend *be = m->be;
  const int64_t h = m->cfg.hidden_size, Sl = m->shl;
  if (ix[SH_FC1_W] < 0) {
    be->ops->memcpy_d2d(be, dy, dx_routed, (size_t)(m->rows_l * h) * mt_dtype_size(be->dtype));
    return;
  }
  /* dffn / dact are the dense MLP's workspaces, sized for max(ffn, S) / tp */
  if (m->glu == 2) {
    mt_row_parallel_linear_bwd(&m->tp, m->dact, SG(SH_FC2_W), SG(SH_FC2_B), dy, a->sh_act,
                               SW(SH_FC2_W), h, Sl);
    be->ops->swiglu_bwd(be, m->dffn, m->dact, a->sh_fc1, m->rows, Sl);
  } else {
    mt_row_parallel_linear_bwd(&m->tp, m->dffn, SG(SH_FC2_W), SG(SH_FC2_B), dy, a->sh_act,
                               SW(SH_FC2_W), h, Sl);
    be->ops->gelu_bwd(be, m->dffn, a->sh_fc1, m->dffn, m->rows * Sl);
  }
  /* dy is consumed: the column-parallel backward overwrites it with dx */
  mt_column_parallel_linear_bwd(&m->tp, dy, SG(SH_FC1_W), SG(SH_FC1_B), m->dffn, a->ln2,
                                SW(SH_FC1_W), m->glu * Sl, h);
  be->ops->add(be, dy, dy, dx_routed, m->rows_l * h);
}
