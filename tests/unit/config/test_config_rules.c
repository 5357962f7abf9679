/* tests/unit/config/test_config_rules.c — the consistency rules docs/config.md
 * lists are the checks that run: every row of the rule table
 * (config/config_check.c, config_rules_model.c; the page is generated from
 * the same rows) refuses its own example config, by that row's check, with
 * a message naming the row's key (a note row adds its note instead); and
 * every key of the key table that needs another setting (its `needs`
 * column, the page's "Keys that need another setting") is refused when
 * given without it, naming it and the key that would enable it. Also: the
 * canonical JSON leaves such keys out and loads again, a config written by
 * an older build (every key) loads with mt_config_load_saved, "--set
 * KEY=null" removes a key, and mt_config_keys_switched_off names what a
 * layout change turns off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/config_internal.h"
#include "core/fileio.h"
#include "core/json.h"

/* Key index of key k's `needs` condition, or -1 (none, or it does not parse). */
static int needs_key(int k) {
  mt_cfg_need c;
  return mt_cfg_need_of(k, &c) ? -1 : c.key;
}

static const char *SRC = "rules.json";

/* Load MT_CFG_RULE_BASE with n overrides on `world` ranks into ctx c. */
static int load(mt_cfg_ctx *c, mt_config *cfg, const char *const *ov, int n, int world, char *err,
                size_t errlen) {
  memset(c, 0, sizeof *c);
  c->src = SRC;
  c->err = err;
  c->errlen = errlen;
  err[0] = '\0';
  return mt_cfg_load_ctx(c, cfg, MT_CFG_RULE_BASE, ov, n, world);
}

/* "WORLD: a=b; c=d" -> world, sets (pointers into buf) */
static int parse_example(const char *ex, char *buf, size_t n, const char **sets, int max,
                         int *world) {
  snprintf(buf, n, "%s", ex);
  char *colon = strchr(buf, ':');
  assert_non_null(colon);
  *colon = '\0';
  *world = atoi(buf);
  int k = 0;
  for (char *q = colon + 1; *q && k < max;) {
    while (*q == ' ') q++;
    char *semi = strchr(q, ';');
    if (semi) *semi = '\0';
    if (*q) sets[k++] = q;
    if (!semi) break;
    q = semi + 1;
  }
  return k;
}

/* Does err name one of the space-separated keys as the message's key? */
static int names_key(const char *err, const char *keys) {
  if (!strcmp(keys, "*")) return 1;
  char list[512], want[160];
  snprintf(list, sizeof list, "%s", keys);
  for (char *t = strtok(list, " "); t; t = strtok(NULL, " ")) {
    snprintf(want, sizeof want, "%s: %s", SRC, t);
    if (!strncmp(err, want, strlen(want)) && (err[strlen(want)] == ':' || err[strlen(want)] == ' '))
      return 1;
  }
  return 0;
}

static void test_every_rule_is_checked(void **state) {
  (void)state;
  const int n = mt_cfg_nrules();
  assert_true(n > 30);
  for (int i = 0; i < n; i++) {
    const mt_cfg_rule *r = mt_cfg_rule_at(i);
    assert_non_null(r->doc);
    assert_true(strlen(r->doc) > 10);
    char buf[512], err[1024];
    const char *sets[16];
    int world;
    const int ns = parse_example(r->example, buf, sizeof buf, sets, 16, &world);
    mt_cfg_ctx c;
    mt_config cfg;
    const int rc = load(&c, &cfg, sets, ns, world, err, sizeof err);
    if (r->note) {
      if (rc != 0 || c.rule != i) fail_msg("note rule %d (%s): rc %d, rule %d: %s", i, r->keys, rc, c.rule, err);
      if (!strstr(cfg.notes, strtok(strcpy(buf, r->keys), " ")))
        fail_msg("note rule %d: notes '%s' lack %s", i, cfg.notes, r->keys);
      print_message("rule %2d note  %s\n", i, cfg.notes);
      mt_config_free(&cfg);
      continue;
    }
    if (rc != 2 || c.rule != i)
      fail_msg("rule %d (%s, example '%s'): rc %d, failed rule %d: %s", i, r->keys, r->example, rc,
               c.rule, err);
    if (!names_key(err, r->keys)) fail_msg("rule %d: message '%s' does not name %s", i, err, r->keys);
    print_message("rule %2d ok    %s\n", i, err + strlen(SRC) + 2);
  }
  /* the keys each rule names exist */
  for (int i = 0; i < n; i++) {
    char list[512];
    snprintf(list, sizeof list, "%s", mt_cfg_rule_at(i)->keys);
    for (char *t = strtok(list, " "); t; t = strtok(NULL, " "))
      if (strcmp(t, "*") && mt_cfg_find_dotted(t) < 0) fail_msg("rule %d names unknown key %s", i, t);
  }
}

