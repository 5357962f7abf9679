/* data/jsonl.c — see jsonl.h. */
#include "data/jsonl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"

char *mt_jsonl_extract(const char *line, size_t len, const char *key, size_t *out_len, char *err,
                       size_t errlen) {
  /* strict JSON (a leading zero, a trailing comma: not JSON, as Python's
   * json.loads in Megatron's preprocess_data.py says); large integers in
   * other fields are fine (the text is all that is read) */
  mt_json_error je;
  if (mt_json_check(line, len, 0, &je)) {
    snprintf(err, errlen, "not a JSON object (column %d: %s%s%s)", je.col, je.what,
             je.path[0] ? " at " : "", je.path);
    return NULL;
  }
  cJSON *root = cJSON_ParseWithLength(line, len);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "not a JSON object");
    cJSON_Delete(root);
    return NULL;
  }
  cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  char *out = NULL;
  if (!v) {
    snprintf(err, errlen, "JSON object has no key \"%s\"", key);
  } else if (!cJSON_IsString(v) || !v->valuestring) {
    snprintf(err, errlen, "value of \"%s\" is not a string", key);
  } else {
    *out_len = strlen(v->valuestring);
    out = mt_xmalloc(*out_len + 1);
    memcpy(out, v->valuestring, *out_len + 1);
  }
  cJSON_Delete(root);
  return out;
}
