/* trainer/resume_checks.c — see resume_checks.h. */
#include "trainer/resume_checks.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/util.h"
#include "trainer/lr_config.h"

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

/* The keys Megatron's OptimizerParamScheduler.load_state_dict checks
 * (_check_and_set), as megatrain's config names them, and the other inputs
 * of its get_lr / get_wd that megatrain's config holds (warmup init and
 * fraction, WSD). Megatron's start_wd and end_wd are training.weight_decay
 * with the constant weight_decay_incr_style, start_weight_decay and
 * end_weight_decay with the others (a key the saved config leaves out, as
 * it does a key without effect, is not compared). Docs:
 * docs/checkpoint.md "Loading". */
typedef enum { SK_FLOAT, SK_I64, SK_STYLE } sched_kind;
#define OFF(f) offsetof(mt_training_config, f), sizeof(((mt_training_config *)0)->f)
static const struct {
  const char *key;      /* training.KEY */
  const char *megatron; /* the name in Megatron's assertion, or its field */
  sched_kind kind;
  size_t off, size;     /* in mt_training_config */
  int (*parse)(const char *); /* SK_STYLE: the names it accepts (>= 0) */
} k_sched[] = {
    {"lr", "learning rate", SK_FLOAT, OFF(lr), NULL},
    {"min_lr", "minimum learning rate", SK_FLOAT, OFF(min_lr), NULL},
    {"lr_warmup_iters", "warmup iterations", SK_I64, OFF(lr_warmup_iters), NULL},
    {"lr_warmup_samples", "warmup iterations (in samples)", SK_I64, OFF(lr_warmup_samples),
     NULL},
    {"lr_warmup_fraction", "warmup iterations (a fraction of the decay)", SK_FLOAT,
     OFF(lr_warmup_fraction), NULL},
    {"lr_warmup_init", "init_lr", SK_FLOAT, OFF(lr_warmup_init), NULL},
    {"lr_decay_iters", "total number of iterations", SK_I64, OFF(lr_decay_iters), NULL},
    {"lr_decay_samples", "total number of iterations (in samples)", SK_I64,
     OFF(lr_decay_samples), NULL},
    {"lr_decay_style", "learning rate decay style", SK_STYLE, OFF(lr_decay_style),
     mt_lr_style_parse},
    {"lr_wsd_decay_style", "wsd_decay_style", SK_STYLE, OFF(lr_wsd_decay_style),
     mt_wsd_style_parse},
    {"lr_wsd_decay_iters", "wsd_decay_steps", SK_I64, OFF(lr_wsd_decay_iters), NULL},
    {"lr_wsd_decay_samples", "wsd_decay_steps (in samples)", SK_I64, OFF(lr_wsd_decay_samples),
     NULL},
    {"weight_decay", "start weight decay and end weight decay", SK_FLOAT, OFF(weight_decay),
     NULL},
    {"start_weight_decay", "start weight decay", SK_FLOAT, OFF(start_weight_decay), NULL},
    {"end_weight_decay", "end weight decay", SK_FLOAT, OFF(end_weight_decay), NULL},
    {"weight_decay_incr_style", "weight decay incr style", SK_STYLE,
     OFF(weight_decay_incr_style), mt_wd_style_parse},
};
#undef OFF

/* Appends "training.KEY: checkpoint A, this run B" to buf. */
static void add_diff(char *buf, size_t n, const char *key, const char *a, const char *b) {
  size_t l = strlen(buf);
  if (l < n) snprintf(buf + l, n - l, "%straining.%s: checkpoint %s, this run %s", l ? "; " : "",
                      key, a, b);
}

/* Compare row i of k_sched: 1 when the checkpoint's value (written into
 * *ck) differs from this run's (c), with both values in a and b. A number
 * saved as null is 0 (a nullable key's "unset", e.g. lr_warmup_init). */
