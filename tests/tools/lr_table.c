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
#include "tests/support/json_cases.h"
#include "optimizer/lr_schedule.h"
#include "trainer/train_internal.h"

int main(int argc, char **argv) {
  int cases_rc;
  cJSON *cases = mt_test_read_cases(argc, argv, "lr_table", &cases_rc);
  if (!cases) return cases_rc;
  const cJSON *cs;
  cJSON_ArrayForEach(cs, cases) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cs, "name");
    cJSON *tr = cJSON_Duplicate(cs, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(tr, "name");
    cJSON_AddNumberToObject(tr, "micro_batch_size", 1);
    mt_config cfg;
    char err[1024];
    int rc = mt_test_load_training(&cfg, tr, nm->valuestring, 1, err, sizeof err);
    if (rc != 0) {
      fprintf(stderr, "lr_table: %s\n", err);
      return rc;
    }
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
