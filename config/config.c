/* config/config.c — reading a config: defaults, JSON parsing with located
 * syntax errors, --set overrides, the walk that type-checks every key (with
 * did-you-mean for unknown ones), and the public API of config/config.h.
 * Range and consistency checks are in config_check.c, the key table in
 * config_keys.c. */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/util.h"
#include "config/config_internal.h"

/* ---- did-you-mean ------------------------------------------------------ */

static int edit_distance(const char *a, const char *b) {
  enum { N = 64 };
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la >= N || lb >= N) return N;
  int row[N];
  for (int j = 0; j <= lb; j++) row[j] = j;
  for (int i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* Is `cand` a plausible intended spelling of `name`? Smaller score = closer;
 * -1 = not plausible. */
static int closeness(const char *name, const char *cand) {
  int d = edit_distance(name, cand);
  int len = (int)strlen(name);
  int limit = len / 3 > 2 ? len / 3 : 2;
  if (d <= limit) return d;
  if (len >= 3 && (strstr(cand, name) || strstr(name, cand))) return 100 + d;
  return -1;
}

static int find_section(const char *name) {
  for (int s = 1; s < MT_CFG_NSECTIONS; s++)
    if (strcmp(mt_cfg_sections[s], name) == 0) return s;
  return -1;
}

/* Writes " (did you mean 'x'?)" for an unknown key `name` of section `sec`
 * (sec = 0: the top level, where sections are the candidates), or "". */
static void suggest(int sec, const char *name, char *out, size_t n) {
  out[0] = '\0';
  /* The key exists, but in another section. */
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    if (kd->sec != sec && strcmp(kd->name, name) == 0) {
      if (kd->sec == 0)
        snprintf(out, n, " (did you mean the top-level key '%s'?)", kd->name);
      else
        snprintf(out, n, " (did you mean '%s.%s'?)", mt_cfg_sections[kd->sec], kd->name);
      return;
    }
  }
  const char *best = NULL;
  int best_score = -1;
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    if (mt_cfg_keys[k].sec != sec) continue;
    int sc = closeness(name, mt_cfg_keys[k].name);
    if (sc >= 0 && (best_score < 0 || sc < best_score)) best = mt_cfg_keys[k].name, best_score = sc;
  }
  if (sec == 0)
    for (int s = 1; s < MT_CFG_NSECTIONS; s++) {
      int sc = closeness(name, mt_cfg_sections[s]);
      if (sc >= 0 && (best_score < 0 || sc < best_score)) best = mt_cfg_sections[s], best_score = sc;
    }
  if (best) snprintf(out, n, " (did you mean '%s'?)", best);
}

static int fail_unknown(mt_cfg_ctx *c, int sec, const char *name, int from_set) {
  char hint[160], label[192];
  suggest(sec, name, hint, sizeof hint);
  const char *via = from_set ? " (from --set)" : "";
  if (sec == 0) {
    snprintf(label, sizeof label, "%s%s", name, via);
    return mt_cfg_fail_label(c, label,
                             "unknown section%s (expected one of device, model, parallel, "
                             "training, data, checkpoint, logging)",
                             hint);
  }
  snprintf(label, sizeof label, "%s.%s%s", mt_cfg_sections[sec], name, via);
  return mt_cfg_fail_label(c, label, "unknown key%s (docs/config.md lists the keys of '%s')", hint,
                           mt_cfg_sections[sec]);
}

/* ---- values ------------------------------------------------------------ */

/* "a string (\"abc\")", "2.5", "true", ... for messages. */
static const char *describe(const cJSON *v, char *buf, size_t n) {
  if (cJSON_IsString(v)) snprintf(buf, n, "a string (\"%.40s\")", v->valuestring);
  else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
  else if (cJSON_IsTrue(v)) snprintf(buf, n, "true");
  else if (cJSON_IsFalse(v)) snprintf(buf, n, "false");
  else if (cJSON_IsNull(v)) snprintf(buf, n, "null");
  else if (cJSON_IsArray(v)) snprintf(buf, n, "a list");
  else if (cJSON_IsObject(v)) snprintf(buf, n, "an object");
  else snprintf(buf, n, "an invalid value");
  return buf;
}

static int integral(const cJSON *v, double lo, double hi) {
  double d = v->valuedouble;
  return cJSON_IsNumber(v) && isfinite(d) && d == floor(d) && d >= lo && d <= hi;
}

