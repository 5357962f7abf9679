/* config/config_needs.c — keys that have an effect only under another
 * setting: the `needs` column of the key table (config_table.c). A key
 * given (in the file or by --set, at any value but null, its default
 * included) whose setting does not hold is refused, naming the key, the key
 * that would enable it and that key's value; a config megatrain wrote itself
 * (mt_config_load_saved: a checkpoint's, the planner's base) has such keys
 * dropped instead, and the canonical JSON leaves them out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

typedef mt_cfg_need cond;

int mt_cfg_need_of(int k, mt_cfg_need *c) {
  const char *needs = mt_cfg_keys[k].needs;
  if (!needs) return -1;
  const size_t n = strcspn(needs, "=!>");
  char name[96];
  if (n == 0 || n >= sizeof name) return -1;
  memcpy(name, needs, n);
  name[n] = '\0';
  c->key = mt_cfg_find_dotted(name);
  if (c->key < 0) return -1;
  const char *q = needs + n;
  c->op = 0;
  c->val[0] = '\0';
  if (*q == '=') c->op = '=', q += 1;
  else if (q[0] == '!' && q[1] == '=') c->op = '!', q += 2;
  else if (*q == '>') c->op = '>', q += 1;
  else if (*q) return -1;
  if (c->op && (!*q || strlen(q) >= sizeof c->val)) return -1;
  snprintf(c->val, sizeof c->val, "%s", q);
  return 0;
}

static double number(const mt_config *cfg, int k) {
  const void *p = mt_cfg_cfield(cfg, k);
  switch (mt_cfg_keys[k].type) {
    case MT_CT_INT:
    case MT_CT_BOOL:
    case MT_CT_LAYER_FREQ: return *(const int *)p;
    case MT_CT_I64:
    case MT_CT_I64x3: return (double)*(const int64_t *)p; /* the first: 0 = off */
    case MT_CT_U64: return (double)*(const uint64_t *)p;
    case MT_CT_FLOAT: return *(const float *)p;
    default: return 0;
  }
}

static int holds(const mt_config *cfg, const cond *c) {
  if (mt_cfg_keys[c->key].type == MT_CT_PATHS) { /* set, or "=null": not set */
    const int set = ((const mt_data_blend *)mt_cfg_cfield(cfg, c->key))->n_paths > 0;
    return !c->op ? set : c->op == '=' && !strcmp(c->val, "null") ? !set : 0;
  }
  if (mt_cfg_keys[c->key].type == MT_CT_STR) {
    const char *s = (const char *)mt_cfg_cfield(cfg, c->key);
    if (!c->op) return s[0] != '\0';
    const int eq = strcmp(s, c->val) == 0;
    return c->op == '=' ? eq : c->op == '!' ? !eq : 0;
  }
  const double v = number(cfg, c->key);
  if (!c->op) return v != 0;
  const double w = !strcmp(c->val, "true") ? 1 : !strcmp(c->val, "false") ? 0 : strtod(c->val, NULL);
  return c->op == '=' ? v == w : c->op == '!' ? v != w : v > w;
}

int mt_cfg_applies(const mt_config *cfg, int k, int *blocker) {
  /* up the chain; at most one step per key, so a cycle in the table ends */
  for (int step = 0; step < mt_cfg_nkeys; step++) {
    cond c;
    if (mt_cfg_need_of(k, &c)) return 1;
    if (!holds(cfg, &c)) {
      if (blocker) *blocker = k;
      return 0;
    }
    k = c.key;
  }
  return 1;
}

static void dotted(int k, char *buf, size_t n) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  if (kd->sec == 0) snprintf(buf, n, "%s", kd->name);
  else snprintf(buf, n, "%s.%s", mt_cfg_sections[kd->sec], kd->name);
}

