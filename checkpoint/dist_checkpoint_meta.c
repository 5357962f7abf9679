/* checkpoint/dist_checkpoint_meta.c — metadata.json of a layout-free
 * checkpoint: the scalars (iteration, consumed samples, optimizer step,
 * counters, the seed exactly: a string above 2^53), the shard files, a
 * human-readable tensor list and the resolved config (cJSON; integers
 * written with every digit, read through the strict check of core/json.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

/* Integer field `key` of o into *v: 0, or -1 with a message. */
static int get_int(const cJSON *o, const char *key, int64_t *v, const char *path, char *err,
                   size_t errlen) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  /* range first: converting a double outside int64 (1e308, inf) is undefined,
   * and above 2^53 a JSON number is not exact (the writer stores doubles) */
  if (!cJSON_IsNumber(x) || !(x->valuedouble >= -9007199254740992.0 &&
                              x->valuedouble <= 9007199254740992.0) ||
      x->valuedouble != (double)(int64_t)x->valuedouble) {
    snprintf(err, errlen, "'%s': \"%s\" is missing or not an integer of at most 2^53", path,
             key);
    return -1;
  }
  *v = (int64_t)x->valuedouble;
  return 0;
}

/* "opt_param_scheduler": Megatron's state_dict keys, then megatrain's. */
static void sched_to_json(cJSON *o, const mt_ckpt_sched *s) {
  cJSON *j = cJSON_AddObjectToObject(o, "opt_param_scheduler");
  cJSON_AddNumberToObject(j, "max_lr", s->max_lr);
  cJSON_AddNumberToObject(j, "lr_warmup_steps", s->lr_warmup_steps);
  mt_json_add_int(j, "num_steps", s->num_steps);
  cJSON_AddStringToObject(j, "lr_decay_style", s->lr_decay_style);
  cJSON_AddNumberToObject(j, "lr_decay_steps", s->lr_decay_steps);
  cJSON_AddNumberToObject(j, "min_lr", s->min_lr);
  cJSON_AddNumberToObject(j, "start_wd", s->start_wd);
  cJSON_AddNumberToObject(j, "end_wd", s->end_wd);
  cJSON_AddStringToObject(j, "wd_incr_style", s->wd_incr_style);
  cJSON_AddNumberToObject(j, "wd_incr_steps", s->wd_incr_steps);
  cJSON_AddNumberToObject(j, "init_lr", s->init_lr);
  cJSON_AddNumberToObject(j, "wsd_decay_steps", s->wsd_decay_steps);
  cJSON_AddStringToObject(j, "lr_wsd_decay_style", s->lr_wsd_decay_style);
  if (s->rampup_batch_size[0] > 0) {
    cJSON *r = cJSON_AddArrayToObject(j, "rampup_batch_size");
    for (int i = 0; i < 3; i++) cJSON_AddItemToArray(r, mt_json_int(s->rampup_batch_size[i]));
  } else {
    cJSON_AddNullToObject(j, "rampup_batch_size");
  }
  mt_json_add_int(j, "global_batch_size", s->global_batch_size);
}

/* The object back into *s (present = 1): 0, or -1 with a message naming
 * the key that is missing or of another type. */