static int is_weight(const cJSON *v, double *w) {
  if (cJSON_IsNumber(v)) {
    *w = v->valuedouble;
    return 1;
  }
  if (cJSON_IsString(v) && v->valuestring[0]) {
    char *end;
    errno = 0;
    *w = strtod(v->valuestring, &end);
    return *end == '\0' && errno == 0;
  }
  return 0;
}

/* data.data_path and the per-split paths: "prefix" | ["a", "b"] |
 * [w, "a", w, "b"] (w number or numeric string). */
static int set_paths(mt_cfg_ctx *c, int k, const cJSON *v, mt_data_blend *d) {
  char buf[80];
  d->n_paths = 0;
  d->weighted = 0;
  if (cJSON_IsString(v)) {
    if (!v->valuestring[0]) return mt_cfg_fail(c, k, "empty path (expected a path prefix)");
    if (strlen(v->valuestring) >= MT_PATH_MAX)
      return mt_cfg_fail(c, k, "path longer than %d characters", MT_PATH_MAX - 1);
    snprintf(d->data_path[0], MT_PATH_MAX, "%s", v->valuestring);
    d->data_weight[0] = 1.0;
    d->n_paths = 1;
    return 0;
  }
  if (!cJSON_IsArray(v))
    return mt_cfg_fail(c, k,
                       "expected a path prefix or a list of them (optionally weighted: "
                       "[0.7, \"a\", 0.3, \"b\"]), got %s",
                       describe(v, buf, sizeof buf));
  int n = cJSON_GetArraySize(v);
  if (n == 0) return mt_cfg_fail(c, k, "empty list (expected at least one path prefix)");
  double w0;
  int weighted = is_weight(v->child, &w0);
  if (weighted && n % 2)
    return mt_cfg_fail(c, k,
                       "weighted form needs pairs, got %d elements (expected [weight, prefix, "
                       "weight, prefix, ...])",
                       n);
  int np = weighted ? n / 2 : n;
  if (np > MT_MAX_DATA_PATHS)
    return mt_cfg_fail(c, k, "%d paths (expected at most %d)", np, MT_MAX_DATA_PATHS);
  const cJSON *e = v->child;
  for (int i = 0; i < np; i++) {
    double w = 1.0;
    if (weighted) {
      if (!is_weight(e, &w) || !isfinite(w) || w <= 0)
        return mt_cfg_fail(c, k, "element %d is %s (expected a weight > 0 before each prefix)",
                           2 * i, describe(e, buf, sizeof buf));
      e = e->next;
    }
    int idx = weighted ? 2 * i + 1 : i;
    if (!cJSON_IsString(e) || !e->valuestring[0])
      return mt_cfg_fail(c, k, "element %d is %s (expected a path prefix string)", idx,
                         describe(e, buf, sizeof buf));
    if (strlen(e->valuestring) >= MT_PATH_MAX)
      return mt_cfg_fail(c, k, "element %d is longer than %d characters", idx, MT_PATH_MAX - 1);
    snprintf(d->data_path[i], MT_PATH_MAX, "%s", e->valuestring);
    d->data_weight[i] = w;
    e = e->next;
  }
  d->n_paths = np;
  d->weighted = weighted;
  return 0;
}

/* model.moe_layer_freq: an integer k >= 1, or a list of 0/1 entries, one per
 * layer (Megatron's list form; the length is checked against num_layers once
 * every key is read). */
static int set_layer_freq(mt_cfg_ctx *c, int k, const cJSON *v, mt_model_config *m) {
  char buf[80];
  m->moe_layer_pattern_len = 0;
  if (cJSON_IsNumber(v)) {
    if (!integral(v, INT_MIN, INT_MAX))
      return mt_cfg_fail(c, k, "expected an integer or a list of 0/1, got %s",
                         describe(v, buf, sizeof buf));
    m->moe_layer_freq = (int)v->valuedouble;
    return 0;
  }
  if (!cJSON_IsArray(v))
    return mt_cfg_fail(c, k, "expected an integer or a list of 0/1 (one per layer), got %s",
                       describe(v, buf, sizeof buf));
  int n = cJSON_GetArraySize(v);
  if (n < 1 || n > MT_MAX_LAYERS)
    return mt_cfg_fail(c, k, "list of %d entries (expected 1..%d, one per layer)", n,
                       MT_MAX_LAYERS);
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    if (!integral(e, 0, 1))
      return mt_cfg_fail(c, k, "element %d is %s (expected 0 for a dense layer or 1 for MoE)", i,
                         describe(e, buf, sizeof buf));
    m->moe_layer_pattern[i] = (uint8_t)e->valuedouble;
  }
  m->moe_layer_pattern_len = n;
  m->moe_layer_freq = 0;
  return 0;
}

