/* tests/tools/mmidx_dump.c — load a token source (Megatron prefix or llm.c
 * shard) with megatrain's reader and dump what it sees, for cross-checks with
 * tests/reference/mmidx_reader.py:
 *   mmidx_dump PATH TOKENS_OUT
 * stdout: "kind K dtype D docs N mmdocs M", then one "len L ptr P" line per
 * sequence (P in bytes), then one "doc I" line per document_indices entry;
 * TOKENS_OUT gets all tokens as int32. Exit 1 with the error on bad input. */
#include <stdio.h>
#include <stdlib.h>

#include "data/indexed_dataset.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PATH TOKENS_OUT\n", argv[0]);
    return 2;
  }
  char err[1024];
  mt_token_source s;
  if (mt_token_source_open(&s, argv[1], err, sizeof(err)) != 0) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  printf("kind %d dtype %d docs %lld mmdocs %lld\n", s.kind, s.dtype, (long long)s.n_docs,
         (long long)s.n_mm_docs);
  FILE *f = fopen(argv[2], "wb");
  if (!f) return 1;
  int32_t *buf = malloc(sizeof(int32_t) * 65536);
  for (int64_t d = 0; d < s.n_docs; d++) {
    printf("len %d ptr %lld\n", s.doc_len[d], (long long)(s.doc_off[d] * (int64_t)s.itemsize));
    for (int64_t o = 0; o < s.doc_len[d]; o += 65536) {
      int64_t k = s.doc_len[d] - o < 65536 ? s.doc_len[d] - o : 65536;
      mt_token_source_read(&s, d, o, k, buf);
      fwrite(buf, 4, (size_t)k, f);
    }
  }
  for (int64_t i = 0; i < s.n_mm_docs; i++) printf("doc %lld\n", (long long)s.mm_doc_index[i]);
  fclose(f);
  free(buf);
  mt_token_source_close(&s);
  return 0;
}
