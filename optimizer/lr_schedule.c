/* optimizer/lr_schedule.c — see lr_schedule.h. */
#include "optimizer/lr_schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_lr_style_parse(const char *s) {
  if (!strcmp(s, "constant")) return MT_LR_CONSTANT;
  if (!strcmp(s, "linear")) return MT_LR_LINEAR;
  if (!strcmp(s, "cosine")) return MT_LR_COSINE;
  if (!strcmp(s, "inverse-square-root")) return MT_LR_INVERSE_SQRT;
  if (!strcmp(s, "WSD")) return MT_LR_WSD;
  return -1;
}

int mt_wsd_style_parse(const char *s) {
  if (!strcmp(s, "exponential")) return MT_WSD_EXPONENTIAL;
  if (!strcmp(s, "linear")) return MT_WSD_LINEAR;
  if (!strcmp(s, "cosine")) return MT_WSD_COSINE;
  if (!strcmp(s, "minus_sqrt")) return MT_WSD_MINUS_SQRT;
  return -1;
}

int mt_wd_style_parse(const char *s) {
  if (!strcmp(s, "constant")) return MT_WD_CONSTANT;
  if (!strcmp(s, "linear")) return MT_WD_LINEAR;
  if (!strcmp(s, "cosine")) return MT_WD_COSINE;
  return -1;
}

mt_lr_steps mt_lr_schedule_steps(const mt_lr_schedule *s) {
  mt_lr_steps st;
  if (s->fixed_steps)
    return (mt_lr_steps){s->steps.warmup, s->steps.decay, s->steps.wsd_decay, s->steps.wd_incr};
  const double g = (double)(s->gbs > 0 ? s->gbs : 1);
  if (s->samples) {
    st.decay = (double)s->decay_samples;
    st.wd_incr = (double)s->train_samples;
    st.wsd_decay = (double)s->wsd_decay_samples;
    st.warmup = (double)s->warmup_samples;
  } else {
    st.decay = (double)s->decay_iters * g;
    st.wd_incr = (double)s->train_iters * g;
    st.wsd_decay = (double)s->wsd_decay_iters * g;
    st.warmup = (double)s->warmup_iters * g;
  }
  if (s->warmup_fraction > 0) st.warmup = s->warmup_fraction * st.decay;
  return st;
}

double mt_lr_sched_lr(const mt_lr_schedule *s, double n) {
  const mt_lr_steps st = mt_lr_schedule_steps(s);
  const double max_lr = s->max_lr, min_lr = s->min_lr;
  if (st.warmup > 0 && n <= st.warmup) return s->init_lr + (max_lr - s->init_lr) * n / st.warmup;
  if (s->style == MT_LR_CONSTANT) return max_lr;
  if (n > st.decay) return min_lr;
  if (s->style == MT_LR_INVERSE_SQRT) {
    const double w = st.warmup > 1 ? st.warmup : 1, k = n > 1 ? n : 1;
    const double lr = max_lr * sqrt(w) / sqrt(k);
    return lr > min_lr ? lr : min_lr;
  }
  const double r = (n - st.warmup) / (st.decay - st.warmup);
  double c = 0;
  if (s->style == MT_LR_LINEAR) c = 1.0 - r;
  else if (s->style == MT_LR_COSINE) c = 0.5 * (cos(M_PI * r) + 1.0);
  else { /* WSD */
    const double anneal = st.decay - st.wsd_decay;
    if (n <= anneal) c = 1.0;
    else {
      const double q = (n - anneal) / st.wsd_decay;
      switch (s->wsd_style) {
        case MT_WSD_LINEAR: c = 1.0 - q; break;
        case MT_WSD_COSINE: c = 0.5 * (cos(M_PI * q) + 1.0); break;
        case MT_WSD_MINUS_SQRT: c = 1.0 - sqrt(q); break;
        default: c = 2.0 * pow(0.5, q) - 1.0; break; /* exponential */
      }
    }
  }
  return min_lr + c * (max_lr - min_lr);
}

double mt_lr_sched_wd(const mt_lr_schedule *s, double n) {
  const mt_lr_steps st = mt_lr_schedule_steps(s);
  if (n > st.wd_incr || s->wd_style == MT_WD_CONSTANT) return s->end_wd;
  const double r = n / st.wd_incr;
  const double c = s->wd_style == MT_WD_LINEAR ? r : 0.5 * (cos(M_PI * (1.0 - r)) + 1.0);
  return s->start_wd + c * (s->end_wd - s->start_wd);
}

double mt_lr_decimal(float f) {
  char b[32];
  for (int p = 1; p <= 9; p++) {
    snprintf(b, sizeof b, "%.*g", p, (double)f);
    if ((float)strtod(b, NULL) == f) break;
  }
  return strtod(b, NULL);
}
