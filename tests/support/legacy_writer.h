/* tests/support/legacy_writer.h — a writer of the previous, per-layout
 * checkpoint format (checkpoint/legacy_format.h), for tests only (the
 * trainer writes the layout-free format): model_optim_rng.bin, ZeRO shard
 * files and model_buffers.bin, published like the old trainer did (write
 * into iter_N.tmp, fsync, rename, then latest_checkpointed_iteration.txt).
 * MEGATRAIN_FAILPOINT=checkpoint_write:N writes half of iteration N's file
 * and SIGKILLs the process. */
#ifndef MT_TESTS_SUPPORT_LEGACY_WRITER_H
#define MT_TESTS_SUPPORT_LEGACY_WRITER_H

#include <stddef.h>

#include "checkpoint/legacy_format.h"
#include "optimizer/optimizer.h"

/* Write n bytes to path followed by their CRC-32 (zlib, 4 bytes little
 * endian as stored by the host), fsynced. Returns 0 or -1 with a message. */
int mt_ckpt_write_with_crc(const char *path, const void *data, size_t n, char *err,
                           size_t errlen);
/* Read a file written by mt_ckpt_write_with_crc and verify its CRC; returns
 * a malloc'ed buffer of *n payload bytes (free()), or NULL with a message. */
void *mt_ckpt_read_with_crc(const char *path, size_t *n, char *err, size_t errlen);

/* Save iteration st->iteration under `save_dir`. `config_json` is stored in
 * metadata.json. Returns 0, or -1 with a message (I/O errors) in err; on
 * failure the previous checkpoint is untouched. Collective over layout->world. */
int mt_checkpoint_save(const char *save_dir, const mt_ckpt_state *st, const char *config_json,
                       const mt_adamw *opt, const mt_ckpt_layout *layout, char *err,
                       size_t errlen);

/* The ZeRO shard file of this rank (ctx: the mt_zero_opt), for
 * mt_ckpt_layout.shard_save. Returns 0 or -1 with a message. */
int mt_zero_ckpt_save(void *ctx, const mt_ckpt_state *st, const char *mp_dir, char *err,
                      size_t errlen);
/* L's buffers as their own file (ZeRO: model_buffers.bin). */
int mt_ckpt_buffers_save_file(const char *path, const mt_ckpt_layout *L, char *err,
                              size_t errlen);

#endif
