/* tests/support/probe_core.c — a safetensors file's metadata (tests/support/
 * probes.h). */
#include <string.h>

#include "core/safetensors_internal.h"
#include "tests/support/probes.h"

const char *mt_st_metadata(const mt_st_file *f, const char *key) {
  for (int i = 0; i < f->n_meta; i++)
    if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
  return NULL;
}
