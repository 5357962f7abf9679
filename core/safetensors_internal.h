/* core/safetensors_internal.h — an open safetensors file (core/
 * safetensors.c); tests read its metadata through tests/support/probes.h. */
#ifndef MT_CORE_SAFETENSORS_INTERNAL_H
#define MT_CORE_SAFETENSORS_INTERNAL_H

#include <stdint.h>

#include "core/safetensors.h"

struct mt_st_file {
  char path[1024];
  int fd;
  uint64_t data_start; /* 8 + N */
  int n;
  mt_st_info *t;
  int n_meta;
  char **meta; /* key, value pairs */
};

#endif
