/* data/jsonl.h — one line of a JSON-lines corpus (Megatron's
 * tools/preprocess_data.py input: one JSON object per line, one document). */
#ifndef MT_DATA_JSONL_H
#define MT_DATA_JSONL_H

#include <stddef.h>

/* Parse line[0, len) (need not be NUL-terminated) with cJSON and return a
 * malloc'ed copy of the string value of `key` (length in *out_len). Returns
 * NULL with a message in err when the line is not a JSON object, lacks the
 * key, or the value is not a string. Strings are UTF-8 as cJSON decodes them
 * (\u escapes, surrogate pairs); a \u0000 escape ends the string. */
char *mt_jsonl_extract(const char *line, size_t len, const char *key, size_t *out_len, char *err,
                       size_t errlen);

#endif
