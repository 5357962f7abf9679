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

/* What the FP8 linear layers do not cover yet: FP8 parameter gathers (both
 * backends run them: cpu, and cuda through cuBLASLt's FP8 matmul or the
 * dequantize path, docs/fp8.md "On the cuda backend"). */
static int r_fp8_scope(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (!cfg->training.fp8_format[0]) return 0;
  if (cfg->training.fp8_param_gather)
    return mt_cfg_fail(c, key("training.fp8_param_gather"),
                       "true: FP8 parameter all-gathers are not implemented (expected false)");
  return 0;
}

static const mt_cfg_rule k_fp8[] = {
    {"training.num_layers_at_start_in_bf16", r_bf16_layers,
     "`training.num_layers_at_start_in_bf16` + `num_layers_at_end_in_bf16` ≤ `model.num_layers` "
     "(with `first_last_layers_bf16`)",
     "1: training.precision=bf16; training.fp8_format=e4m3; training.first_last_layers_bf16=true; "
     "training.num_layers_at_start_in_bf16=2", 0, 0},
    {"training.fp8_param_gather", r_fp8_scope,
     "`training.fp8_format` needs `fp8_param_gather` false (what the FP8 linear layers cover "
     "so far, docs/fp8.md)",
     "1: training.precision=bf16; training.fp8_format=hybrid; training.fp8_param_gather=true",
     0, 0},
};

const mt_cfg_rule *mt_cfg_rules_fp8(int *n) {
  *n = (int)(sizeof k_fp8 / sizeof k_fp8[0]);
  return k_fp8;
}
