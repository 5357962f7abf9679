/* optimizer/lr_schedule.h — Megatron's learning-rate schedule
 * (OptimizerParamScheduler): linear warmup, then constant | linear | cosine
 * decay from lr to min_lr, then min_lr.
 */
#ifndef MT_OPTIMIZER_LR_SCHEDULE_H
#define MT_OPTIMIZER_LR_SCHEDULE_H

#include <stdint.h>

typedef struct {
  float max_lr, min_lr;
  int64_t warmup_iters, decay_iters;
  int style; /* MT_LR_CONSTANT | MT_LR_LINEAR | MT_LR_COSINE */
} mt_lr_schedule;

enum { MT_LR_CONSTANT = 0, MT_LR_LINEAR = 1, MT_LR_COSINE = 2 };

/* Parse "constant" | "linear" | "cosine"; -1 when unknown. */
int mt_lr_style_parse(const char *s);

/* Learning rate of update number `iter` (1-based):
 *   iter <= warmup:            max_lr * iter / warmup
 *   iter >= decay_iters:       min_lr
 *   otherwise, with r = (iter - warmup) / (decay_iters - warmup):
 *     constant: max_lr; linear: min + (max - min)(1 - r);
 *     cosine:   min + (max - min) * 0.5 (1 + cos(pi r)).
 * A pure function of iter, so a resumed run needs only the iteration. */
float mt_lr_at(const mt_lr_schedule *s, int64_t iter);

#endif
