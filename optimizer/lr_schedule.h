/* optimizer/lr_schedule.h — Megatron's OptimizerParamScheduler
 * (megatron/core/optimizer_param_scheduler.py) and the step counts Megatron's
 * training.get_optimizer_param_scheduler derives from the training keys:
 * learning rate (linear warmup from lr_warmup_init, then constant | linear |
 * cosine | inverse-square-root | WSD decay to min_lr) and weight decay
 * (constant | linear | cosine increment from start to end), both functions of
 * the scheduler's step count, which counts SAMPLES (Megatron steps it by the
 * global batch size after every update).
 */
#ifndef MT_OPTIMIZER_LR_SCHEDULE_H
#define MT_OPTIMIZER_LR_SCHEDULE_H

#include <stdint.h>

enum {
  MT_LR_CONSTANT = 0,
  MT_LR_LINEAR = 1,
  MT_LR_COSINE = 2,
  MT_LR_INVERSE_SQRT = 3, /* "inverse-square-root" */
  MT_LR_WSD = 4           /* "WSD": warmup, stable, decay */
};
/* lr_wsd_decay_style: the shape of WSD's final decay */
enum { MT_WSD_EXPONENTIAL = 0, MT_WSD_LINEAR = 1, MT_WSD_COSINE = 2, MT_WSD_MINUS_SQRT = 3 };
/* weight_decay_incr_style */
enum { MT_WD_CONSTANT = 0, MT_WD_LINEAR = 1, MT_WD_COSINE = 2 };

/* The schedule as the config gives it. Iteration-based (samples 0):
 * lengths in iterations, times gbs samples; sample-based (samples 1,
 * Megatron's train_samples): the *_samples lengths. Rates are doubles of the
 * decimals the config holds (Megatron's Python floats). */
typedef struct {
  double max_lr, min_lr, init_lr;  /* lr, min_lr, lr_warmup_init */
  int64_t warmup_iters, decay_iters; /* lr_warmup_iters, lr_decay_iters (iteration-based) */
  int style;                       /* MT_LR_* */
  int64_t gbs;                     /* samples per iteration (0 counts as 1) */
  int samples;                     /* 1 = sample-based lengths below */
  int64_t warmup_samples, decay_samples, train_samples; /* sample-based */
  int64_t train_iters;             /* iteration-based weight-decay length */
  double warmup_fraction;          /* > 0: warmup = fraction × decay steps (either basis) */
  int64_t wsd_decay_iters, wsd_decay_samples; /* WSD's decay length; 0 = unset */
  int wsd_style;                   /* MT_WSD_* */
  double start_wd, end_wd;         /* start_weight_decay, end_weight_decay */
  int wd_style;                    /* MT_WD_* */
  int fixed_steps;                 /* 1: `steps` below are the lengths (a checkpoint's
                                      scheduler state), not derived from the keys above */
  struct { double warmup, decay, wsd_decay, wd_incr; } steps;
} mt_lr_schedule;

/* Megatron's scheduler lengths in samples (get_optimizer_param_scheduler):
 * warmup, decay, WSD decay and weight-decay increment steps. */
typedef struct {
  double warmup, decay, wsd_decay, wd_incr;
} mt_lr_steps;
/* (fixed_steps: s->steps) */
mt_lr_steps mt_lr_schedule_steps(const mt_lr_schedule *s);

/* Parse a style name; -1 when unknown. lr_decay_style: "constant" | "linear"
 * | "cosine" | "inverse-square-root" | "WSD"; lr_wsd_decay_style:
 * "exponential" | "linear" | "cosine" | "minus_sqrt"; weight_decay_incr_style:
 * "constant" | "linear" | "cosine". */
int mt_lr_style_parse(const char *s);
int mt_wsd_style_parse(const char *s);
int mt_wd_style_parse(const char *s);

/* Learning rate and weight decay at scheduler step count num_steps (samples
 * consumed), Megatron's get_lr / get_wd formula for formula (double):
 *   num_steps <= warmup (> 0): init + (max - init) num_steps / warmup
 *   constant: max; num_steps > decay: min;
 *   inverse-square-root: max(min, max sqrt(max(warmup, 1)) / sqrt(max(n, 1)))
 *   else r = (n - warmup) / (decay - warmup), coefficient c on max - min:
 *     linear 1 - r; cosine (1 + cos(pi r)) / 2; WSD 1 until decay - wsd,
 *     then with q = (n - (decay - wsd)) / wsd: exponential 2·0.5^q - 1,
 *     linear 1 - q, cosine (1 + cos(pi q)) / 2, minus_sqrt 1 - sqrt(q).
 *   wd: end when n > wd_incr or constant; else start + c (end - start),
 *     c = n / wd_incr (linear), (1 + cos(pi (1 - n / wd_incr))) / 2 (cosine).
 * Megatron's update k (1-based) uses the values at the samples consumed
 * before it, (k - 1) · gbs with a constant batch; it logs the values at
 * k · gbs (its scheduler has stepped when the iteration is logged). */
double mt_lr_sched_lr(const mt_lr_schedule *s, double num_steps);
double mt_lr_sched_wd(const mt_lr_schedule *s, double num_steps);

/* The double a float config value was written as: the shortest decimal that
 * reads back as f, read as a double (1e-3f -> 0.001, not 0.0010000000475). */
double mt_lr_decimal(float f);

#endif
