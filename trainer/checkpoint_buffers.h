/* trainer/checkpoint_buffers.h — "buffer" records of a checkpoint
 * (mt_ckpt_layout.buffers, see checkpoint.h), used by trainer/checkpoint.c. */
#ifndef MT_TRAINER_CHECKPOINT_BUFFERS_H
#define MT_TRAINER_CHECKPOINT_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/checkpoint.h"

#define MT_CKPT_REC_BUFFER 4u /* record kind after param, exp_avg, exp_avg_sq, master */

/* The records of L's buffers (malloc'ed, *n bytes; free()). */
unsigned char *mt_ckpt_buffers_serialise(const mt_ckpt_layout *L, size_t *n);
/* Validate one buffer record read from `path` against L (name, dtype, size)
 * and, when apply, copy src into the buffer. Returns 0 or -1 with a message. */
int mt_ckpt_buffer_record(const mt_ckpt_layout *L, const char *path, const char *name,
                          uint32_t dtype, const int64_t shape[6], uint64_t nbytes,
                          const void *src, int apply, char *err, size_t errlen);
/* -1 with a message unless `seen` records covered all of L's buffers. */
int mt_ckpt_buffers_missing(const mt_ckpt_layout *L, int seen, const char *path, char *err,
                            size_t errlen);
/* ZeRO checkpoints: L's buffers as their own file (magic, count, records,
 * CRC-32) / load it (nothing to do when L has none and the file is absent).
 * Return 0 or -1 with a message; load modifies nothing on error. */
int mt_ckpt_buffers_save_file(const char *path, const mt_ckpt_layout *L, char *err,
                              size_t errlen);
int mt_ckpt_buffers_load_file(const char *path, const mt_ckpt_layout *L, char *err,
                              size_t errlen);

#endif