static int sched_from_json(const cJSON *j, mt_ckpt_sched *s, const char *path, char *err,
                           size_t errlen) {
  static const char *const nums[] = {"max_lr", "min_lr", "init_lr", "lr_warmup_steps",
                                     "lr_decay_steps", "wsd_decay_steps", "wd_incr_steps",
                                     "start_wd", "end_wd"};
  double *dst[] = {&s->max_lr, &s->min_lr, &s->init_lr, &s->lr_warmup_steps,
                   &s->lr_decay_steps, &s->wsd_decay_steps, &s->wd_incr_steps, &s->start_wd,
                   &s->end_wd};
  for (int i = 0; i < 9; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, nums[i]);
    if (!cJSON_IsNumber(x)) {
      snprintf(err, errlen, "'%s': \"opt_param_scheduler\".\"%s\" is missing or not a number",
               path, nums[i]);
      return -1;
    }
    *dst[i] = x->valuedouble;
  }
  static const char *const strs[] = {"lr_decay_style", "lr_wsd_decay_style", "wd_incr_style"};
  char *sdst[] = {s->lr_decay_style, s->lr_wsd_decay_style, s->wd_incr_style};
  const size_t ssz[] = {sizeof s->lr_decay_style, sizeof s->lr_wsd_decay_style,
                        sizeof s->wd_incr_style};
  for (int i = 0; i < 3; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, strs[i]);
    if (!cJSON_IsString(x) || strlen(x->valuestring) >= ssz[i]) {
      snprintf(err, errlen, "'%s': \"opt_param_scheduler\".\"%s\" is missing or not a style name",
               path, strs[i]);
      return -1;
    }
    snprintf(sdst[i], ssz[i], "%s", x->valuestring);
  }
  char what[700];
  snprintf(what, sizeof what, "%s\" \"opt_param_scheduler", path);
  if (get_int(j, "num_steps", &s->num_steps, what, err, errlen) ||
      get_int(j, "global_batch_size", &s->global_batch_size, what, err, errlen))
    return -1;
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "rampup_batch_size");
  if (cJSON_IsArray(r) && cJSON_GetArraySize(r) == 3) {
    for (int i = 0; i < 3; i++) {
      const cJSON *e = cJSON_GetArrayItem(r, i);
      if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 9007199254740992.0) {
        snprintf(err, errlen, "'%s': \"opt_param_scheduler\".\"rampup_batch_size\" is not a "
                 "list of three integers", path);
        return -1;
      }
      s->rampup_batch_size[i] = (int64_t)e->valuedouble;
    }
  } else if (!cJSON_IsNull(r)) {
    snprintf(err, errlen, "'%s': \"opt_param_scheduler\".\"rampup_batch_size\" is missing or "
             "not a list of three integers or null", path);
    return -1;
  }
  s->present = 1;
  return 0;
}

char *mt_dckpt_meta_json(const mt_dckpt_meta *meta, const char *config_json,
                         const mt_dckpt_index *ix) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", MT_DCKPT_FORMAT);
  mt_json_add_int(o, "iteration", meta->iteration);
  mt_json_add_int(o, "consumed_samples", meta->consumed_samples);
  mt_json_add_int(o, "step", meta->step);
  mt_json_add_int(o, "skipped_iters", meta->skipped_iters);
  mt_json_add_int(o, "nan_iters", meta->nan_iters);
  if (meta->seed <= ((uint64_t)1 << 53)) {
    cJSON_AddItemToObject(o, "seed", mt_json_uint(meta->seed));
  } else {
    char s[32];
    snprintf(s, sizeof s, "%" PRIu64, meta->seed);
    cJSON_AddStringToObject(o, "seed", s);
  }
  mt_json_add_int(o, "vocab_size", meta->vocab_size);
  cJSON_AddBoolToObject(o, "has_optimizer", meta->has_optimizer != 0);
  if (meta->sched.present) sched_to_json(o, &meta->sched);
  cJSON *files = cJSON_AddArrayToObject(o, "files");
  for (int i = 0; i < ix->n_f; i++) {
    char s[64];
    snprintf(s, sizeof s, "shard_%05d.bin", ix->f[i].rank);
    cJSON_AddItemToArray(files, cJSON_CreateString(s));
  }
  cJSON *tensors = cJSON_AddArrayToObject(o, "tensors");
  for (int i = 0; i < ix->n_t; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", ix->t[i].name);
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    cJSON_AddItemToArray(shape, mt_json_int(ix->t[i].rows));
    cJSON_AddItemToArray(shape, mt_json_int(ix->t[i].cols));
    cJSON_AddStringToObject(t, "dtype", mt_dtype_name(ix->t[i].dtype));
    cJSON_AddItemToArray(tensors, t);
  }
  cJSON_AddRawToObject(o, "config", config_json ? config_json : "null");
  char *s = cJSON_Print(o);
  cJSON_Delete(o);
  if (!s) mt_fatal("cJSON_Print failed (out of memory)");
  size_t n = strlen(s);
  char *out = mt_xmalloc(n + 2);
  memcpy(out, s, n);
  out[n] = '\n';
  out[n + 1] = '\0';
  cJSON_free(s);
  return out;
}

