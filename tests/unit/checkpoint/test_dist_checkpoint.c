/* tests/unit/checkpoint/test_dist_checkpoint.c — checkpoint/dist_checkpoint.h on one
 * process (world NULL): tensors saved under one cut are read back under
 * others (row boxes -> column boxes, ZeRO-like flat sub-ranges crossing box
 * rows, the whole tensor, SwiGLU-like half boxes, [1, n] tensors), bf16
 * storage read as fp32 and back, int64 buffers, tensors over 1 MiB (several
 * CRC blocks; a partial read verifies only its blocks), device views through
 * the cpu backend's copies, the metadata scalars (a seed above 2^53), and
 * the refusals: bit flip, truncated / missing shard file, missing tensor,
 * shape mismatch, overlapping / incomplete pieces, legacy directories, and a
 * failed save that leaves "latest" and the previous checkpoint untouched. */
#include "tests/unit/checkpoint/dckpt_fixture.h"

/* 4 row boxes written, read as 3 column boxes, flat sub-ranges, the whole;
 * a [1, n] tensor; SwiGLU-like halves. */
static void test_recut(void **state) {
  (void)state;
  fresh_dir("recut");
  const int64_t R = 7, C = 10;
  int64_t rb[5] = {0, 2, 4, 6, 7};
  mt_dckpt_view v[12];
  void *mem[12];
  int n = 0;
  for (int i = 0; i < 4; i++) {
    mem[n] = box_data(rb[i], 0, rb[i + 1] - rb[i], C, 0, (rb[i + 1] - rb[i]) * C);
    v[n] = view("w", R, C, rb[i], 0, rb[i + 1] - rb[i], C, 0, -1, MT_F32, mem[n], 1);
    n++;
  }
  /* b [1, 13]: two flat ranges of the whole box */
  mem[n] = box_data(0, 0, 1, 13, 0, 5);
  v[n] = view("b", 1, 13, 0, 0, 1, 13, 0, 5, MT_F32, mem[n], 1);
  n++;
  mem[n] = box_data(0, 0, 1, 13, 5, 13);
  v[n] = view("b", 1, 13, 0, 0, 1, 13, 5, 13, MT_F32, mem[n], 1);
  n++;
  /* fc1 [8, 3] stored by "tp rank 0 and 1" as halves: rows {0,1},{4,5} and {2,3},{6,7} */
  for (int h = 0; h < 2; h++)
    for (int t = 0; t < 2; t++) {
      int64_t r0 = h * 4 + t * 2;
      mem[n] = box_data(r0, 0, 2, 3, 0, 6);
      v[n] = view("fc1", 8, 3, r0, 0, 2, 3, 0, -1, MT_F32, mem[n], 1);
      n++;
    }
  /* a replica that is not written */
  mem[n] = box_data(0, 0, 7, 10, 0, 70);
  v[n] = view("w", R, C, 0, 0, R, C, 0, -1, MT_F32, mem[n], 0);
  n++;
  save_ok(5, NULL, v, n);
  for (int i = 0; i < n; i++) free(mem[i]);

  mt_dckpt *c = open_ok();
  assert_int_equal(mt_dckpt_n_tensors(c), 3);
  int64_t rows, cols;
  mt_dtype dt;
  int wi = mt_dckpt_find(c, "w");
  assert_true(wi >= 0);
  mt_dckpt_tensor_shape(c, wi, &rows, &cols, &dt);
  assert_int_equal(rows, R);
  assert_int_equal(cols, C);
  assert_int_equal(dt, MT_F32);
  assert_int_equal(mt_dckpt_find(c, "nope"), -1);
  const mt_dckpt_meta *m = mt_dckpt_meta_of(c);
  assert_int_equal(m->iteration, 5);
  assert_int_equal(m->consumed_samples, 200);
  assert_int_equal(m->skipped_iters, 1);
  assert_int_equal(m->nan_iters, 2);
  assert_int_equal(m->vocab_size, 7);
  assert_true(strstr(mt_dckpt_config_json(c), "\"hidden_size\":8") != NULL);
  /* column boxes */
  int64_t cb[4] = {0, 4, 7, 10};
  for (int i = 0; i < 3; i++) expect_view(c, NULL, "w", R, C, 0, cb[i], R, cb[i + 1] - cb[i], 0, -1);
  /* ZeRO-like flat sub-ranges of a column box crossing its rows */
  expect_view(c, NULL, "w", R, C, 0, 4, R, 3, 2, 11);
  expect_view(c, NULL, "w", R, C, 0, 4, R, 3, 11, 21);
  expect_view(c, NULL, "w", R, C, 1, 2, 5, 8, 3, 37);
  /* flat sub-ranges of the whole tensor, and the whole */
  expect_view(c, NULL, "w", R, C, 0, 0, R, C, 13, 58);
  expect_view(c, NULL, "w", R, C, 0, 0, R, C, 0, -1);
  /* [1, n] */
  expect_view(c, NULL, "b", 1, 13, 0, 3, 1, 7, 0, -1);
  expect_view(c, NULL, "b", 1, 13, 0, 0, 1, 13, 4, 9);
  /* halves read by tp = 4: rows {0}, {4}, ... and whole */
  expect_view(c, NULL, "fc1", 8, 3, 1, 0, 1, 3, 0, -1);
  expect_view(c, NULL, "fc1", 8, 3, 3, 0, 3, 3, 1, 8);
  expect_view(c, NULL, "fc1", 8, 3, 0, 0, 8, 3, 0, -1);
  assert_true(mt_dckpt_tensor_used(c, wi));
  char err[256];
  float *whole = mt_dckpt_read_tensor(c, "b", MT_F32, err, sizeof err);
  assert_non_null(whole);
  for (int k = 0; k < 13; k++) EXPECT(whole[k] == val(0, k), "k %d", k);
  free(whole);
  mt_dckpt_close(c);
  /* saving the same iteration again replaces it */
  float *w = box_data(0, 0, R, C, 0, R * C);
  float *b = box_data(0, 0, 1, 13, 0, 13);
  mt_dckpt_view v2[2] = {view("w", R, C, 0, 0, R, C, 0, -1, MT_F32, w, 1),
                         view("b", 1, 13, 0, 0, 1, 13, 0, -1, MT_F32, b, 1)};
  save_ok(5, NULL, v2, 2);
  c = open_ok();
  assert_int_equal(mt_dckpt_n_tensors(c), 2);
  expect_view(c, NULL, "w", R, C, 2, 3, 4, 5, 0, -1);
  mt_dckpt_close(c);
  free(w);
  free(b);
  mt_dckpt_rm_rf(g_dir);
}

