/* config/config_rules_mtp.c — the consistency rules of multi-token
 * prediction (model.mtp_num_layers; docs/model.md "Multi-token prediction"),
 * as rows of the rule table that config_check.c runs and docs/config.md
 * lists: the combinations the MTP path does not implement are refused with
 * the keys that make them. */
#include <string.h>

#include "config/config_internal.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

/* Documents inside packed sequences: Megatron rolls the MTP inputs inside
 * each document (packed sequences); megatrain's MTP rolls over the whole
 * sample only. */
static int r_mtp_docs(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (cfg->model.mtp_num_layers <= 0) return 0;
  const char *k = cfg->data.reset_position_ids     ? "data.reset_position_ids"
                  : cfg->data.reset_attention_mask ? "data.reset_attention_mask"
                                                   : NULL;
  if (!k) return 0;
  return mt_cfg_fail(c, key("model.mtp_num_layers"),
                     "%d with %s true is not implemented (expected mtp_num_layers null, or "
                     "reset_position_ids and reset_attention_mask false: the MTP inputs are "
                     "shifted over the whole sample, not inside each document)",
                     cfg->model.mtp_num_layers, k);
}

/* The MTP embedding on a last stage without the embedding: the stage holds
 * a copy of the word embedding (the tied output layer, or the MTP copy), but
 * no position table. */
static int r_mtp_stage(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->mtp_num_layers <= 0 || cfg->parallel.pipeline_model_parallel_size <= 1) return 0;
  if (!strcmp(m->position_embedding_type, "learned_absolute"))
    return mt_cfg_fail(c, key("model.mtp_num_layers"),
                       "%d with pipeline_model_parallel_size %d and position_embedding_type "
                       "\"learned_absolute\" is not implemented (expected \"rope\" or \"none\", "
                       "or pipeline_model_parallel_size 1: the last stage holds no position "
                       "table)",
                       m->mtp_num_layers, cfg->parallel.pipeline_model_parallel_size);
  return 0;
}

static const mt_cfg_rule k_mtp[] = {
    {"model.mtp_num_layers data.reset_position_ids data.reset_attention_mask", r_mtp_docs,
     "MTP: `model.mtp_num_layers` not with `data.reset_position_ids` or "
     "`data.reset_attention_mask` (the MTP inputs shift over the whole sample)",
     "1: model.mtp_num_layers=1; data.reset_position_ids=true", 0, 0},
    {"model.mtp_num_layers parallel.pipeline_model_parallel_size model.position_embedding_type",
     r_mtp_stage,
     "MTP with `pipeline_model_parallel_size` > 1: no learned position table (the last stage "
     "holds a copy of the word embedding, not of the position table)",
     "2: model.mtp_num_layers=1; parallel.pipeline_model_parallel_size=2", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_mtp(int *n) {
  *n = (int)(sizeof k_mtp / sizeof k_mtp[0]);
  return k_mtp;
}
