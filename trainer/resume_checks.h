/* trainer/resume_checks.h — what a resumed run compares with the config saved
 * in the checkpoint (metadata.json "config"): the model shape (Megatron's
 * check_checkpoint_args), the learning-rate schedule (Megatron's
 * OptimizerParamScheduler check) and the global batch size. */
#ifndef MT_TRAINER_RESUME_CHECKS_H
#define MT_TRAINER_RESUME_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
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
