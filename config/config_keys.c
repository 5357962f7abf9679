/* config/config_keys.c — the canonical JSON writer of a resolved config
 * (key lookups are in config_table.c, messages in config_msg.c). */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"

/* Shortest decimal form that reads back as the same float, as a double, so
 * the canonical JSON shows 0.1 rather than 0.10000000149011612. */
static cJSON *checked(cJSON *item) {
  MT_ASSERT(item != NULL);
  return item;
}

static cJSON *paths_to_json(const mt_data_blend *d) {
  if (d->n_paths == 0) return checked(cJSON_CreateNull());
  int weighted = d->weighted;
  for (int i = 0; i < d->n_paths; i++)
    if (d->data_weight[i] != 1.0) weighted = 1;
  cJSON *arr = checked(cJSON_CreateArray());
  for (int i = 0; i < d->n_paths; i++) {
    if (weighted) cJSON_AddItemToArray(arr, checked(cJSON_CreateNumber(d->data_weight[i])));
    cJSON_AddItemToArray(arr, checked(cJSON_CreateString(d->data_path[i])));
  }
  return arr;
}

/* Keys that `needs` lets through but a rule refuses as without effect:
 * MLA derives kv_channels (r_mla_kv_channels), and with rope_type "rope"
 * the YaRN-only keys do nothing (r_yarn_keys). Written, the canonical JSON
 * would not load back. */
static int dead_by_rule(const mt_config *cfg, const mt_cfg_key *kd) {
  const mt_model_config *m = &cfg->model;
  if (strcmp(mt_cfg_sections[kd->sec], "model") || !m->multi_latent_attention) return 0;
  if (!strcmp(kd->name, "kv_channels")) return 1;
  static const char *const yarn_only[] = {"original_max_position_embeddings", "beta_fast",
                                          "beta_slow", "mscale"};
  if (mt_model_yarn(m)) return 0;
  for (size_t i = 0; i < sizeof yarn_only / sizeof *yarn_only; i++)
    if (!strcmp(kd->name, yarn_only[i])) return 1;
  return 0;
}

cJSON *mt_cfg_to_json(const mt_config *cfg) {
  cJSON *root = checked(cJSON_CreateObject());
  cJSON *obj = root;
  int cur = 0;
  for (int k = 0; k < mt_cfg_nkeys; k++) { /* the table is grouped by section */
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    const void *p = mt_cfg_cfield(cfg, k);
    if (kd->sec != cur) {
      cur = kd->sec;
      obj = checked(cJSON_AddObjectToObject(root, mt_cfg_sections[cur]));
    }
    if (!mt_cfg_applies(cfg, k, NULL)) continue; /* no effect here: given, it would be refused */
    if (dead_by_rule(cfg, kd)) continue;
    cJSON *v = NULL;
    /* a nullable number at 0 is null (off), so the JSON loads back as it was */
    const int null_num = (kd->flags & MT_CK_NULLABLE) &&
                         ((kd->type == MT_CT_INT && *(const int *)p == 0) ||
                          (kd->type == MT_CT_I64 && *(const int64_t *)p == 0) ||
                          (kd->type == MT_CT_FLOAT && *(const float *)p == 0.0f));
    switch (null_num ? -1 : (int)kd->type) {
      case -1: v = cJSON_CreateNull(); break;
      case MT_CT_INT: v = cJSON_CreateNumber(*(const int *)p); break;
      case MT_CT_I64: v = mt_json_int(*(const int64_t *)p); break; /* every digit */
      case MT_CT_U64: v = mt_json_uint(*(const uint64_t *)p); break;
      case MT_CT_FLOAT: v = cJSON_CreateNumber(mt_float_decimal(*(const float *)p)); break;
      case MT_CT_BOOL: v = cJSON_CreateBool(*(const int *)p != 0); break;
      case MT_CT_STR:
        v = ((kd->flags & MT_CK_NULLABLE) && ((const char *)p)[0] == '\0')
                ? cJSON_CreateNull()
                : cJSON_CreateString((const char *)p);
        break;
      case MT_CT_PATHS: v = paths_to_json((const mt_data_blend *)p); break;
      case MT_CT_I64x3:
        if (((const int64_t *)p)[0] == 0) {
          v = cJSON_CreateNull();
        } else {
          v = checked(cJSON_CreateArray());
          for (int i = 0; i < 3; i++)
            cJSON_AddItemToArray(v, checked(mt_json_int(((const int64_t *)p)[i])));
        }
        break;
      case MT_CT_LAYER_FREQ:
        if (cfg->model.moe_layer_pattern_len > 0) {
          v = checked(cJSON_CreateArray());
          for (int i = 0; i < cfg->model.moe_layer_pattern_len; i++)
            cJSON_AddItemToArray(v, checked(cJSON_CreateNumber(cfg->model.moe_layer_pattern[i])));
        } else {
          v = cJSON_CreateNumber(*(const int *)p);
        }
        break;
    }
    cJSON_AddItemToObject(obj, kd->name, checked(v));
  }
  return root;
}
