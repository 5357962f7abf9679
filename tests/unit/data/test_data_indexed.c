/* tests/unit/data/test_data_indexed.c — MMIDIDX writer/reader and llm.c shards:
 * byte layout, round trip, and every kind of bad file gives a message (never
 * a crash): missing/truncated .idx, wrong magic, wrong version, float dtype,
 * .bin shorter than the index says, broken document_indices, llm.c header
 * mismatch, token id >= vocabulary size (through mt_gpt_dataset_open). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/unit/check.h"

#include "data/data_util.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"

static char g_dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof(g_dir), "/tmp/mt_test_indexed_%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "mkdir -p %s", g_dir);
  return system(cmd);
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  return system(cmd);
}

/* Docs: doc d has d+1 tokens valued base + 10*d + i. */
static void write_docs(const char *prefix, int dtype, int n_docs, int base) {
  char err[512];
  mt_mmidx_writer *w = mt_mmidx_writer_open(prefix, dtype, err, sizeof(err));
  assert_non_null(w);
  for (int d = 0; d < n_docs; d++) {
    int32_t ids[64];
    for (int i = 0; i <= d; i++) ids[i] = base + 10 * d + i;
    EXPECT_EQ(mt_mmidx_writer_add(w, ids, (size_t)d + 1, err, sizeof(err)), 0, "document %d: %s", d, err);
  }
  assert_int_equal(mt_mmidx_writer_finish(w, err, sizeof(err)), 0);
}

static void test_layout_and_roundtrip(void **state) {
  (void)state;
  char prefix[300], path[320], err[512];
  for (int pass = 0; pass < 2; pass++) {
    int dtype = pass ? MT_DTYPE_INT32 : MT_DTYPE_UINT16;
    snprintf(prefix, sizeof(prefix), "%s/rt%d", g_dir, pass);
    write_docs(prefix, dtype, 5, 100);
    snprintf(path, sizeof(path), "%s.idx", prefix);
    size_t n;
    char *idx = mt_data_read_file(path, &n, err, sizeof(err));
    assert_non_null(idx);
    assert_int_equal(n, 34 + 5 * 12 + 6 * 8);
    assert_memory_equal(idx, "MMIDIDX\0\0", 9);
    assert_int_equal(idx[9], 1); /* version */
    assert_int_equal(idx[17], dtype);
    free(idx);
    snprintf(path, sizeof(path), "%s.bin.tmp", prefix);
    assert_int_not_equal(access(path, F_OK), 0); /* temporaries renamed */
    mt_token_source s;
    assert_int_equal(mt_token_source_open(&s, prefix, err, sizeof(err)), 0);
    assert_int_equal(s.kind, MT_SOURCE_MMIDX);
    assert_int_equal(s.n_docs, 5);
    assert_int_equal(s.n_mm_docs, 6);
    for (int d = 0; d < 5; d++) {
      EXPECT_EQ(s.doc_len[d], d + 1, "pass %d document %d", pass, d);
      EXPECT_EQ(s.mm_doc_index[d + 1], d + 1, "pass %d document %d", pass, d);
      int32_t out[64];
      mt_token_source_read(&s, d, 0, d + 1, out);
      for (int i = 0; i <= d; i++) EXPECT_EQ(out[i], 100 + 10 * d + i, "pass %d document %d token %d", pass, d, i);
    }
    int64_t lo, hi;
    mt_token_source_minmax(&s, &lo, &hi);
    assert_int_equal(lo, 100);
    assert_int_equal(hi, 144);
    mt_token_source_close(&s);
    /* "PREFIX.bin" is accepted as the prefix too */
    snprintf(path, sizeof(path), "%s.bin", prefix);
    assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), 0);
    mt_token_source_close(&s);
  }
  assert_int_equal(mt_mmidx_optimal_dtype(50257), MT_DTYPE_UINT16);
  assert_int_equal(mt_mmidx_optimal_dtype(65500), MT_DTYPE_INT32);
}

/* Write `idx` bytes (n) next to a valid .bin and expect open to fail with a
 * message containing `want`. */
static void expect_bad_idx(const char *name, const char *idx, size_t n, const char *want) {
  char prefix[300], path[320], err[512];
  snprintf(prefix, sizeof(prefix), "%s/%s", g_dir, name);
  write_docs(prefix, MT_DTYPE_UINT16, 5, 0);
  snprintf(path, sizeof(path), "%s.idx", prefix);
  FILE *f = fopen(path, "wb");
  fwrite(idx, 1, n, f);
  fclose(f);
  mt_token_source s;
  err[0] = 0;
  assert_int_equal(mt_token_source_open(&s, prefix, err, sizeof(err)), -1);
  if (!strstr(err, want)) fail_msg("%s: message \"%s\" lacks \"%s\"", name, err, want);
  assert_non_null(strstr(err, name));
}

