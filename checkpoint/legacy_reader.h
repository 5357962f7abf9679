/* checkpoint/legacy_reader.h — loading a checkpoint of the previous,
 * per-layout format (checkpoint/legacy_format.h) under the layout that wrote
 * it; collective over layout->world. */
#ifndef MT_CHECKPOINT_LEGACY_READER_H
#define MT_CHECKPOINT_LEGACY_READER_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/legacy_format.h"
#include "optimizer/optimizer.h"

/* Load the latest checkpoint under `load_dir` into the optimizer's buffers
 * (parameters, master, moments, step) and st. Errors (missing files, bad
 * checksum, truncated file, a tensor whose name or shape differs from the
 * model — named in the message) return -1 with a message; nothing is
 * modified unless every check passed. Collective over layout->world. */
int mt_checkpoint_load(const char *load_dir, mt_ckpt_state *st, mt_adamw *opt,
                       const mt_ckpt_layout *layout, char *err, size_t errlen);

/* Iteration named by load_dir/latest_checkpointed_iteration.txt, or -1. */
int64_t mt_checkpoint_latest(const char *dir);

#endif
