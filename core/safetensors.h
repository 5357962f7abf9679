/* core/safetensors.h — the safetensors format (Hugging Face), written from
 * its specification (github.com/huggingface/safetensors, "Format"):
 *
 *   8 bytes   N, unsigned little-endian 64-bit: the header length
 *   N bytes   a UTF-8 JSON object: {"__metadata__": {str: str, ...},
 *             NAME: {"dtype": "F32", "shape": [d0, ...],
 *                    "data_offsets": [begin, end]}, ...}
 *             (padded with spaces to a multiple of 8 bytes)
 *   rest      the byte buffer: tensor data row-major little-endian, offsets
 *             relative to the buffer's start, tensors contiguous, not
 *             overlapping, no holes and nothing after the last one.
 *
 * A model too big for one file is split over several files
 * (model-00001-of-00003.safetensors ...) with model.safetensors.index.json
 * {"metadata": {"total_size": BYTES}, "weight_map": {NAME: FILE, ...}}, as
 * transformers' save_pretrained writes it (max_shard_size, default 5GB).
 *
 * The reader checks everything before any data is read and reports the first
 * problem in one message naming the file, the tensor and what was expected:
 * a header length beyond the file or above 100 MB, a header that is not a
 * JSON object, an unknown dtype, a shape that is not a list of non-negative
 * integers, offsets that are reversed, outside the buffer, overlapping,
 * leaving a hole, or not numel x dtype size, a duplicate name; for
 * directories a missing/unreadable index, a weight_map naming a file or
 * tensor that is not there, a tensor not in the weight_map. Data is read
 * with pread (no copy of the whole file). Host-only, no model knowledge, no
 * global state; JSON through cJSON. Errors are returned (-1 or NULL with a
 * message in err), never fatal.
 */
#ifndef MT_CORE_SAFETENSORS_H
#define MT_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define MT_ST_MAX_DIMS 8
#define MT_ST_NAME_MAX 256
#define MT_ST_HEADER_MAX (100u << 20) /* the reference implementation's limit */

/* The element types of the specification. */
typedef enum {
  MT_ST_BOOL, MT_ST_U8, MT_ST_I8, MT_ST_F8_E5M2, MT_ST_F8_E4M3, MT_ST_I16, MT_ST_U16,
  MT_ST_F16, MT_ST_BF16, MT_ST_I32, MT_ST_U32, MT_ST_F32, MT_ST_F64, MT_ST_I64, MT_ST_U64,
  MT_ST_N_DTYPES
} mt_st_dtype;

/* "F32" ... (NULL outside the enum) and bytes per element (0 outside). */
const char *mt_st_dtype_name(mt_st_dtype t);
size_t mt_st_dtype_size(mt_st_dtype t);
/* dtype named `s`, or -1. */
int mt_st_dtype_parse(const char *s);

/* One tensor of a file: name, dtype, shape and where its bytes are. */
typedef struct {
  char name[MT_ST_NAME_MAX];
  mt_st_dtype dtype;
  int ndim;
  int64_t shape[MT_ST_MAX_DIMS];
  int64_t numel;
  uint64_t begin, end; /* data_offsets (relative to the byte buffer) */
} mt_st_info;

/* ---- one file ---- */
typedef struct mt_st_file mt_st_file;

/* Open and validate `path` (every check above). Returns 0 and *out, or -1
 * with a message "safetensors file 'PATH': ...". */
int mt_st_open(const char *path, mt_st_file **out, char *err, size_t errlen);
void mt_st_close(mt_st_file *f);
/* Tensors in header order (the order of the JSON object). */
int mt_st_count(const mt_st_file *f);
const mt_st_info *mt_st_info_at(const mt_st_file *f, int i);
/* Index of tensor `name`, or -1. */
int mt_st_find(const mt_st_file *f, const char *name);
/* Read tensor i's end - begin bytes into dst. 0, or -1 with a message
 * naming the file and the tensor (a short read means a truncated file). */
int mt_st_read(mt_st_file *f, int i, void *dst, char *err, size_t errlen);

/* ---- writing ---- */
typedef struct {
  const char *name;
  mt_st_dtype dtype;
  int ndim;
  int64_t shape[MT_ST_MAX_DIMS];
  const void *data; /* numel x dtype size bytes, row-major little-endian */
} mt_st_tensor;

/* Bytes of t's data (numel x dtype size). */
uint64_t mt_st_tensor_bytes(const mt_st_tensor *t);

/* Write n tensors, in this order, to `path` (created or truncated, fsynced)
 * with __metadata__ {meta_kv[0]: meta_kv[1], ...} (n_meta pairs; may be 0).
 * Names must be unique. Returns 0 or -1 with a message naming the path. */
int mt_st_write(const char *path, const mt_st_tensor *t, int n, const char *const *meta_kv,
                int n_meta, char *err, size_t errlen);

/* ---- a model directory: model.safetensors or sharded with an index ---- */
typedef struct mt_st_dir mt_st_dir;

/* Open DIR/model.safetensors.index.json with every file it names, else
 * DIR/model.safetensors; validated as above, and a tensor present in two
 * files is refused. Returns 0 and *out or -1 with a message. */
int mt_st_dir_open(const char *dir, mt_st_dir **out, char *err, size_t errlen);
void mt_st_dir_close(mt_st_dir *d);
/* All tensors of all files (file order, then header order). */
int mt_st_dir_count(const mt_st_dir *d);
const mt_st_info *mt_st_dir_info(const mt_st_dir *d, int i);
int mt_st_dir_find(const mt_st_dir *d, const char *name);
/* The file tensor i lives in (for messages). */
const char *mt_st_dir_file(const mt_st_dir *d, int i);
int mt_st_dir_read(mt_st_dir *d, int i, void *dst, char *err, size_t errlen);

/* Write n tensors into directory `dir` (which must exist): one file
 * model.safetensors when their total size is at most max_shard_bytes (0 =
 * no limit), else model-0000K-of-0000N.safetensors files, each filled in
 * order up to max_shard_bytes (a bigger tensor gets a file of its own, as
 * transformers does), and model.safetensors.index.json. meta_kv as for
 * mt_st_write. Returns 0 or -1 with a message. */
int mt_st_dir_write(const char *dir, const mt_st_tensor *t, int n, uint64_t max_shard_bytes,
                    const char *const *meta_kv, int n_meta, char *err, size_t errlen);

/* Parse a size such as "5GB", "500MB", "100KB", "10000" (bytes; units of
 * 1000 as transformers' convert_file_size_to_int, "GiB"/"MiB"/"KiB" of
 * 1024). Returns 0 and *bytes, or -1 when it is not a size. */
int mt_st_parse_size(const char *s, uint64_t *bytes);

#endif
