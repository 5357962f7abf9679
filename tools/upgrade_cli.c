/* tools/upgrade_cli.c — `megatrain convert --upgrade`: rewrite a
 * checkpoint of the previous per-layout format (iter_NNNNNNN/mp_rank_*,
 * checkpoint/legacy_format.h) in the layout-free format (checkpoint/dist_checkpoint.h)
 * by building the trainer from the checkpoint's own saved config under the
 * layout that wrote it, loading it, and saving it again (docs/checkpoint.md
 * "Legacy checkpoints"). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backends/registry.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/util.h"
#include "tools/cli.h"
#include "trainer/train_internal.h"

#define UPGRADE_USAGE                                                                     \
  "usage: megatrain convert --upgrade --load OLD --output NEW [--set section.key=VALUE]...\n" \
  "  (run under the layout that wrote OLD: mpirun -np N megatrain convert --upgrade ...)\n"

/* The saved config of OLD's latest checkpoint as a JSON string (malloc'ed),
 * and its iteration; NULL with a message when OLD holds no checkpoint of the
 * previous format. */
static char *legacy_config(const char *old, int64_t *iteration, char *err, size_t errlen) {
  char path[2048];
  snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", old);
  size_t len = 0;
  int eno = 0;
  char *txt = mt_read_file(path, 64, &len, &eno);
  if (!txt) {
    snprintf(err, errlen, "cannot read '%s' (%s): --load must be a checkpoint.save directory",
             path, strerror(eno));
    return NULL;
  }
  char *end = NULL;
  long long it = strtoll(txt, &end, 10);
  const int bad = end == txt || it < 0;
  free(txt);
  if (bad) {
    snprintf(err, errlen, "'%s' does not hold an iteration number", path);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/iter_%07lld/metadata.json", old, it);
  char *js = mt_read_file(path, (size_t)64 << 20, &len, &eno);
  if (!js) {
    snprintf(err, errlen, "cannot read '%s' (%s)", path, strerror(eno));
    return NULL;
  }
  char what[4200];
  snprintf(what, sizeof what, "'%s' is not valid JSON", path);
  cJSON *root = mt_json_parse(js, len, MT_JSON_INT53, what, err, errlen);
  free(js);
  if (!root) return NULL;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
  char *out = NULL;
  if (!root || !cJSON_IsString(fmt)) {
    snprintf(err, errlen, "'%s' is not a checkpoint's metadata.json (no \"format\" string)", path);
  } else if (strncmp(fmt->valuestring, "megatrain-v", 11) != 0) {
    snprintf(err, errlen,
             "'%s' has format \"%s\": not the previous per-layout format (megatrain-vN), "
             "nothing to upgrade (a layout-free checkpoint loads under any layout as it is)",
             path, fmt->valuestring);
  } else if (!cJSON_IsObject(cfg)) {
    snprintf(err, errlen, "'%s' holds no saved \"config\" object to rebuild the model from", path);
  } else {
    out = mt_json_print(cfg);
    *iteration = it;
  }
  cJSON_Delete(root);
  return out;
}

int mt_cli_upgrade(int argc, char **argv) {
  const char *old = NULL, *out = NULL;
  int n_sets = 0;
  const char **sets = mt_xcalloc((size_t)argc + 8, sizeof(char *));
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--upgrade")) continue;
    if (!strcmp(argv[i], "--load") && i + 1 < argc) old = argv[++i];
    else if (!strcmp(argv[i], "--output") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
    else {
      fprintf(stderr, "megatrain convert: error: unknown or incomplete argument '%s'\n%s",
              argv[i], UPGRADE_USAGE);
      free(sets);
      return 2;
    }
  }
  if (!old || !out) {
    fprintf(stderr, "megatrain convert: error: --upgrade needs --load OLD and --output NEW\n%s",
            UPGRADE_USAGE);
    free(sets);
    return 2;
  }
  DIR *od = opendir(out);
  if (od) { /* never write into another run's checkpoints (or OLD itself) */
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(od)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(od);
    if (!empty) {
      fprintf(stderr,
              "megatrain convert: error: --output '%s' already exists and is not empty "
              "(expected a new or empty directory for the upgraded checkpoint)\n",
              out);
      free(sets);
      return 2;
    }
  }
  mt_dist *dist = mt_dist_init(&argc, &argv);
  const int rank = mt_dist_rank(dist);
  char err[4096] = "";
  int64_t iteration = -1;
  char *cj = legacy_config(old, &iteration, err, sizeof err);
  if (!cj) {
    if (rank == 0) fprintf(stderr, "megatrain convert: error: %s\n", err);
    free(sets);
    mt_dist_finalize(dist);
    return 1;
  }
  /* the saved config, reading OLD and writing NEW; nothing else of the old
   * run (its metrics file) is touched; the user's --set come last */
  size_t cap = strlen(old) + strlen(out) + 64;
  char *s_load = mt_xmalloc(cap), *s_save = mt_xmalloc(cap);
  snprintf(s_load, cap, "checkpoint.load=%s", old);
  snprintf(s_save, cap, "checkpoint.save=%s", out);
  const char **all = mt_xcalloc((size_t)n_sets + 8, sizeof(char *));
  int n = 0;
  all[n++] = s_load;
  all[n++] = s_save;
  all[n++] = "logging.metrics_file=null";
  all[n++] = "training.finetune=false";
  for (int i = 0; i < n_sets; i++) all[n++] = sets[i];
  char source[4200];
  snprintf(source, sizeof source, "%s/iter_%07lld/metadata.json \"config\"", old,
           (long long)iteration);
  mt_config cfg;
  int rc = mt_config_load_saved(&cfg, cj, source, all, n, mt_dist_size(dist), err, sizeof err);
  free(cj);
  free(all);
  free(sets);
  free(s_load);
  free(s_save);
  if (rc) {
    if (rank == 0)
      fprintf(stderr,
              "megatrain convert: error: %s\n(convert --upgrade rebuilds the run that wrote "
              "'%s' from its saved config: launch it with that run's number of ranks, e.g. "
              "mpirun -np N)\n",
              err, old);
    mt_dist_finalize(dist);
    return rc;
  }
  mt_backends_process_init(
      &(mt_backend_options){.device = cfg.device, .num_threads = cfg.training.num_threads});
  mt_trainer T, *t = &T;
  double t0 = mt_now();
  rc = mt_trainer_setup(t, &cfg, dist, err, sizeof err);
  if (rc == 0 && t->iteration != iteration) {
    snprintf(err, sizeof err, "'%s' names iteration %lld but iteration %lld was loaded", old,
             (long long)iteration, (long long)t->iteration);
    rc = -1;
  }
  if (rc == 0) rc = mt_trainer_save(t, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "[rank %d] megatrain convert: error: %s\n", rank, err);
  } else if (rank == 0) {
    printf("upgraded iteration %lld of '%s' (per-layout format) to '%s' (layout-free) in %.2f s\n",
           (long long)iteration, old, out, mt_now() - t0);
  }
  mt_trainer_teardown(t);
  mt_config_free(&cfg);
  if (rc != 0 && mt_dist_size(dist) > 1) mt_abort_job(1);
  mt_dist_finalize(dist);
  return rc ? 1 : 0;
}
