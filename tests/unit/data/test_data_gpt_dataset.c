/* tests/unit/data/test_data_gpt_dataset.c — Megatron GPTDataset semantics:
 * split bounds, epochs, samples = seq_length + 1 consecutive tokens of the
 * shuffled document stream (crossing documents, one shared token between
 * consecutive samples), shuffle is a permutation, determinism, dp=1 vs dp=4
 * global batches, resume at consumed samples, blending proportions, cache. */
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
#include "data/gpt_index.h"
#include "data/indexed_dataset.h"

static char g_dir[256], g_a[300], g_b[300];

/* Source tag*100000 + doc*100 + position: every token says where it is from.
 * Document d has 3 + (d * 7) % 23 tokens. */
static void write_source(const char *prefix, int tag, int n_docs) {
  char err[512];
  mt_mmidx_writer *w = mt_mmidx_writer_open(prefix, MT_DTYPE_INT32, err, sizeof(err));
  assert_non_null(w);
  for (int d = 0; d < n_docs; d++) {
    int32_t ids[32];
    int n = 3 + (d * 7) % 23;
    for (int i = 0; i < n; i++) ids[i] = tag * 100000 + d * 100 + i;
    assert_int_equal(mt_mmidx_writer_add(w, ids, (size_t)n, err, sizeof(err)), 0);
  }
  assert_int_equal(mt_mmidx_writer_finish(w, err, sizeof(err)), 0);
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof(g_dir), "/tmp/mt_test_gptds_%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "mkdir -p %s/cache", g_dir);
  if (system(cmd) != 0) return -1;
  snprintf(g_a, sizeof(g_a), "%s/a", g_dir);
  snprintf(g_b, sizeof(g_b), "%s/b", g_dir);
  write_source(g_a, 1, 500);
  write_source(g_b, 2, 300);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  return system(cmd);
}

static void test_split_and_epochs(void **state) {
  (void)state;
  double w[3];
  char err[256];
  int64_t b[3][2];
  int present[3];
  assert_int_equal(mt_parse_split("969,30,1", w, err, sizeof(err)), 0);
  mt_split_bounds(w, 1000, b, present);
  assert_int_equal(b[0][1], 969);
  assert_int_equal(b[1][1], 999);
  assert_int_equal(b[2][1], 1000);
  mt_split_bounds(w, 7222, b, present); /* Megatron's Python rule gives [0, 6998, 7215, 7222] */
  assert_int_equal(b[0][1], 6998);
  assert_int_equal(b[1][0], 6998);
  assert_int_equal(b[1][1], 7215);
  assert_int_equal(b[2][1], 7222);
  assert_true(present[0] && present[1] && present[2]);
  /* round(c · n) of the running sums, not sums of rounded sizes: 1,1,1 over
   * 5 documents gives [0, 2), [2, 3), [3, 5) (Python: round(5/3) = 2,
   * round(10/3) = 3) */
  assert_int_equal(mt_parse_split("1,1,1", w, err, sizeof(err)), 0);
  mt_split_bounds(w, 5, b, present);
  assert_int_equal(b[0][1], 2);
  assert_int_equal(b[1][1], 3);
  assert_int_equal(b[2][1], 5);
  /* a zero weight: no dataset for that split (Megatron's None) */
  assert_int_equal(mt_parse_split("98,0,2", w, err, sizeof(err)), 0);
  mt_split_bounds(w, 100, b, present);
  assert_true(present[0] && !present[1] && present[2]);
  assert_int_equal(mt_parse_split("1", w, err, sizeof(err)), 0);
  assert_true(w[0] == 1.0 && w[1] == 0 && w[2] == 0);
  assert_int_equal(mt_parse_split("a,b", w, err, sizeof(err)), -1);
  assert_int_equal(mt_parse_split("0,0,0", w, err, sizeof(err)), -1);
  assert_int_equal(mt_gpt_num_epochs(100, 10, 9, 1), 1);  /* 9*10+1 <= 100 */
  assert_int_equal(mt_gpt_num_epochs(100, 10, 10, 1), 2); /* 101 > 100 */
  assert_int_equal(mt_gpt_num_epochs(100, 10, 10, 0), 1); /* without the extra token */
  assert_int_equal(mt_gpt_num_epochs(100, 10, 30, 1), 4);
  assert_int_equal(mt_gpt_num_epochs(100, 10, -1, 1), 1); /* None: one epoch */
}