static int differs(int i, const cJSON *t, const mt_training_config *c, mt_training_config *ck,
                   char *a, char *b, size_t n) {
  const char *key = k_sched[i].key;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(t, key);
  void *mine = (char *)c + k_sched[i].off, *theirs = (char *)ck + k_sched[i].off;
  const int null = cJSON_IsNull(x);
  const double xv = null ? 0 : cJSON_IsNumber(x) ? x->valuedouble : NAN;
  switch (k_sched[i].kind) {
    case SK_FLOAT:
      if (isnan(xv) || (float)xv == *(float *)mine) return 0;
      *(float *)theirs = (float)xv;
      if (null) snprintf(a, n, "null");
      else fmt_float(a, n, *(float *)theirs);
      fmt_float(b, n, *(float *)mine);
      return 1;
    case SK_I64: {
      if (isnan(xv) || !(fabs(xv) <= MT_JSON_INT_MAX) || (int64_t)xv == *(int64_t *)mine)
        return 0;
      const int64_t v = (int64_t)xv;
      *(int64_t *)theirs = v;
      if (null) snprintf(a, n, "null");
      else snprintf(a, n, "%lld", (long long)v);
      snprintf(b, n, "%lld", (long long)*(int64_t *)mine);
      if (!strcmp(key, "lr_decay_iters")) {
        const cJSON *ti = cJSON_GetObjectItemCaseSensitive(t, "train_iters");
        if (cJSON_IsNumber(ti) && (int64_t)ti->valuedouble == v)
          snprintf(a, n, "%lld (= its training.train_iters)", (long long)v);
        if (c->lr_decay_iters == c->train_iters)
          snprintf(b, n, "%lld (= this run's training.train_iters)", (long long)c->lr_decay_iters);
      }
      return 1;
    }
    case SK_STYLE:
      if (!cJSON_IsString(x) || !strcmp(x->valuestring, (const char *)mine) ||
          k_sched[i].parse(x->valuestring) < 0)
        return 0;
      snprintf((char *)theirs, k_sched[i].size, "%s", x->valuestring);
      snprintf(a, n, "\"%.40s\"", x->valuestring);
      snprintf(b, n, "\"%.40s\"", (const char *)mine);
      return 1;
  }
  return 0;
}

int mt_resume_check_schedule(const char *saved_config_json, const mt_config *cfg,
                             const char *load_dir, int verbose, mt_lr_schedule *sched,
                             float *weight_decay, char *err, size_t errlen) {
  if (!saved_config_json) return 0;
  char e[8];
  cJSON *root = mt_json_parse(saved_config_json, strlen(saved_config_json), MT_JSON_INT53, "", e,
                              sizeof e);
  const cJSON *t = saved_training(root);
  if (!t) {
    cJSON_Delete(root);
    return 0;
  }
  const mt_training_config *c = &cfg->training;
  mt_training_config ck = *c; /* the checkpoint's values, key by key below */
  char diff[1536] = "", a[96], b[96];
  for (int i = 0; i < (int)(sizeof k_sched / sizeof k_sched[0]); i++)
    if (differs(i, t, c, &ck, a, b, sizeof a)) add_diff(diff, sizeof diff, k_sched[i].key, a, b);
  cJSON_Delete(root);
  if (!diff[0]) return 0;
  if (c->override_opt_param_scheduler) {
    if (verbose)
      printf("> training.override_opt_param_scheduler: this config's LR schedule and weight "
             "decay replace the checkpoint's (%s)\n", diff);
    return 0;
  }
  if (c->use_checkpoint_opt_param_scheduler) {
    *sched = mt_trainer_lr_schedule(&ck);
    *weight_decay = ck.weight_decay;
    if (verbose)
      printf("> training.use_checkpoint_opt_param_scheduler: the checkpoint's LR schedule is "
             "used, and its weight decay, not this config's (%s)\n", diff);
    return 0;
  }
  snprintf(err, errlen,
           "checkpoint '%s' was trained with another optimizer schedule (learning rate and weight "
           "decay, as Megatron's OptimizerParamScheduler checks on load): %s (expected equal "
           "values to resume; set training.override_opt_param_scheduler: true to use this "
           "config's values, or training.use_checkpoint_opt_param_scheduler: true to keep the "
           "checkpoint's)",
           load_dir, diff);
  return -1;
}

void mt_resume_sched_fill(mt_ckpt_sched *out, const mt_lr_schedule *sched, int64_t num_steps,
                          const mt_training_config *cfg, int64_t next_gbs) {
  memset(out, 0, sizeof *out);
  const mt_lr_steps st = mt_lr_schedule_steps(sched);
  out->present = 1;
  out->max_lr = sched->max_lr;
  out->min_lr = sched->min_lr;
  out->init_lr = sched->init_lr;
  out->lr_warmup_steps = st.warmup;
  out->lr_decay_steps = st.decay;
  out->wsd_decay_steps = st.wsd_decay;
  out->wd_incr_steps = st.wd_incr;
  out->num_steps = num_steps;
  snprintf(out->lr_decay_style, sizeof out->lr_decay_style, "%s", cfg->lr_decay_style);
  snprintf(out->lr_wsd_decay_style, sizeof out->lr_wsd_decay_style, "%s",
           cfg->lr_wsd_decay_style);
  snprintf(out->wd_incr_style, sizeof out->wd_incr_style, "%s", cfg->weight_decay_incr_style);
  out->start_wd = sched->start_wd;
  out->end_wd = sched->end_wd;
  memcpy(out->rampup_batch_size, cfg->rampup_batch_size, sizeof out->rampup_batch_size);
  out->global_batch_size = next_gbs;
}

