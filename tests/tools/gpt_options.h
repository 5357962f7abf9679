/* tests/tools/gpt_options.h — KEY=VALUE options for the model tools and
 * benches (tests/tools/gpt_dump, bench/bench_gpt): sets any field of an
 * mt_gpt_config's model section by its config-key name (Megatron's argument
 * names, docs/config.md; found in the key table), e.g.
 *   position_embedding_type=rope rotary_percent=0.5 normalization=RMSNorm
 *   swiglu=1 num_query_groups=2 kv_channels=24 add_bias_linear=0
 *   qk_layernorm=1 untie_embeddings_and_output_weights=1 num_experts=4 ...
 * Test-tool helper only (not part of the library); one header, no state. */
#ifndef MT_TESTS_GPT_OPTIONS_H
#define MT_TESTS_GPT_OPTIONS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "model/gpt.h"

/* 1 when `arg` has the KEY=VALUE form. */
static inline int mt_gpt_is_option(const char *arg) { return strchr(arg, '=') != NULL; }

static inline int mt_gpt_option_bool(const char *v) {
  return !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "True");
}

/* Apply one KEY=VALUE option to the model section of c: any model key of
 * the config's key table (config/config_table.c), its value parsed by the
 * key's type (enumerated strings checked against its choices);
 * moe_layer_freq also takes the list form [0,1,1] (or 0,1,1); norm_epsilon
 * and layernorm_epsilon set both. Returns 0, or -1 with a message in err
 * (unknown key or value). Unlike the config loader, no cross-key checks and
 * no derivation (the model derives sizes left 0). */
static inline int mt_gpt_apply_option(mt_gpt_config *c, const char *arg, char *err, size_t n) {
  char key[64], dotted[80];
  const char *eq = strchr(arg, '=');
  if (!eq || (size_t)(eq - arg) >= sizeof key) {
    snprintf(err, n, "option '%s': expected KEY=VALUE", arg);
    return -1;
  }
  memcpy(key, arg, (size_t)(eq - arg));
  key[eq - arg] = 0;
  const char *v = eq + 1;
  mt_model_config *m = &c->model;
  if (!strcmp(key, "moe_layer_freq")) {
    m->moe_layer_pattern_len = 0;
    if (v[0] != '[' && !strchr(v, ',')) {
      m->moe_layer_freq = atoi(v);
      return 0;
    }
    int len = 0; /* list form: one 0/1 entry per layer */
    for (const char *q = v; *q; q++) {
      if (*q != '0' && *q != '1') continue;
      if (len >= MT_MAX_LAYERS) { snprintf(err, n, "moe_layer_freq: too long"); return -1; }
      m->moe_layer_pattern[len++] = (uint8_t)(*q - '0');
    }
    m->moe_layer_pattern_len = len;
    m->moe_layer_freq = 0;
    return 0;
  }
  snprintf(dotted, sizeof dotted, "model.%s", key);
  const int k = mt_cfg_find_dotted(dotted);
  if (k < 0) {
    snprintf(err, n, "unknown option '%s' (not a model key of docs/config.md)", key);
    return -1;
  }
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  void *f = (char *)m + (kd->off - offsetof(mt_config, model));
  switch (kd->type) {
    case MT_CT_INT: *(int *)f = atoi(v); break;
    case MT_CT_BOOL: *(int *)f = mt_gpt_option_bool(v); break;
    case MT_CT_FLOAT: *(float *)f = (float)atof(v); break;
    case MT_CT_STR: {
      const size_t lv = strlen(v);
      int ok = !kd->choices && lv < kd->size;
      for (const char *q = kd->choices; q && *q && !ok;) {
        const char *bar = strchr(q, '|');
        const size_t lq = bar ? (size_t)(bar - q) : strlen(q);
        ok = lq == lv && !strncmp(q, v, lv);
        q = bar ? bar + 1 : q + lq;
      }
      if (!ok) { snprintf(err, n, "%s: unknown '%s' (one of %s)", key, v, kd->choices); return -1; }
      snprintf((char *)f, kd->size, "%s", v);
      break;
    }
    default: snprintf(err, n, "option '%s': type not supported here", key); return -1;
  }
  if (!strcmp(key, "norm_epsilon") || !strcmp(key, "layernorm_epsilon"))
    m->norm_epsilon = m->layernorm_epsilon = (float)atof(v);
  return 0;
}

#endif
