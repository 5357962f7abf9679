/* core/fileio.h — file helpers shared by data/, trainer/ and planner/:
 * whole-file reads, durable writes (write + fsync, then the caller renames),
 * directory fsync, mkdir -p, and CRC-32 over buffers of any size.
 * Host-only, no state; errors are returned, never fatal. */
#ifndef MT_CORE_FILEIO_H
#define MT_CORE_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* Read the whole file at `path` into a malloc'ed buffer with a NUL after the
 * last byte (so text can be parsed in place); its length goes to *len.
 * max_bytes 0 = no limit. Returns NULL on failure with *err_no set: the errno
 * of open/read, or EFBIG when the file is larger than max_bytes. */
char *mt_read_file(const char *path, size_t max_bytes, size_t *len, int *err_no);

/* Create/truncate `path`, write n bytes, fsync and close it. Returns 0, or -1
 * with "cannot create 'PATH': reason" / "write to 'PATH' failed: reason" /
 * "fsync/close of 'PATH' failed: reason" in err. */
int mt_write_file_synced(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* fsync the directory `path` so renames inside it are durable (best effort). */
void mt_fsync_dir(const char *path);

/* mkdir -p with mode 0755; returns 0 or -1 (errno set). */
int mt_mkdirs(const char *path);

/* CRC-32 (zlib's polynomial and values, as Python's zlib.crc32) of n bytes
 * continuing from crc (start with 0); computed by libdeflate (any size_t
 * length). */
uint32_t mt_crc32(uint32_t crc, const void *p, size_t n);

#endif