static uint16_t to_bf16(float f) { /* exact for the values used */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* bf16 storage read as fp32 (exact) and back (bitwise); fp32 read as bf16
 * rounds to nearest even; int64 buffers; a seed above 2^53. */
static void test_dtypes(void **state) {
  (void)state;
  fresh_dir("dtypes");
  uint16_t hb[6];
  float hf[6] = {1.0f, -2.5f, 0.15625f, 196608.0f, -0.0f, 7.0f};
  for (int i = 0; i < 6; i++) hb[i] = to_bf16(hf[i]);
  float f[3] = {1.00390625f /* 1 + 2^-8: a tie, rounds to 1 */, 1.01171875f /* 1+3*2^-8: tie, up */,
                1.2f};
  int64_t ints[4] = {INT64_MAX, -5, 0, (int64_t)1 << 40};
  mt_dckpt_view v[3] = {view("h", 2, 3, 0, 0, 2, 3, 0, -1, MT_BF16, hb, 1),
                        view("f", 1, 3, 0, 0, 1, 3, 0, -1, MT_F32, f, 1),
                        view("router.expert_bias_tokens", 1, 4, 0, 0, 1, 4, 0, -1, MT_I64, ints, 1)};
  v[2].host = 1;
  char err[512];
  mt_dckpt_meta m = meta_at(3);
  m.seed = 18446744073709551557ull;
  m.has_optimizer = 0;
  if (mt_dckpt_save(g_dir, &m, NULL, NULL, v, 3, NULL, err, sizeof err)) fail_msg("%s", err);
  mt_dckpt *c = open_ok();
  assert_true(mt_dckpt_meta_of(c)->seed == 18446744073709551557ull);
  assert_int_equal(mt_dckpt_meta_of(c)->has_optimizer, 0);
  assert_string_equal(mt_dckpt_config_json(c), "null");
  float *hf2 = mt_dckpt_read_tensor(c, "h", MT_F32, err, sizeof err);
  assert_non_null(hf2);
  assert_memory_equal(hf2, hf, sizeof hf);
  uint16_t *hb2 = mt_dckpt_read_tensor(c, "h", MT_BF16, err, sizeof err);
  assert_memory_equal(hb2, hb, sizeof hb);
  uint16_t *fb = mt_dckpt_read_tensor(c, "f", MT_BF16, err, sizeof err);
  assert_int_equal(fb[0], 0x3f80);
  assert_int_equal(fb[1], 0x3f82);
  assert_int_equal(fb[2], 0x3f9a); /* 1.2 = 0x3f99999a -> 0x3f9a */
  int64_t *i2 = mt_dckpt_read_tensor(c, "router.expert_bias_tokens", MT_I64, err, sizeof err);
  assert_memory_equal(i2, ints, sizeof ints);
  /* int64 cannot become fp32 */
  assert_null(mt_dckpt_read_tensor(c, "router.expert_bias_tokens", MT_F32, err, sizeof err));
  assert_non_null(strstr(err, "stored as int64"));
  free(hf2);
  free(hb2);
  free(fb);
  free(i2);
  mt_dckpt_close(c);
  mt_dckpt_rm_rf(g_dir);
}

/* A tensor of 3 MiB in two pieces: several CRC blocks; a flipped byte in
 * the last block fails only the reads that touch it; device views go
 * through the cpu backend. */
static void test_large_and_blocks(void **state) {
  (void)state;
  fresh_dir("large");
  const int64_t R = 1024, C = 768; /* 3 MiB fp32 */
  float *top = box_data(0, 0, 600, C, 0, 600 * C), *bot = box_data(600, 0, R - 600, C, 0, (R - 600) * C);
  mt_dckpt_view v[2] = {view("big", R, C, 0, 0, 600, C, 0, -1, MT_F32, top, 1),
                        view("big", R, C, 600, 0, R - 600, C, 0, -1, MT_F32, bot, 1)};
  mt_backend_options o = {.device = "cpu", .dtype = MT_F32};
  char err[512];
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) fail_msg("cpu backend: %s", err);
  save_ok(1, be, v, 2);
  mt_dckpt *c = open_ok();
  expect_view(c, be, "big", R, C, 0, 100, R, 300, 0, -1);      /* column cut, device path */
  expect_view(c, NULL, "big", R, C, 0, 0, R, C, 5000, 700000); /* flat range over both pieces */
  mt_dckpt_close(c);
  /* flip one byte near the end of the first piece (its block 1) */
  char path[512];
  snprintf(path, sizeof path, "%s/iter_0000001/shard_00000.bin", g_dir);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  long at = MT_DCKPT_SHARD_HEADER + 600 * C * 4 - 10;
  fseek(f, at, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(ch ^ 0x10, f);
  fclose(f);
  c = open_ok();
  expect_view(c, NULL, "big", R, C, 0, 0, 100, C, 0, -1); /* block 0 only: fine */
  float *d = malloc((size_t)R * C * sizeof *d);
  mt_dckpt_view w = view("big", R, C, 0, 0, R, C, 0, -1, MT_F32, d, 0);
  assert_int_equal(mt_dckpt_load(c, NULL, &w, 1, err, sizeof err), -1);
  assert_non_null(strstr(err, "checksum mismatch"));
  assert_non_null(strstr(err, "'big'"));
  assert_non_null(strstr(err, "shard_00000.bin"));
  mt_dckpt_close(c);
  free(d);
  free(top);
  free(bot);
  mt_backend_destroy(be);
  mt_dckpt_rm_rf(g_dir);
}

/* Two small tensors saved at iteration 1. */
static void save_small(int64_t it) {
  float *a = box_data(0, 0, 4, 6, 0, 24), *b = box_data(0, 0, 1, 6, 0, 6);
  mt_dckpt_view v[3] = {view("a", 4, 6, 0, 0, 2, 6, 0, -1, MT_F32, a, 1),
                        view("a", 4, 6, 2, 0, 2, 6, 0, -1, MT_F32, a + 12, 1),
                        view("b", 1, 6, 0, 0, 1, 6, 0, -1, MT_F32, b, 1)};
  save_ok(it, NULL, v, 3);
  free(a);
  free(b);
}

static void expect_open_error(const char *want1, const char *want2) {
  char err[512] = "";
  mt_dckpt *c = NULL;
  assert_int_equal(mt_dckpt_open(g_dir, -1, &c, err, sizeof err), -1);
  assert_null(c);
  if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
    fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err, want1, want2 ? want2 : "");
}

