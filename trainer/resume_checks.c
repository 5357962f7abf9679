/* trainer/resume_checks.c — see resume_checks.h. */
#include "trainer/resume_checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/util.h"

/* The "training" object of a saved config, or NULL. */
static const cJSON *saved_training(const cJSON *root) {
  if (!root || !cJSON_IsObject(root)) return NULL;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "training");
  return cJSON_IsObject(t) ? t : NULL;
}

static int saved_num(const cJSON *t, const char *k, double *v) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(t, k);
  if (!cJSON_IsNumber(x)) return 0;
  *v = x->valuedouble;
  return 1;
}

/* The shortest decimal that reads back as f. */
static void fmt_float(char *out, size_t n, float f) {
  for (int p = 1; p <= 9; p++) {
    snprintf(out, n, "%.*g", p, (double)f);
    if ((float)strtod(out, NULL) == f) return;
  }
}

/* Appends "KEY: checkpoint A, this run B" to buf. */
static void add_diff(char *buf, size_t n, const char *key, const char *a, const char *b) {
  size_t l = strlen(buf);
  if (l < n) snprintf(buf + l, n - l, "%straining.%s: checkpoint %s, this run %s", l ? "; " : "",
                      key, a, b);
}

int mt_resume_check_schedule(const char *saved_config_json, const mt_config *cfg,
                             const char *load_dir, int verbose, mt_lr_schedule *sched, char *err,
                             size_t errlen) {
  if (!saved_config_json) return 0;
  cJSON *root = cJSON_Parse(saved_config_json);
  const cJSON *t = saved_training(root);
  if (!t) {
    cJSON_Delete(root);
    return 0;
  }
  const mt_training_config *c = &cfg->training;
  mt_lr_schedule ck = *sched; /* the checkpoint's schedule, field by field below */
  char diff[1024] = "", a[64], b[64];
  double v;
  if (saved_num(t, "lr", &v) && (float)v != c->lr) {
    ck.max_lr = mt_lr_decimal((float)v);
    fmt_float(a, sizeof a, (float)v);
    fmt_float(b, sizeof b, c->lr);
    add_diff(diff, sizeof diff, "lr", a, b);
  }
  if (saved_num(t, "min_lr", &v) && (float)v != c->min_lr) {
    ck.min_lr = mt_lr_decimal((float)v);
    fmt_float(a, sizeof a, (float)v);
    fmt_float(b, sizeof b, c->min_lr);
    add_diff(diff, sizeof diff, "min_lr", a, b);
  }
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(t, "lr_decay_style");
  if (cJSON_IsString(st) && strcmp(st->valuestring, c->lr_decay_style) != 0 &&
      mt_lr_style_parse(st->valuestring) >= 0) {
    ck.style = mt_lr_style_parse(st->valuestring);
    snprintf(a, sizeof a, "\"%.40s\"", st->valuestring);
    snprintf(b, sizeof b, "\"%.40s\"", c->lr_decay_style);
    add_diff(diff, sizeof diff, "lr_decay_style", a, b);
  }
  if (saved_num(t, "lr_warmup_iters", &v) && (int64_t)v != c->lr_warmup_iters) {
    ck.warmup_iters = (int64_t)v;
    snprintf(a, sizeof a, "%lld", (long long)v);
    snprintf(b, sizeof b, "%lld", (long long)c->lr_warmup_iters);
    add_diff(diff, sizeof diff, "lr_warmup_iters", a, b);
  }
  if (saved_num(t, "lr_decay_iters", &v) && (int64_t)v != c->lr_decay_iters) {
    ck.decay_iters = (int64_t)v;
    snprintf(a, sizeof a, "%lld", (long long)v);
    double ti;
    if (saved_num(t, "train_iters", &ti) && (int64_t)ti == (int64_t)v)
      snprintf(a, sizeof a, "%lld (= its training.train_iters)", (long long)v);
    snprintf(b, sizeof b, "%lld%s", (long long)c->lr_decay_iters,
             c->lr_decay_iters == c->train_iters ? " (= this run's training.train_iters)" : "");
    add_diff(diff, sizeof diff, "lr_decay_iters", a, b);
  }
  cJSON_Delete(root);
  if (!diff[0]) return 0;
  if (c->override_opt_param_scheduler) {
    if (verbose)
      printf("> training.override_opt_param_scheduler: this config's LR schedule replaces the "
             "checkpoint's (%s)\n", diff);
    return 0;
  }
  if (c->use_checkpoint_opt_param_scheduler) {
    *sched = ck;
    if (verbose)
      printf("> training.use_checkpoint_opt_param_scheduler: the checkpoint's LR schedule is "
             "used, not this config's (%s)\n", diff);
    return 0;
  }
  snprintf(err, errlen,
           "checkpoint '%s' was trained with another learning-rate schedule: %s (expected equal "
           "values to resume; set training.override_opt_param_scheduler: true to use this "
           "config's schedule, or training.use_checkpoint_opt_param_scheduler: true to keep the "
           "checkpoint's)",
           load_dir, diff);
  return -1;
}

