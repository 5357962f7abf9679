/* planner/plan_fp8.c — the FP8 terms of the plan (docs/planner.md "FP8"):
 * which layers' linears run in FP8, the FP8 linear weights a rank holds, the
 * bytes one quantization moves per element, and what `fp8_param_gather`
 * changes in the parameter memory and the data-parallel all-gather.
 *
 * Megatron runs the linear layers' forward, dgrad and wgrad GEMMs in FP8
 * (TE's Linear / LayerNormLinear / GroupedLinear) inside every transformer
 * layer except the first `num_layers_at_start_in_bf16` and last
 * `num_layers_at_end_in_bf16` with `first_last_layers_bf16`
 * (transformer_block.py get_fp8_context); attention, norms, the router and
 * the output layer stay bf16 (docs/fp8.md). Pure arithmetic. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "planner/plan_internal.h"

int mt_plan_fp8_on(const mt_config *cfg) { return cfg->training.fp8_format[0] != '\0'; }

int mt_plan_fp8_layer_bf16(const mt_config *cfg, int l) {
  const mt_training_config *t = &cfg->training;
  if (!mt_plan_fp8_on(cfg)) return 1;
  if (!t->first_last_layers_bf16) return 0;
  return l < t->num_layers_at_start_in_bf16 ||
         l >= cfg->model.num_layers - t->num_layers_at_end_in_bf16;
}

void mt_plan_fp8_stage_bf16_layers(const mt_config *cfg, const mt_plan_dims *d, int r,
                                   int *n_dense, int *n_moe) {
  mt_plan_chunk *ch = mt_xcalloc((size_t)d->v, sizeof(mt_plan_chunk));
  const int nc = mt_plan_stage_chunks(cfg, r, ch);
  *n_dense = *n_moe = 0;
  for (int k = 0; k < nc; k++)
    for (int lc = 0; lc < ch[k].n; lc++) {
      const int l = ch[k].first + lc;
      if (!mt_plan_fp8_layer_bf16(cfg, l)) continue;
      if (d->E > 0 && mt_plan_is_moe_layer(d, l)) (*n_moe)++;
      else (*n_dense)++;
    }
  free(ch);
}

/* Bytes per element of one quantization of a bf16 tensor (TE's cast on
 * sm_90, whose FP8 GEMMs take only the TN layout, so every operand is
 * written twice: row-wise for one GEMM and transposed for the other — X for
 * fprop and wgrad, W for fprop and dgrad, dY for dgrad and wgrad):
 *   read 2 + write 1 + 1                                  = 4, plus
 *   tensorwise (current scaling): a separate amax pass    + 2 (reads it again)
 *   delayed: the amax is taken inside the cast            + 0
 *   blockwise: an fp32 scale per 1x128 tile (activations,
 *     gradients) or 128x128 block (weights), both copies  + 2*4/128 or 2*4/16384
 *   mxfp8: an e8m0 byte per 32 elements, both copies      + 2*1/32
 * A weight that is already FP8 (fp8_param_gather) only gets its transposed
 * copy: read 1 + write 1 = 2. */
double mt_plan_fp8_quant_bytes(const char *recipe, int weight, int param_gather) {
  if (weight && param_gather) return 2;
  double b = 4;
  if (!strcmp(recipe, "tensorwise")) b += 2;
  else if (!strcmp(recipe, "blockwise")) b += weight ? 8.0 / 16384 : 8.0 / 128;
  else if (!strcmp(recipe, "mxfp8")) b += 2.0 / 32;
  return b;
}

/* FP8 linear weights of one layer on one rank: elements, *tensors gets the
 * weight tensors (TE keeps one scale per tensor; GroupedLinear one per
 * expert). Attention: linear_qkv [(a + 2 ng) hn / t, h] and linear_proj
 * [h, a hn / t], or MLA's projections (the down projections whole on every
 * TP rank, the up projections and linear_proj split by heads); MLP: fc1
 * [g f / t, h] and fc2 [h, f / t]; a MoE layer: E/ep experts of fc1
 * [g F/etp, h] and fc2 [h, F/etp] plus the shared expert's pair (width S). */
static double layer_weights(const mt_plan_dims *d, int moe, double *tensors) {
  const double h = d->h, t = d->t;
  double w, n;
  if (d->mla) {
    const double npl = d->a / t, hq = d->dn + d->dr;
    w = (d->qr > 0 ? d->qr * h + npl * hq * d->qr : npl * hq * h) + (d->kr + d->dr) * h +
        npl * (d->dn + d->dv) * d->kr + h * npl * d->dv;
    n = d->qr > 0 ? 5 : 4;
  } else {
    w = (d->a + 2 * d->ng) * d->hn / t * h + h * d->a * d->hn / t;
    n = 2;
  }
  if (!moe) {
    w += d->g * d->f / t * h + h * d->f / t;
    n += 2;
  } else {
    const double El = d->E / d->ep, Fx = d->fm / (d->etp > 1 ? d->etp : 1);
    w += El * (d->g * Fx * h + h * Fx);
    n += 2 * El;
    if (d->S > 0) {
      w += d->g * d->S / t * h + h * d->S / t;
      n += 2;
    }
  }
  *tensors = n;
  return w;
}