/* Every sample equals tokens [j*seq, j*seq + seq + 1) of the stream made of
 * doc_idx's documents, j = shuffle_idx[i]. */
static void check_index(const int32_t *doc_len, int64_t b, int64_t e, int seq, int64_t ns,
                        uint32_t seed) {
  mt_gpt_index ix;
  char err[256];
  assert_int_equal(mt_gpt_index_build(&ix, doc_len, b, e, seq, ns, seed, 1, err, sizeof(err)), 0);
  assert_true(ix.n_samples >= ns);
  int64_t total = 0;
  for (int64_t i = 0; i < ix.n_doc_idx; i++) {
    EXPECT(ix.doc_idx[i] >= b && ix.doc_idx[i] < e, "doc_idx[%lld] = %lld, docs [%lld, %lld)", (long long)i,
           (long long)ix.doc_idx[i], (long long)b, (long long)e);
    total += doc_len[ix.doc_idx[i]];
  }
  int64_t *pos = malloc((size_t)ix.n_doc_idx * sizeof(int64_t)); /* stream start of doc_idx[i] */
  int64_t acc = 0;
  for (int64_t i = 0; i < ix.n_doc_idx; i++) {
    pos[i] = acc;
    acc += doc_len[ix.doc_idx[i]];
  }
  char *seen = calloc((size_t)ix.n_samples, 1);
  for (int64_t s = 0; s < ix.n_samples; s++) {
    int64_t di = ix.sample_idx[2 * s], off = ix.sample_idx[2 * s + 1];
    EXPECT_EQ(pos[di] + off, s * seq, "sample %lld (doc_idx %lld, offset %lld)", (long long)s, (long long)di,
              (long long)off); /* sample s starts at s * seq */
    int64_t j = ix.shuffle_idx[s];
    EXPECT(j >= 0 && j < ix.n_samples && !seen[j], "shuffle_idx[%lld] = %lld of %lld samples", (long long)s,
           (long long)j, (long long)ix.n_samples);
    seen[j] = 1;
  }
  assert_true(ix.n_samples * seq + 1 <= total);
  free(seen);
  free(pos);
  mt_gpt_index_free(&ix);
}

static void test_index_properties(void **state) {
  (void)state;
  int32_t len[200];
  for (int i = 0; i < 200; i++) len[i] = 1 + (i * 13) % 37;
  len[5] = 0; /* zero-length documents are tolerated (Megatron files can have them) */
  check_index(len, 0, 200, 16, 10, 1);     /* < 1 epoch */
  check_index(len, 0, 200, 16, 500, 2);    /* several epochs, last one separate */
  check_index(len, 10, 50, 64, 300, 3);    /* sub-range of documents */
  check_index(len, 0, 200, 2, 5000, 4);    /* seq_length 2 (Megatron asserts > 1) */
  check_index(len, 0, 200, 4096, 3, 5);    /* samples longer than many documents */
}

static mt_gpt_dataset *open_ds(int n, const double *w, const char *split, int seq, uint64_t seed,
                               int64_t ntrain, const char *cache) {
  const char *paths[2] = {g_a, g_b};
  mt_gpt_dataset_options o = {0};
  o.n_paths = n;
  o.paths = paths;
  o.weights = w;
  o.weighted = w != NULL;
  o.mid_level_dataset_surplus = 0.005;
  o.split = split;
  o.seq_length = seq;
  o.seed = seed;
  o.num_samples[MT_SPLIT_TRAIN] = ntrain;
  o.num_samples[MT_SPLIT_VALID] = 40;
  o.cache_dir = cache;
  char err[512];
  mt_gpt_dataset *ds = mt_gpt_dataset_open(&o, err, sizeof(err));
  if (!ds) fail_msg("open: %s", err);
  return ds;
}

static uint64_t sample_hash(const mt_gpt_dataset *ds, int split, int64_t id, int seq) {
  int32_t buf[512];
  mt_gpt_dataset_get(ds, split, id, buf);
  return mt_hash_bytes(buf, (size_t)(seq + 1) * 4, 0);
}

