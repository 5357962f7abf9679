/* config/batch_rampup.h — the global batch size of an iteration under
 * training.rampup_batch_size [start, increment, ramp-up samples]: Megatron's
 * RampupBatchsizeNumMicroBatchesCalculator (megatron/core/
 * num_microbatches_calculator.py, before Megatron replaced it with
 * step_batch_size_schedule) and the iteration count its update_train_iters
 * derives for sample-based training. Pure functions of the config values,
 * host only, no communication. Docs: docs/optimizer.md, "Batch-size ramp-up". */
#ifndef MT_CONFIG_BATCH_RAMPUP_H
#define MT_CONFIG_BATCH_RAMPUP_H

#include <stdint.h>

typedef struct {
  int64_t start, increment, samples; /* rampup_batch_size; start 0 = no ramp-up */
  int64_t global;                    /* training.global_batch_size, the batch after the ramp */
  double per_increment;              /* samples / ((global - start) / increment), a double as
                                        Megatron's Python division */
} mt_batch_rampup;

/* rampup[3] as the config holds it (start 0: off) and the final global
 * batch size. Needs start < global, increment dividing global - start and
 * samples >= 1 when on (the config check ensures it). */
mt_batch_rampup mt_batch_rampup_make(const int64_t rampup[3], int64_t global_batch_size);

/* The global batch size of the iteration that starts after `consumed`
 * samples (Megatron's update(consumed_samples)):
 *   consumed > samples: global;
 *   else start + increment · trunc(consumed / per_increment).
 * Without a ramp-up: global. */
int64_t mt_batch_rampup_gbs(const mt_batch_rampup *r, int64_t consumed);

/* Megatron's update_train_iters with a ramp-up: iterations of the ramp
 * (while consumed <= samples and consumed <= train_samples, each adds one
 * iteration of mt_batch_rampup_gbs(consumed) samples), then
 * ⌊(train_samples − consumed) / global⌋ iterations of the full batch (a
 * partial last batch is dropped). Without a ramp-up: ⌊train_samples /
 * global⌋. */
int64_t mt_batch_rampup_train_iters(const mt_batch_rampup *r, int64_t train_samples);

#endif
