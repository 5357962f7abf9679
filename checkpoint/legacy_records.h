/* checkpoint/legacy_records.h — reading the pieces of the previous
 * checkpoint format (checkpoint/legacy_format.h): whole files, files framed
 * by a CRC-32 trailer, and "buffer" records — non-parameter model state such
 * as the routers' expert biases (mt_ckpt_layout.buffers), stored with the
 * parameter-record layout
 *   u32 name_len, name, u32 kind (MT_CKPT_REC_BUFFER), u32 dtype,
 *   i64 shape[6] = {numel, 1, numel, 1, 0, 0}, u64 nbytes, data
 * inside model_optim_rng.bin, or (ZeRO) in model_buffers.bin. */
#ifndef MT_CHECKPOINT_LEGACY_RECORDS_H
#define MT_CHECKPOINT_LEGACY_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/legacy_format.h"

/* The whole file at path (malloc'ed, *n bytes; free()), or NULL with a
 * message naming the file ("short read", or the open error). */
unsigned char *mt_ckpt_read_whole(const char *path, size_t *n, char *err, size_t errlen);
/* Read a file whose last 4 bytes are the CRC-32 (zlib, little endian) of
 * the rest and verify it; returns a malloc'ed buffer of *n payload bytes
 * (free()), or NULL with a message. */
void *mt_ckpt_read_with_crc(const char *path, size_t *n, char *err, size_t errlen);

/* Validate one buffer record read from `path` against L (name, dtype, size)
 * and, when apply, copy src into the buffer. Returns 0 or -1 with a message. */
int mt_ckpt_buffer_record(const mt_ckpt_layout *L, const char *path, const char *name,
                          uint32_t dtype, const int64_t shape[6], uint64_t nbytes,
                          const void *src, int apply, char *err, size_t errlen);
/* -1 with a message unless `seen` records covered all of L's buffers. */
int mt_ckpt_buffers_missing(const mt_ckpt_layout *L, int seen, const char *path, char *err,
                            size_t errlen);
/* ZeRO checkpoints: load L's buffers from their own file (magic, count,
 * records, CRC-32; nothing to do when L has none and the file is absent).
 * Returns 0 or -1 with a message; modifies nothing on error. */
int mt_ckpt_buffers_load_file(const char *path, const mt_ckpt_layout *L, char *err,
                              size_t errlen);

#endif
