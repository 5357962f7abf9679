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