static void test_bad_indices(void **state) {
  (void)state;
  char prefix[300], path[320], err[512];
  snprintf(prefix, sizeof(prefix), "%s/good", g_dir);
  write_docs(prefix, MT_DTYPE_UINT16, 5, 0);
  snprintf(path, sizeof(path), "%s.idx", prefix);
  size_t n;
  char *good = mt_data_read_file(path, &n, err, sizeof(err));
  char *b = malloc(n);
  expect_bad_idx("trunc_header", good, 20, "truncated");
  expect_bad_idx("trunc_body", good, n - 3, "truncated");
  expect_bad_idx("empty", good, 0, "truncated");
  memcpy(b, good, n);
  b[0] = 'X';
  expect_bad_idx("magic", b, n, "magic");
  memcpy(b, good, n);
  b[9] = 2;
  expect_bad_idx("version", b, n, "version 2");
  memcpy(b, good, n);
  b[17] = MT_DTYPE_FLOAT32;
  expect_bad_idx("float", b, n, "dtype");
  memcpy(b, good, n);
  b[17] = 42;
  expect_bad_idx("dtype42", b, n, "dtype");
  memcpy(b, good, n);
  int64_t big = 1000; /* pointer of sequence 4 beyond the .bin */
  memcpy(b + 34 + 5 * 4 + 4 * 8, &big, 8);
  expect_bad_idx("pointer", b, n, "outside the .bin");
  memcpy(b, good, n);
  int64_t bad_doc = 7;
  memcpy(b + 34 + 5 * 12 + 5 * 8, &bad_doc, 8);
  expect_bad_idx("docidx", b, n, "document_indices");
  memcpy(b, good, n);
  uint64_t huge = (uint64_t)1 << 62; /* counts that overflow naive size math */
  memcpy(b + 18, &huge, 8);
  expect_bad_idx("hugecount", b, n, "truncated");
  free(b);
  free(good);
  /* .bin shorter than the index says */
  snprintf(prefix, sizeof(prefix), "%s/shortbin", g_dir);
  write_docs(prefix, MT_DTYPE_UINT16, 5, 0);
  snprintf(path, sizeof(path), "%s.bin", prefix);
  assert_int_equal(truncate(path, 20), 0);
  mt_token_source s;
  assert_int_equal(mt_token_source_open(&s, prefix, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "shorter"));
  /* missing files */
  assert_int_equal(mt_token_source_open(&s, "/nonexistent/prefix", err, sizeof(err)), -1);
  assert_non_null(strstr(err, "/nonexistent/prefix.idx"));
  snprintf(path, sizeof(path), "%s/good.idx", g_dir);
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), 0); /* prefix.idx given */
  mt_token_source_close(&s);
  snprintf(path, sizeof(path), "%s/good.bin", g_dir);
  unlink(path);
  snprintf(prefix, sizeof(prefix), "%s/good", g_dir);
  assert_int_equal(mt_token_source_open(&s, prefix, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "good.bin"));
}

static void write_llmc(const char *path, const uint16_t *tok, int n, int version, int claimed) {
  int32_t h[256] = {0};
  h[0] = MT_LLMC_MAGIC;
  h[1] = version;
  h[2] = claimed;
  FILE *f = fopen(path, "wb");
  fwrite(h, 4, 256, f);
  fwrite(tok, 2, (size_t)n, f);
  fclose(f);
}

static void test_llmc(void **state) {
  (void)state;
  char path[300], err[512];
  uint16_t tok[12] = {50256, 1, 2, 3, 50256, 4, 5, 50256, 6, 7, 8, 9};
  snprintf(path, sizeof(path), "%s/shard.bin", g_dir);
  write_llmc(path, tok, 12, 1, 12);
  mt_token_source s;
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), 0);
  assert_int_equal(s.kind, MT_SOURCE_LLMC);
  assert_int_equal(s.n_docs, 3);
  assert_int_equal(s.doc_len[0], 4);
  assert_int_equal(s.doc_len[1], 3);
  assert_int_equal(s.doc_len[2], 5);
  int32_t out[5];
  mt_token_source_read(&s, 2, 0, 5, out);
  assert_int_equal(out[0], 50256);
  assert_int_equal(out[4], 9);
  mt_token_source_close(&s);
  write_llmc(path, tok, 12, 2, 12);
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "version 2"));
  write_llmc(path, tok, 12, 1, 13);
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "13 tokens"));
  write_llmc(path, tok, 0, 1, 0); /* header only: no documents */
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), 0);
  assert_int_equal(s.n_docs, 0);
  mt_token_source_close(&s);
  FILE *f = fopen(path, "wb"); /* magic but truncated header */
  int32_t m = MT_LLMC_MAGIC;
  fwrite(&m, 4, 1, f);
  fclose(f);
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "truncated"));
  f = fopen(path, "wb"); /* neither format */
  fputs("hello world", f);
  fclose(f);
  assert_int_equal(mt_token_source_open(&s, path, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "neither"));
}

static void test_vocab_bound(void **state) {
  (void)state;
  char prefix[300], err[512];
  snprintf(prefix, sizeof(prefix), "%s/vocab", g_dir);
  write_docs(prefix, MT_DTYPE_UINT16, 20, 1000); /* max id 1000 + 190 + 19 = 1209 */
  const char *paths[1] = {prefix};
  mt_gpt_dataset_options o = {0};
  o.n_paths = 1;
  o.paths = paths;
  o.split = "1,0,0";
  o.seq_length = 4;
  o.num_samples[0] = 10;
  o.vocab_size = 1209;
  assert_null(mt_gpt_dataset_open(&o, err, sizeof(err)));
  assert_non_null(strstr(err, "token id 1209 >= vocabulary size 1209"));
  o.vocab_size = 1210;
  mt_gpt_dataset *ds = mt_gpt_dataset_open(&o, err, sizeof(err));
  assert_non_null(ds);
  assert_int_equal(mt_gpt_dataset_max_token(ds), 1209);
  mt_gpt_dataset_close(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_and_roundtrip),
      cmocka_unit_test(test_bad_indices),
      cmocka_unit_test(test_llmc),
      cmocka_unit_test(test_vocab_bound),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