void mt_resume_note_batch(const char *saved_config_json, const mt_config *cfg,
                          int64_t consumed_samples, int verbose) {
  if (!saved_config_json || !verbose) return;
  cJSON *root = cJSON_Parse(saved_config_json);
  const cJSON *t = saved_training(root);
  double v;
  if (t && saved_num(t, "global_batch_size", &v) && (int64_t)v != cfg->training.global_batch_size)
    printf("> note: global_batch_size changed from %lld to %d; the data continues at consumed "
           "sample %lld\n",
           (long long)v, cfg->training.global_batch_size, (long long)consumed_samples);
  cJSON_Delete(root);
}

char *mt_resume_legacy_config(const char *load_dir, int64_t iteration) {
  char path[MT_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/iter_%07lld/metadata.json", load_dir, (long long)iteration);
  size_t len = 0;
  int e = 0;
  char *text = mt_read_file(path, (size_t)16 << 20, &len, &e);
  if (!text) return NULL;
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *cfg = root ? cJSON_GetObjectItemCaseSensitive(root, "config") : NULL;
  char *out = NULL;
  if (cJSON_IsObject(cfg)) {
    char *s = cJSON_PrintUnformatted(cfg);
    if (s) out = mt_xstrdup(s);
    cJSON_free(s);
  }
  cJSON_Delete(root);
  return out;
}

/* The model keys that fix how the stored tensors are interpreted (Megatron's
 * check_checkpoint_args); derived ones are compared as resolved. */
static const char *const shape_keys[] = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
    "kv_channels", "swiglu", "normalization", "position_embedding_type", "rotary_percent",
    "rotary_interleaved", "num_experts", "moe_ffn_hidden_size", "vocab_size", "qk_layernorm",
    "untie_embeddings_and_output_weights", "add_bias_linear",
    "moe_shared_expert_intermediate_size", "moe_layer_freq"};

static const cJSON *model_of(const cJSON *root) {
  const cJSON *m = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
  return cJSON_IsObject(m) ? m : NULL;
}

/* model.moe_layer_freq as the same pattern: an integer k (every k-th layer)
 * and the list [1, 0, ...] of the same layers are one setting. */
static int same_layer_freq(const cJSON *a, const cJSON *b, const cJSON *sa, const cJSON *sb) {
  const cJSON *na = cJSON_GetObjectItemCaseSensitive(sa, "num_layers");
  const cJSON *nb = cJSON_GetObjectItemCaseSensitive(sb, "num_layers");
  if (!cJSON_IsNumber(na) || !cJSON_IsNumber(nb) || na->valueint != nb->valueint) return 0;
  for (int l = 0; l < na->valueint; l++) {
    int moe[2];
    const cJSON *f[2] = {a, b};
    for (int k = 0; k < 2; k++) {
      if (cJSON_IsArray(f[k])) {
        const cJSON *x = cJSON_GetArrayItem(f[k], l);
        if (!cJSON_IsNumber(x)) return 0;
        moe[k] = x->valueint != 0;
      } else if (cJSON_IsNumber(f[k]) && f[k]->valueint >= 1) {
        moe[k] = l % f[k]->valueint == 0;
      } else {
        return 0;
      }
    }
    if (moe[0] != moe[1]) return 0;
  }
  return 1;
}

int mt_resume_check_model(const char *saved_config_json, const mt_config *cfg,
                          const char *load_dir, char *err, size_t errlen) {
  if (!saved_config_json || !cfg->json) return 0;
  cJSON *saved = cJSON_Parse(saved_config_json), *mine = cJSON_Parse(cfg->json);
  const cJSON *s = model_of(saved), *m = model_of(mine);
  char diff[1536] = "";
  int n_diff = 0;
  for (size_t k = 0; s && m && k < sizeof shape_keys / sizeof shape_keys[0]; k++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, shape_keys[k]);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(m, shape_keys[k]);
    if (!a || !b || cJSON_Compare(a, b, 1)) continue; /* a key the checkpoint lacks: no check */
    if (!strcmp(shape_keys[k], "moe_layer_freq") && same_layer_freq(a, b, s, m)) continue;
    char *as = cJSON_PrintUnformatted(a), *bs = cJSON_PrintUnformatted(b);
    size_t l = strlen(diff);
    if (l < sizeof diff)
      snprintf(diff + l, sizeof diff - l, "%smodel.%s %.100s but the config gives %.100s",
               n_diff ? ", " : "", shape_keys[k], as ? as : "?", bs ? bs : "?");
    n_diff++;
    cJSON_free(as);
    cJSON_free(bs);
  }
  cJSON_Delete(saved);
  cJSON_Delete(mine);
  if (!n_diff) return 0;
  snprintf(err, errlen,
           "checkpoint '%s' was trained with %s; a checkpoint loads only into the model shape "
           "that wrote it",
           load_dir, diff);
  return -1;
}