/* training.rampup_batch_size: [start >= 1, increment >= 1, samples >= 0]
 * (the rules in config_rules_train.c check them against the batch). */
static int set_i64x3(mt_cfg_ctx *c, int k, const cJSON *v, int64_t *out) {
  char buf[80];
  static const char *const what[3] = {"start batch size", "batch size increment",
                                      "ramp-up samples"};
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3)
    return mt_cfg_fail(c, k, "expected a list of three integers [%s, %s, %s] or null, got %s",
                       what[0], what[1], what[2], describe(v, buf, sizeof buf));
  for (int i = 0; i < 3; i++) {
    const cJSON *e = cJSON_GetArrayItem(v, i);
    if (!integral(e, i < 2 ? 1 : 0, MT_JSON_INT_MAX))
      return mt_cfg_fail(c, k, "element %d (%s) is %s (expected an integer %s)", i, what[i],
                         describe(e, buf, sizeof buf), i < 2 ? ">= 1" : ">= 0");
    out[i] = (int64_t)e->valuedouble;
  }
  return 0;
}

static int set_value(mt_cfg_ctx *c, int k, const cJSON *v, mt_config *cfg) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  void *p = mt_cfg_field(cfg, k);
  char buf[80];
  if (c->present[k]) return mt_cfg_fail(c, k, "given twice (expected each key once)");
  c->present[k] = 1;
  if (cJSON_IsNull(v) && (kd->flags & (MT_CK_NULLABLE | MT_CK_DERIVED))) {
    memset(p, 0, kd->size); /* "" / 0: off, or derive */
    c->present[k] = 2;      /* given as null */
    return 0;
  }
  switch (kd->type) {
    case MT_CT_INT:
    case MT_CT_I64:
    case MT_CT_U64: {
      /* the type's limits: int, or 2^53 (what a JSON number holds exactly) */
      const double tlo = kd->type == MT_CT_INT ? INT_MIN : kd->type == MT_CT_U64 ? 0 : -MT_JSON_INT_MAX;
      const double thi = kd->type == MT_CT_INT ? INT_MAX : MT_JSON_INT_MAX;
      const char *what = kd->type == MT_CT_U64 ? "a non-negative integer" : "an integer";
      if (!integral(v, -INFINITY, INFINITY))
        return mt_cfg_fail(c, k, "expected %s, got %s", what, describe(v, buf, sizeof buf));
      if (!integral(v, tlo, thi)) { /* an integer, but out of range: say the range */
        double lo = tlo, hi = thi;
        if (kd->flags & MT_CK_GE) lo = kd->lo > lo ? kd->lo : lo;
        if (kd->flags & MT_CK_GT) lo = kd->lo + 1 > lo ? kd->lo + 1 : lo;
        if (kd->flags & MT_CK_LE) hi = kd->hi < hi ? kd->hi : hi;
        if (kd->flags & MT_CK_LT) hi = kd->hi - 1 < hi ? kd->hi - 1 : hi;
        return mt_cfg_fail(c, k, "%s is out of range (expected %s in [%.0f, %.0f])",
                           describe(v, buf, sizeof buf), what, lo, hi);
      }
      if (kd->type == MT_CT_INT) *(int *)p = (int)v->valuedouble;
      else if (kd->type == MT_CT_I64) *(int64_t *)p = (int64_t)v->valuedouble;
      else *(uint64_t *)p = (uint64_t)v->valuedouble;
      return 0;
    }
    case MT_CT_FLOAT:
      if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return mt_cfg_fail(c, k, "expected a number, got %s", describe(v, buf, sizeof buf));
      if (fabs(v->valuedouble) > 3.0e38)
        return mt_cfg_fail(c, k, "%g does not fit a float", v->valuedouble);
      *(float *)p = (float)v->valuedouble;
      return 0;
    case MT_CT_BOOL:
      if (!cJSON_IsBool(v))
        return mt_cfg_fail(c, k, "expected true or false, got %s", describe(v, buf, sizeof buf));
      *(int *)p = cJSON_IsTrue(v) ? 1 : 0;
      return 0;
    case MT_CT_STR: {
      if (!cJSON_IsString(v))
        return mt_cfg_fail(c, k, "expected %s, got %s",
                           kd->choices ? "a string" : (kd->flags & MT_CK_NULLABLE) ? "a string or null" : "a string",
                           describe(v, buf, sizeof buf));
      const char *s = v->valuestring;
      if (kd->choices && !((kd->flags & MT_CK_NULLABLE) && s[0] == '\0')) {
        size_t len = strlen(s);
        const char *q = kd->choices;
        int ok = 0;
        while (*q && !ok) {
          const char *bar = strchr(q, '|');
          size_t n = bar ? (size_t)(bar - q) : strlen(q);
          ok = n == len && strncmp(q, s, n) == 0;
          q += n + (bar != NULL);
        }
        if (!ok)
          return mt_cfg_fail(c, k, "unknown value \"%.40s\" (expected one of %s%s)", s, kd->choices,
                             (kd->flags & MT_CK_NULLABLE) ? ", or null" : "");
      }
      if (strlen(s) >= kd->size)
        return mt_cfg_fail(c, k, "longer than %zu characters", kd->size - 1);
      snprintf((char *)p, kd->size, "%s", s);
      return 0;
    }
    case MT_CT_PATHS:
      return set_paths(c, k, v, (mt_data_blend *)p);
    case MT_CT_LAYER_FREQ:
      return set_layer_freq(c, k, v, &cfg->model);
    case MT_CT_I64x3:
      return set_i64x3(c, k, v, (int64_t *)p);
  }
  return 0;
}

