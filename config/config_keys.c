/* config/config_keys.c — lookups in the key table (config_table.c), the
 * message helpers and the canonical JSON writer. */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

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

/* Length of the valid UTF-8 sequence of 2-4 bytes at p, or 0. */
static int utf8_len(const unsigned char *p) {
  int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (p[0] >= 0xf5) n = 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  return n;
}

/* Rewrite s in place (capacity cap) with control bytes (but newlines) and
 * bytes that are not valid UTF-8 shown as \xNN: a key or value quoted from a
 * binary file never writes raw bytes to the terminal. */
static void escape_unprintable(char *s, size_t cap) {
  char tmp[4096];
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p && o + 5 < sizeof tmp) {
    int u = *p >= 0x80 ? utf8_len(p) : 0;
    if (u) {
      memcpy(tmp + o, p, (size_t)u);
      o += (size_t)u;
      p += u;
    } else if ((*p < 0x20 && *p != '\n') || *p >= 0x7f) {
      o += (size_t)snprintf(tmp + o, sizeof tmp - o, "\\x%02X", *p++);
    } else {
      tmp[o++] = (char)*p++;
    }
  }
  tmp[o] = '\0';
  snprintf(s, cap, "%s", tmp);
}

static void vfail(mt_cfg_ctx *c, const char *label, const char *suffix, const char *fmt,
                  va_list ap) {
  if (c->failed) return;
  c->failed = 1;
  if (!c->err || c->errlen == 0) return;
  int n = snprintf(c->err, c->errlen, "%s: %s%s: ", c->src, label, suffix);
  if (n >= 0 && (size_t)n < c->errlen) vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
  escape_unprintable(c->err, c->errlen);
}

int mt_cfg_fail(mt_cfg_ctx *c, int key, const char *fmt, ...) {
  char label[96];
  const mt_cfg_key *kd = &mt_cfg_keys[key];
  if (kd->sec == 0)
    snprintf(label, sizeof label, "%s", kd->name);
  else
    snprintf(label, sizeof label, "%s.%s", mt_cfg_sections[kd->sec], kd->name);
  va_list ap;
  va_start(ap, fmt);
  vfail(c, label, c->overridden[key] ? " (from --set)" : "", fmt, ap);
  va_end(ap);
  return 2;
}

int mt_cfg_fail_label(mt_cfg_ctx *c, const char *label, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, label, "", fmt, ap);
  va_end(ap);
  return 2;
}

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
    cJSON *v = NULL;
    /* a nullable number at 0 is null (off), so the JSON loads back as it was */
    const int null_num = (kd->flags & MT_CK_NULLABLE) &&
                         ((kd->type == MT_CT_INT && *(const int *)p == 0) ||
                          (kd->type == MT_CT_I64 && *(const int64_t *)p == 0) ||
                          (kd->type == MT_CT_FLOAT && *(const float *)p == 0.0f));
    switch (null_num ? -1 : (int)kd->type) {
      case -1: v = cJSON_CreateNull(); break;
      case MT_CT_INT: v = cJSON_CreateNumber(*(const int *)p); break;
      case MT_CT_I64: v = cJSON_CreateNumber((double)*(const int64_t *)p); break;
      case MT_CT_U64: v = cJSON_CreateNumber((double)*(const uint64_t *)p); break;
      case MT_CT_FLOAT: v = cJSON_CreateNumber(mt_float_decimal(*(const float *)p)); break;
      case MT_CT_BOOL: v = cJSON_CreateBool(*(const int *)p != 0); break;
      case MT_CT_STR:
        v = ((kd->flags & MT_CK_NULLABLE) && ((const char *)p)[0] == '\0')
                ? cJSON_CreateNull()
                : cJSON_CreateString((const char *)p);
        break;
      case MT_CT_PATHS: v = paths_to_json((const mt_data_blend *)p); break;
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
