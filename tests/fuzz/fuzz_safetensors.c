/* tests/fuzz/fuzz_safetensors.c — libFuzzer target: the safetensors reader
 * (core/safetensors.c), one file and a sharded model directory with its
 * model.safetensors.index.json.
 *
 * Input: u8 mode. Mode even: the rest is one .safetensors file
 * (mt_st_open). Mode odd: u16 LE a, a bytes of index JSON, u32 LE b, b bytes
 * of model-00001-of-00002.safetensors, the rest model-00002-of-00002.safetensors
 * (mt_st_dir_open). Files go to a directory under /dev/shm (or $TMPDIR).
 * Every tensor of a file that opens is read (mt_st_read / mt_st_dir_read);
 * its byte range must lie inside the data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_scratch.h"
#include "tests/support/probes.h"
#include "core/safetensors.h"

static char g_dir[300];

/* Remove this process's scratch directory at exit. */
static void cleanup(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_scratch(g_dir, sizeof g_dir, "fuzz_st", "");
  if (mkdir(g_dir, 0700) != 0) {
    perror(g_dir);
    exit(1);
  }
  atexit(cleanup);
  return 0;
}

static void put_file(const char *name, const uint8_t *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

static void check_info(const mt_st_info *in) {
  if (in->end < in->begin || (uint64_t)in->numel * mt_st_dtype_size(in->dtype) != in->end - in->begin)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char err[1024];
  if (!(data[0] & 1)) {
    put_file("one.safetensors", data + 1, size - 1);
    char path[512];
    snprintf(path, sizeof path, "%s/one.safetensors", g_dir);
    mt_st_file *f = NULL;
    if (mt_st_open(path, &f, err, sizeof err) == 0) {
      for (int i = 0; i < mt_st_count(f); i++) {
        const mt_st_info *in = mt_st_info_at(f, i);
        check_info(in);
        if (mt_st_find(f, in->name) != i) abort();
        void *buf = malloc(in->end - in->begin + 1);
        if (mt_st_read(f, i, buf, err, sizeof err) != 0) abort(); /* validated: must read */
        free(buf);
      }
      (void)mt_st_metadata(f, "format");
      mt_st_close(f);
    }
    return 0;
  }
  const uint8_t *p = data + 1, *end = data + size;
  uint16_t a = 0;
  uint32_t b = 0;
  if (end - p >= 2) memcpy(&a, p, 2), p += 2;
  if (a > end - p) a = (uint16_t)(end - p);
  const uint8_t *ij = p;
  p += a;
  if (end - p >= 4) memcpy(&b, p, 4), p += 4;
  if (b > (uint32_t)(end - p)) b = (uint32_t)(end - p);
  put_file("model.safetensors.index.json", ij, a);
  put_file("model-00001-of-00002.safetensors", p, b);
  put_file("model-00002-of-00002.safetensors", p + b, (size_t)(end - p - b));
  mt_st_dir *d = NULL;
  if (mt_st_dir_open(g_dir, &d, err, sizeof err) == 0) {
    for (int i = 0; i < mt_st_dir_count(d); i++) {
      const mt_st_info *in = mt_st_dir_info(d, i);
      check_info(in);
      (void)mt_st_dir_file(d, i);
      void *buf = malloc(in->end - in->begin + 1);
      if (mt_st_dir_read(d, i, buf, err, sizeof err) != 0) abort();
      free(buf);
    }
    mt_st_dir_close(d);
  }
  return 0;
}