/* ---- overrides --------------------------------------------------------- */

static int apply_override(mt_cfg_ctx *c, cJSON *root, const char *ov) {
  const char *eq = strchr(ov, '=');
  char key[128];
  if (!eq || eq == ov || (size_t)(eq - ov) >= sizeof key)
    return mt_cfg_fail_label(c, "--set", "\"%.100s\" is not of the form section.key=value", ov);
  memcpy(key, ov, (size_t)(eq - ov));
  key[eq - ov] = '\0';
  const char *val = eq + 1;
  int sec = 0;
  const char *name = key;
  char *dot = strchr(key, '.');
  if (dot) {
    *dot = '\0';
    sec = find_section(key);
    if (sec < 0) return fail_unknown(c, 0, key, 1);
    name = dot + 1;
  } else if (find_section(key) > 0) {
    return mt_cfg_fail_label(c, "--set", "\"%s\" is a section (expected section.key=value)", key);
  }
  int k = mt_cfg_find_key(sec, name);
  if (k < 0) return fail_unknown(c, sec, name, 1);
  /* the value as strict JSON (core/json.h: "09" is not a number), else text */
  mt_json_error je;
  cJSON *v = mt_json_check(val, strlen(val), MT_JSON_INT53, &je) ? NULL
                                                                 : cJSON_ParseWithLength(val, strlen(val));
  /* String keys take the text as written when it reads as a number or bool
   * (--set checkpoint.save=2024 is the directory "2024"). */
  if (v && (cJSON_IsNumber(v) || cJSON_IsBool(v)) &&
      (mt_cfg_keys[k].type == MT_CT_STR || mt_cfg_keys[k].type == MT_CT_PATHS)) {
    cJSON_Delete(v);
    v = NULL;
  }
  if (!v) v = cJSON_CreateString(val);
  MT_ASSERT(v != NULL);
  /* null on a key that takes none and has a default: the key is removed
   * (its default applies; a required key keeps the type error) */
  const int remove = cJSON_IsNull(v) && mt_cfg_keys[k].type != MT_CT_PATHS &&
                     !(mt_cfg_keys[k].flags & (MT_CK_NULLABLE | MT_CK_DERIVED | MT_CK_REQUIRED));
  cJSON *obj = root;
  if (sec > 0) {
    obj = cJSON_GetObjectItemCaseSensitive(root, mt_cfg_sections[sec]);
    if (!obj) obj = cJSON_AddObjectToObject(root, mt_cfg_sections[sec]);
    MT_ASSERT(obj != NULL);
    if (!cJSON_IsObject(obj)) {
      cJSON_Delete(v);
      return mt_cfg_fail_label(c, mt_cfg_sections[sec], "expected an object");
    }
  }
  if (remove) {
    cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
    cJSON_Delete(v);
  } else if (cJSON_GetObjectItemCaseSensitive(obj, name)) {
    cJSON_ReplaceItemInObjectCaseSensitive(obj, name, v);
  } else {
    cJSON_AddItemToObject(obj, name, v);
  }
  c->overridden[k] = 1;
  return 0;
}

