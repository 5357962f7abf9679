/* data/data_util.c — see data_util.h. */
#include "data/data_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

char *mt_data_read_file(const char *path, size_t *len, char *err, size_t errlen) {
  int e = 0;
  char *buf = mt_read_file(path, 0, len, &e);
  if (!buf)
    snprintf(err, errlen, "cannot read %s: %s", path, e == EIO ? "I/O error" : strerror(e));
  return buf;
}

int mt_mmap_open(mt_mmap *m, const char *path, char *err, size_t errlen) {
  m->data = NULL;
  m->size = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "cannot open %s: not a regular file", path);
    close(fd);
    return -1;
  }
  if (st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
      close(fd);
      return -1;
    }
    m->data = p;
    m->size = (size_t)st.st_size;
  }
  close(fd);
  return 0;
}

void mt_mmap_close(mt_mmap *m) {
  if (m->data) munmap((void *)m->data, m->size);
  m->data = NULL;
  m->size = 0;
}