/* The value of key k under cfg as a message shows it. */
static void value_text(const mt_config *cfg, int k, char *buf, size_t n) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  if (kd->type == MT_CT_STR) {
    const char *s = (const char *)mt_cfg_cfield(cfg, k);
    if (!s[0] && (kd->flags & MT_CK_NULLABLE)) snprintf(buf, n, "null");
    else snprintf(buf, n, "\"%.48s\"", s);
  } else if (kd->type == MT_CT_PATHS) {
    const mt_data_blend *b = (const mt_data_blend *)mt_cfg_cfield(cfg, k);
    if (b->n_paths == 0) snprintf(buf, n, "null");
    else snprintf(buf, n, "\"%.40s\"%s", b->data_path[0], b->n_paths > 1 ? ", ..." : "");
  } else if (kd->type == MT_CT_LAYER_FREQ && cfg->model.moe_layer_pattern_len > 0) {
    snprintf(buf, n, "the list");
  } else if (kd->type == MT_CT_I64x3 && *(const int64_t *)mt_cfg_cfield(cfg, k) != 0) {
    const int64_t *v = (const int64_t *)mt_cfg_cfield(cfg, k);
    snprintf(buf, n, "[%lld,%lld,%lld]", (long long)v[0], (long long)v[1], (long long)v[2]);
  } else if (kd->type == MT_CT_BOOL) {
    snprintf(buf, n, "%s", number(cfg, k) != 0 ? "true" : "false");
  } else {
    const double v = number(cfg, k);
    if (v == 0 && (kd->flags & MT_CK_NULLABLE)) snprintf(buf, n, "null");
    else snprintf(buf, n, "%g", v);
  }
}

/* What the condition asks for: `md` 0 for messages ("model.num_experts > 0",
 * "model.position_embedding_type \"rope\""), 1 for markdown. */
void mt_cfg_need_text(const mt_cfg_need *c, int md, char *buf, size_t n) {
  char key[96];
  dotted(c->key, key, sizeof key);
  const char *q = md ? "`" : "";
  const int str = mt_cfg_keys[c->key].type == MT_CT_STR;
  const char *vq = md ? "`" : str ? "\"" : "";
  switch (c->op) {
    case 0:
      snprintf(buf, n, "%s%s%s %s", q, key, q,
               mt_cfg_keys[c->key].type == MT_CT_BOOL ? (md ? "`true`" : "true") : "set");
      break;
    case '=': snprintf(buf, n, "%s%s%s %s%s%s", q, key, q, vq, c->val, vq); break;
    case '!': snprintf(buf, n, "%s%s%s other than %s%s%s", q, key, q, vq, c->val, vq); break;
    default: snprintf(buf, n, "%s%s%s > %s", q, key, q, c->val); break;
  }
}

int mt_cfg_check_needs(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    int b = -1;
    if (c->present[k] != 1 || mt_cfg_applies(cfg, k, &b)) continue;
    cond cd;
    mt_cfg_need_of(b, &cd); /* parsed by mt_cfg_applies */
    char mine[64], key[96], val[64], req[192];
    value_text(cfg, k, mine, sizeof mine);
    /* the enabling key: bare in the key's own section, else section.key */
    if (mt_cfg_keys[cd.key].sec == mt_cfg_keys[k].sec)
      snprintf(key, sizeof key, "%s", mt_cfg_keys[cd.key].name);
    else
      dotted(cd.key, key, sizeof key);
    value_text(cfg, cd.key, val, sizeof val);
    mt_cfg_need_text(&cd, 0, req, sizeof req);
    return mt_cfg_fail(c, k,
                       "%s has no effect with %s %s (expected %s for it to apply, or the key left "
                       "out)",
                       mine, key, val, req);
  }
  return 0;
}

void mt_cfg_drop_dead(mt_cfg_ctx *c, mt_config *cfg) {
  unsigned char dead[MT_CFG_MAX_KEYS] = {0};
  for (int k = 0; k < mt_cfg_nkeys; k++) /* decided on the config as given */
    dead[k] = c->present[k] && !c->overridden[k] && !mt_cfg_applies(cfg, k, NULL);
  for (int k = 0; k < mt_cfg_nkeys; k++)
    if (dead[k]) {
      mt_cfg_apply_default(cfg, k);
      c->present[k] = 0;
    }
}
