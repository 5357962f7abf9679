/* config/config_check_train.c — the checks of the optimizer schedule keys
 * (Megatron's arguments.py rules for iteration- and sample-based lengths,
 * warmup, WSD and the weight-decay increment) and of the data paths (one
 * blend, or Megatron's per-split blends); called by mt_cfg_check. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

/* data_path, or Megatron's per-split paths (BlendedMegatronDatasetConfig:
 * blend and blend_per_split exclude each other, and split with them). */
int mt_cfg_check_data_paths(mt_cfg_ctx *c, const mt_config *cfg) {
  const mt_data_config *d = &cfg->data;
  const int per_split = d->split_blend[0].n_paths || d->split_blend[1].n_paths ||
                        d->split_blend[2].n_paths;
  if (!per_split && d->n_paths == 0)
    return mt_cfg_fail(c, key("data.data_path"),
                       "required key is missing (expected data.data_path, or "
                       "data.train_data_path with valid_data_path / test_data_path)");
  if (!per_split) return 0;
  if (d->n_paths)
    return mt_cfg_fail(c, key("data.train_data_path"),
                       "given together with data.data_path (expected one of the two: one blend "
                       "split by data.split, or one blend per split, as Megatron asserts)");
  if (!d->split_blend[0].n_paths)
    return mt_cfg_fail(c, key("data.train_data_path"),
                       "missing: data.valid_data_path / test_data_path need it (expected the "
                       "training prefixes)");
  if (c->present[key("data.split")] == 1)
    return mt_cfg_fail(c, key("data.split"),
                       "\"%s\" has no effect with data.train_data_path (every document of a "
                       "per-split path belongs to its split; expected no split)",
                       d->split);
  return 0;
}

/* Megatron's arguments.py rules for the optimizer schedule (iteration- vs
 * sample-based lengths, warmup forms, WSD, the weight-decay increment), and
 * refusals of keys that would change nothing; resolves start/end weight
 * decay to weight_decay for the constant style. */
