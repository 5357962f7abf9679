/* tests/tools/tok_encode.c — encode a file with any tokenizer of
 * data/tokenizer.h and write the ids as int32 (the format of the reference
 * scripts); checks that decoding gives the file back.
 *   tok_encode TYPE MODEL TEXT_FILE OUT_IDS [--template] [--no-roundtrip]
 *              [--expect-decode FILE] [--bench SECONDS]
 * TYPE: GPT2BPETokenizer (MODEL = "VOCAB,MERGES"), HuggingFaceTokenizer,
 * SentencePieceTokenizer. --template: Megatron's text_to_ids for
 * HuggingFaceTokenizer (post-processor template). --bench: repeat the
 * encoding (documents of <= 4 KB cut after a newline, as a preprocess of
 * many documents) for about SECONDS and print MB/s (one thread). --expect-decode:
 * decoding must give FILE (NFC, SentencePiece's U+2581) instead of TEXT. Prints
 * "chars N tokens N" (chars = Unicode code points of the file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/data_util.h"
#include "data/tokenizer.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: tok_encode TYPE MODEL TEXT OUT [--template] [--no-roundtrip] "
                    "[--bench S]\n");
    return 2;
  }
  int with_template = 0, roundtrip = 1;
  double bench = 0;
  const char *expect = NULL;
  for (int i = 5; i < argc; i++) {
    if (!strcmp(argv[i], "--template")) with_template = 1;
    else if (!strcmp(argv[i], "--no-roundtrip")) roundtrip = 0;
    else if (!strcmp(argv[i], "--bench") && i + 1 < argc) bench = atof(argv[++i]);
    else if (!strcmp(argv[i], "--expect-decode") && i + 1 < argc) expect = argv[++i];
    else return 2;
  }
  mt_tokenizer_spec spec = {.type = argv[1], .model = argv[2]};
  char files[8192];
  if (!strcmp(argv[1], "GPT2BPETokenizer")) {
    snprintf(files, sizeof files, "%s", argv[2]);
    char *comma = strchr(files, ',');
    if (!comma) return 2;
    *comma = 0;
    spec.vocab_file = files;
    spec.merge_file = comma + 1;
    spec.model = NULL;
  }
  char err[1024];
  double t0 = now();
  mt_tokenizer *t = mt_tokenizer_load(&spec, err, sizeof err);
  if (!t) {
    fprintf(stderr, "tok_encode: %s\n", err);
    return 1;
  }
  double t_load = now() - t0;
  size_t n;
  char *text = mt_data_read_file(argv[3], &n, err, sizeof err);
  if (!text) {
    fprintf(stderr, "tok_encode: %s\n", err);
    return 1;
  }
  mt_tok_encoder *e = mt_tok_encoder_new(t);
  mt_tokvec v = {0};
  mt_tok_encode_doc(e, text, n, with_template, &v);
  FILE *f = fopen(argv[4], "wb");
  if (!f || fwrite(v.data, 4, v.n, f) != v.n || fclose(f) != 0) return 1;
  size_t chars = 0;
  for (size_t i = 0; i < n; i++) chars += ((unsigned char)text[i] & 0xC0) != 0x80;
  printf("chars %zu tokens %zu vocab %d eod %d load_s %.2f\n", chars, v.n,
         mt_tokenizer_vocab_size(t), mt_tokenizer_eod(t), t_load);
  int rc = 0;
  if (roundtrip) {
    size_t dl, en = n;
    char *want = text;
    if (expect && !(want = mt_data_read_file(expect, &en, err, sizeof err))) {
      fprintf(stderr, "tok_encode: %s\n", err);
      return 1;
    }
    char *d = mt_tokenizer_decode(t, v.data, v.n, &dl);
    if (dl != en || memcmp(d, want, en) != 0) {
      size_t k = 0;
      while (k < dl && k < en && d[k] == want[k]) k++;
      fprintf(stderr, "tok_encode: decode(encode(text)) differs at byte %zu (%zu vs %zu bytes)\n",
              k, dl, en);
      rc = 3;
    }
    if (want != text) free(want);
    free(d);
  }
  if (bench > 0) { /* fresh encoders: no warm piece cache from the run above */
    double t1 = now(), mb = 0;
    int reps = 0;
    while (now() - t1 < bench || reps == 0) {
      mt_tok_encoder *e2 = mt_tok_encoder_new(t);
      mt_tokvec w = {0};
      for (size_t i = 0; i < n;) { /* documents of <= 4 KB cut after a newline */
        size_t j = i + 4096 < n ? i + 4096 : n, k = j;
        if (j < n) {
          while (k > i && text[k - 1] != '\n') k--;
          if (k > i) j = k;
        }
        mt_tok_encode(e2, text + i, j - i, &w);
        i = j;
      }
      mt_tokvec_free(&w);
      mt_tok_encoder_free(e2);
      mb += (double)n / 1e6;
      reps++;
    }
    printf("MB/s %.2f (%d passes of %.2f MB)\n", mb / (now() - t1), reps, (double)n / 1e6);
  }
  mt_tokvec_free(&v);
  mt_tok_encoder_free(e);
  mt_tokenizer_free(t);
  free(text);
  return rc;
}
