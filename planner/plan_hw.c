/* planner/plan_hw.c — reading a hardware description (configs/hardware/NAME.json).
 *
 * {"name": "A100-SXM4-80GB", "source": "...", "peak_tflops_bf16": 312, ...,
 *  "efficiency": {"gemm_max": .., "gemm_dim_half": .., "hbm": .., "link": ..,
 *                 "overhead_per_iter_ms": ..}}
 * Every numeric key is required and must be > 0 (overhead_per_iter_ms >= 0),
 * except peak_tflops_fp8 (dense FP8 tensor-core peak), which a GPU without
 * FP8 tensor cores leaves out (or sets to 0);
 * unknown keys are errors, as in training configs. docs/planner.md.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "planner/plan.h"

typedef struct {
  const char *key;
  size_t off;
  int is_int;
  int allow_zero;
  int optional; /* may be left out: 0 then (peak_tflops_fp8: no FP8 tensor cores) */
} hw_key;

#define HWF(k, f, i, z) {k, offsetof(mt_hardware, f), i, z, 0}
static const hw_key k_top[] = {
    HWF("peak_tflops_bf16", peak_tflops_bf16, 0, 0),
    HWF("peak_tflops_fp32", peak_tflops_fp32, 0, 0),
    {"peak_tflops_fp8", offsetof(mt_hardware, peak_tflops_fp8), 0, 1, 1},
    HWF("hbm_gib", hbm_gib, 0, 0),
    HWF("hbm_gbs", hbm_gbs, 0, 0),
    HWF("intra_node_gbs", intra_node_gbs, 0, 0),
    HWF("gpus_per_node", gpus_per_node, 1, 0),
    HWF("inter_node_gbs", inter_node_gbs, 0, 0),
    HWF("intra_latency_us", intra_latency_us, 0, 0),
    HWF("inter_latency_us", inter_latency_us, 0, 0),
    HWF("reserved_gib", reserved_gib, 0, 1),
};
static const hw_key k_eff[] = {
    HWF("gemm_max", gemm_eff_max, 0, 0),
    HWF("gemm_dim_half", gemm_dim_half, 0, 1),
    HWF("hbm", hbm_eff, 0, 0),
    HWF("link", link_eff, 0, 0),
    HWF("overhead_per_iter_ms", overhead_per_iter_ms, 0, 1),
};
#define NK(a) (sizeof(a) / sizeof((a)[0]))

static int fail(char *err, size_t n, const char *path, const char *fmt, const char *a) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a);
  snprintf(err, n, "hardware file %s: %s", path, msg);
  return 2;
}

/* Fill the keys of table `t` from object `o`; *seen marks the ones given. */
static int read_keys(const cJSON *o, const hw_key *t, size_t nt, const char *section,
                     mt_hardware *hw, const char *path, char *err, size_t n) {
  char name[128];
  for (size_t i = 0; i < nt; i++) {
    snprintf(name, sizeof name, "%s%s", section, t[i].key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, t[i].key);
    if (!v && t[i].optional) continue;
    if (!v) return fail(err, n, path, "missing key \"%s\" (see docs/planner.md)", name);
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    /* an integer key is range-checked before the cast (a double beyond int is undefined) */
    if (!cJSON_IsNumber(v) || d < 0 || (d == 0 && !t[i].allow_zero) ||
        (t[i].is_int && (d > INT_MAX || d != (double)(int)d)))
      return fail(err, n, path,
                  t[i].is_int       ? "key \"%s\" must be an integer > 0 (at most 2147483647)"
                  : t[i].allow_zero ? "key \"%s\" must be a number >= 0"
                                    : "key \"%s\" must be a number > 0",
                  name);
    char *dst = (char *)hw + t[i].off;
    if (t[i].is_int) *(int *)dst = (int)d;
    else *(double *)dst = d;
  }
  for (const cJSON *c = o->child; c; c = c->next) {
    int known = 0;
    for (size_t i = 0; i < nt && !known; i++) known = !strcmp(c->string, t[i].key);
    if (!section[0] && (!strcmp(c->string, "name") || !strcmp(c->string, "source") ||
                        !strcmp(c->string, "notes") || !strcmp(c->string, "efficiency")))
      known = 1;
    if (!section[0] && !strcmp(c->string, "efficiency_notes")) known = 1;
    if (!known) {
      snprintf(name, sizeof name, "%s%s", section, c->string);
      return fail(err, n, path, "unknown key \"%s\" (see docs/planner.md)", name);
    }
  }
  return 0;
}

int mt_hardware_load(mt_hardware *out, const char *path, char *err, size_t errlen) {
  size_t len = 0;
  int e = 0;
  char *text = mt_read_file(path, 0, &len, &e);
  if (!text) {
    char m[300];
    snprintf(m, sizeof m, "cannot open hardware file %s: %s (expected a JSON file, or one of "
             "the shipped names a100-80gb, h100-sxm, h200-sxm, h800-sxm, b200)", path, strerror(e));
    snprintf(err, errlen, "%s", m);
    return 2;
  }
  char what[400];
  snprintf(what, sizeof what, "hardware file %s: not JSON", path);
  cJSON *root = mt_json_parse(text, len, MT_JSON_INT53, what, err, errlen);
  free(text);
  if (!root) return 2;
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return fail(err, errlen, path, "%snot a JSON object", "");
  }
  mt_hardware hw;
  memset(&hw, 0, sizeof hw);
  snprintf(hw.source_path, sizeof hw.source_path, "%s", path);
  int rc = read_keys(root, k_top, NK(k_top), "", &hw, path, err, errlen);
  const cJSON *eff = cJSON_GetObjectItemCaseSensitive(root, "efficiency");
  if (!rc && !cJSON_IsObject(eff))
    rc = fail(err, errlen, path, "missing object \"%s\" (see docs/planner.md)", "efficiency");
  if (!rc) rc = read_keys(eff, k_eff, NK(k_eff), "efficiency.", &hw, path, err, errlen);
  const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
  if (!rc && !cJSON_IsString(nm))
    rc = fail(err, errlen, path, "missing string key \"%s\"", "name");
  if (!rc) snprintf(hw.name, sizeof hw.name, "%s", nm->valuestring);
  if (!rc && (hw.gemm_eff_max > 1 || hw.hbm_eff > 1 || hw.link_eff > 1))
    rc = fail(err, errlen, path, "%sefficiency fractions must be <= 1", "");
  cJSON_Delete(root);
  if (!rc) *out = hw;
  return rc;
}
