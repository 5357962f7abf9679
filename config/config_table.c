/* config/config_table.c — the table of config keys, the single source of
 * every key's section, name, type, range, default, Megatron flag and
 * description. The loader applies the defaults from it, the walk and
 * config_check.c validate types, ranges and enumerations with it, the
 * did-you-mean searches it, the canonical JSON follows its order, the last
 * column names the setting a key needs to have an effect (given without it
 * the key is refused, config_needs.c), and docs/config.md is generated from
 * it (`make docs`, tests/support/config_doc.c). The rows live in one file
 * per section group (keys_model.inc, keys_parallel.inc, keys_training.inc,
 * keys_io.inc), included into the one array below in canonical order. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

const char *const mt_cfg_sections[MT_CFG_NSECTIONS] = {
    "", "model", "parallel", "training", "data", "checkpoint", "logging"};

enum { S_TOP, S_MODEL, S_PAR, S_TRAIN, S_DATA, S_CKPT, S_LOG };

/* Row: section, name, type, FLD(field), flags + range, choices, default
 * (number, string or derivation rule), Megatron flag, description[, needs]. */
#define FLD(path) offsetof(mt_config, path), sizeof(((mt_config *)0)->path)
#define GE(x) MT_CK_GE, (x), 0
#define GT(x) MT_CK_GT, (x), 0
#define REQ MT_CK_REQUIRED
#define NUL MT_CK_NULLABLE
#define DER MT_CK_DERIVED
#define NUM(x) (x), NULL   /* default of a number or bool key */
#define STR(s) 0, (s)      /* default of a string key */
#define RULE(s) 0, (s)     /* derived key: how it is derived */

/* Order = order of the canonical JSON and of docs/config.md. */
const mt_cfg_key mt_cfg_keys[] = {
    {S_TOP, "device", MT_CT_STR, FLD(device), 0, 0, 0, "cpu|cuda", STR("cpu"),
     "always CUDA / DeepSpeed accelerator",
     "backend every rank computes on (`cuda`: one GPU per rank, NCCL)", NULL},

#include "config/keys_model.inc"

#include "config/keys_parallel.inc"

#include "config/keys_training.inc"

#include "config/keys_io.inc"

};
const int mt_cfg_nkeys = (int)(sizeof(mt_cfg_keys) / sizeof(mt_cfg_keys[0]));

_Static_assert(sizeof(mt_cfg_keys) / sizeof(mt_cfg_keys[0]) <= MT_CFG_MAX_KEYS,
               "raise MT_CFG_MAX_KEYS");

int mt_cfg_find_key(int sec, const char *name) {
  for (int k = 0; k < mt_cfg_nkeys; k++)
    if (mt_cfg_keys[k].sec == sec && strcmp(mt_cfg_keys[k].name, name) == 0) return k;
  return -1;
}

int mt_cfg_find_dotted(const char *dotted) {
  const char *dot = strchr(dotted, '.');
  if (!dot) return mt_cfg_find_key(0, dotted);
  for (int s = 1; s < MT_CFG_NSECTIONS; s++) {
    size_t n = strlen(mt_cfg_sections[s]);
    if ((size_t)(dot - dotted) == n && strncmp(dotted, mt_cfg_sections[s], n) == 0)
      return mt_cfg_find_key(s, dot + 1);
  }
  return -1;
}

void *mt_cfg_field(mt_config *cfg, int k) { return (char *)cfg + mt_cfg_keys[k].off; }
const void *mt_cfg_cfield(const mt_config *cfg, int k) {
  return (const char *)cfg + mt_cfg_keys[k].off;
}

void mt_cfg_apply_default(mt_config *cfg, int k) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  void *p = mt_cfg_field(cfg, k);
  if (kd->type != MT_CT_PATHS) memset(p, 0, kd->size);
  if (kd->type == MT_CT_LAYER_FREQ) cfg->model.moe_layer_pattern_len = 0;
  if (kd->flags & MT_CK_DERIVED) return; /* 0 = derive */
  switch (kd->type) {
    case MT_CT_INT:
    case MT_CT_LAYER_FREQ:
    case MT_CT_BOOL: *(int *)p = (int)kd->def; break;
    case MT_CT_I64: *(int64_t *)p = (int64_t)kd->def; break;
    case MT_CT_U64: *(uint64_t *)p = (uint64_t)kd->def; break;
    case MT_CT_FLOAT: *(float *)p = (float)kd->def; break;
    case MT_CT_STR:
      if (kd->def_str) snprintf((char *)p, kd->size, "%s", kd->def_str);
      break;
    case MT_CT_I64x3: break; /* null: all 0 */
    case MT_CT_PATHS: /* no default: an empty blend */
      ((mt_data_blend *)p)->n_paths = 0;
      ((mt_data_blend *)p)->weighted = 0;
      break;
  }
}

void mt_cfg_apply_defaults(mt_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  for (int k = 0; k < mt_cfg_nkeys; k++) mt_cfg_apply_default(cfg, k);
}
