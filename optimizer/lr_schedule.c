/* optimizer/lr_schedule.c — see lr_schedule.h. */
#include "optimizer/lr_schedule.h"

#include <math.h>
#include <string.h>

int mt_lr_style_parse(const char *s) {
  if (!strcmp(s, "constant")) return MT_LR_CONSTANT;
  if (!strcmp(s, "linear")) return MT_LR_LINEAR;
  if (!strcmp(s, "cosine")) return MT_LR_COSINE;
  return -1;
}

float mt_lr_at(const mt_lr_schedule *s, int64_t iter) {
  if (s->warmup_iters > 0 && iter <= s->warmup_iters)
    return (float)((double)s->max_lr * (double)iter / (double)s->warmup_iters);
  if (s->style == MT_LR_CONSTANT) return s->max_lr;
  if (iter >= s->decay_iters) return s->min_lr;
  double r = (double)(iter - s->warmup_iters) / (double)(s->decay_iters - s->warmup_iters);
  double coeff = s->style == MT_LR_LINEAR ? 1.0 - r : 0.5 * (1.0 + cos(M_PI * r));
  return (float)((double)s->min_lr + coeff * ((double)s->max_lr - (double)s->min_lr));
}