static void test_samples_content(void **state) {
  (void)state;
  int seq = 32;
  mt_gpt_dataset *ds = open_ds(1, NULL, "969,30,1", seq, 1234, 1000, NULL);
  assert_true(mt_gpt_dataset_num_samples(ds, MT_SPLIT_TRAIN) >= 1000);
  assert_true(mt_gpt_dataset_num_samples(ds, MT_SPLIT_VALID) >= 40);
  assert_int_equal(mt_gpt_dataset_num_samples(ds, MT_SPLIT_TEST), 0);
  int32_t buf[64];
  for (int64_t i = 0; i < 1000; i++) {
    mt_gpt_dataset_get(ds, MT_SPLIT_TRAIN, i, buf);
    for (int k = 0; k <= seq; k++) {
      int doc = (buf[k] % 100000) / 100, p = buf[k] % 100;
      EXPECT_EQ(buf[k] / 100000, 1, "sample %lld token %d (%d)", (long long)i, k, (int)buf[k]);
      EXPECT(doc < 485, "sample %lld token %d: doc %d", (long long)i, k, doc); /* train = documents [0, 485) of 500 */
      if (k > 0 && p != 0) /* inside a document */
        EXPECT_EQ(buf[k], buf[k - 1] + 1, "sample %lld token %d", (long long)i, k);
      if (k > 0 && p == 0)
        EXPECT_EQ(buf[k - 1] % 100, 2 + ((buf[k - 1] % 100000) / 100 * 7) % 23, "sample %lld token %d",
                  (long long)i, k);
    }
  }
  mt_gpt_dataset_get(ds, MT_SPLIT_VALID, 3, buf);
  for (int k = 0; k <= seq; k++) {
    int doc = (buf[k] % 100000) / 100;
    EXPECT(doc >= 485 && doc < 500, "valid sample 3 token %d: doc %d", k, doc); /* valid = [485, 500) */
  }
  mt_gpt_dataset_close(ds);
}

static void test_determinism_dp_resume(void **state) {
  (void)state;
  int seq = 16, gbs = 8, iters = 12;
  mt_gpt_dataset *d1 = open_ds(1, NULL, "969,30,1", seq, 7, (int64_t)gbs * iters, NULL);
  mt_gpt_dataset *d2 = open_ds(1, NULL, "969,30,1", seq, 7, (int64_t)gbs * iters, NULL);
  mt_gpt_dataset *d3 = open_ds(1, NULL, "969,30,1", seq, 8, (int64_t)gbs * iters, NULL);
  int differ = 0;
  for (int it = 0; it < iters; it++) {
    /* dp = 1: one rank takes the whole global batch; dp = 4: four slices */
    uint64_t h1 = 0, h4 = 0;
    for (int j = 0; j < gbs; j++)
      h1 = h1 * 31 + sample_hash(d1, 0, mt_gpt_sample_id(it, gbs, 1, 0, j), seq);
    for (int r = 0; r < 4; r++)
      for (int j = 0; j < gbs / 4; j++)
        h4 = h4 * 31 + sample_hash(d2, 0, mt_gpt_sample_id(it, gbs, 4, r, j), seq);
    EXPECT(h1 == h4, "iteration %d: hash dp=1 %llu, dp=4 %llu", it, (unsigned long long)h1, (unsigned long long)h4);
    for (int j = 0; j < gbs; j++)
      differ += sample_hash(d1, 0, (int64_t)it * gbs + j, seq) !=
                sample_hash(d3, 0, (int64_t)it * gbs + j, seq);
  }
  assert_true(differ > gbs * iters / 2); /* another seed, another order */
  /* resume: a fresh open continuing at consumed_samples = 5 * gbs */
  mt_gpt_dataset_close(d2);
  d2 = open_ds(1, NULL, "969,30,1", seq, 7, (int64_t)gbs * iters, NULL);
  int64_t consumed = 5 * (int64_t)gbs;
  for (int it = 5; it < iters; it++)
    for (int j = 0; j < gbs; j++)
      EXPECT(sample_hash(d1, 0, (int64_t)it * gbs + j, seq) ==
                 sample_hash(d2, 0, consumed + (int64_t)(it - 5) * gbs + j, seq),
             "iteration %d micro-sample %d after resume", it, j);
  mt_gpt_dataset_close(d1);
  mt_gpt_dataset_close(d2);
  mt_gpt_dataset_close(d3);
}