static void test_refusals(void **state) {
  (void)state;
  fresh_dir("refuse");
  char err[512], path[512];
  int e0;
  save_small(1);
  mt_dckpt *c = open_ok();
  /* missing tensor, shape mismatch: nothing written */
  float d[24];
  for (int i = 0; i < 24; i++) d[i] = -1;
  mt_dckpt_view v[2] = {view("a", 4, 6, 0, 0, 4, 6, 0, -1, MT_F32, d, 0),
                        view("c", 2, 2, 0, 0, 2, 2, 0, -1, MT_F32, d, 0)};
  assert_int_equal(mt_dckpt_load(c, NULL, v, 2, err, sizeof err), -1);
  assert_non_null(strstr(err, "no tensor 'c'"));
  for (int i = 0; i < 24; i++) EXPECT(d[i] == -1, "element %d written", i);
  v[1] = view("b", 1, 8, 0, 0, 1, 8, 0, -1, MT_F32, d, 0);
  assert_int_equal(mt_dckpt_load(c, NULL, v, 2, err, sizeof err), -1);
  assert_non_null(strstr(err, "checkpoint tensor 'b' is [1, 6] but the model built from the "
                              "config has [1, 8]"));
  for (int i = 0; i < 24; i++) EXPECT(d[i] == -1, "element %d written", i);
  mt_dckpt_close(c);
  /* truncated shard file */
  snprintf(path, sizeof path, "%s/iter_0000001/shard_00000.bin", g_dir);
  assert_int_equal(truncate(path, 60), 0);
  expect_open_error("truncated", "shard_00000.bin");
  /* missing shard file */
  unlink(path);
  expect_open_error("is missing", "shard_00000.bin");
  /* metadata.json edited (index.bin records its CRC-32): one digit of
   * consumed_samples (40) */
  save_small(1);
  snprintf(path, sizeof path, "%s/iter_0000001/metadata.json", g_dir);
  size_t mn;
  char *mt = mt_read_file(path, 0, &mn, &e0);
  char *cs = strstr(mt, "\"consumed_samples\":");
  assert_non_null(cs);
  cs = strchr(cs, '4');
  assert_non_null(cs);
  *cs = '5';
  assert_int_equal(mt_write_file_synced(path, mt, mn, err, sizeof err), 0);
  free(mt);
  expect_open_error("checksum mismatch in '", "iter_0000001/metadata.json' (file corrupt or "
                                              "edited)");
  /* a bit flip in index.bin */
  save_small(1);
  snprintf(path, sizeof path, "%s/iter_0000001/index.bin", g_dir);
  size_t n;
  int e;
  unsigned char *idx = (unsigned char *)mt_read_file(path, 0, &n, &e);
  idx[40] ^= 1;
  assert_int_equal(mt_write_file_synced(path, idx, n, err, sizeof err), 0);
  idx[40] ^= 1;
  expect_open_error("checksum mismatch", "index.bin");
  /* overlapping and incomplete pieces in a (well-checksummed) index */
  mt_dckpt_index ix;
  assert_int_equal(mt_dckpt_index_decode(&ix, idx, n, path, err, sizeof err), 0);
  free(idx);
  int pa = ix.sorted[ix.t[mt_dckpt_index_find(&ix, "a")].first + 1];
  ix.p[pa].r0 = 1; /* rows 1..2 instead of 2..3: overlap at row 1, row 3 missing */
  idx = mt_dckpt_index_encode(&ix, &n);
  assert_int_equal(mt_write_file_synced(path, idx, n, err, sizeof err), 0);
  free(idx);
  expect_open_error("tensor 'a': two stored pieces overlap", "row 1, column 0");
  ix.p[pa].r0 = 2;
  ix.p[pa].hi = 6; /* a shorter piece: incomplete */
  ix.p[pa].nbytes = 24;
  ix.p[pa].n_blocks = 1;
  idx = mt_dckpt_index_encode(&ix, &n);
  assert_int_equal(mt_write_file_synced(path, idx, n, err, sizeof err), 0);
  free(idx);
  expect_open_error("tensor 'a' [4, 6] is incomplete: 18 of 24", "row 3, column 0");
  mt_dckpt_index_free(&ix);
  /* legacy per-layout checkpoint: 1, no message */
  snprintf(path, sizeof path, "%s/iter_0000007/mp_rank_00", g_dir);
  mt_mkdirs(path);
  c = NULL;
  assert_int_equal(mt_dckpt_open(g_dir, 7, &c, err, sizeof err), 1);
  assert_null(c);
  /* no checkpoint at all */
  assert_int_equal(mt_dckpt_open(g_dir, 9, &c, err, sizeof err), -1);
  assert_non_null(strstr(err, "iter_0000009' does not exist"));
  mt_dckpt_rm_rf(g_dir);
}

