/* tests/fuzz/fuzz_jsonl.c — libFuzzer target: arbitrary bytes as a JSON-lines
 * corpus: every line through the JSON reader (key "text"), and the extracted
 * text — plus the raw line, which may be invalid UTF-8 — through the GPT-2
 * tokenizer, checking that decode(encode(x)) == x. Needs the GPT-2 files in
 * $MEGATRAIN_SHARED_DATA (default ../shared/data). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe.h"
#include "data/jsonl.h"

static mt_bpe *g_bpe;
static mt_bpe_encoder *g_enc;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *d = getenv("MEGATRAIN_SHARED_DATA");
  char v[1024], m[1024], err[512];
  snprintf(v, sizeof(v), "%s/gpt2-vocab.json", d ? d : "../shared/data");
  snprintf(m, sizeof(m), "%s/gpt2-merges.txt", d ? d : "../shared/data");
  g_bpe = mt_bpe_load(v, m, err, sizeof(err));
  if (!g_bpe) {
    fprintf(stderr, "fuzz_jsonl: %s\n", err);
    exit(1);
  }
  g_enc = mt_bpe_encoder_new(g_bpe, 4096);
  return 0;
}

static void roundtrip(const char *s, size_t n) {
  mt_tokvec v = {0};
  mt_bpe_encode(g_enc, s, n, &v);
  size_t dl;
  char *d = mt_bpe_decode(g_bpe, v.data, v.n, &dl);
  if (dl != n || memcmp(d, s, n) != 0) abort();
  free(d);
  mt_tokvec_free(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char err[256];
    size_t tl;
    char *text = mt_jsonl_extract(p, n, "text", &tl, err, sizeof(err));
    if (text) {
      roundtrip(text, tl);
      free(text);
    }
    roundtrip(p, n);
    p += n + 1;
  }
  return 0;
}