/* The expert part of layer_weights (the parameters the edp group reduces). */
static double expert_weights(const mt_plan_dims *d, double *tensors) {
  const double El = d->E / d->ep, Fx = d->fm / (d->etp > 1 ? d->etp : 1);
  *tensors = 2 * El;
  return El * (d->g * Fx * d->h + d->h * Fx);
}

void mt_plan_fp8_stage_weights(const mt_config *cfg, const mt_plan_dims *d, int r, double w[2],
                               double tensors[2]) {
  w[0] = w[1] = tensors[0] = tensors[1] = 0;
  if (!mt_plan_fp8_on(cfg)) return;
  mt_plan_chunk *ch = mt_xcalloc((size_t)d->v, sizeof(mt_plan_chunk));
  const int nc = mt_plan_stage_chunks(cfg, r, ch);
  for (int k = 0; k < nc; k++)
    for (int lc = 0; lc < ch[k].n; lc++) {
      const int l = ch[k].first + lc;
      if (mt_plan_fp8_layer_bf16(cfg, l)) continue;
      const int moe = d->E > 0 && mt_plan_is_moe_layer(d, l);
      double n, ne = 0, we = moe ? expert_weights(d, &ne) : 0;
      const double all = layer_weights(d, moe, &n);
      w[0] += all - we;
      tensors[0] += n - ne;
      w[1] += we;
      tensors[1] += ne;
    }
  free(ch);
}

/* With fp8_param_gather megatrain keeps the bf16 parameter buffer and adds
 * the gathered e4m3 codes of the FP8 linears' weights, 1 byte per element
 * (optimizer/fp8_param_gather.c, MT_MEM_PARAM; docs/fp8.md "FP8 parameter
 * gather"). Megatron instead holds those weights as TE Float8Tensors only
 * (`_data` 1 byte, `_scale_inv` one fp32 per tensor), W8 - 4 T8 bytes less
 * than bf16: megatrain does not free the bf16 copies yet. ZeRO-3's sharded
 * buffers are not adjusted. */
void mt_plan_fp8_stage_memory(const mt_config *cfg, const mt_plan_dims *d, int r,
                              double bytes[MT_PM_N]) {
  /* Megatron gathers FP8 parameters with the distributed optimizer only */
  if (!mt_plan_fp8_on(cfg) || !cfg->training.fp8_param_gather || d->zero < 1 || d->zero >= 3 ||
      d->e != 2)
    return;
  double w[2], n[2];
  mt_plan_fp8_stage_weights(cfg, d, r, w, n);
  (void)n;
  bytes[MT_PM_PARAM] += w[0] + w[1];
}

/* Bytes of the data-parallel parameter all-gathers of stage r (the full
 * gathered buffers, part k: 0 dense over dp x cp, 1 experts over edp), from
 * the elements the buckets gather (`elems`, ZeRO padding included) at
 * d->e bytes: with fp8_param_gather each FP8 weight is 1 byte,
 *   bytes = elems e - W8 (e - 1),
 * as the trainer's gather (core/fp8_gather.h: 2 (S - F) + F; it sends no
 * ZeRO padding, at most dp - 1 elements per bucket, not modelled here). The
 * scales do not travel in the gather: every rank computes them from an
 * all-reduce of 4 bytes per scale (not priced). */
double mt_plan_fp8_gather_bytes(const mt_config *cfg, const mt_plan_dims *d, int r, int part,
                                double elems) {
  double bytes = elems * d->e;
  if (!mt_plan_fp8_on(cfg) || !cfg->training.fp8_param_gather || d->e != 2) return bytes;
  double w[2], n[2];
  mt_plan_fp8_stage_weights(cfg, d, r, w, n);
  (void)n;
  return bytes - w[part] * (d->e - 1);
}

void mt_plan_fp8_copy(mt_config *dst, const mt_config *src) {
  const mt_training_config *a = &src->training;
  mt_training_config *b = &dst->training;
  memcpy(b->fp8_format, a->fp8_format, sizeof b->fp8_format);
  memcpy(b->fp8_recipe, a->fp8_recipe, sizeof b->fp8_recipe);
  b->fp8_wgrad = a->fp8_wgrad;
  b->fp8_param_gather = a->fp8_param_gather;
  b->first_last_layers_bf16 = a->first_last_layers_bf16;
  b->num_layers_at_start_in_bf16 = a->num_layers_at_start_in_bf16;
  b->num_layers_at_end_in_bf16 = a->num_layers_at_end_in_bf16;
}
