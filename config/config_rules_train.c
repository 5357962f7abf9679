/* config/config_rules_train.c — the consistency rules of the optimizer
 * schedule keys (Megatron's arguments.py rules for iteration- and
 * sample-based lengths, warmup, WSD and the weight-decay increment), as rows
 * of the rule table that config_check.c runs after the data rules (and
 * the one rule of the data-parallel overlap keys), and
 * docs/config.md lists (tests/support/config_doc.c). Keys that only need
 * another setting (the WSD keys without WSD, start/end weight decay with the
 * constant style, the *_samples lengths without train_samples) are the
 * `needs` column of config_table.c (config_needs.c), not rules here. */
#include <stdio.h>
#include <string.h>

#include "config/batch_rampup.h"
#include "config/config_internal.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

static int given(const mt_cfg_ctx *c, const char *k) { return c->present[key(k)] == 1; }

/* (a resolved config, e.g. a checkpoint's, holds the derived train_iters:
 * that value is accepted) */
static int r_samples_iters(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  const mt_batch_rampup r = mt_batch_rampup_make(t->rampup_batch_size, t->global_batch_size);
  if (t->train_samples <= 0 || t->train_iters == mt_batch_rampup_train_iters(&r, t->train_samples))
    return 0;
  return mt_cfg_fail(c, key("training.train_samples"),
                     "%lld together with training.train_iters %lld (expected one of the two: "
                     "iteration- or sample-based training, as Megatron asserts)",
                     (long long)t->train_samples, (long long)t->train_iters);
}

static int r_train_length(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (t->train_iters >= 1) return 0;
  if (t->train_samples > 0)
    return mt_cfg_fail(c, key("training.train_samples"),
                       "%lld samples are fewer than one global batch of %d (expected "
                       "train_samples >= global_batch_size)",
                       (long long)t->train_samples, t->global_batch_size);
  return mt_cfg_fail(c, key("training.train_iters"),
                     "missing (expected training.train_iters or training.train_samples)");
}

/* The lengths of the other basis: the iteration keys with train_samples,
 * the sample keys without it (lr_decay_iters is always set, derived or
 * given: with train_samples its derived value train_iters is accepted). */
static int r_length_basis(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  const int samples = t->train_samples > 0;
  static const char *const it_only[] = {"training.lr_decay_iters", "training.lr_warmup_iters",
                                        "training.lr_wsd_decay_iters"};
  static const char *const sm_only[] = {"training.lr_decay_samples", "training.lr_warmup_samples",
                                        "training.lr_wsd_decay_samples"};
  const int64_t it_v[] = {samples && t->lr_decay_iters == t->train_iters ? 0 : t->lr_decay_iters,
                          t->lr_warmup_iters, t->lr_wsd_decay_iters};
  const int64_t sm_v[] = {t->lr_decay_samples, t->lr_warmup_samples, t->lr_wsd_decay_samples};
  for (int i = 0; i < 3; i++) {
    const char *k = samples ? it_only[i] : sm_only[i];
    if ((samples ? it_v[i] : (i == 0 ? 0 : sm_v[i])) != 0 || (!samples && i == 0 && given(c, k)))
      return mt_cfg_fail(c, key(k),
                         "has no effect with %s training (expected %s, as Megatron asserts)",
                         samples ? "sample-based (training.train_samples)" : "iteration-based",
                         samples ? "the *_samples key instead" : "training.train_samples with it");
  }
  return 0;
}

static int r_warmup_forms(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (!(t->lr_warmup_fraction > 0 && (t->lr_warmup_iters > 0 || t->lr_warmup_samples > 0)))
    return 0;
  return mt_cfg_fail(c, key("training.lr_warmup_fraction"),
                     "%g together with training.%s (expected only one warmup length)",
                     (double)t->lr_warmup_fraction,
                     t->lr_warmup_iters > 0 ? "lr_warmup_iters" : "lr_warmup_samples");
}

static int r_wsd_length(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (strcmp(t->lr_decay_style, "WSD")) return 0;
  const int samples = t->train_samples > 0;
  const int64_t w = samples ? t->lr_wsd_decay_samples : t->lr_wsd_decay_iters;
  const int64_t d = samples ? t->lr_decay_samples : t->lr_decay_iters;
  const char *k = samples ? "training.lr_wsd_decay_samples" : "training.lr_wsd_decay_iters";
  if (w < 1)
    return mt_cfg_fail(c, key(k), "missing (lr_decay_style \"WSD\" needs the length of its "
                                  "final decay)");
  if (w > d)
    return mt_cfg_fail(c, key(k), "%lld is longer than the decay length %lld (expected <=)",
                       (long long)w, (long long)d);
  return 0;
}

