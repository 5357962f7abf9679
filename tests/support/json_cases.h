/* tests/support/json_cases.h — the case files of the table tools
 * (tests/tools/lr_table.c, rampup_table.c): a JSON list of objects. */
#ifndef MT_TESTS_SUPPORT_JSON_CASES_H
#define MT_TESTS_SUPPORT_JSON_CASES_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "config/config.h"

/* argv[1] of a tool called as `PROG CASES.json`, parsed: the list (the
 * caller's to cJSON_Delete), or NULL after printing a usage line (wrong
 * argument count; *rc = 2) or "PROG: FILE: not a JSON list of cases"
 * (*rc = 1). */
cJSON *mt_test_read_cases(int argc, char **argv, const char *prog, int *rc);

/* Loads a config made of `training` (taken over and freed) under a minimal
 * model (1 layer, hidden 8, 1 head, seq 4) and an unused data path, as
 * mt_config_load_string does with world size `world`: 0, or its error
 * code with err filled. */
int mt_test_load_training(mt_config *cfg, cJSON *training, const char *name, int world,
                          char *err, size_t errlen);

#endif
