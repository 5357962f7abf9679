/* data/indexed_dataset.h — token files on disk.
 *
 * 1. Megatron-LM's MMIDIDX indexed dataset (megatron/core/datasets/
 *    indexed_dataset.py), PREFIX.bin + PREFIX.idx. The .idx is, little-endian:
 *      9 bytes  "MMIDIDX\0\0"
 *      uint64   version = 1
 *      uint8    dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
 *               6 float64, 7 float32, 8 uint16)
 *      uint64   sequence count S
 *      uint64   document count D (entries of document_indices)
 *      int32    sequence_lengths[S]     (tokens)
 *      int64    sequence_pointers[S]    (byte offsets into .bin)
 *      int64    document_indices[D]     (0, then the end of every document,
 *                                        in sequences)
 *    The .bin is the token ids of all sequences back to back in that dtype.
 *    megatrain writes one sequence per document (what tools/preprocess_data.py
 *    writes for GPT without sentence splitting) and uint16 when the
 *    vocabulary size is < 65500, else int32 (Megatron's DType.optimal_dtype).
 * 2. llm.c token shards: int32 header[256] with header[0] = 20240520,
 *    header[1] = 1, header[2] = token count, then uint16 tokens. Documents
 *    start at each EOT token (50256), which llm.c puts before every document.
 *
 * mt_token_source gives both the same view: documents = Megatron sequences
 * (GPTDataset treats each sequence as one document), token lengths and offsets
 * per document, and token reads converted to int32.
 */
#ifndef MT_DATA_INDEXED_DATASET_H
#define MT_DATA_INDEXED_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "data/data_util.h"

enum {
  MT_DTYPE_UINT8 = 1, MT_DTYPE_INT8 = 2, MT_DTYPE_INT16 = 3, MT_DTYPE_INT32 = 4,
  MT_DTYPE_INT64 = 5, MT_DTYPE_FLOAT64 = 6, MT_DTYPE_FLOAT32 = 7, MT_DTYPE_UINT16 = 8
};

#define MT_LLMC_MAGIC 20240520
#define MT_LLMC_EOT 50256
#define MT_MMIDX_HEADER_BYTES 34

/* Megatron's DType.optimal_dtype: uint16 when vocab_size < 65500 else int32. */
int mt_mmidx_optimal_dtype(int64_t vocab_size);

/* ---- writer ---- */
typedef struct mt_mmidx_writer mt_mmidx_writer;

/* Start writing PREFIX.bin/.idx with token dtype `dtype` (uint16 or int32).
 * Data goes to PREFIX.bin.tmp/.idx.tmp and is renamed by finish, so a failed
 * run leaves nothing half-written. NULL + message on I/O errors. */
mt_mmidx_writer *mt_mmidx_writer_open(const char *prefix, int dtype, char *err, size_t errlen);

/* Append one document of n ids (one sequence). Ids must fit the dtype.
 * Returns 0, or -1 + message (write error, id out of range). */
int mt_mmidx_writer_add(mt_mmidx_writer *w, const int32_t *ids, size_t n, char *err, size_t errlen);

/* Write the index and rename both files into place; frees w. 0 or -1. */
int mt_mmidx_writer_finish(mt_mmidx_writer *w, char *err, size_t errlen);

/* Delete the temporary files and free w. */
void mt_mmidx_writer_abort(mt_mmidx_writer *w);

/* Documents and tokens written so far. */
void mt_mmidx_writer_counts(const mt_mmidx_writer *w, int64_t *docs, int64_t *tokens);

/* ---- reader ---- */
enum { MT_SOURCE_MMIDX = 1, MT_SOURCE_LLMC = 2 };

typedef struct {
  int kind;          /* MT_SOURCE_* */
  char path[1024];   /* prefix (MMIDIDX) or shard file (llm.c) */
  mt_mmap bin, idx;  /* idx unused for llm.c */
  int dtype;         /* MT_DTYPE_* of the tokens */
  size_t itemsize;
  const uint8_t *tokens; /* first token in bin */
  int64_t n_tokens;  /* tokens covered by documents */
  int64_t n_docs;
  int32_t *doc_len;  /* [n_docs] tokens per document */
  int64_t *doc_off;  /* [n_docs] token offset of each document */
  int64_t n_mm_docs; /* MMIDIDX: document_indices entries (0 for llm.c) */
  int64_t *mm_doc_index; /* [n_mm_docs] MMIDIDX document_indices */
} mt_token_source;

/* Open `path`: an llm.c shard when the file starts with magic 20240520, else
 * a Megatron prefix (PATH.idx + PATH.bin; a trailing ".bin"/".idx" on PATH is
 * dropped). Validates everything the reads depend on: magic, version, dtype,
 * sizes, pointer ranges against the .bin size, document_indices. Returns 0, or
 * -1 with one line naming the file and what was expected. */
int mt_token_source_open(mt_token_source *s, const char *path, char *err, size_t errlen);

/* Same checks on index bytes already in memory (fuzzing, tests): parses an
 * MMIDIDX index of `size` bytes against a .bin of `bin_size` bytes. On
 * success fills the document arrays of s (no maps; free with close). */
int mt_mmidx_parse(mt_token_source *s, const uint8_t *idx, size_t size, size_t bin_size,
                   const char *name, char *err, size_t errlen);

void mt_token_source_close(mt_token_source *s);

/* Copy n tokens of document `doc` starting at token `off` as int32 (the
 * caller guarantees off + n <= doc_len[doc]). */
void mt_token_source_read(const mt_token_source *s, int64_t doc, int64_t off, int64_t n,
                          int32_t *out);

/* Largest and smallest token id over all documents (a full scan). */
void mt_token_source_minmax(const mt_token_source *s, int64_t *min_id, int64_t *max_id);

#endif
