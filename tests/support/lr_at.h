/* tests/support/lr_at.h — the learning rate of a schedule at an iteration,
 * for tests and tools (the trainer counts samples: mt_lr_sched_lr). */
#ifndef MT_TESTS_SUPPORT_LR_AT_H
#define MT_TESTS_SUPPORT_LR_AT_H

#include <stdint.h>

#include "optimizer/lr_schedule.h"

/* (float) mt_lr_sched_lr(s, iter · gbs), gbs 0 counted as 1. Host only. */
float mt_lr_at(const mt_lr_schedule *s, int64_t iter);

#endif