int mt_cfg_check_schedule(mt_cfg_ctx *c, mt_config *cfg) {
  mt_training_config *t = &cfg->training;
  const int samples = t->train_samples > 0;
#define GIVEN(k) (c->present[key(k)] == 1)
  /* (a resolved config, e.g. a checkpoint's, holds the derived values:
   * those are accepted) */
  if (samples && t->train_iters != t->train_samples / t->global_batch_size)
    return mt_cfg_fail(c, key("training.train_samples"),
                       "%lld together with training.train_iters %lld (expected one of the two: "
                       "iteration- or sample-based training, as Megatron asserts)",
                       (long long)t->train_samples, (long long)t->train_iters);
  if (t->train_iters < 1 && samples)
    return mt_cfg_fail(c, key("training.train_samples"),
                       "%lld samples are fewer than one global batch of %d (expected "
                       "train_samples >= global_batch_size)",
                       (long long)t->train_samples, t->global_batch_size);
  if (t->train_iters < 1)
    return mt_cfg_fail(c, key("training.train_iters"),
                       "missing (expected training.train_iters or training.train_samples)");
  static const char *const it_only[] = {"training.lr_decay_iters", "training.lr_warmup_iters",
                                        "training.lr_wsd_decay_iters"};
  static const char *const sm_only[] = {"training.lr_decay_samples", "training.lr_warmup_samples",
                                        "training.lr_wsd_decay_samples"};
  const int64_t it_v[] = {samples && t->lr_decay_iters == t->train_iters ? 0 : t->lr_decay_iters,
                          t->lr_warmup_iters, t->lr_wsd_decay_iters};
  const int64_t sm_v[] = {t->lr_decay_samples, t->lr_warmup_samples, t->lr_wsd_decay_samples};
  for (int i = 0; i < 3; i++) {
    const char *k = samples ? it_only[i] : sm_only[i];
    /* (iteration-based: lr_decay_iters is always set, derived or given) */
    if ((samples ? it_v[i] : (i == 0 ? 0 : sm_v[i])) != 0 || (!samples && i == 0 && GIVEN(k)))
      return mt_cfg_fail(c, key(k),
                         "has no effect with %s training (expected %s, as Megatron asserts)",
                         samples ? "sample-based (training.train_samples)" : "iteration-based",
                         samples ? "the *_samples key instead" : "training.train_samples with it");
  }
  if (t->lr_warmup_fraction > 0 && (t->lr_warmup_iters > 0 || t->lr_warmup_samples > 0))
    return mt_cfg_fail(c, key("training.lr_warmup_fraction"),
                       "%g together with training.%s (expected only one warmup length)",
                       (double)t->lr_warmup_fraction,
                       t->lr_warmup_iters > 0 ? "lr_warmup_iters" : "lr_warmup_samples");
  const int wsd = !strcmp(t->lr_decay_style, "WSD");
  if (!wsd) {
    static const char *const wk[] = {"training.lr_wsd_decay_style", "training.lr_wsd_decay_iters",
                                     "training.lr_wsd_decay_samples"};
    const int set[] = {strcmp(t->lr_wsd_decay_style, "exponential") != 0,
                       t->lr_wsd_decay_iters != 0, t->lr_wsd_decay_samples != 0};
    for (int i = 0; i < 3; i++)
      if (set[i])
        return mt_cfg_fail(c, key(wk[i]),
                           "has no effect with lr_decay_style \"%s\" (expected lr_decay_style "
                           "\"WSD\")",
                           t->lr_decay_style);
  } else {
    const int64_t w = samples ? t->lr_wsd_decay_samples : t->lr_wsd_decay_iters;
    const int64_t d = samples ? t->lr_decay_samples : t->lr_decay_iters;
    const char *k = samples ? "training.lr_wsd_decay_samples" : "training.lr_wsd_decay_iters";
    if (w < 1)
      return mt_cfg_fail(c, key(k), "missing (lr_decay_style \"WSD\" needs the length of its "
                                    "final decay)");
    if (w > d)
      return mt_cfg_fail(c, key(k), "%lld is longer than the decay length %lld (expected <=)",
                         (long long)w, (long long)d);
  }
  const int wd_const = !strcmp(t->weight_decay_incr_style, "constant");
  if (wd_const) {
    if (GIVEN("training.start_weight_decay") || GIVEN("training.end_weight_decay"))
      return mt_cfg_fail(c, key(GIVEN("training.start_weight_decay") ? "training.start_weight_decay"
                                                                   : "training.end_weight_decay"),
                         "has no effect with weight_decay_incr_style \"constant\" (expected "
                         "training.weight_decay, or weight_decay_incr_style \"linear\" or "
                         "\"cosine\")");
    /* start = end = weight_decay: mt_lr_schedule resolves it (the keys
     * stay null, so the resolved config loads back) */
  } else {
    /* (Megatron asserts both given; a null start here is 0, so that a
     * resolved config with start 0 loads back) */
    if (!GIVEN("training.end_weight_decay") && t->end_weight_decay == 0)
      return mt_cfg_fail(c, key("training.end_weight_decay"),
                         "missing (weight_decay_incr_style \"%s\" needs start_weight_decay and "
                         "end_weight_decay)",
                         t->weight_decay_incr_style);
    if (t->weight_decay != (float)mt_cfg_keys[key("training.weight_decay")].def)
      return mt_cfg_fail(c, key("training.weight_decay"),
                         "%g has no effect with weight_decay_incr_style \"%s\" (expected "
                         "start_weight_decay and end_weight_decay only, weight_decay at its "
                         "default)",
                         (double)t->weight_decay, t->weight_decay_incr_style);
    if (t->end_weight_decay < t->start_weight_decay)
      return mt_cfg_fail(c, key("training.end_weight_decay"),
                         "%g is smaller than start_weight_decay %g (expected end >= start, as "
                         "Megatron asserts)",
                         (double)t->end_weight_decay, (double)t->start_weight_decay);
  }
  if (t->lr_warmup_init > t->lr)
    return mt_cfg_fail(c, key("training.lr_warmup_init"),
                       "%g is larger than lr %g (expected lr_warmup_init <= lr)",
                       (double)t->lr_warmup_init, (double)t->lr);
  /* lr_warmup_steps <= lr_decay_steps, in samples (Megatron asserts <;
   * megatrain accepts a run that is all warmup, as before issue 30) */
  const double decay = samples ? (double)t->lr_decay_samples
                               : (double)t->lr_decay_iters * t->global_batch_size;
  const double warm = t->lr_warmup_fraction > 0 ? t->lr_warmup_fraction * decay
                      : samples ? (double)t->lr_warmup_samples
                                : (double)t->lr_warmup_iters * t->global_batch_size;
  if (warm > decay && decay > 0)
    return mt_cfg_fail(c, key(samples ? "training.lr_warmup_samples" : "training.lr_warmup_iters"),
                       "the warmup (%.17g samples) is longer than the decay (%.17g samples; "
                       "expected warmup <= decay)",
                       warm, decay);
  if (GIVEN("training.lr_warmup_init") && warm == 0)
    return mt_cfg_fail(c, key("training.lr_warmup_init"),
                       "has no effect without a warmup (expected lr_warmup_iters, "
                       "lr_warmup_samples or lr_warmup_fraction)");
#undef GIVEN
  return 0;
}

