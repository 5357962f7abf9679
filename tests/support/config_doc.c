/* tests/support/config_doc.c — renders docs/config.md from the key table and
 * the rule table: one markdown table per section, the consistency rules in
 * the order they are checked, and the keys that need another setting,
 * spliced into the hand-written template docs/config.md.in at its marker
 * lines. */
#include "tests/support/config_doc.h"

#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* The `needs` condition of key k as docs/config.md shows it, e.g.
 * "`model.num_experts` > 0"; "" when none. */
static void needs_doc(int k, char *buf, size_t n) {
  mt_cfg_need c;
  if (mt_cfg_need_of(k, &c)) {
    buf[0] = '\0';
    return;
  }
  mt_cfg_need_text(&c, 1, buf, n);
}

enum { MARK_RULES = 100, MARK_NEEDS = 101 };

/* Section index of marker line [ls, le), MARK_RULES / MARK_NEEDS for the
 * rule markers, -2 when it is not a marker, -1 when it names nothing known. */
static int marker_section(const char *ls, const char *le) {
  size_t n = (size_t)(le - ls);
  if (n == strlen(MT_CONFIG_DOC_RULES) && !strncmp(ls, MT_CONFIG_DOC_RULES, n)) return MARK_RULES;
  if (n == strlen(MT_CONFIG_DOC_NEEDS) && !strncmp(ls, MT_CONFIG_DOC_NEEDS, n)) return MARK_NEEDS;
  size_t m = strlen(MT_CONFIG_DOC_MARKER), tail = strlen(" -->");
  if (n < m + tail || strncmp(ls, MT_CONFIG_DOC_MARKER, m) != 0 ||
      strncmp(le - tail, " -->", tail) != 0)
    return -2;
  const char *name = ls + m;
  size_t len = n - m - tail;
  if (len == 3 && strncmp(name, "top", 3) == 0) return 0;
  for (int s = 1; s < MT_CFG_NSECTIONS; s++)
    if (strlen(mt_cfg_sections[s]) == len && strncmp(name, mt_cfg_sections[s], len) == 0) return s;
  return -1;
}

/* Shortest decimal that reads back as the same float, exponent without
 * leading zeros ("1e-5", not "1e-05"). */
static void fmt_float(double v, char *buf, size_t n) {
  float f = (float)v;
  for (int prec = 1; prec <= 9; prec++) {
    snprintf(buf, n, "%.*g", prec, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  char *e = strchr(buf, 'e');
  if (e && (e[1] == '-' || e[1] == '+')) {
    char *d = e + 2;
    while (d[0] == '0' && d[1]) memmove(d, d + 1, strlen(d));
    if (e[1] == '+') memmove(e + 1, e + 2, strlen(e + 1));
  }
}

static void fmt_type(const mt_cfg_key *kd, char *buf, size_t n) {
  const char *base = "int";
  switch (kd->type) {
    case MT_CT_INT:
    case MT_CT_I64:
    case MT_CT_U64: base = "int"; break;
    case MT_CT_FLOAT: base = "float"; break;
    case MT_CT_BOOL: base = "bool"; break;
    case MT_CT_STR: base = "string"; break;
    case MT_CT_PATHS: base = "string or list"; break;
    case MT_CT_LAYER_FREQ: base = "int or list"; break;
    case MT_CT_I64x3: base = "list of 3 ints"; break;
  }
  snprintf(buf, n, "%s%s%s", base, (kd->flags & MT_CK_NULLABLE) ? ", nullable" : "",
           (kd->flags & MT_CK_DERIVED) ? ", derived" : "");
}

static void fmt_default(const mt_cfg_key *kd, char *buf, size_t n) {
  char num[32];
  if (kd->type == MT_CT_FLOAT) fmt_float(kd->def, num, sizeof num);
  else snprintf(num, sizeof num, "%.0f", kd->def);
  if (kd->flags & MT_CK_DERIVED)
    snprintf(buf, n, "%s", kd->def_str);
  else if (kd->flags & MT_CK_REQUIRED)
    snprintf(buf, n, kd->def != 0 ? "required (%s)" : "required", num);
  else if (kd->type == MT_CT_STR)
    snprintf(buf, n, kd->def_str ? "`%s`" : "null", kd->def_str ? kd->def_str : "");
  else if (kd->type == MT_CT_BOOL)
    snprintf(buf, n, "%s", kd->def != 0 ? "true" : "false");
  else if ((kd->flags & MT_CK_NULLABLE) && kd->def == 0)
    snprintf(buf, n, "null");
  else
    snprintf(buf, n, "%s", num);
}

static void fmt_range(const mt_cfg_key *kd, char *buf, size_t n) {
  unsigned f = kd->flags;
  char lo[32], hi[32];
  fmt_float(kd->lo, lo, sizeof lo);
  fmt_float(kd->hi, hi, sizeof hi);
  int has_lo = (f & (MT_CK_GE | MT_CK_GT)) != 0, has_hi = (f & (MT_CK_LE | MT_CK_LT)) != 0;
  buf[0] = '\0';
  if (kd->choices) {
    size_t used = 0;
    for (const char *q = kd->choices; *q && used < n;) {
      const char *bar = strchr(q, '|');
      int len = bar ? (int)(bar - q) : (int)strlen(q);
      used += (size_t)snprintf(buf + used, n - used, "%s`%.*s`", used ? " \\| " : "", len, q);
      q += len + (bar != NULL);
    }
  } else if (has_lo && has_hi)
    snprintf(buf, n, "%c%s, %s%c", (f & MT_CK_GE) ? '[' : '(', lo, hi, (f & MT_CK_LE) ? ']' : ')');
  else if (has_lo)
    snprintf(buf, n, "%s %s", (f & MT_CK_GE) ? "≥" : ">", lo);
  else if (has_hi)
    snprintf(buf, n, "%s %s", (f & MT_CK_LE) ? "≤" : "<", hi);
  else if (kd->type == MT_CT_U64)
    snprintf(buf, n, "[0, 2^53]");
  else if (kd->type == MT_CT_PATHS)
    snprintf(buf, n, "1 to %d prefixes", MT_MAX_DATA_PATHS);
  else
    snprintf(buf, n, "—");
}

static void write_table(FILE *out, int sec) {
  fprintf(out, "| key | type | default | range | Megatron flag | description |\n");
  fprintf(out, "|---|---|---|---|---|---|\n");
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    if (kd->sec != sec) continue;
    char type[64], def[128], range[128], needs[160];
    fmt_type(kd, type, sizeof type);
    fmt_default(kd, def, sizeof def);
    fmt_range(kd, range, sizeof range);
    needs_doc(k, needs, sizeof needs);
    fprintf(out, "| `%s` | %s | %s | %s | %s | %s%s%s%s |\n", kd->name, type, def, range,
            kd->megatron, kd->doc, needs[0] ? "; applies only with " : "", needs,
            needs[0] ? " (given otherwise: refused)" : "");
  }
}

/* The consistency rules, in the order they are checked: "1. `key`: text". */
static void write_rules(FILE *out) {
  const int n = mt_cfg_nrules();
  int i_out = 0;
  for (int pass = 1; pass >= 0; pass--) /* the ones before the ranges first */
    for (int i = 0; i < n; i++) {
      const mt_cfg_rule *r = mt_cfg_rule_at(i);
      if (r->before_ranges != pass) continue;
      fprintf(out, "%d. %s%s%s\n", ++i_out, r->doc,
              r->before_ranges ? " (checked before the ranges)" : "",
              r->note ? " (a note, not an error)" : "");
    }
}

/* The keys of the key table with a `needs` condition. */
static void write_needs(FILE *out) {
  fprintf(out, "| key | applies only with |\n|---|---|\n");
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    char needs[160];
    needs_doc(k, needs, sizeof needs);
    if (!needs[0]) continue;
    fprintf(out, "| `%s.%s` | %s |\n", mt_cfg_sections[mt_cfg_keys[k].sec], mt_cfg_keys[k].name,
            needs);
  }
}

