/* tests/support/lr_at.c — see lr_at.h. */
#include "tests/support/lr_at.h"

float mt_lr_at(const mt_lr_schedule *s, int64_t iter) {
  return (float)mt_lr_sched_lr(s, (double)iter * (double)(s->gbs > 0 ? s->gbs : 1));
}
