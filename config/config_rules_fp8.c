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

/* The delayed-scaling states that are keyed by weight address rather than
 * by (layer, linear) (model/fp8_linear.c): the MoE experts (one state per
 * expert), the shared experts, MTP's eh_proj and MLA's projections. They are not saved in
 * checkpoints (checkpoint/fp8_meta.h) and ZeRO-3's gathers change their
 * weights' addresses at every use (measured before the keys: 36 histories
 * instead of 8 on the 2-layer test model, 2.8e-3 off the zero_stage 0 run).
 * NULL: none in this model. */
static const char *delayed_unkeyed(const mt_config *cfg) {
  if (!cfg->training.fp8_format[0] || strcmp(cfg->training.fp8_recipe, "delayed")) return NULL;
  if (cfg->model.num_experts > 0) return "the MoE experts' (model.num_experts > 0)";
  if (cfg->model.mtp_num_layers > 0) return "MTP's eh_proj (model.mtp_num_layers > 0)";
  if (cfg->model.multi_latent_attention)
    return "MLA's projections' (model.multi_latent_attention)";
  return NULL;
}

static int r_fp8_resume(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const char *what = delayed_unkeyed(cfg);
  if (!what || !cfg->checkpoint.load[0] || cfg->training.finetune) return 0;
  return mt_cfg_fail(c, key("checkpoint.load"),
                     "\"%s\" with training.fp8_recipe \"delayed\": %s amax histories are not "
                     "saved in checkpoints yet, so the run would not continue as saved (expected "
                     "fp8_recipe tensorwise, blockwise or mxfp8 to resume, or training.finetune)",
                     cfg->checkpoint.load, what);
}

static int r_fp8_delayed_zero3(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const char *what = delayed_unkeyed(cfg);
  if (!what || cfg->parallel.zero_stage < 3) return 0;
  return mt_cfg_fail(c, key("training.fp8_recipe"),
                     "\"delayed\" with parallel.zero_stage 3 is not supported with %s FP8 "
                     "linears: their amax histories are kept per weight address, which ZeRO-3's "
                     "gathers do not keep (expected fp8_recipe tensorwise, blockwise or mxfp8, "
                     "or zero_stage 2 or less)", what);
}

static const mt_cfg_rule k_fp8[] = {
    {"training.fp8_recipe", r_fp8_delayed_zero3,
     "`training.fp8_recipe` `delayed` with MoE experts, MTP or MLA needs `parallel.zero_stage` ≤ 2 "
     "(those amax histories are kept per weight address, which ZeRO-3's gathers change)",
     "2: training.precision=bf16; training.fp8_format=e4m3; parallel.zero_stage=3; "
     "model.num_experts=4", 0, 0},
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
    {"checkpoint.load", r_fp8_resume,
     "`checkpoint.load` with `training.fp8_recipe` `delayed` and MoE experts, MTP or MLA is "
     "refused "
     "(those amax histories are not in checkpoints yet), except with `training.finetune`",
     "1: training.precision=bf16; training.fp8_format=e4m3; checkpoint.load=ckpt; "
     "model.num_experts=4", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_fp8(int *n) {
  *n = (int)(sizeof k_fp8 / sizeof k_fp8[0]);
  return k_fp8;
}
