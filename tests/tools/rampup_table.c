/* tests/tools/rampup_table.c — the global batch of every iteration of the
 * ramp-up cases in a JSON file (tests/data/rampup_cases.json: objects with
 * "name", rampup_batch_size, global_batch_size, micro_batch_size,
 * data_parallel_size, train_samples), as megatrain computes them: each case
 * goes through the config loader (train_iters derivation and the ramp-up
 * checks, world size = data_parallel_size) and the iterations use
 * mt_batch_rampup_gbs of the consumed samples, as trainer/train.c. Prints
 *   NAME K GLOBAL_BATCH NUM_MICRO_BATCHES CONSUMED_BEFORE CONSUMED_AFTER
 * per iteration and "NAME train_iters T": the format of
 * tests/reference/megatron_rampup.py.
 * usage: rampup_table CASES.json */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "config/batch_rampup.h"
#include "config/config.h"
#include "core/fileio.h"
#include "tests/support/json_cases.h"

int main(int argc, char **argv) {
  int cases_rc;
  cJSON *cases = mt_test_read_cases(argc, argv, "rampup_table", &cases_rc);
  if (!cases) return cases_rc;
  const cJSON *cs;
  cJSON_ArrayForEach(cs, cases) {
    const char *name = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
    const int dp = cJSON_GetObjectItemCaseSensitive(cs, "data_parallel_size")->valueint;
    cJSON *tr = cJSON_Duplicate(cs, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(tr, "name");
    cJSON_DeleteItemFromObjectCaseSensitive(tr, "data_parallel_size");
    cJSON_AddNumberToObject(tr, "lr", 1e-3);
    mt_config cfg;
    char err[1024];
    int rc = mt_test_load_training(&cfg, tr, name, dp, err, sizeof err);
    if (rc != 0) {
      fprintf(stderr, "rampup_table: %s\n", err);
      return rc;
    }
    const mt_training_config *t = &cfg.training;
    const mt_batch_rampup r = mt_batch_rampup_make(t->rampup_batch_size, t->global_batch_size);
    int64_t consumed = 0;
    for (int64_t k = 1; k <= t->train_iters; k++) {
      const int64_t b = mt_batch_rampup_gbs(&r, consumed);
      printf("%s %lld %lld %lld %lld %lld\n", name, (long long)k, (long long)b,
             (long long)(b / ((int64_t)t->micro_batch_size * dp)), (long long)consumed,
             (long long)(consumed + b));
      consumed += b;
    }
    printf("%s train_iters %lld\n", name, (long long)t->train_iters);
    mt_config_free(&cfg);
  }
  cJSON_Delete(cases);
  return 0;
}
