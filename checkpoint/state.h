/* checkpoint/state.h — the training state a checkpoint carries besides
 * tensors (iteration, consumed samples, counters, seed) and the persistent
 * non-parameter buffers saved with the model; shared by the layout-free
 * format (checkpoint/dist_checkpoint.h) and the previous one
 * (checkpoint/legacy_format.h). */
#ifndef MT_CHECKPOINT_STATE_H
#define MT_CHECKPOINT_STATE_H

#include <stdint.h>

#include "core/dtype.h"
#include "model/params.h"

typedef struct {
  int64_t iteration;
  int64_t consumed_samples;
  int64_t skipped_iters, nan_iters;
  uint64_t seed;
} mt_ckpt_state;

/* Megatron's OptimizerParamScheduler.state_dict (metadata.json
 * "opt_param_scheduler"; lengths and num_steps in samples, as Megatron's
 * scheduler counts), megatrain's other schedule inputs (init_lr, the WSD
 * decay) and the batch-size ramp-up. `present` 0: a checkpoint without it
 * (written before issue 30 item 4, or imported). */
typedef struct {
  int present;
  double max_lr, min_lr, init_lr;
  double lr_warmup_steps, lr_decay_steps, wsd_decay_steps, wd_incr_steps;
  int64_t num_steps;
  char lr_decay_style[24], lr_wsd_decay_style[16], wd_incr_style[16];
  double start_wd, end_wd;
  int64_t rampup_batch_size[3];     /* training.rampup_batch_size; start 0 = none */
  int64_t global_batch_size;        /* the batch of the next iteration (the ramp-up's) */
} mt_ckpt_sched;

/* A non-parameter state tensor saved with the model (Megatron's persistent
 * buffers, e.g. decoder.layers.L.mlp.router.expert_bias): host memory, fp32
 * or int64, `numel` elements; restored in place by load. */
typedef struct {
  char name[MT_PARAM_NAME_MAX];
  void *data;
  int64_t numel;
  mt_dtype dtype; /* MT_F32 or MT_I64 */
} mt_ckpt_buffer;

#endif
