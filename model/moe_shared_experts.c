/* model/moe_shared_experts.c — shared experts of an MoE layer (see
 * moe_shared_experts.h): a dense, TP-sharded MLP through the column/row
 * parallel layers of model/tensor_parallel.h. */
#include "model/moe_shared_experts.h"

#include "core/util.h"

static void *act(mt_gpt *m, int64_t n) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(m->be->dtype), MT_MEM_ACT);
}

void mt_moe_shared_alloc_acts(mt_gpt *m, mt_layer_acts *a) {
  a->sh_fc1 = a->sh_act = NULL;
  if (m->cfg.model.moe_shared_expert_intermediate_size <= 0) return;
  a->sh_fc1 = act(m, m->rows * m->glu * m->shl);
  a->sh_act = act(m, m->rows * m->shl);
}

void mt_moe_shared_free_acts(mt_gpt *m, mt_layer_acts *a) {
  m->be->ops->free(m->be, a->sh_fc1);
  m->be->ops->free(m->be, a->sh_act);
  a->sh_fc1 = a->sh_act = NULL;
}

void mt_moe_shared_forward_fc1(mt_gpt *m, const mt_mlp_tensors *w, mt_layer_acts *a) {
  if (!w->linear_fc1.weight) return;
  mt_backend *be = m->be;
  const int64_t h = m->cfg.model.hidden_size, Sl = m->shl;
  mt_gpt_fp8_select(m, m->fp8_l, MT_GPT_FP8_SHARED_FC1);
  mt_column_parallel_linear_fwd(&m->tp, a->sh_fc1, a->ln2, w->linear_fc1.weight,
                                w->linear_fc1.bias, m->glu * Sl, h);
  if (m->glu == 2)
    be->ops->swiglu_fwd(be, a->sh_act, a->sh_fc1, m->rows, Sl);
  else
    be->ops->gelu_fwd(be, a->sh_act, a->sh_fc1, m->rows * Sl);
}

void mt_moe_shared_forward_fc2(mt_gpt *m, const mt_mlp_tensors *w, mt_layer_acts *a) {
  if (!w->linear_fc1.weight) return;
  const int64_t h = m->cfg.model.hidden_size, Sl = m->shl;
  mt_gpt_fp8_select(m, m->fp8_l, MT_GPT_FP8_SHARED_FC2);
  mt_row_parallel_linear_fwd(&m->tp, m->ws.sh_out, a->sh_act, w->linear_fc2.weight,
                             w->linear_fc2.bias, h, Sl);
}

void mt_moe_shared_forward_add(mt_gpt *m, const mt_mlp_tensors *w, void *out) {
  if (!w->linear_fc1.weight) return;
  m->be->ops->add(m->be, out, out, m->ws.sh_out, m->rows_l * m->cfg.model.hidden_size);
}

void mt_moe_shared_forward(mt_gpt *m, const mt_mlp_tensors *w, mt_layer_acts *a, void *out) {
  mt_moe_shared_forward_fc1(m, w, a);
  mt_moe_shared_forward_fc2(m, w, a);
  mt_moe_shared_forward_add(m, w, out);
}

void mt_moe_shared_backward_own(mt_gpt *m, const mt_mlp_tensors *w, const mt_mlp_tensors *g,
                                mt_layer_acts *a, void *dy) {
  mt_backend *be = m->be;
  const int64_t h = m->cfg.model.hidden_size, Sl = m->shl;
  if (!w->linear_fc1.weight) return;
  /* dffn / dact are the dense MLP's workspaces, sized for max(ffn, S) / tp */
  mt_gpt_fp8_select(m, m->fp8_l, MT_GPT_FP8_SHARED_FC2);
  if (m->glu == 2) {
    mt_row_parallel_linear_bwd(&m->tp, m->ws.dact, g->linear_fc2.weight, g->linear_fc2.bias, dy,
                               a->sh_act, w->linear_fc2.weight, h, Sl);
    be->ops->swiglu_bwd(be, m->ws.dffn, m->ws.dact, a->sh_fc1, m->rows, Sl);
  } else {
    mt_row_parallel_linear_bwd(&m->tp, m->ws.dffn, g->linear_fc2.weight, g->linear_fc2.bias, dy,
                               a->sh_act, w->linear_fc2.weight, h, Sl);
    be->ops->gelu_bwd(be, m->ws.dffn, a->sh_fc1, m->ws.dffn, m->rows * Sl);
  }
  /* dy is consumed: the column-parallel backward overwrites it with dx */
  mt_gpt_fp8_select(m, m->fp8_l, MT_GPT_FP8_SHARED_FC1);
  mt_column_parallel_linear_bwd(&m->tp, dy, g->linear_fc1.weight, g->linear_fc1.bias, m->ws.dffn,
                                a->ln2, w->linear_fc1.weight, m->glu * Sl, h);
}

void mt_moe_shared_backward_add(mt_gpt *m, const mt_mlp_tensors *w, void *dy,
                                const void *dx_routed) {
  mt_backend *be = m->be;
  const int64_t h = m->cfg.model.hidden_size;
  if (!w->linear_fc1.weight)
    be->ops->memcpy_d2d(be, dy, dx_routed, (size_t)(m->rows_l * h) * mt_dtype_size(be->dtype));
  else
    be->ops->add(be, dy, dy, dx_routed, m->rows_l * h);
}

void mt_moe_shared_backward(mt_gpt *m, const mt_mlp_tensors *w, const mt_mlp_tensors *g,
                            mt_layer_acts *a, void *dy, const void *dx_routed) {
  mt_moe_shared_backward_own(m, w, g, a, dy);
  mt_moe_shared_backward_add(m, w, dy, dx_routed);
}