/* A value of key k that its own type and range accept. */
static void some_value(int k, char *buf, size_t n) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  switch (kd->type) {
    case MT_CT_BOOL: snprintf(buf, n, "%s", kd->def != 0 ? "true" : "false"); break;
    case MT_CT_STR:
      if (kd->def_str) snprintf(buf, n, "%s", kd->def_str);
      else if (kd->choices) snprintf(buf, n, "%.*s", (int)strcspn(kd->choices, "|"), kd->choices);
      else snprintf(buf, n, "some/path"); /* a free string (a file path), no default */
      break;
    case MT_CT_FLOAT: snprintf(buf, n, "%g", kd->def != 0 ? kd->def : 1.0); break;
    case MT_CT_I64x3: snprintf(buf, n, "[2,2,8]"); break;
    default: /* integers: the default, or 1 for a derived or null default */
      snprintf(buf, n, "%.0f", (kd->flags & MT_CK_DERIVED) || kd->def == 0 ? 1.0 : kd->def);
  }
}

/* An override that makes key k's own condition fail. */
static void breaking(int k, char *buf, size_t n) {
  const char *needs = mt_cfg_keys[k].needs;
  const int ck = needs_key(k);
  const mt_cfg_key *kd = &mt_cfg_keys[ck];
  const char *op = needs + strcspn(needs, "=!>");
  char name[96];
  snprintf(name, sizeof name, "%.*s", (int)(op - needs), needs);
  if (!*op) snprintf(buf, n, "%s=%s", name, kd->type == MT_CT_BOOL ? "false" : "null");
  else if (*op == '>' || *op == '!') snprintf(buf, n, "%s=%s", name, op + (*op == '!' ? 2 : 1));
  else if (kd->type == MT_CT_STR) { /* another choice */
    const char *c = kd->choices;
    while (!strncmp(c, op + 1, strcspn(c, "|"))) c += strcspn(c, "|") + 1;
    snprintf(buf, n, "%s=%.*s", name, (int)strcspn(c, "|"), c);
  } else snprintf(buf, n, "%s=%g", name, strtod(op + 1, NULL) + 1);
}

static void test_every_needs_key(void **state) {
  (void)state;
  int n_ruled = 0, needs_rule = -1;
  for (int i = 0; i < mt_cfg_nrules(); i++)
    if (mt_cfg_rule_at(i)->check == mt_cfg_check_needs) needs_rule = i;
  assert_true(needs_rule >= 0);
  mt_config base;
  mt_cfg_ctx c;
  char err[1024];
  assert_int_equal(load(&c, &base, NULL, 0, 1, err, sizeof err), 0);
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    if (!mt_cfg_keys[k].needs) continue;
    n_ruled++;
    const int ck = needs_key(k);
    if (ck < 0) fail_msg("key %s: needs '%s' does not parse", mt_cfg_keys[k].name, mt_cfg_keys[k].needs);
    /* conditions are evaluated before derivation (mt_cfg_drop_dead) */
    assert_false(mt_cfg_keys[ck].flags & MT_CK_DERIVED);
    char set[160], val[64], brk[160];
    some_value(k, val, sizeof val);
    snprintf(set, sizeof set, "%s.%s=%s", mt_cfg_sections[mt_cfg_keys[k].sec], mt_cfg_keys[k].name,
             val);
    const char *ov[2] = {set, brk};
    int nov = 1;
    if (mt_cfg_applies(&base, k, NULL)) { /* the base enables it: switch that off */
      breaking(k, brk, sizeof brk);
      nov = 2;
    }
    mt_config cfg;
    const int rc = load(&c, &cfg, ov, nov, 1, err, sizeof err);
    if (rc != 2 || c.rule != needs_rule)
      fail_msg("%s (%s%s%s): rc %d, rule %d: %s", set, nov > 1 ? "with " : "", nov > 1 ? brk : "",
               "", rc, c.rule, err);
    char want[200];
    snprintf(want, sizeof want, "%s: %s.%s (from --set): ", SRC,
             mt_cfg_sections[mt_cfg_keys[k].sec], mt_cfg_keys[k].name);
    if (strncmp(err, want, strlen(want)) || !strstr(err, " has no effect with "))
      fail_msg("'%s' does not start with '%s... has no effect with'", err, want);
    /* it names a key up its chain of conditions as the one that enables it */
    int named = 0;
    for (int j = ck, step = 0; j >= 0 && step < 8; step++) {
      char dotted[128];
      snprintf(dotted, sizeof dotted, "expected %s.%s ", mt_cfg_sections[mt_cfg_keys[j].sec],
               mt_cfg_keys[j].name);
      named |= strstr(err, dotted) != NULL;
      j = mt_cfg_keys[j].needs ? needs_key(j) : -1;
    }
    if (!named) fail_msg("'%s' names no enabling key of %s", err, mt_cfg_keys[k].name);
    print_message("%-55s -> %s\n", set, strstr(err, "has no effect"));
  }
  print_message("%d keys need another setting\n", n_ruled);
  assert_true(n_ruled >= 30);
  mt_config_free(&base);
}

