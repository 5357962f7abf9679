/* data/data_util.h — small helpers shared by the data/ files: whole-file
 * reads with data/'s error message, read-only memory maps. */
#ifndef MT_DATA_UTIL_H
#define MT_DATA_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole file into a malloc'ed, NUL-terminated buffer (length in *len)
 * through core/fileio.h's mt_read_file. Returns NULL and writes
 * "cannot read PATH: reason" into err on failure. */
char *mt_data_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* A read-only private memory map of a whole file (size 0 maps nothing). */
typedef struct {
  const uint8_t *data;
  size_t size;
} mt_mmap;

/* Map `path`; returns 0, or -1 with "cannot open PATH: reason" in err. */
int mt_mmap_open(mt_mmap *m, const char *path, char *err, size_t errlen);
void mt_mmap_close(mt_mmap *m);

/* mt_hash_bytes lives in core/hash.h. */
#include "core/hash.h"

#endif
