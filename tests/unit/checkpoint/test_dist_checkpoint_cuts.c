/* tests/unit/checkpoint/test_dist_checkpoint_cuts.c — checkpoint/
 * dist_checkpoint.h under random cuts: tensors saved as random grids of
 * boxes split into random flat pieces (fp32 and bf16), read back under
 * other random cuts, every element checked; and the inputs the fuzz
 * target found, kept as regression cases. */
#include "tests/unit/checkpoint/dckpt_fixture.h"

static uint64_t g_lcg = 88172645463325252ull;
static int64_t rnd(int64_t n) { /* 0 .. n-1 */
  g_lcg = g_lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (int64_t)((g_lcg >> 33) % (uint64_t)n);
}

/* Cuts of [R, C] into grid boxes (rows in a parts, columns in b parts), each
 * box split into up to 3 flat ranges: appends views to v. */
static int random_cut(const char *name, int64_t R, int64_t C, mt_dckpt_view *v, int write) {
  int64_t rs[5], cs[5];
  int a = 1 + (int)rnd(R < 4 ? R : 4), b = 1 + (int)rnd(C < 4 ? C : 4), n = 0;
  rs[0] = 0, cs[0] = 0, rs[a] = R, cs[b] = C;
  for (int i = 1; i < a; i++) rs[i] = rs[i - 1] + 1 + rnd(R - rs[i - 1] - (a - i));
  for (int i = 1; i < b; i++) cs[i] = cs[i - 1] + 1 + rnd(C - cs[i - 1] - (b - i));
  for (int i = 0; i < a; i++)
    for (int j = 0; j < b; j++) {
      int64_t nr = rs[i + 1] - rs[i], nc = cs[j + 1] - cs[j], m = nr * nc;
      int64_t x = rnd(m + 1), y = rnd(m + 1);
      int64_t cut[4] = {0, x < y ? x : y, x < y ? y : x, m};
      for (int k = 0; k < 3; k++) {
        if (cut[k] == cut[k + 1] && k != 0) continue;
        v[n] = view(name, R, C, rs[i], cs[j], nr, nc, cut[k], cut[k + 1], MT_F32,
                    box_data(rs[i], cs[j], nr, nc, cut[k], cut[k + 1]), write);
        n++;
      }
    }
  return n;
}

/* 60 random pairs of cuts (boxes x flat ranges) of random small tensors,
 * stored as fp32 or bf16 (values exact in bf16). */
/* Inputs the fuzzer (tests/fuzz/fuzz_dckpt*.c) found undefined behaviour on:
 * metadata integers beyond int64 / 2^53, a tensor without pieces, sizes and
 * piece boxes whose products overflow. Each is now a clean refusal. */
static void test_fuzz_found(void **state) {
  (void)state;
  char err[512], *cfg = NULL;
  mt_dckpt_meta m;
  const char *big[] = {"1e308", "1e16", "-1e30"};
  for (int i = 0; i < 3; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"format\": \"%s\", \"iteration\": %s, \"consumed_samples\": 0, \"step\": 0, "
             "\"skipped_iters\": 0, \"nan_iters\": 0, \"seed\": 1, \"vocab_size\": 5, "
             "\"has_optimizer\": true}",
             MT_DCKPT_FORMAT, big[i]);
    assert_int_equal(mt_dckpt_meta_parse(text, "m.json", &m, &cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "\"iteration\" is missing or not an integer"));
  }
  mt_dckpt_index ix;
  memset(&ix, 0, sizeof ix);
  assert_int_equal(mt_dckpt_index_tensor(&ix, "huge", (int64_t)1 << 62, 4, MT_F32, err, sizeof err), 0);
  mt_dckpt_index_finish(&ix);
  assert_int_equal(mt_dckpt_index_validate(&ix, "idx", err, sizeof err), -1);
  assert_non_null(strstr(err, "impossible shape"));
  mt_dckpt_index_free(&ix);
  assert_int_equal(mt_dckpt_index_tensor(&ix, "w", 4, 4, MT_F32, err, sizeof err), 0);
  assert_int_equal(mt_dckpt_index_tensor(&ix, "empty", 2, 2, MT_F32, err, sizeof err), 1);
  ix.p = calloc(1, sizeof *ix.p);
  ix.n_p = 1;
  ix.p[0] = (mt_dckpt_piece){.tensor = 0, .r0 = INT64_MAX - 1, .nr = 2, .nc = 4, .hi = 8,
                             .nbytes = 32, .n_blocks = 1};
  mt_dckpt_index_finish(&ix);
  assert_int_equal(mt_dckpt_index_validate(&ix, "idx", err, sizeof err), -1);
  assert_non_null(strstr(err, "lies outside it"));
  ix.p[0].r0 = 0;
  ix.p[0].nr = 2; /* rows 0..1 of w stored, rows 2..3 and all of 'empty' not */
  assert_int_equal(mt_dckpt_index_validate(&ix, "idx", err, sizeof err), -1);
  assert_non_null(strstr(err, "'w' [4, 4] is incomplete"));
  mt_dckpt_index_free(&ix);
}

static void test_random_cuts(void **state) {
  (void)state;
  fresh_dir("random");
  mt_dckpt_view sv[48], lv[48];
  char err[512];
  for (int it = 0; it < 60; it++) {
    int64_t R = 1 + rnd(9), C = 1 + rnd(9);
    int ns = random_cut("t", R, C, sv, 1), nl = random_cut("t", R, C, lv, 0);
    int bf = (int)rnd(2);
    if (bf) /* val(r, c) = r*1000 + c + 0.25 is not exact in bf16: store exact copies */
      for (int i = 0; i < ns; i++) {
        uint16_t *h = malloc((size_t)(sv[i].hi - sv[i].lo + 1) * 2);
        mt_dckpt_convert(h, MT_BF16, sv[i].data, MT_F32, sv[i].hi - sv[i].lo);
        free(sv[i].data);
        sv[i].data = h;
        sv[i].dtype = MT_BF16;
      }
    save_ok(1, NULL, sv, ns);
    mt_dckpt *c = open_ok();
    for (int i = 0; i < nl; i++) memset(lv[i].data, 0xff, (size_t)(lv[i].hi - lv[i].lo) * 4);
    if (mt_dckpt_load(c, NULL, lv, nl, err, sizeof err)) fail_msg("case %d: %s", it, err);
    for (int i = 0; i < nl; i++) {
      const mt_dckpt_view *x = &lv[i];
      for (int64_t k = x->lo; k < x->hi; k++) {
        float want = val(x->r0 + k / x->nc, x->c0 + k % x->nc), got = ((float *)x->data)[k - x->lo];
        if (bf) {
          uint16_t h;
          mt_dckpt_convert(&h, MT_BF16, &want, MT_F32, 1);
          mt_dckpt_convert(&want, MT_F32, &h, MT_BF16, 1);
        }
        EXPECT(got == want, "case %d [%lld, %lld] view %d element %lld", it, (long long)R,
               (long long)C, i, (long long)k);
      }
    }
    mt_dckpt_close(c);
    for (int i = 0; i < ns; i++) free(sv[i].data);
    for (int i = 0; i < nl; i++) free(lv[i].data);
  }
  mt_dckpt_rm_rf(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_cuts),
      cmocka_unit_test(test_fuzz_found),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