/* Appends "NAME (KEY): checkpoint A, this run B" to buf. */
static void add_state_diff(char *buf, size_t n, const char *name, const char *key, double a,
                           double b) {
  size_t l = strlen(buf);
  if (l < n)
    snprintf(buf + l, n - l, "%s%s (%s): checkpoint %.17g, this run %.17g", l ? "; " : "", name,
             key, a, b);
}

int mt_resume_check_sched_state(const mt_ckpt_sched *ck, const char *saved_config_json,
                                const mt_config *cfg, const char *load_dir, int verbose,
                                mt_lr_schedule *sched, char *err, size_t errlen) {
  const mt_training_config *c = &cfg->training;
  if (verbose && memcmp(ck->rampup_batch_size, c->rampup_batch_size, sizeof c->rampup_batch_size))
    printf("> note: rampup_batch_size changed from [%lld, %lld, %lld] to [%lld, %lld, %lld] "
           "(0 = none); the batch follows this run's ramp-up from the consumed samples\n",
           (long long)ck->rampup_batch_size[0], (long long)ck->rampup_batch_size[1],
           (long long)ck->rampup_batch_size[2], (long long)c->rampup_batch_size[0],
           (long long)c->rampup_batch_size[1], (long long)c->rampup_batch_size[2]);
  /* iteration-based lengths scale with the batch: megatrain accepts a new one */
  int lengths = 1;
  if (saved_config_json && c->train_samples == 0) {
    char e[8];
    cJSON *root = mt_json_parse(saved_config_json, strlen(saved_config_json), MT_JSON_INT53, "",
                                e, sizeof e);
    double v;
    const cJSON *t = saved_training(root);
    if (t && saved_num(t, "global_batch_size", &v) && (int64_t)v != c->global_batch_size)
      lengths = 0;
    cJSON_Delete(root);
  }
  const mt_lr_steps st = mt_lr_schedule_steps(sched);
  char diff[1536] = "";
  const struct { const char *name, *key; double ck, mine; int length; } nums[] = {
      {"learning rate", "max_lr", ck->max_lr, sched->max_lr, 0},
      {"minimum learning rate", "min_lr", ck->min_lr, sched->min_lr, 0},
      {"warmup iterations", "lr_warmup_steps", ck->lr_warmup_steps, st.warmup, 1},
      {"total number of iterations", "lr_decay_steps", ck->lr_decay_steps, st.decay, 1},
      {"start weight decay", "start_wd", ck->start_wd, sched->start_wd, 0},
      {"end weight decay", "end_wd", ck->end_wd, sched->end_wd, 0},
      /* wd_incr_steps (train_iters × gbs or train_samples) is not compared: a
       * longer run is accepted (docs/checkpoint.md); use_checkpoint takes it */
      {"init_lr", "init_lr", ck->init_lr, sched->init_lr, 0},
      {"wsd_decay_steps", "wsd_decay_steps", ck->wsd_decay_steps, st.wsd_decay, 1},
  };
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
    if (nums[i].ck != nums[i].mine && (lengths || !nums[i].length))
      add_state_diff(diff, sizeof diff, nums[i].name, nums[i].key, nums[i].ck, nums[i].mine);
  const struct { const char *name, *key, *ck, *mine; } strs[] = {
      {"learning rate decay style", "lr_decay_style", ck->lr_decay_style, c->lr_decay_style},
      {"weight decay incr style", "wd_incr_style", ck->wd_incr_style,
       c->weight_decay_incr_style},
      {"wsd_decay_style", "lr_wsd_decay_style", ck->lr_wsd_decay_style, c->lr_wsd_decay_style},
  };
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
    size_t l = strlen(diff);
    if (strcmp(strs[i].ck, strs[i].mine) && l < sizeof diff)
      snprintf(diff + l, sizeof diff - l, "%s%s (%s): checkpoint \"%s\", this run \"%s\"",
               l ? "; " : "", strs[i].name, strs[i].key, strs[i].ck, strs[i].mine);
  }
  if (!diff[0]) return 0;
  if (c->override_opt_param_scheduler) {
    if (verbose)
      printf("> training.override_opt_param_scheduler: this run's scheduler values replace the "
             "checkpoint's opt_param_scheduler state (%s)\n", diff);
    return 0;
  }
  if (c->use_checkpoint_opt_param_scheduler) {
    const int s = mt_lr_style_parse(ck->lr_decay_style), w = mt_wsd_style_parse(ck->lr_wsd_decay_style);
    const int d = mt_wd_style_parse(ck->wd_incr_style);
    if (s < 0 || w < 0 || d < 0) {
      snprintf(err, errlen, "checkpoint '%s': opt_param_scheduler holds an unknown style (\"%s\", "
               "\"%s\", \"%s\")", load_dir, ck->lr_decay_style, ck->lr_wsd_decay_style,
               ck->wd_incr_style);
      return -1;
    }
    sched->max_lr = ck->max_lr;
    sched->min_lr = ck->min_lr;
    sched->init_lr = ck->init_lr;
    sched->style = s;
    sched->wsd_style = w;
    sched->wd_style = d;
    sched->start_wd = ck->start_wd;
    sched->end_wd = ck->end_wd;
    sched->fixed_steps = 1;
    sched->steps.warmup = ck->lr_warmup_steps;
    sched->steps.decay = ck->lr_decay_steps;
    sched->steps.wsd_decay = ck->wsd_decay_steps;
    sched->steps.wd_incr = ck->wd_incr_steps;
    if (verbose)
      printf("> training.use_checkpoint_opt_param_scheduler: the checkpoint's opt_param_scheduler "
             "state is used (%s)\n", diff);
    return 0;
  }
  snprintf(err, errlen,
           "checkpoint '%s': OptimizerParamScheduler: the checkpoint's scheduler state and this "
           "run's values do not match: %s (lengths in samples; expected equal values to resume, "
           "as Megatron asserts; set training.override_opt_param_scheduler: true to use this "
           "run's values, or training.use_checkpoint_opt_param_scheduler: true to keep the "
           "checkpoint's)",
           load_dir, diff);
  return -1;
}

