/* tests/fuzz/fuzz_dckpt_meta.c — libFuzzer target: metadata.json of a
 * layout-free checkpoint (mt_dckpt_meta_parse, checkpoint/dist_checkpoint_meta.c)
 * from arbitrary bytes; a parsed result is written back with
 * mt_dckpt_meta_json and parsed again (must succeed with the same scalars). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/dist_checkpoint_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  mt_dckpt_meta m;
  char *cfg = NULL, err[512];
  if (mt_dckpt_meta_parse(text, "metadata.json", &m, &cfg, err, sizeof err) == 0) {
    mt_dckpt_index ix;
    memset(&ix, 0, sizeof ix);
    char *again = mt_dckpt_meta_json(&m, cfg, &ix);
    mt_dckpt_meta m2;
    char *cfg2 = NULL;
    if (mt_dckpt_meta_parse(again, "metadata.json (rewritten)", &m2, &cfg2, err, sizeof err) != 0 ||
        m2.iteration != m.iteration || m2.seed != m.seed || m2.step != m.step ||
        m2.has_optimizer != m.has_optimizer)
      abort();
    free(cfg2);
    free(again);
  }
  free(cfg);
  free(text);
  return 0;
}
