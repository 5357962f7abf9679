/* tests/support/probe_planner.c — the model's parameter count from the
 * planner's formulas (tests/support/probes.h). */
#include <math.h>

#include "planner/plan_internal.h"
#include "tests/support/probes.h"

int64_t mt_plan_num_parameters(const mt_config *cfg, int padded_vocab) {
  mt_plan_dims d;
  mt_plan_dims_from(cfg, 1, &d);
  return (int64_t)llround(mt_plan_total_params(&d, padded_vocab));
}