void mt_resume_note_batch(const char *saved_config_json, const mt_config *cfg,
                          int64_t consumed_samples, int verbose) {
  if (!saved_config_json || !verbose) return;
  char e[8];
  cJSON *root = mt_json_parse(saved_config_json, strlen(saved_config_json), MT_JSON_INT53, "", e,
                              sizeof e);
  const cJSON *t = saved_training(root);
  double v;
  if (t && saved_num(t, "global_batch_size", &v) && (int64_t)v != cfg->training.global_batch_size)
    printf("> note: global_batch_size changed from %lld to %d; the data continues at consumed "
           "sample %lld\n",
           (long long)v, cfg->training.global_batch_size, (long long)consumed_samples);
  cJSON_Delete(root);
}

int mt_resume_legacy_config(const char *load_dir, int64_t iteration, char **out, char *err,
                            size_t errlen) {
  char path[MT_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/iter_%07lld/metadata.json", load_dir, (long long)iteration);
  *out = NULL;
  size_t len = 0;
  int e = 0;
  char *text = mt_read_file(path, (size_t)16 << 20, &len, &e);
  if (!text) return 0; /* no metadata.json: nothing to compare */
  char what[MT_PATH_MAX + 128];
  snprintf(what, sizeof what, "'%s' is not valid JSON", path);
  cJSON *root = mt_json_parse(text, len, MT_JSON_INT53, what, err, errlen);
  free(text);
  if (!root) return -1;
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
  if (cJSON_IsObject(cfg)) *out = mt_json_print(cfg);
  cJSON_Delete(root);
  return 0;
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
  char e[8];
  cJSON *saved = mt_json_parse(saved_config_json, strlen(saved_config_json), MT_JSON_INT53, "",
                               e, sizeof e);
  cJSON *mine = mt_json_parse(cfg->json, strlen(cfg->json), MT_JSON_INT53, "", e, sizeof e);
  const cJSON *s = model_of(saved), *m = model_of(mine);
  char diff[1536] = "";
  int n_diff = 0;
  cJSON *derived[2] = {NULL, NULL};
  for (size_t k = 0; s && m && k < sizeof shape_keys / sizeof shape_keys[0]; k++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, shape_keys[k]);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(m, shape_keys[k]);
    /* the canonical JSON leaves out a key without effect: num_query_groups
     * without group_query_attention is then every head its own group */
    if (!strcmp(shape_keys[k], "num_query_groups")) {
      const cJSON *side[2] = {s, m}, **v[2] = {&a, &b};
      for (int i = 0; i < 2; i++) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(side[i], "num_attention_heads");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(side[i], "group_query_attention");
        if (!*v[i] && cJSON_IsNumber(h) && cJSON_IsFalse(g))
          *v[i] = derived[i] = cJSON_CreateNumber(h->valuedouble);
      }
    }
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
  cJSON_Delete(derived[0]);
  cJSON_Delete(derived[1]);
  cJSON_Delete(saved);
  cJSON_Delete(mine);
  if (!n_diff) return 0;
  snprintf(err, errlen,
           "checkpoint '%s' was trained with %s; a checkpoint loads only into the model shape "
           "that wrote it",
           load_dir, diff);
  return -1;
}
