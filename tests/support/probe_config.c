/* tests/support/probe_config.c — default configs built by hand in tests and
 * benches (tests/support/probes.h). */
#include <stdlib.h>

#include "config/config_internal.h"
#include "core/util.h"
#include "tests/support/probes.h"

void mt_config_defaults(mt_config *cfg) {
  mt_cfg_apply_defaults(cfg);
  mt_cfg_derive(cfg, 1);
}

void mt_model_config_defaults(mt_model_config *m) {
  mt_config *cfg = mt_xcalloc(1, sizeof *cfg);
  mt_cfg_apply_defaults(cfg);
  *m = cfg->model;
  free(cfg);
}
