/* tests/support/json_cases.c — see json_cases.h. */
#include "tests/support/json_cases.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/fileio.h"

cJSON *mt_test_read_cases(int argc, char **argv, const char *prog, int *rc) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CASES.json\n", prog);
    *rc = 2;
    return NULL;
  }
  size_t len = 0;
  int e = 0;
  char *text = mt_read_file(argv[1], (size_t)1 << 20, &len, &e);
  cJSON *cases = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!cJSON_IsArray(cases)) {
    fprintf(stderr, "%s: %s: not a JSON list of cases\n", prog, argv[1]);
    cJSON_Delete(cases);
    *rc = 1;
    return NULL;
  }
  *rc = 0;
  return cases;
}

int mt_test_load_training(mt_config *cfg, cJSON *training, const char *name, int world,
                          char *err, size_t errlen) {
  cJSON *root = cJSON_CreateObject();
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddNumberToObject(model, "num_layers", 1);
  cJSON_AddNumberToObject(model, "hidden_size", 8);
  cJSON_AddNumberToObject(model, "num_attention_heads", 1);
  cJSON_AddNumberToObject(model, "seq_length", 4);
  cJSON_AddItemToObject(root, "training", training);
  cJSON *data = cJSON_AddObjectToObject(root, "data");
  cJSON_AddStringToObject(data, "data_path", "unused");
  char *js = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  const int rc = mt_config_load_string(cfg, js, name, NULL, 0, world, err, errlen);
  cJSON_free(js);
  return rc;
}
