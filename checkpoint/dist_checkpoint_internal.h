/* checkpoint/dist_checkpoint_internal.h — what the files of
 * checkpoint/dist_checkpoint_*.c share: the in-memory piece index, its binary
 * encoding (index.bin), its validation, metadata.json, and the piece/view
 * overlap copy. Not a public interface (checkpoint/dist_checkpoint.h is).
 *
 * index.bin (little endian):
 *   "MTDCKIDX" u32 version u32 n_tensors u32 n_files u32 n_pieces u64 block_bytes
 *   n_files x  { u32 rank, u64 file_bytes }              shard_RRRRR.bin of rank
 *   n_tensors x { u32 name_len, name, i64 rows, i64 cols, u32 dtype }
 *   n_pieces x { u32 tensor, u32 file, u64 offset, u64 nbytes,
 *                i64 r0 c0 nr nc lo hi, u32 n_blocks, u32 crc[n_blocks] }
 *   u32 CRC-32 of metadata.json's bytes (version 2; absent in version 1)
 *   u32 CRC-32 of everything before it.
 * shard_RRRRR.bin: "MTDCKSHD" u32 version u32 rank i64 iteration u64 0, then
 * the raw data of the rank's pieces (each at its index offset, 8-aligned).
 * A piece's dtype is its tensor's; block i of a piece is its bytes
 * [i * block_bytes, (i + 1) * block_bytes). */
#ifndef MT_CHECKPOINT_DIST_CHECKPOINT_INTERNAL_H
#define MT_CHECKPOINT_DIST_CHECKPOINT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/dist_checkpoint.h"

#define MT_DCKPT_INDEX_MAGIC "MTDCKIDX"
#define MT_DCKPT_SHARD_MAGIC "MTDCKSHD"
#define MT_DCKPT_VERSION 1u       /* of shard_RRRRR.bin */
#define MT_DCKPT_INDEX_VERSION 2u /* of index.bin (1: without metadata.json's CRC, still read) */
#define MT_DCKPT_BLOCK ((int64_t)1 << 20) /* CRC block, bytes */
#define MT_DCKPT_SHARD_HEADER 32          /* bytes before the first piece */
#define MT_DCKPT_CHUNK ((int64_t)16 << 20) /* staging chunk, bytes (multiple of BLOCK) */

typedef struct {
  int32_t tensor, file;
  int64_t offset, nbytes;           /* in the shard file */
  int64_t r0, c0, nr, nc, lo, hi;   /* what part of the global tensor */
  int32_t n_blocks;
  uint32_t *crc;                    /* [n_blocks] */
} mt_dckpt_piece;

typedef struct {
  char name[MT_DCKPT_NAME_MAX];
  int64_t rows, cols;
  mt_dtype dtype;
  int32_t first, count;             /* its pieces: sorted[first .. first + count) */
  int used;                         /* touched by mt_dckpt_load */
} mt_dckpt_tensor;

typedef struct {
  int32_t rank;
  int64_t bytes;                    /* expected length of shard_RRRRR.bin */
} mt_dckpt_file;

typedef struct {
  mt_dckpt_tensor *t;
  int n_t;
  mt_dckpt_file *f;
  int n_f;
  mt_dckpt_piece *p;
  int n_p;
  int32_t *sorted;                  /* piece ids grouped by tensor (mt_dckpt_index_finish) */
  void *name_map;                   /* name -> tensor (hash table, dist_checkpoint_index.c) */
  uint32_t meta_crc;                /* CRC-32 of metadata.json's bytes ... */
  int has_meta_crc;                 /* ... when the index records it (version 2) */
} mt_dckpt_index;

struct mt_dckpt {
  char dir[4096];
  mt_dckpt_meta meta;
  char *config_json;
  mt_dckpt_index ix;
};

/* ---- dist_checkpoint_index.c ---- */
void mt_dckpt_index_free(mt_dckpt_index *ix);
/* Index of tensor `name` (needs mt_dckpt_index_finish), or -1. */
int mt_dckpt_index_find(const mt_dckpt_index *ix, const char *name);
/* Add a tensor (or find the existing one of that name: its shape and dtype
 * must agree, else -1 with a message). dtype < 0: not known yet. */
int mt_dckpt_index_tensor(mt_dckpt_index *ix, const char *name, int64_t rows, int64_t cols,
                          int dtype, char *err, size_t errlen);
/* Group pieces by tensor, build the name table. */
void mt_dckpt_index_finish(mt_dckpt_index *ix);
/* Every piece in bounds with a consistent size, every tensor covered exactly
 * once (no gap, no overlap). 0 or -1 naming the tensor. `where` names the
 * index in messages. */
int mt_dckpt_index_validate(const mt_dckpt_index *ix, const char *where, char *err,
                            size_t errlen);
/* Encode to a malloc'ed buffer (version 2: ix->meta_crc, the trailing CRC). */
unsigned char *mt_dckpt_index_encode(const mt_dckpt_index *ix, size_t *n);
/* Decode; 0 or -1 with a message naming `path`. */
int mt_dckpt_index_decode(mt_dckpt_index *ix, const unsigned char *b, size_t n, const char *path,
                          char *err, size_t errlen);

/* ---- dist_checkpoint_meta.c ---- */
/* metadata.json text (malloc'ed) for meta, the index's tensors and files. */
char *mt_dckpt_meta_json(const mt_dckpt_meta *meta, const char *config_json,
                         const mt_dckpt_index *ix);
/* Parse metadata.json: fills meta and *config_json (malloc'ed). */
int mt_dckpt_meta_parse(const char *text, const char *path, mt_dckpt_meta *meta,
                        char **config_json, char *err, size_t errlen);

/* ---- dist_checkpoint_copy.c ---- */
/* Convert n elements src (dtype s) -> dst (dtype d); fp32 <-> bf16 round to
 * nearest even; equal dtypes copy. */
void mt_dckpt_convert(void *dst, mt_dtype d, const void *src, mt_dtype s, int64_t n);
/* 1 when dtype s can be converted to dtype d. */
int mt_dckpt_convertible(mt_dtype d, mt_dtype s);
/* Fill host view v (dtype vd, data = element lo) from the stored piece p of
 * tensor t (stored dtype sd) read through fd: reads only the overlapping
 * blocks, verifies them. Adds the number of elements copied to *covered.
 * 0 or -1 naming `path` and the tensor. */
int mt_dckpt_fill_from_piece(int fd, const char *path, const mt_dckpt_tensor *t,
                             const mt_dckpt_piece *p, const mt_dckpt_view *v, void *vdata,
                             int64_t *covered, char *err, size_t errlen);

/* ---- dist_checkpoint_save.c ---- */
int mt_dckpt_rm_rf(const char *path);

/* A growable byte buffer (index and shard encoding). */
typedef struct {
  unsigned char *p;
  size_t n, cap;
} mt_dckpt_buf;
/* Append n bytes of src to b (grows with mt_xrealloc; free b->p). */
void mt_dckpt_buf_put(mt_dckpt_buf *b, const void *src, size_t n);
#define MT_DCKPT_PUT(b, v) mt_dckpt_buf_put((b), &(v), sizeof(v))

#endif
