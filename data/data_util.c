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

#include "core/util.h"

char *mt_data_read_file(const char *path, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = mt_xmalloc(cap);
  for (;;) {
    if (n + 1 >= cap) buf = mt_xrealloc(buf, cap *= 2);
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "cannot read %s: I/O error", path);
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
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

