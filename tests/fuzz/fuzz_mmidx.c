/* tests/fuzz/fuzz_mmidx.c — libFuzzer target: arbitrary bytes as a Megatron
 * .idx (against a .bin whose size is taken from the first input byte), then,
 * when it parses, a GPT sample index over its documents and every sample read
 * through the same code the trainer uses. Build/run: tests/fuzz/run_fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/gpt_index.h"
#include "data/indexed_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t bin_size = (size_t)data[0] * 64; /* any .bin size up to 16 KB */
  uint8_t *bin = calloc(bin_size + 8, 1);
  for (size_t i = 0; i < bin_size; i++) bin[i] = (uint8_t)(i * 7);
  mt_token_source s;
  memset(&s, 0, sizeof(s));
  char err[512];
  if (mt_mmidx_parse(&s, data + 1, size - 1, bin_size, "fuzz.idx", err, sizeof(err)) == 0) {
    s.tokens = bin;
    int64_t lo, hi;
    mt_token_source_minmax(&s, &lo, &hi);
    int64_t total = 0;
    for (int64_t d = 0; d < s.n_docs; d++) total += s.doc_len[d];
    if (s.n_docs > 0 && s.n_docs < 4096 && total >= 2) {
      mt_gpt_index ix;
      int seq = 1 + data[0] % 16;
      if (mt_gpt_index_build(&ix, s.doc_len, 0, s.n_docs, seq, 32, 1234, 1, err, sizeof(err)) == 0) {
        int32_t out[32];
        for (int64_t j = 0; j < ix.n_samples && j < 64; j++) {
          int64_t k = ix.shuffle_idx[j];
          int64_t b = ix.sample_idx[2 * k], ob = ix.sample_idx[2 * k + 1];
          int64_t e = ix.sample_idx[2 * k + 2], oe = ix.sample_idx[2 * k + 3];
          int64_t n = 0;
          for (int64_t i = b; i <= e; i++) {
            int32_t d = ix.doc_idx[i];
            int64_t from = i == b ? ob : 0, to = i == e ? oe + 1 : s.doc_len[d];
            if (to - from > 0) mt_token_source_read(&s, d, from, to - from, out + n);
            n += to - from;
          }
          if (n != seq + 1) abort();
        }
        mt_gpt_index_free(&ix);
      }
    }
  }
  mt_token_source_close(&s);
  free(bin);
  return 0;
}