/* (Megatron asserts both given; a null start is 0, so that a resolved config
 * with start 0 loads back. With the constant style start = end =
 * weight_decay: mt_trainer_lr_schedule resolves it, the keys stay null.) */
static int r_wd_end_given(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (!strcmp(t->weight_decay_incr_style, "constant") || given(c, "training.end_weight_decay") ||
      t->end_weight_decay != 0)
    return 0;
  return mt_cfg_fail(c, key("training.end_weight_decay"),
                     "missing (weight_decay_incr_style \"%s\" needs start_weight_decay and "
                     "end_weight_decay)",
                     t->weight_decay_incr_style);
}

static int r_wd_incr_weight_decay(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (!strcmp(t->weight_decay_incr_style, "constant") ||
      t->weight_decay == (float)mt_cfg_keys[key("training.weight_decay")].def)
    return 0;
  return mt_cfg_fail(c, key("training.weight_decay"),
                     "%g has no effect with weight_decay_incr_style \"%s\" (expected "
                     "start_weight_decay and end_weight_decay only, weight_decay at its "
                     "default)",
                     (double)t->weight_decay, t->weight_decay_incr_style);
}

static int r_wd_order(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (!strcmp(t->weight_decay_incr_style, "constant") ||
      t->end_weight_decay >= t->start_weight_decay)
    return 0;
  return mt_cfg_fail(c, key("training.end_weight_decay"),
                     "%g is smaller than start_weight_decay %g (expected end >= start, as "
                     "Megatron asserts)",
                     (double)t->end_weight_decay, (double)t->start_weight_decay);
}

static int r_warmup_init_lr(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  if (t->lr_warmup_init <= t->lr) return 0;
  return mt_cfg_fail(c, key("training.lr_warmup_init"),
                     "%g is larger than lr %g (expected lr_warmup_init <= lr)",
                     (double)t->lr_warmup_init, (double)t->lr);
}

/* Warmup and decay lengths in samples, as Megatron's scheduler counts. */
static void lengths(const mt_training_config *t, double *warm, double *decay) {
  const int samples = t->train_samples > 0;
  *decay = samples ? (double)t->lr_decay_samples : (double)t->lr_decay_iters * t->global_batch_size;
  *warm = t->lr_warmup_fraction > 0 ? t->lr_warmup_fraction * *decay
          : samples                 ? (double)t->lr_warmup_samples
                                    : (double)t->lr_warmup_iters * t->global_batch_size;
}

/* lr_warmup_steps <= lr_decay_steps, in samples (Megatron asserts <;
 * megatrain accepts a run that is all warmup, as before issue 30) */
static int r_warmup_decay(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_training_config *t = &cfg->training;
  double warm, decay;
  lengths(t, &warm, &decay);
  if (!(warm > decay && decay > 0)) return 0;
  return mt_cfg_fail(c,
                     key(t->train_samples > 0 ? "training.lr_warmup_samples"
                                              : "training.lr_warmup_iters"),
                     "the warmup (%.17g samples) is longer than the decay (%.17g samples; "
                     "expected warmup <= decay)",
                     warm, decay);
}

static int r_warmup_init_needs(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  double warm, decay;
  lengths(&cfg->training, &warm, &decay);
  if (!given(c, "training.lr_warmup_init") || warm != 0) return 0;
  return mt_cfg_fail(c, key("training.lr_warmup_init"),
                     "has no effect without a warmup (expected lr_warmup_iters, "
                     "lr_warmup_samples or lr_warmup_fraction)");
}

/* Megatron's RampupBatchsizeNumMicroBatchesCalculator asserts (start >= 1,
 * increment >= 1 and samples >= 0 are the key's own check), and what its
 * update asserts at every iteration: each ramped batch a multiple of
 * micro_batch_size x dp (here start and increment, checked once); Megatron
 * divides by the number of increments and by the samples per increment, so
 * start = global_batch_size and 0 ramp-up samples fail there with a
 * ZeroDivisionError: here they are refused. */