static void test_canonical_and_saved(void **state) {
  (void)state;
  mt_config cfg, again;
  mt_cfg_ctx c;
  char err[1024];
  /* a dense model: no MoE key, no rotary key, no num_query_groups in the
   * canonical JSON, which loads again as a user's config */
  assert_int_equal(load(&c, &cfg, NULL, 0, 1, err, sizeof err), 0);
  assert_null(strstr(cfg.json, "moe_router_topk"));
  assert_null(strstr(cfg.json, "expert_tensor_parallel_size"));
  assert_null(strstr(cfg.json, "rotary_base"));
  assert_null(strstr(cfg.json, "num_query_groups"));
  assert_null(strstr(cfg.json, "virtual_pipeline_model_parallel_size"));
  assert_non_null(strstr(cfg.json, "\"num_experts\":null"));
  assert_int_equal(mt_config_load_string(&again, cfg.json, "canonical", NULL, 0, 1, err, sizeof err), 0);
  assert_string_equal(again.json, cfg.json);
  mt_config_free(&again);
  mt_config_free(&cfg);
  /* issue 30's keys: per-split paths (no split, no data_path written),
   * sample-based WSD, a weight-decay increment, no warmup (lr_warmup_init
   * written as null): the canonical JSON loads again as a user's config */
  const char *i30[] = {"data.data_path=null", "data.train_data_path=[\"t\"]",
                       "data.valid_data_path=[\"v\"]", "training.train_iters=null",
                       "training.train_samples=40", "training.lr_decay_style=WSD",
                       "training.lr_wsd_decay_samples=8", "training.weight_decay_incr_style=linear",
                       "training.end_weight_decay=0.1"};
  assert_int_equal(load(&c, &cfg, i30, (int)(sizeof i30 / sizeof i30[0]), 1, err, sizeof err), 0);
  assert_null(strstr(cfg.json, "\"split\""));
  assert_non_null(strstr(cfg.json, "\"lr_wsd_decay_style\":\"exponential\""));
  assert_non_null(strstr(cfg.json, "\"lr_warmup_init\":null"));
  assert_non_null(strstr(cfg.json, "\"lr_wsd_decay_samples\":8"));
  if (mt_config_load_string(&again, cfg.json, "canonical", NULL, 0, 1, err, sizeof err))
    fail_msg("%s", err);
  assert_string_equal(again.json, cfg.json);
  mt_config_free(&again);
  mt_config_free(&cfg);
  /* a checkpoint's config written by an older build (every key, the MoE keys
   * of a dense model included): refused as a user's config, loaded as a
   * saved one with the same model */
  size_t len;
  int e;
  char *meta = mt_read_file("tests/fuzz/seeds/dckpt_meta_gpt_test.json", 0, &len, &e);
  if (!meta) {
    print_message("tests/fuzz/seeds not found from here; skipping\n");
    skip();
  }
  cJSON *m = mt_json_parse(meta, len, MT_JSON_INT53, "seed", err, sizeof err);
  assert_non_null(m);
  char *old = mt_json_print(cJSON_GetObjectItemCaseSensitive(m, "config"));
  cJSON_Delete(m);
  assert_int_equal(mt_config_load_string(&cfg, old, "old", NULL, 0, 1, err, sizeof err), 2);
  print_message("as a user's config: %s\n", err);
  assert_non_null(strstr(err, "has no effect"));
  assert_int_equal(mt_config_load_saved(&cfg, old, "old", NULL, 0, 1, err, sizeof err), 0);
  assert_int_equal(cfg.model.moe_router_topk, 2);
  assert_int_equal(cfg.model.num_query_groups, 4);
  assert_null(strstr(cfg.json, "moe_router_topk"));
  /* a --set that does not apply is still refused in a saved config */
  const char *ov[] = {"model.moe_router_topk=4"};
  assert_int_equal(mt_config_load_saved(&again, old, "old", ov, 1, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "model.moe_router_topk (from --set): 4 has no effect"));
  mt_config_free(&cfg);
  free(old);
  free(meta);
}

