/* tests/fuzz/fuzz_config.c — libFuzzer target: the config reader
 * (config/config.c mt_config_load_string: JSON syntax errors, key walk,
 * did-you-mean, range and consistency checks, --set overrides).
 *
 * Input: u8 world-size selector, then NUL-separated strings: the config JSON
 * and up to two "section.key=value" overrides. A config that loads is
 * written back as its canonical JSON (cfg.json) and loaded again: that must
 * succeed with the same hash (what a resume from a checkpoint's config does). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const int worlds[8] = {1, 2, 4, 8, 3, 16, 64, 6};
  int world = worlds[data[0] & 7];
  char *buf = malloc(size + 1);
  memcpy(buf, data + 1, size - 1);
  buf[size - 1] = '\0';
  const char *parts[3] = {buf, NULL, NULL};
  int np = 1;
  for (size_t i = 0; i + 1 < size - 1 && np < 3; i++)
    if (buf[i] == '\0') parts[np++] = buf + i + 1;
  mt_config cfg;
  char err[2048];
  if (mt_config_load_string(&cfg, parts[0], "fuzz.json", parts + 1, np - 1, world, err,
                            sizeof err) == 0) {
    mt_config again;
    if (mt_config_load_string(&again, cfg.json, "cfg.json", NULL, 0, world, err, sizeof err) != 0) {
      fprintf(stderr, "fuzz_config: canonical JSON does not load again: %s\n%s\n", err, cfg.json);
      abort();
    }
    if (mt_config_hash(&again) != mt_config_hash(&cfg)) {
      fprintf(stderr, "fuzz_config: canonical JSON loads with another hash\n%s\n%s\n", cfg.json,
              again.json);
      abort();
    }
    mt_config_free(&again);
    mt_config_free(&cfg);
  }
  free(buf);
  return 0;
}