static void test_blend(void **state) {
  (void)state;
  double w[2] = {0.7, 0.3};
  int seq = 8;
  int64_t n = 2000;
  mt_gpt_dataset *ds = open_ds(2, w, "969,30,1", seq, 99, n, NULL);
  /* Megatron's blend size: sum of ceil(n · w) */
  assert_int_equal(mt_gpt_dataset_num_samples(ds, MT_SPLIT_TRAIN),
                   mt_blend_target_size(0.7, n) + mt_blend_target_size(0.3, n));
  int64_t from_a = 0;
  int32_t buf[16];
  for (int64_t i = 0; i < n; i++) {
    mt_gpt_dataset_get(ds, MT_SPLIT_TRAIN, i, buf);
    int tag = buf[0] / 100000;
    for (int k = 1; k <= seq; k++) /* one source */
      EXPECT_EQ(buf[k] / 100000, tag, "sample %lld token %d", (long long)i, k);
    from_a += tag == 1;
    double want = 0.7 * (double)(i + 1);
    EXPECT((double)from_a > want - 1.5 && (double)from_a < want + 1.5, "sample %lld: %lld from source a, want %.1f",
           (long long)i, (long long)from_a, want);
  }
  mt_gpt_dataset_close(ds);
  /* the greedy rule itself */
  int16_t di[10];
  int64_t dsi[10];
  double w2[3] = {0.5, 0.0, 0.5};
  mt_blend_build(w2, 3, 10, di, dsi);
  for (int s = 0; s < 10; s++) EXPECT(di[s] != 1, "sample %d: dataset %d (weight 0)", s, (int)di[s]);
  assert_int_equal(di[0], 0);
  assert_int_equal(dsi[9], 4);
}

static void test_cache(void **state) {
  (void)state;
  char cache[300], cmd[400];
  snprintf(cache, sizeof(cache), "%s/cache", g_dir);
  mt_gpt_dataset *a = open_ds(1, NULL, "969,30,1", 24, 5, 300, NULL);
  mt_gpt_dataset *b = open_ds(1, NULL, "969,30,1", 24, 5, 300, cache); /* writes */
  mt_gpt_dataset *c = open_ds(1, NULL, "969,30,1", 24, 5, 300, cache); /* reads */
  snprintf(cmd, sizeof(cmd), "ls %s/gpt_index_*.bin | wc -l | grep -qx 2", cache);
  assert_int_equal(system(cmd), 0); /* train + valid */
  for (int64_t i = 0; i < 300; i++) {
    uint64_t h = sample_hash(a, 0, i, 24);
    EXPECT(h == sample_hash(b, 0, i, 24), "sample %lld (writing the cache)", (long long)i);
    EXPECT(h == sample_hash(c, 0, i, 24), "sample %lld (reading the cache)", (long long)i);
  }
  mt_gpt_dataset_close(c);
  /* a corrupt cache file is rebuilt, not trusted */
  snprintf(cmd, sizeof(cmd), "for f in %s/gpt_index_*.bin; do truncate -s 100 $f; done", cache);
  assert_int_equal(system(cmd), 0);
  c = open_ds(1, NULL, "969,30,1", 24, 5, 300, cache);
  for (int64_t i = 0; i < 300; i++)
    EXPECT(sample_hash(a, 0, i, 24) == sample_hash(c, 0, i, 24), "sample %lld (rebuilt cache)", (long long)i);
  mt_gpt_dataset_close(a);
  mt_gpt_dataset_close(b);
  mt_gpt_dataset_close(c);
}

static void test_errors(void **state) {
  (void)state;
  char err[512];
  const char *paths[1] = {g_a};
  mt_gpt_dataset_options o = {0};
  o.n_paths = 1;
  o.paths = paths;
  o.split = "0,1,0"; /* empty train split */
  o.seq_length = 8;
  o.num_samples[0] = 10;
  assert_null(mt_gpt_dataset_open(&o, err, sizeof(err)));
  assert_non_null(strstr(err, "train split"));
  o.split = "10,0,0"; /* empty valid split requested: no error, 0 samples */
  o.num_samples[1] = 10;
  mt_gpt_dataset *ds = mt_gpt_dataset_open(&o, err, sizeof(err));
  assert_non_null(ds);
  assert_int_equal(mt_gpt_dataset_num_samples(ds, MT_SPLIT_VALID), 0);
  mt_gpt_dataset_close(ds);
  o.split = "x";
  assert_null(mt_gpt_dataset_open(&o, err, sizeof(err)));
  assert_non_null(strstr(err, "split"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_and_epochs), cmocka_unit_test(test_index_properties),
      cmocka_unit_test(test_samples_content),  cmocka_unit_test(test_determinism_dp_resume),
      cmocka_unit_test(test_blend),            cmocka_unit_test(test_cache),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