static int r_rampup(mt_cfg_ctx *c, mt_config *cfg, int world) {
  const mt_training_config *t = &cfg->training;
  const int64_t *r = t->rampup_batch_size, g = t->global_batch_size;
  if (r[0] <= 0) return 0;
  const int k = key("training.rampup_batch_size");
  if (r[0] >= g)
    return mt_cfg_fail(c, k,
                       "start batch size %lld is not smaller than global_batch_size %lld "
                       "(expected start < global_batch_size: the ramp-up grows the batch to it)",
                       (long long)r[0], (long long)g);
  if ((g - r[0]) % r[1])
    return mt_cfg_fail(c, k,
                       "global batch size interval %lld (global_batch_size %lld - start %lld) is "
                       "not divisible by the batch size increment %lld (expected a multiple, as "
                       "Megatron asserts)",
                       (long long)(g - r[0]), (long long)g, (long long)r[0], (long long)r[1]);
  if (r[2] < 1)
    return mt_cfg_fail(c, k, "0 ramp-up samples (expected >= 1: the samples per increment are "
                             "ramp-up samples / number of increments)");
  const int64_t mp = (int64_t)cfg->parallel.tensor_model_parallel_size *
                     cfg->parallel.pipeline_model_parallel_size *
                     cfg->parallel.context_parallel_size;
  const int dp = mp > 0 && world % mp == 0 ? (int)(world / mp) : 1;
  const int64_t per = (int64_t)t->micro_batch_size * (dp > 0 ? dp : 1);
  for (int i = 0; i < 2; i++)
    if (r[i] % per)
      return mt_cfg_fail(c, k,
                         "%s %lld is not divisible by micro_batch_size (%d) x data-parallel size "
                         "(%d) = %lld (expected a multiple: every ramped global batch is, as "
                         "Megatron asserts)",
                         i ? "batch size increment" : "start batch size", (long long)r[i],
                         t->micro_batch_size, dp, (long long)per);
  const int pp = cfg->parallel.pipeline_model_parallel_size;
  if (cfg->parallel.virtual_pipeline_model_parallel_size > 1)
    for (int i = 0; i < 2; i++)
      if ((r[i] / per) % pp)
        return mt_cfg_fail(c, k,
                           "%s %lld gives %lld micro-batches, which the interleaved schedule "
                           "(virtual_pipeline_model_parallel_size %d) needs to be a multiple of "
                           "pipeline_model_parallel_size %d",
                           i ? "batch size increment" : "start batch size", (long long)r[i],
                           (long long)(r[i] / per),
                           cfg->parallel.virtual_pipeline_model_parallel_size, pp);
  return 0;
}

#define LIN "training.weight_decay_incr_style=linear; "
/* overlap_grad_reduce / overlap_param_gather true when no gradient is
 * reduced over more than one rank: dp x cp = 1 and, with experts, an
 * expert-data-parallel size of 1 (Megatron accepts it and does nothing;
 * docs/config.md says so). Derived sizes (etp) are set by now. */
static int r_overlap_dp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  const mt_parallel_config *p = &cfg->parallel;
  const int tp = p->tensor_model_parallel_size, pp = p->pipeline_model_parallel_size;
  const int cp = p->context_parallel_size;
  if (!(p->overlap_grad_reduce || p->overlap_param_gather) || tp < 1 || pp < 1 || cp < 1 ||
      world % (tp * cp * pp))
    return 0;
  const int dp_cp = world / (tp * pp);
  int edp = 1;
  const int eg = pp * p->expert_model_parallel_size *
                 (p->expert_tensor_parallel_size > 0 ? p->expert_tensor_parallel_size : tp);
  if (cfg->model.num_experts > 0 && eg > 0 && world % eg == 0) edp = world / eg;
  if (dp_cp > 1 || edp > 1) return 0;
  const char *k = p->overlap_grad_reduce ? "parallel.overlap_grad_reduce"
                                         : "parallel.overlap_param_gather";
  return mt_cfg_fail(c, key(k),
                     "true has no effect on %d rank(s) with tp %d x cp %d x pp %d: no gradient "
                     "is reduced over data-parallel ranks (expected a world larger than "
                     "tp x cp x pp, or the key left out)",
                     world, tp, cp, pp);
}

