/* trainer/checkpoint.h — megatrain's PREVIOUS, per-layout checkpoint format.
 * The trainer saves the layout-free format (trainer/dist_checkpoint.h) and
 * loads this one only for checkpoints written before it, under the layout
 * that wrote them (trainer/train_checkpoint.c). mt_checkpoint_save and
 * mt_zero_ckpt_save are kept only to write such checkpoints in tests
 * (tests/tools/legacy_ckpt.c, tests/unit/test_checkpoint.c).
 *
 * Layout (Megatron's names): SAVE/iter_0000100/ holds one
 * mp_rank_TT[_PPP]/model_optim_rng.bin per model-parallel rank (written by
 * data-parallel rank 0; ZeRO shards add per-dp files) and metadata.json;
 * SAVE/latest_checkpointed_iteration.txt names the newest complete one.
 *
 * Crash safety: everything is written into SAVE/iter_0000100.tmp, fsynced,
 * and renamed to its final name only when every rank has finished; the
 * "latest" file is replaced by rename afterwards. A crash at any point leaves
 * the previous checkpoint loadable. Every .bin ends with a CRC-32 (zlib) of
 * its contents that load verifies; metadata.json repeats it.
 *
 * What is saved: parameters, Adam moments (and fp32 master copies), the
 * optimizer step, iteration, consumed samples, skipped/nan counters, the seed
 * and the resolved config. The RNG is counter-based (docs/rng.md), so seed and
 * iteration/sample ids are its whole state; the data loader's position is
 * consumed_samples; the LR schedule is a function of the iteration.
 */
#ifndef MT_TRAINER_CHECKPOINT_H
#define MT_TRAINER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model/params.h"
#include "parallel/comm.h"
#include "trainer/optimizer.h"

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

/* Where this rank's checkpoint file lives and who writes it. */
typedef struct {
  int tp_rank, pp_rank, pp_size;
  int writer;        /* 1 on the rank that writes this model-parallel file (dp rank 0) */
  mt_group *world;   /* barrier + agreement over all ranks */
  /* ZeRO (parallel.zero_stage >= 1, trainer/zero_checkpoint.c): when set,
   * EVERY rank writes / reads its own shard file inside the mp_rank
   * directory (path given as mp_dir) through these instead of
   * model_optim_rng.bin, and `opt` is unused (may be NULL). They return 0 or
   * -1 with a message; shard_load must modify nothing on error. */
  int (*shard_save)(void *ctx, const mt_ckpt_state *st, const char *mp_dir, char *err,
                    size_t errlen);
  int (*shard_load)(void *ctx, mt_ckpt_state *st, const char *mp_dir, char *err, size_t errlen);
  void *shard_ctx;
  /* buffers of this model-parallel rank (its pipeline stage's layers): the
   * writer stores them as records of kind "buffer" after the parameters of
   * model_optim_rng.bin, or with ZeRO in mp_rank_TT[_PPP]/model_buffers.bin
   * (magic "MTBUFS\0\1", u32 count, the same records, CRC-32). Loading
   * requires exactly these names, dtypes and sizes. */
  const mt_ckpt_buffer *buffers;
  int n_buffers;
} mt_ckpt_layout;

/* Write n bytes to path followed by their CRC-32 (zlib, 4 bytes little
 * endian as stored by the host), fsynced. Returns 0 or -1 with a message. */
int mt_ckpt_write_with_crc(const char *path, const void *data, size_t n, char *err,
                           size_t errlen);
/* Read a file written by mt_ckpt_write_with_crc and verify its CRC; returns
 * a malloc'ed buffer of *n payload bytes (free()), or NULL with a message. */
void *mt_ckpt_read_with_crc(const char *path, size_t *n, char *err, size_t errlen);

/* (Tests only, see above.) Save iteration st->iteration under `save_dir`. `config_json` is stored in
 * metadata.json. Returns 0, or -1 with a message (I/O errors) in err; on
 * failure the previous checkpoint is untouched. Collective over layout->world. */
int mt_checkpoint_save(const char *save_dir, const mt_ckpt_state *st, const char *config_json,
                       const mt_adamw *opt, const mt_ckpt_layout *layout, char *err,
                       size_t errlen);

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