int mt_dckpt_meta_parse(const char *text, const char *path, mt_dckpt_meta *meta,
                        char **config_json, char *err, size_t errlen) {
  memset(meta, 0, sizeof *meta);
  *config_json = NULL;
  char what[600];
  snprintf(what, sizeof what, "'%s' is not valid JSON", path);
  cJSON *o = mt_json_parse(text, strlen(text), MT_JSON_INT53, what, err, errlen);
  if (!o) return -1;
  if (!cJSON_IsObject(o)) {
    snprintf(err, errlen, "'%s' is not a JSON object", path);
    cJSON_Delete(o);
    return -1;
  }
  int rc = -1;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, MT_DCKPT_FORMAT) != 0) {
    snprintf(err, errlen, "'%s': \"format\" is %s%s%s, expected \"%s\"", path,
             cJSON_IsString(fmt) ? "\"" : "", cJSON_IsString(fmt) ? fmt->valuestring : "missing",
             cJSON_IsString(fmt) ? "\"" : "", MT_DCKPT_FORMAT);
    goto done;
  }
  if (get_int(o, "iteration", &meta->iteration, path, err, errlen) ||
      get_int(o, "consumed_samples", &meta->consumed_samples, path, err, errlen) ||
      get_int(o, "step", &meta->step, path, err, errlen) ||
      get_int(o, "skipped_iters", &meta->skipped_iters, path, err, errlen) ||
      get_int(o, "nan_iters", &meta->nan_iters, path, err, errlen) ||
      get_int(o, "vocab_size", &meta->vocab_size, path, err, errlen))
    goto done;
  const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
  if (cJSON_IsString(seed)) {
    char *end;
    errno = 0;
    unsigned long long s = strtoull(seed->valuestring, &end, 10);
    if (errno || *end || end == seed->valuestring) {
      snprintf(err, errlen, "'%s': \"seed\" \"%s\" is not an unsigned integer", path,
               seed->valuestring);
      goto done;
    }
    meta->seed = s;
  } else if (cJSON_IsNumber(seed) && seed->valuedouble >= 0 &&
             seed->valuedouble <= 9007199254740992.0) {
    meta->seed = (uint64_t)seed->valuedouble;
  } else {
    snprintf(err, errlen, "'%s': \"seed\" is missing or not an unsigned integer", path);
    goto done;
  }
  const cJSON *ho = cJSON_GetObjectItemCaseSensitive(o, "has_optimizer");
  if (!cJSON_IsBool(ho)) {
    snprintf(err, errlen, "'%s': \"has_optimizer\" is missing or not true/false", path);
    goto done;
  }
  meta->has_optimizer = cJSON_IsTrue(ho);
  /* a checkpoint written before issue 30 item 4 has none: present stays 0 */
  const cJSON *sj = cJSON_GetObjectItemCaseSensitive(o, "opt_param_scheduler");
  if (sj && !cJSON_IsObject(sj)) {
    snprintf(err, errlen, "'%s': \"opt_param_scheduler\" is not an object", path);
    goto done;
  }
  if (sj && sched_from_json(sj, &meta->sched, path, err, errlen)) goto done;
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(o, "config");
  if (cfg) {
    *config_json = mt_json_print(cfg); /* integers with every digit */
  } else {
    *config_json = mt_xmalloc(5);
    memcpy(*config_json, "null", 5);
  }
  rc = 0;
done:
  cJSON_Delete(o);
  return rc;
}
