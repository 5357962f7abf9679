/* checkpoint/legacy_records.c — CRC-framed files and "buffer" records of
 * the previous checkpoint format (see legacy_records.h, legacy_format.h). */
#include "checkpoint/legacy_records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"

unsigned char *mt_ckpt_read_whole(const char *path, size_t *n, char *err, size_t errlen) {
  int e = 0;
  unsigned char *p = (unsigned char *)mt_read_file(path, 0, n, &e);
  if (!p) {
    if (e == EIO) snprintf(err, errlen, "short read on '%s'", path);
    else snprintf(err, errlen, "cannot open checkpoint file '%s': %s", path, strerror(e));
  }
  return p;
}

void *mt_ckpt_read_with_crc(const char *path, size_t *n, char *err, size_t errlen) {
  size_t len = 0;
  unsigned char *p = mt_ckpt_read_whole(path, &len, err, errlen);
  if (!p) return NULL;
  uint32_t stored;
  if (len < 4) goto bad;
  memcpy(&stored, p + len - 4, 4);
  if (mt_crc32(0, p, len - 4) != stored) goto bad;
  *n = len - 4;
  return p;
bad:
  free(p);
  snprintf(err, errlen, "checksum mismatch in '%s' (file corrupt or truncated)", path);
  return NULL;
}

int mt_ckpt_buffer_record(const mt_ckpt_layout *L, const char *path, const char *name,
                          uint32_t dtype, const int64_t shape[6], uint64_t nbytes,
                          const void *src, int apply, char *err, size_t errlen) {
  for (int i = 0; i < L->n_buffers; i++) {
    const mt_ckpt_buffer *b = &L->buffers[i];
    if (strcmp(b->name, name)) continue;
    if (dtype != (uint32_t)b->dtype || shape[0] != b->numel ||
        nbytes != (uint64_t)b->numel * mt_dtype_size(b->dtype)) {
      snprintf(err, errlen,
               "'%s': checkpoint buffer '%s' has %lld elements of dtype %s (%llu bytes) but "
               "the model built from the config expects %lld of dtype %s (%llu bytes)",
               path, name, (long long)shape[0], mt_dtype_name((mt_dtype)dtype),
               (unsigned long long)nbytes, (long long)b->numel, mt_dtype_name(b->dtype),
               (unsigned long long)((uint64_t)b->numel * mt_dtype_size(b->dtype)));
      return -1;
    }
    if (apply) memcpy(b->data, src, nbytes);
    return 0;
  }
  snprintf(err, errlen,
           "'%s': checkpoint buffer '%s' does not exist in the model built from the config, "
           "which has %d buffer(s)%s%s%s (expected only records of the model's buffers)",
           path, name, L->n_buffers, L->n_buffers ? ", e.g. '" : "",
           L->n_buffers ? L->buffers[0].name : "", L->n_buffers ? "'" : "");
  return -1;
}

int mt_ckpt_buffers_missing(const mt_ckpt_layout *L, int seen, const char *path, char *err,
                            size_t errlen) {
  if (seen == L->n_buffers) return 0;
  snprintf(err, errlen,
           "'%s' holds %d buffer record(s) but the model built from the config has %d "
           "buffers%s%s%s (expected one record per model buffer)",
           path, seen, L->n_buffers, L->n_buffers ? ", e.g. '" : "",
           L->n_buffers ? L->buffers[0].name : "", L->n_buffers ? "'" : "");
  return -1;
}

int mt_ckpt_buffers_load_file(const char *path, const mt_ckpt_layout *L, char *err,
                              size_t errlen) {
  if (L->n_buffers == 0 && access(path, F_OK) != 0) return 0;
  size_t n = 0;
  unsigned char *d = mt_ckpt_read_with_crc(path, &n, err, errlen);
  if (!d) return -1;
  int rc = -1;
  uint32_t cnt = 0;
  if (n < 12 || memcmp(d, MT_LEGACY_BUFS_MAGIC, 8)) {
    snprintf(err, errlen, "'%s' is not a megatrain buffer file (bad magic)", path);
    goto out;
  }
  memcpy(&cnt, d + 8, 4);
  for (int pass = 0; pass < 2; pass++) {
    size_t off = 12;
    for (uint32_t k = 0; k < cnt; k++) {
      uint32_t name_len, kind, dtype;
      int64_t shape[6];
      uint64_t nbytes;
      char name[MT_PARAM_NAME_MAX + 1];
      if (off + 4 > n) goto bad;
      memcpy(&name_len, d + off, 4);
      if (name_len > MT_PARAM_NAME_MAX || off + 4 + name_len + 8 + sizeof shape + 8 > n) goto bad;
      off += 4;
      memcpy(name, d + off, name_len);
      name[name_len] = '\0';
      off += name_len;
      memcpy(&kind, d + off, 4);
      memcpy(&dtype, d + off + 4, 4);
      memcpy(shape, d + off + 8, sizeof shape);
      memcpy(&nbytes, d + off + 8 + sizeof shape, 8);
      off += 16 + sizeof shape;
      if (kind != MT_CKPT_REC_BUFFER || off + nbytes > n) goto bad;
      if (mt_ckpt_buffer_record(L, path, name, dtype, shape, nbytes, d + off, pass, err,
                                errlen))
        goto out;
      off += nbytes;
    }
    if (pass == 0 && mt_ckpt_buffers_missing(L, (int)cnt, path, err, errlen)) goto out;
  }
  rc = 0;
  goto out;
bad:
  snprintf(err, errlen, "'%s': truncated or malformed buffer record", path);
out:
  free(d);
  return rc;
}