/* ---- parsing ----------------------------------------------------------- */

/* "<src>: line L, column C: JSON syntax error: <what> (at <key>)" plus the
 * line and a caret; e from core/json.h's strict check. */
static int fail_syntax(mt_cfg_ctx *c, const char *text, const mt_json_error *e) {
  const char *at = text + e->offset;
  int line = 1;
  const char *ls = text;
  for (const char *q = text; q < at; q++)
    if (*q == '\n') line++, ls = q + 1;
  const char *le = ls;
  while (*le && *le != '\n') le++;
  if (le > ls && le[-1] == '\r') le--;
  int col = (int)(at - ls) + 1;
  /* Show at most ~100 characters around the error position; bytes that are
   * not printable ASCII are shown escaped (\xNN) so that a binary file never
   * writes raw bytes to the terminal. caret = output column of 'at'. */
  const char *from = ls, *to = le;
  if (at - from > 24) from = at - 24;
  if (to - from > 60) to = from + 60;
  if (to < at) to = at;
  char snip[4 * 64 + 8];
  int n = 0, caret = 0;
  for (const char *q = from; q < to && n < (int)sizeof snip - 5 && (n < 100 || q <= at); q++) {
    unsigned char ch = (unsigned char)*q;
    if (q == at) caret = n;
    if (ch == '\t' || ch == '\r')
      snip[n++] = ' ';
    else if (ch < 0x20 || ch >= 0x7f)
      n += snprintf(snip + n, sizeof snip - (size_t)n, "\\x%02X", ch);
    else
      snip[n++] = (char)ch;
  }
  if (at >= to) caret = n;
  snip[n] = '\0';
  char label[MT_PATH_MAX + 32];
  snprintf(label, sizeof label, "line %d, column %d", line, col);
  return mt_cfg_fail_label(c, label, "JSON syntax error: %s%s%s%s\n    %s\n    %*s^", e->what,
                           e->path[0] ? " (at " : "", e->path, e->path[0] ? ")" : "", snip, caret,
                           "");
}

static int walk(mt_cfg_ctx *c, const cJSON *root, mt_config *cfg) {
  char buf[80];
  for (const cJSON *it = root->child; it; it = it->next) {
    int s = find_section(it->string);
    if (s < 0) {
      int k = mt_cfg_find_key(0, it->string);
      if (k < 0) return fail_unknown(c, 0, it->string, 0);
      if (set_value(c, k, it, cfg)) return 2;
      continue;
    }
    if (!cJSON_IsObject(it))
      return mt_cfg_fail_label(c, it->string, "expected an object, got %s",
                               describe(it, buf, sizeof buf));
    for (const cJSON *kv = it->child; kv; kv = kv->next) {
      int k = mt_cfg_find_key(s, kv->string);
      if (k < 0) return fail_unknown(c, s, kv->string, 0);
      if (set_value(c, k, kv, cfg)) return 2;
    }
  }
  for (int k = 0; k < mt_cfg_nkeys; k++)
    if ((mt_cfg_keys[k].flags & MT_CK_REQUIRED) && !c->present[k])
      return mt_cfg_fail(c, k, "required key is missing");
  return 0;
}

int mt_cfg_load_ctx(mt_cfg_ctx *c, mt_config *cfg, const char *json,
                    const char *const *overrides, int n_overrides, int world_size) {
  const char *text = json ? json : "";
  mt_json_error je;
  if (mt_json_check(text, strlen(text), MT_JSON_INT53, &je)) return fail_syntax(c, text, &je);
  cJSON *root = cJSON_ParseWithLength(text, strlen(text));
  if (!root) return mt_cfg_fail_label(c, "JSON", "cannot be parsed (out of memory)");
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return mt_cfg_fail_label(c, "top level", "expected a JSON object ({ ... })");
  }
  int rc = 0;
  for (int i = 0; i < n_overrides && rc == 0; i++) rc = apply_override(c, root, overrides[i]);

  mt_config tmp;
  mt_cfg_apply_defaults(&tmp); /* derived keys stay 0 so absence can be told apart */
  if (rc == 0) rc = walk(c, root, &tmp);
  cJSON_Delete(root);
  if (rc == 0) rc = mt_cfg_check(c, &tmp, world_size);
  if (rc) return 2;

  snprintf(tmp.source_path, sizeof tmp.source_path, "%s", c->src);
  snprintf(tmp.notes, sizeof tmp.notes, "%s", c->notes);
  cJSON *canon = mt_cfg_to_json(&tmp);
  char *s = cJSON_PrintUnformatted(canon);
  cJSON_Delete(canon);
  MT_ASSERT(s != NULL);
  tmp.json = mt_xstrdup(s);
  cJSON_free(s);
  *cfg = tmp;
  return 0;
}

