/* tests/tools/lr_table.c — the learning rate and weight decay of every
 * update of the schedule cases in a JSON file (tests/data/lr_schedule_cases.json:
 * a list of objects holding training keys and a "name"), as the trainer
 * computes them: each case goes through the config loader (derivations and
 * checks) and mt_trainer_lr_schedule, then update k (1-based) of train_iters
 * uses the values at (k - 1) · gbs consumed samples and logs those at k · gbs
 * (trainer/train.c). Prints one line per update:
 *   NAME K CONSUMED_BEFORE LR_APPLIED WD_APPLIED LR_LOGGED WD_LOGGED
 * with %.17g values, the format of tests/reference/megatron_schedule.py, which
 * runs Megatron's OptimizerParamScheduler on the same cases.
 * usage: lr_table CASES.json */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "core/fileio.h"
#include "optimizer/lr_schedule.h"
#include "trainer/train_internal.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: lr_table CASES.json\n");
    return 2;
  }
  size_t len = 0;
  int e = 0;
  char *text = mt_read_file(argv[1], (size_t)1 << 20, &len, &e);
  cJSON *cases = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!cJSON_IsArray(cases)) {
    fprintf(stderr, "lr_table: %s: not a JSON list of cases\n", argv[1]);
    return 1;
  }
  const cJSON *cs;
  cJSON_ArrayForEach(cs, cases) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cs, "name");
    cJSON *tr = cJSON_Duplicate(cs, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(tr, "name");
    cJSON_AddNumberToObject(tr, "micro_batch_size", 1);
    cJSON *root = cJSON_CreateObject();
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddNumberToObject(model, "num_layers", 1);
    cJSON_AddNumberToObject(model, "hidden_size", 8);
    cJSON_AddNumberToObject(model, "num_attention_heads", 1);
    cJSON_AddNumberToObject(model, "seq_length", 4);
    cJSON_AddItemToObject(root, "training", tr);
    cJSON *data = cJSON_AddObjectToObject(root, "data");
    cJSON_AddStringToObject(data, "data_path", "unused");
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    mt_config cfg;
    char err[1024];
    /* world size = the global batch: dp = gbs with micro-batch 1 */
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(cs, "global_batch_size");
    int rc = mt_config_load_string(&cfg, js, nm->valuestring, NULL, 0, 1, err, sizeof err);
    cJSON_free(js);
    if (rc != 0) {
      fprintf(stderr, "lr_table: %s\n", err);
      return rc;
    }
    (void)g;
    const mt_lr_schedule s = mt_trainer_lr_schedule(&cfg.training);
    const int64_t gbs = cfg.training.global_batch_size;
    for (int64_t k = 1; k <= cfg.training.train_iters; k++) {
      const double before = (double)((k - 1) * gbs), after = (double)(k * gbs);
      printf("%s %lld %lld %.17g %.17g %.17g %.17g\n", nm->valuestring, (long long)k,
             (long long)((k - 1) * gbs), mt_lr_sched_lr(&s, before), mt_lr_sched_wd(&s, before),
             mt_lr_sched_lr(&s, after), mt_lr_sched_wd(&s, after));
    }
    mt_config_free(&cfg);
  }
  cJSON_Delete(cases);
  return 0;
}
