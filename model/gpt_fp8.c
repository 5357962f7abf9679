/* model/gpt_fp8.c — the FP8 linear layers' delayed-scaling state of the
 * GPT's transformer layers (see gpt.h, model/fp8_linear.h). */
#include <stdio.h>

#include "model/gpt_internal.h"

int mt_gpt_fp8_meta(mt_gpt *m, int i, char *name, size_t n, float **data, int64_t *numel) {
  const mt_gpt_config *c = &m->cfg;
  if (!m->tp.fp8 || c->fp8_options.recipe != MT_FP8_RECIPE_DELAYED || i < 0) return 0;
  static const char *const lin[4] = {"self_attention.linear_qkv", "self_attention.linear_proj",
                                     "mlp.linear_fc1", "mlp.linear_fc2"};
  static const char *const role[3] = {"input", "weight", "grad_output"};
  for (int ci = 0; ci < m->n_chunks; ci++)
    for (int j = 0; j < m->chunks[ci].n_layers; j++) {
      const int l = m->chunks[ci].first_layer + j; /* the layers fp8_layer (gpt_block.c) runs */
      if (l < c->fp8_bf16_start || l >= c->model.num_layers - c->fp8_bf16_end) continue;
      /* its keyed linears: no linear_qkv under MLA, no dense fc1 / fc2 in a
       * MoE layer (those projections and experts are keyed by address) */
      int ks[4], nk = 0;
      for (int k = 0; k < 4; k++)
        if (!(k == MT_GPT_FP8_QKV && m->mla) &&
            !(k >= MT_GPT_FP8_FC1 && mt_gpt_is_moe_layer(c, l)))
          ks[nk++] = k;
      if (i >= 3 * nk) {
        i -= 3 * nk;
        continue;
      }
      char pre[64];
      mt_gpt_layer_name(c, l, pre, sizeof pre);
      snprintf(name, n, "%s.%s.fp8_meta.%s", pre, lin[ks[i / 3]], role[i % 3]);
      *data = mt_fp8_linear_meta(m->tp.fp8, mt_gpt_fp8_key(l, ks[i / 3]), i % 3);
      *numel = mt_fp8_linear_meta_len(m->tp.fp8);
      return 1;
    }
  return 0;
}
