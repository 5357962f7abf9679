/* trainer/resume_checks.h — what a resumed run compares with the config saved
 * in the checkpoint (metadata.json "config"): the model shape (Megatron's
 * check_checkpoint_args), the learning-rate schedule (Megatron's
 * OptimizerParamScheduler check) and the global batch size. */
#ifndef MT_TRAINER_RESUME_CHECKS_H
#define MT_TRAINER_RESUME_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "checkpoint/state.h"
#include "optimizer/lr_schedule.h"

/* Compare every key Megatron's OptimizerParamScheduler checks on load
 * (cfg->training as resolved: lr, min_lr, the warmup and decay lengths in
 * iterations or samples, lr_decay_style, weight_decay or
 * start/end_weight_decay for Megatron's start and end weight decay,
 * weight_decay_incr_style) and the other inputs of its schedule
 * (lr_warmup_init, lr_warmup_fraction, the WSD keys; k_sched in
 * resume_checks.c lists them) with saved_config_json (the
 * resolved config JSON saved with the checkpoint; NULL, "null" or a JSON
 * without a "training" object: nothing to compare, returns 0; a key the
 * saved config lacks is not compared, as Megatron skips start_wd when the
 * state has none). As Megatron:
 *   - training.override_opt_param_scheduler: this config wins, *sched and
 *     *weight_decay are kept; `verbose` prints what the checkpoint had;
 *   - training.use_checkpoint_opt_param_scheduler: the checkpoint's values
 *     are written to *sched and *weight_decay, and `verbose` prints them;
 *   - neither: any difference is an error (returns -1; err names every
 *     differing key with both values and the two keys that choose; the
 *     caller exits 1, as Megatron's assertion does).
 * load_dir names the checkpoint in messages. Host only, no communication:
 * every rank reads the same metadata and reaches the same result. */
int mt_resume_check_schedule(const char *saved_config_json, const mt_config *cfg,
                             const char *load_dir, int verbose, mt_lr_schedule *sched,
                             float *weight_decay, char *err, size_t errlen);

/* The scheduler state a checkpoint stores (checkpoint/state.h): sched's
 * values and step lengths in samples (mt_lr_schedule_steps), num_steps,
 * cfg's ramp-up and next_gbs, the batch of the next iteration. Host only. */
void mt_resume_sched_fill(mt_ckpt_sched *out, const mt_lr_schedule *sched, int64_t num_steps,
                          const mt_training_config *cfg, int64_t next_gbs);

/* Megatron's OptimizerParamScheduler.load_state_dict against a checkpoint's
 * state ck (present; mt_resume_check_schedule has compared the config keys
 * first): max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style,
 * start_wd, end_wd, wd_incr_style (not wd_incr_steps: megatrain accepts a
 * longer train_iters, docs/checkpoint.md), and megatrain's init_lr,
 * wsd_decay_steps, lr_wsd_decay_style, against *sched (this run's, lengths
 * in samples). With iteration-based training and another global_batch_size
 * than saved_config_json's the lengths are not compared (they scale
 * with the batch; docs/checkpoint.md). override_opt_param_scheduler: this
 * run's values stay; use_checkpoint_opt_param_scheduler: ck's values and
 * lengths are written to *sched (fixed_steps); neither: a difference is an
 * error naming each value by Megatron's name with both values (-1; the
 * caller exits 1). `verbose` prints what a flag replaced and a note when
 * the ramp-up differs from ck's (allowed, as Megatron: the batch is a
 * function of the consumed samples). Host only. */
int mt_resume_check_sched_state(const mt_ckpt_sched *ck, const char *saved_config_json,
                                const mt_config *cfg, const char *load_dir, int verbose,
                                mt_lr_schedule *sched, char *err, size_t errlen);

/* Compare the model keys that fix how the stored tensors are interpreted
 * (num_layers, hidden_size, ffn_hidden_size, num_attention_heads,
 * num_query_groups and kv_channels as resolved, swiglu, normalization,
 * position embedding and rotary settings, experts, vocab_size, ...) of
 * saved_config_json with this run's (cfg->json), as Megatron's
 * check_checkpoint_args. No saved config, no "model" object, or a key absent
 * from either side: nothing to compare for it. Any difference: -1, err names
 * every differing key with both values (the caller exits 1). Host only. */
int mt_resume_check_model(const char *saved_config_json, const mt_config *cfg,
                          const char *load_dir, char *err, size_t errlen);

/* When saved_config_json's training.global_batch_size differs from this
 * run's and `verbose`, print "> note: global_batch_size changed from A to
 * B; the data continues at consumed sample N" (N = consumed_samples). */
void mt_resume_note_batch(const char *saved_config_json, const mt_config *cfg,
                          int64_t consumed_samples, int verbose);

/* The "config" object of the previous per-layout format's
 * LOAD/iter_NNNNNNN/metadata.json as a malloc'ed JSON string in *out
 * (free()), or *out = NULL when the file or the object is missing (then
 * nothing is compared). Returns 0, or -1 with a message naming the file when
 * it is not JSON (core/json.h's strict check). */
int mt_resume_legacy_config(const char *load_dir, int64_t iteration, char **out, char *err,
                            size_t errlen);

#endif