/* A checkpoint of an MLA model with rope_type "rope" saves every key, the
 * YaRN-only ones too (r_yarn_keys): loading its config as saved resets them;
 * as a user's config, or given by --set, they are refused. */
static void test_saved_mla_rope(void **state) {
  (void)state;
  const char *json =
      "{\"model\": {\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
      "\"seq_length\": 32, \"position_embedding_type\": \"rope\", "
      "\"multi_latent_attention\": true, \"rope_type\": \"rope\", "
      "\"original_max_position_embeddings\": 4096, \"beta_fast\": 32, \"beta_slow\": 1, "
      "\"mscale\": 1.0}, \"training\": {\"micro_batch_size\": 2, \"train_iters\": 10, "
      "\"lr\": 1e-3}, \"data\": {\"data_path\": \"x\"}}";
  mt_config cfg;
  char err[1024];
  assert_int_equal(mt_config_load_string(&cfg, json, "user", NULL, 0, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "has no effect with rope_type \"rope\""));
  assert_int_equal(mt_config_load_saved(&cfg, json, "saved", NULL, 0, 1, err, sizeof err), 0);
  assert_int_equal(cfg.model.original_max_position_embeddings, 4096); /* the default */
  mt_config_free(&cfg);
  const char *ov[] = {"model.beta_fast=16"};
  assert_int_equal(mt_config_load_saved(&cfg, json, "saved", ov, 1, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "model.beta_fast (from --set)"));
}

static void test_set_null_and_switched_off(void **state) {
  (void)state;
  mt_config full, sel;
  mt_cfg_ctx c;
  char err[1024];
  const char *f[] = {"model.recompute_granularity=full", "model.recompute_num_layers=2"};
  assert_int_equal(load(&c, &full, f, 2, 1, err, sizeof err), 0);
  /* switching to selective with the key still given: refused; removed: fine */
  const char *s1[] = {"model.recompute_granularity=full", "model.recompute_num_layers=2",
                      "model.recompute_granularity=selective"};
  assert_int_equal(load(&c, &sel, s1, 3, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "model.recompute_num_layers (from --set): 2 has no effect with "
                              "recompute_granularity \"selective\""));
  const char *s2[] = {"model.recompute_granularity=full", "model.recompute_num_layers=2",
                      "model.recompute_granularity=selective", "model.recompute_num_layers=null"};
  assert_int_equal(load(&c, &sel, s2, 4, 1, err, sizeof err), 0);
  assert_int_equal(sel.model.recompute_num_layers, 1); /* the default */
  char names[8][96];
  assert_int_equal(mt_config_keys_switched_off(&full, &sel, names, 8), 1);
  assert_string_equal(names[0], "model.recompute_num_layers");
  assert_int_equal(mt_config_keys_switched_off(&sel, &full, names, 8), 0);
  mt_config_free(&full);
  mt_config_free(&sel);
  /* a required key keeps its type error */
  const char *lr[] = {"training.lr=null"};
  assert_int_equal(load(&c, &sel, lr, 1, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "expected a number, got null"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_rule_is_checked),
      cmocka_unit_test(test_every_needs_key),
      cmocka_unit_test(test_canonical_and_saved),
      cmocka_unit_test(test_saved_mla_rope),
      cmocka_unit_test(test_set_null_and_switched_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
