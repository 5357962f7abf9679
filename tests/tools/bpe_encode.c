/* tests/tools/bpe_encode.c — encode a file (whole file = one text) with the
 * GPT-2 BPE and write the ids as little-endian uint16 (or int32 with -4) to
 * stdout; prints the count and speed to stderr.
 * Usage: bpe_encode VOCAB MERGES FILE [-4] > out */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/bpe.h"
#include "data/data_util.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s VOCAB MERGES FILE [-4]\n", argv[0]);
    return 2;
  }
  char err[512];
  mt_bpe *b = mt_bpe_load(argv[1], argv[2], err, sizeof(err));
  if (!b) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  size_t n;
  char *text = mt_data_read_file(argv[3], &n, err, sizeof(err));
  if (!text) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  int wide = argc > 4 && strcmp(argv[4], "-4") == 0;
  mt_bpe_encoder *e = mt_bpe_encoder_new(b, 0);
  mt_tokvec v = {0};
  double t0 = mt_now();
  mt_bpe_encode(e, text, n, &v);
  double dt = mt_now() - t0;
  for (size_t i = 0; i < v.n; i++) {
    if (wide) {
      fwrite(&v.data[i], 4, 1, stdout);
    } else {
      uint16_t x = (uint16_t)v.data[i];
      fwrite(&x, 2, 1, stdout);
    }
  }
  fprintf(stderr, "%zu bytes -> %zu tokens in %.3f s (%.1f MB/s)\n", n, v.n, dt, n / dt / 1e6);
  mt_tokvec_free(&v);
  mt_bpe_encoder_free(e);
  mt_bpe_free(b);
  free(text);
  return 0;
}