/* Checks the markers and the table strings; 0 or 1 with a message. */
static int check(const char *tmpl, char *err, size_t errlen) {
  int seen[MT_CFG_NSECTIONS] = {0}, seen_rules = 0, seen_needs = 0;
  int line = 0;
  for (const char *ls = tmpl; *ls; line++) {
    const char *le = strchr(ls, '\n');
    if (!le) le = ls + strlen(ls);
    int s = marker_section(ls, le);
    if (s == -1) {
      snprintf(err, errlen, "template line %d: marker names no config section: %.*s", line + 1,
               (int)(le - ls), ls);
      return 1;
    }
    if (s == MARK_RULES || s == MARK_NEEDS) {
      int *seen_m = s == MARK_RULES ? &seen_rules : &seen_needs;
      if ((*seen_m)++) {
        snprintf(err, errlen, "template line %d: second marker %.*s", line + 1, (int)(le - ls), ls);
        return 1;
      }
      ls = *le ? le + 1 : le;
      continue;
    }
    if (s >= 0 && seen[s]++) {
      snprintf(err, errlen, "template line %d: second marker for section '%s'", line + 1,
               s ? mt_cfg_sections[s] : "top");
      return 1;
    }
    ls = *le ? le + 1 : le;
  }
  for (int s = 0; s < MT_CFG_NSECTIONS; s++)
    if (!seen[s]) {
      snprintf(err, errlen, "template has no marker line '%s%s -->'", MT_CONFIG_DOC_MARKER,
               s ? mt_cfg_sections[s] : "top");
      return 1;
    }
  if (!seen_rules || !seen_needs) {
    snprintf(err, errlen, "template has no marker line '%s'",
             seen_rules ? MT_CONFIG_DOC_NEEDS : MT_CONFIG_DOC_RULES);
    return 1;
  }
  for (int k = 0; k < mt_cfg_nkeys; k++)
    if (strchr(mt_cfg_keys[k].megatron, '|') || strchr(mt_cfg_keys[k].doc, '|')) {
      snprintf(err, errlen, "key '%s': '|' in its Megatron flag or description", mt_cfg_keys[k].name);
      return 1;
    }
  return 0;
}

int mt_config_doc_render(const char *tmpl, FILE *out, char *err, size_t errlen) {
  if (check(tmpl, err, errlen)) return 1;
  fprintf(out, "<!-- Generated by `make docs` from docs/config.md.in and the key table in "
               "config/config_table.c and its config/keys_*.inc: edit those, not this file. -->\n");
  for (const char *ls = tmpl; *ls;) {
    const char *le = strchr(ls, '\n');
    if (!le) le = ls + strlen(ls);
    int s = marker_section(ls, le);
    if (s == MARK_RULES) write_rules(out);
    else if (s == MARK_NEEDS) write_needs(out);
    else if (s >= 0) write_table(out, s);
    else fprintf(out, "%.*s\n", (int)(le - ls), ls);
    ls = *le ? le + 1 : le;
  }
  return 0;
}