/* A save that fails (pieces overlap; a tensor nobody writes; a shape that
 * differs between views) leaves "latest" and the previous checkpoint as
 * they were and no temporary directory. */
static void test_failed_save(void **state) {
  (void)state;
  fresh_dir("failsave");
  char err[512], path[512];
  save_small(1);
  float *a = box_data(0, 0, 4, 6, 0, 24);
  mt_dckpt_meta m = meta_at(2);
  mt_dckpt_view cases[3][2] = {
      {view("a", 4, 6, 0, 0, 3, 6, 0, -1, MT_F32, a, 1),
       view("a", 4, 6, 2, 0, 2, 6, 0, -1, MT_F32, a, 1)},
      {view("a", 4, 6, 0, 0, 4, 6, 0, -1, MT_F32, a, 1),
       view("b", 1, 6, 0, 0, 1, 6, 0, -1, MT_F32, a, 0)},
      {view("a", 4, 6, 0, 0, 4, 6, 0, -1, MT_F32, a, 1),
       view("a", 4, 5, 0, 0, 4, 5, 0, -1, MT_F32, a, 0)},
  };
  const char *want[3] = {"overlap", "'b' [1, 6] has no stored piece (no rank wrote it", "two global shapes"};
  for (int k = 0; k < 3; k++) {
    err[0] = '\0';
    assert_int_equal(mt_dckpt_save(g_dir, &m, NULL, NULL, cases[k], 2, NULL, err, sizeof err), -1);
    if (!strstr(err, want[k])) fail_msg("case %d: \"%s\" lacks \"%s\"", k, err, want[k]);
    assert_int_equal(mt_dckpt_latest(g_dir), 1);
    snprintf(path, sizeof path, "%s/iter_0000002", g_dir);
    assert_int_equal(access(path, F_OK), -1);
    DIR *d = opendir(g_dir); /* no temporary directory iter_0000002.tmp.<host>.<pid> left */
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
      if (!strncmp(e->d_name, "iter_0000002.tmp", 16)) fail_msg("case %d left %s", k, e->d_name);
    closedir(d);
  }
  free(a);
  mt_dckpt *c = open_ok();
  expect_view(c, NULL, "a", 4, 6, 0, 0, 4, 6, 0, -1);
  mt_dckpt_close(c);
  mt_dckpt_rm_rf(g_dir);
}