static int load_string(mt_config *cfg, const char *json, const char *source_name,
                       const char *const *overrides, int n_overrides, int world_size, int saved,
                       char *err, size_t errlen) {
  mt_cfg_ctx c;
  memset(&c, 0, sizeof c);
  c.src = source_name ? source_name : "<config>";
  c.err = err;
  c.errlen = errlen;
  c.saved = saved;
  if (err && errlen) err[0] = '\0';
  return mt_cfg_load_ctx(&c, cfg, json, overrides, n_overrides, world_size);
}

int mt_config_load_string(mt_config *cfg, const char *json, const char *source_name,
                          const char *const *overrides, int n_overrides, int world_size,
                          char *err, size_t errlen) {
  return load_string(cfg, json, source_name, overrides, n_overrides, world_size, 0, err, errlen);
}

int mt_config_load_saved(mt_config *cfg, const char *json, const char *source_name,
                         const char *const *overrides, int n_overrides, int world_size, char *err,
                         size_t errlen) {
  return load_string(cfg, json, source_name, overrides, n_overrides, world_size, 1, err, errlen);
}

int mt_config_keys_switched_off(const mt_config *before, const mt_config *after,
                                char (*names)[96], int max) {
  int n = 0;
  for (int k = 0; k < mt_cfg_nkeys && n < max; k++) {
    if (!mt_cfg_keys[k].needs || !mt_cfg_applies(before, k, NULL) || mt_cfg_applies(after, k, NULL))
      continue;
    if (mt_cfg_keys[k].sec == 0) snprintf(names[n++], 96, "%s", mt_cfg_keys[k].name);
    else snprintf(names[n++], 96, "%s.%s", mt_cfg_sections[mt_cfg_keys[k].sec], mt_cfg_keys[k].name);
  }
  return n;
}

int mt_config_load(mt_config *cfg, const char *path, const char *const *overrides,
                   int n_overrides, int world_size, char *err, size_t errlen) {
  mt_cfg_ctx c;
  memset(&c, 0, sizeof c);
  c.src = path;
  c.err = err;
  c.errlen = errlen;
  size_t len = 0;
  int err_no = 0;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return mt_cfg_fail_label(&c, "cannot read config file",
                             "'%s' is a directory, expected a JSON config file", path);
  char *text = mt_read_file(path, (size_t)16 << 20, &len, &err_no);
  if (!text && err_no == EFBIG)
    return mt_cfg_fail_label(&c, "cannot read config file", "larger than 16 MiB");
  if (!text && err_no != ENOENT && err_no != EACCES && err_no != ENOTDIR && err_no != ELOOP &&
      err_no != ENAMETOOLONG)
    return mt_cfg_fail_label(&c, "cannot read config file", "read error: %s", strerror(err_no));
  if (!text) return mt_cfg_fail_label(&c, "cannot open config file", "%s", strerror(err_no));
  int rc = mt_config_load_string(cfg, text, path, overrides, n_overrides, world_size, err, errlen);
  free(text);
  return rc;
}

void mt_config_free(mt_config *cfg) {
  if (!cfg) return;
  free(cfg->json);
  cfg->json = NULL;
}

int mt_config_data_parallel_size(const mt_config *cfg, int world_size) {
  const mt_parallel_config *p = &cfg->parallel;
  int mp = p->tensor_model_parallel_size * p->pipeline_model_parallel_size *
           p->context_parallel_size;
  if (world_size <= 0) world_size = 1;
  return mp > 0 ? world_size / mp : 0;
}

int mt_config_is_moe_layer(const mt_config *cfg, int l) {
  return mt_model_is_moe_layer(&cfg->model, l);
}

int64_t mt_config_padded_vocab(const mt_config *cfg) {
  int64_t m = (int64_t)cfg->model.make_vocab_size_divisible_by *
              cfg->parallel.tensor_model_parallel_size;
  if (m <= 0) m = 1;
  return mt_round_up(cfg->model.vocab_size, m);
}

uint64_t mt_config_hash(const mt_config *cfg) {
  return mt_fnv1a64_str(MT_FNV1A64_INIT, cfg->json);
}