static const mt_cfg_rule k_sched[] = {
    {"training.train_samples", r_samples_iters,
     "`training.train_samples` and `train_iters` are not both given (a resolved config's "
     "`train_iters` = ⌊`train_samples` / `global_batch_size`⌋ is accepted; Megatron asserts "
     "one of the two)",
     "1: training.train_samples=40", 0, 0},
    {"training.train_iters training.train_samples", r_train_length,
     "`training.train_iters` or `train_samples` is given, and `train_samples` ≥ "
     "`global_batch_size`; the message names `train_samples` when it is set",
     "1: training.train_iters=null", 0, 1},
    {"training.lr_decay_iters training.lr_warmup_iters training.lr_wsd_decay_iters "
     "training.lr_decay_samples training.lr_warmup_samples training.lr_wsd_decay_samples",
     r_length_basis,
     "with `training.train_samples` the schedule lengths are the `*_samples` keys "
     "(`lr_decay_iters` only at its derived value), without it the `*_iters` keys (as Megatron "
     "asserts); the message names the key of the other basis",
     "1: training.train_samples=20; training.lr_warmup_iters=2", 0, 0},
    {"training.lr_warmup_fraction", r_warmup_forms,
     "`training.lr_warmup_fraction` excludes `lr_warmup_iters` and `lr_warmup_samples` (one "
     "warmup length)",
     "1: training.lr_warmup_fraction=0.1; training.lr_warmup_iters=2", 0, 0},
    {"training.lr_wsd_decay_iters training.lr_wsd_decay_samples", r_wsd_length,
     "`lr_decay_style` `WSD` needs `training.lr_wsd_decay_iters` (`lr_wsd_decay_samples` with "
     "`train_samples`), at most the decay length",
     "1: training.lr_decay_style=WSD", 0, 0},
    {"training.end_weight_decay", r_wd_end_given,
     "`weight_decay_incr_style` `linear` or `cosine` needs `training.end_weight_decay` "
     "(`start_weight_decay` null is 0)",
     "1: " LIN "training.start_weight_decay=0", 0, 0},
    {"training.weight_decay", r_wd_incr_weight_decay,
     "with `weight_decay_incr_style` `linear` or `cosine`, `training.weight_decay` stays at its "
     "default (the increment uses `start_weight_decay` and `end_weight_decay`)",
     "1: " LIN "training.end_weight_decay=0.1; training.weight_decay=0.2", 0, 0},
    {"training.end_weight_decay", r_wd_order,
     "`training.end_weight_decay` ≥ `start_weight_decay` (as Megatron asserts)",
     "1: " LIN "training.start_weight_decay=0.2; training.end_weight_decay=0.1", 0, 0},
    {"training.lr_warmup_init", r_warmup_init_lr, "`training.lr_warmup_init` ≤ `lr`",
     "1: training.lr_warmup_iters=2; training.lr_warmup_init=1", 0, 0},
    {"training.lr_warmup_iters training.lr_warmup_samples", r_warmup_decay,
     "the warmup is at most the decay, counted in samples (`lr_warmup_fraction` × decay, "
     "`lr_warmup_samples`, or `lr_warmup_iters` × `global_batch_size`; Megatron asserts <)",
     "1: training.train_iters=null; training.train_samples=20; training.lr_warmup_samples=30",
     0, 0},
    {"training.lr_warmup_init", r_warmup_init_needs,
     "`training.lr_warmup_init` needs a warmup (`lr_warmup_iters`, `lr_warmup_samples` or "
     "`lr_warmup_fraction`)",
     "1: training.lr_warmup_init=0", 0, 0},
    {"training.rampup_batch_size", r_rampup,
     "`training.rampup_batch_size` [start, increment, samples]: start < `global_batch_size`, "
     "the increment divides `global_batch_size` − start, samples ≥ 1, start and increment "
     "are multiples of `micro_batch_size` × dp (with vpp > 1: of pp micro-batches too)",
     "1: training.train_iters=null; training.train_samples=64; "
     "training.global_batch_size=8; training.rampup_batch_size=[8,2,16]", 0, 0},
    {"parallel.overlap_grad_reduce parallel.overlap_param_gather", r_overlap_dp,
     "`parallel.overlap_grad_reduce` or `overlap_param_gather` true needs a gradient reduced "
     "over more than one rank: dp × cp > 1, or an expert-data-parallel size > 1 (Megatron "
     "accepts either key there and does nothing)",
     "1: parallel.overlap_grad_reduce=true", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_train(int *n) {
  *n = (int)(sizeof k_sched / sizeof k_sched[0]);
  return k_sched;
}
