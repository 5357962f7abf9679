/* model/gpt_fp8_gather.c — which parameters fp8_param_gather gathers as FP8
 * codes (see gpt.h; docs/fp8.md "FP8 parameter gather"). */
#include <stdio.h>
#include <string.h>

#include "model/gpt_internal.h"

int mt_gpt_fp8_gathered_weight(const mt_gpt *m, int i) {
  const mt_gpt_config *c = &m->cfg;
  const mt_param_list *pl = mt_gpt_params(m);
  if (!m->tp.fp8 || i < 0 || i >= pl->n) return 0;
  const mt_param *p = &pl->p[i];
  int l = -1, at = 0;
  if (p->is_expert || sscanf(p->name, "decoder.layers.%d.%n", &l, &at) != 1 || at == 0) return 0;
  if (l < c->fp8_bf16_start || l >= c->model.num_layers - c->fp8_bf16_end) return 0;
  static const char *const lin[4] = {"self_attention.linear_qkv.weight",
                                     "self_attention.linear_proj.weight",
                                     "mlp.linear_fc1.weight", "mlp.linear_fc2.weight"};
  for (int k = 0; k < 4; k++)
    if (!strcmp(p->name + at, lin[k])) return 1;
  return 0;
}

mt_fp8_linear *mt_gpt_fp8_dense_linear(mt_gpt *m) { return m->tp.fp8; }
