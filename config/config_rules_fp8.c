/* config/config_rules_fp8.c — the consistency rules of the FP8 keys
 * (Megatron's --fp8-* flags, docs/fp8.md), as rows of the rule table that
 * config_check.c runs after the training rules and docs/config.md lists.
 * Keys that only need another setting (the delayed-scaling keys without the
 * delayed recipe, everything without `fp8_format`, `fp8_format` without
 * bf16) are the `needs` column of keys_training.inc (config_needs.c). */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

/* Megatron asserts the bf16 layers fit in the model. */
static int r_bf16_layers(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (!t->fp8_format[0] || !t->first_last_layers_bf16) return 0;
  const long long both = (long long)t->num_layers_at_start_in_bf16 + t->num_layers_at_end_in_bf16;
  if (both <= cfg->model.num_layers) return 0;
  return mt_cfg_fail(c, key("training.num_layers_at_start_in_bf16"),
                     "%d plus training.num_layers_at_end_in_bf16 %d exceed model.num_layers %d "
                     "(expected at most num_layers layers kept in bf16)",
                     t->num_layers_at_start_in_bf16, t->num_layers_at_end_in_bf16,
                     cfg->model.num_layers);
}

/* fp8_param_gather (optimizer/fp8_param_gather.h, docs/fp8.md "FP8
 * parameter gather"): Megatron requires the distributed optimizer (or
 * FSDP); built here for ZeRO stages 1 and 2, the tensorwise and blockwise
 * recipes (TE's cast_master_weights_to_fp8 for current and block scaling)
 * and dense GPT layers. */
static int r_fp8_param_gather(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (!t->fp8_format[0] || !t->fp8_param_gather) return 0;
  const int k = key("training.fp8_param_gather");
  const int z = cfg->parallel.zero_stage;
  if (z < 1 || z > 2)
    return mt_cfg_fail(c, k,
                       "true with parallel.zero_stage %d: the FP8 parameter all-gather is the "
                       "distributed optimizer's (Megatron requires it) and is built for "
                       "zero_stage 1 and 2 (expected zero_stage 1 or 2, or fp8_param_gather false)",
                       z);
  if (!strcmp(t->fp8_recipe, "mxfp8"))
    return mt_cfg_fail(c, k,
                       "true with training.fp8_recipe \"mxfp8\": an MXFP8 weight needs row- and "
                       "column-blocked codes (forward and dgrad), which TE's "
                       "cast_master_weights_to_fp8 does not make either (expected fp8_recipe "
                       "tensorwise or blockwise, or fp8_param_gather false)");
  if (!strcmp(t->fp8_recipe, "delayed"))
    return mt_cfg_fail(c, k,
                       "true with training.fp8_recipe \"delayed\": the gather of weights "
                       "quantized with their amax history's scale is not built (expected "
                       "fp8_recipe tensorwise or blockwise, or fp8_param_gather false)");
  if (cfg->model.num_experts > 0 || cfg->model.mtp_num_layers > 0 ||
      cfg->model.multi_latent_attention)
    return mt_cfg_fail(c, k,
                       "true with %s: the FP8 gather covers the dense layers' linear_qkv, "
                       "linear_proj, linear_fc1 and linear_fc2 only (expected a model without "
                       "MoE experts, MTP and MLA, or fp8_param_gather false)",
                       cfg->model.num_experts > 0      ? "model.num_experts > 0"
                       : cfg->model.mtp_num_layers > 0 ? "model.mtp_num_layers > 0"
                                                       : "model.multi_latent_attention");
  if (cfg->parallel.overlap_param_gather)
    return mt_cfg_fail(c, key("parallel.overlap_param_gather"),
                       "true with training.fp8_param_gather: the overlapped gather of FP8 codes "
                       "is not built (expected overlap_param_gather false)");
  return 0;
}

static const mt_cfg_rule k_fp8[] = {
    {"training.fp8_param_gather parallel.overlap_param_gather", r_fp8_param_gather,
     "`training.fp8_param_gather` needs `parallel.zero_stage` 1 or 2, `fp8_recipe` `tensorwise` "
     "or `blockwise`, "
     "a model without MoE experts, MTP and MLA, and `overlap_param_gather` false (what is built, "
     "docs/fp8.md \"FP8 parameter gather\")",
     "2: training.precision=bf16; training.fp8_format=e4m3; training.fp8_param_gather=true", 0, 0},
    {"training.num_layers_at_start_in_bf16", r_bf16_layers,
     "`training.num_layers_at_start_in_bf16` + `num_layers_at_end_in_bf16` ≤ `model.num_layers` "
     "(with `first_last_layers_bf16`)",
     "1: training.precision=bf16; training.fp8_format=e4m3; training.first_last_layers_bf16=true; "
     "training.num_layers_at_start_in_bf16=2", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_fp8(int *n) {
  *n = (int)(sizeof k_fp8 / sizeof k_fp8[0]);
  return k_fp8;
}