/* A save of an iteration that already exists stopped between its renames
 * (final moved to final.old, the new one not yet in place): open reads
 * final.old, and the next save puts it back before replacing it. What a
 * load directory without "latest" holds is named. */
static void test_same_iteration_crash(void **state) {
  (void)state;
  fresh_dir("crash2");
  char err[512], path[300], old[700];
  save_small(1);
  snprintf(path, sizeof path, "%s/iter_0000001", g_dir);
  snprintf(old, sizeof old, "%s.old", path);
  assert_int_equal(rename(path, old), 0);
  mt_dckpt *c = open_ok();
  assert_non_null(strstr(mt_dckpt_dir(c), "iter_0000001.old"));
  expect_view(c, NULL, "a", 4, 6, 0, 0, 4, 6, 0, -1);
  mt_dckpt_close(c);
  save_small(1);
  EXPECT(access(path, F_OK) == 0 && access(old, F_OK) != 0, "%s back, .old gone", path);
  c = open_ok();
  assert_null(strstr(mt_dckpt_dir(c), ".old"));
  mt_dckpt_close(c);
  c = NULL;
  snprintf(old, sizeof old, "%s/nothing", g_dir);
  assert_int_equal(mt_dckpt_open(old, -1, &c, err, sizeof err), -1);
  EXPECT(strstr(err, "checkpoint directory '") && strstr(err, "nothing' does not exist"), "%s",
         err);
  assert_int_equal(mt_dckpt_open(path, -1, &c, err, sizeof err), -1);
  EXPECT(strstr(err, "is an iteration directory of a checkpoint: pass its parent '") &&
             strstr(err, "crash2"),
         "%s", err);
  snprintf(old, sizeof old, "%s/hf", g_dir);
  mt_mkdirs(old);
  char hf[800];
  snprintf(hf, sizeof hf, "%s/model.safetensors", old);
  assert_int_equal(mt_write_file_synced(hf, "x", 1, err, sizeof err), 0);
  assert_int_equal(mt_dckpt_open(old, -1, &c, err, sizeof err), -1);
  EXPECT(strstr(err, "holds a Hugging Face model (model.safetensors): import it with megatrain "
                     "convert --from hf"), "%s", err);
  /* metadata vocab_size (7) must equal the word embedding's rows */
  float *w = box_data(0, 0, 5, 2, 0, 10);
  mt_dckpt_view we = view("embedding.word_embeddings.weight", 5, 2, 0, 0, 5, 2, 0, -1, MT_F32, w, 1);
  save_ok(3, NULL, &we, 1);
  free(w);
  expect_open_error("says vocab_size 7 but tensor 'embedding.word_embeddings.weight' has 5 rows",
                    NULL);
  mt_dckpt_rm_rf(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recut),     cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_large_and_blocks), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_failed_save), cmocka_unit_test(test_same_iteration_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
