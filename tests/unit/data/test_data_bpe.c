/* tests/unit/data/test_data_bpe.c — GPT-2 BPE tokenizer against tiktoken `gpt2`.
 *
 * Expected ids were produced by npm tiktoken 1.0.22 (`encode_ordinary`), the
 * same reference tokenizer as tinyshakespeare.gpt2.u16. Covers contractions,
 * digits, runs of whitespace, Unicode letters/numbers, emoji (ZWJ sequences,
 * flags), Unicode spaces, invalid UTF-8 (byte-level round trip) and a long
 * piece (O(n log n) merge). The whole-tinyshakespeare check is in
 * tests/integration/test_data_tokenizer_exact.sh (count + sha256 pinned).
 */
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

#include "core/util.h"
#include "data/bpe.h"
#include "data/data_util.h"

typedef struct {
  const char *text;
  int n;
  int32_t ids[64];
} bpe_case;

static const bpe_case k_cases[] = {
    {"Hello, world!", 4, {15496, 11, 995, 0}},
    {"I'm sure they'll say we've done it, didn't they\077 You're 'quoted' 'S", 23, {40, 1101, 1654, 484, 1183, 910, 356, 1053, 1760, 340, 11, 1422, 470, 484, 30, 921, 821, 705, 421, 5191, 6, 705, 50}},
    {"Numbers: 1234567890 3.14159 2024-05-20 1,000,000", 20, {49601, 25, 17031, 2231, 30924, 3829, 513, 13, 1415, 19707, 48609, 12, 2713, 12, 1238, 352, 11, 830, 11, 830}},
    {"   leading spaces\012\012\012trailing   \011\011  \012  ", 18, {220, 220, 3756, 9029, 628, 198, 9535, 4386, 220, 220, 220, 197, 197, 220, 220, 198, 220, 220}},
    {"Unicode: h\303\251llo na\303\257ve caf\303\251 \316\251mega \320\237\321\200\320\270\320\262\320\265\321\202 \320\274\320\270\321\200 \346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210 \355\225\234\352\265\255\354\226\264", 43, {3118, 291, 1098, 25, 289, 2634, 18798, 41492, 40304, 7377, 102, 13731, 12466, 253, 21169, 18849, 38857, 16843, 20375, 12466, 120, 18849, 21169, 10545, 245, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 220, 47991, 250, 166, 113, 255, 168, 244, 112}},
    {"Emoji: \360\237\230\200\360\237\216\211\360\237\221\215\360\237\217\275 family \360\237\221\250\342\200\215\360\237\221\251\342\200\215\360\237\221\247 flags \360\237\207\253\360\237\207\267", 32, {36, 5908, 7285, 25, 30325, 222, 8582, 236, 231, 41840, 235, 8582, 237, 121, 1641, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100, 9701, 12520, 229, 104, 8582, 229, 115}},
    {"Mixed\302\240nbsp\342\200\203em-space\343\200\200ideographic \302\205nel", 18, {44, 2966, 1849, 77, 24145, 447, 225, 368, 12, 13200, 5099, 222, 485, 6826, 220, 126, 227, 4954}},
    {"x\302\205\302\205 y\302\205\302\205\302\205z \034\035 q\342\200\250\342\200\251r \341\240\216 s", 26, {87, 126, 227, 126, 227, 331, 126, 227, 126, 227, 126, 227, 89, 220, 216, 217, 10662, 447, 101, 447, 102, 81, 28053, 254, 236, 264}},
    {"tabs\011and\015\012CRLF\015\012", 11, {8658, 82, 197, 392, 201, 198, 34, 7836, 37, 201, 198}},
    {"<|endoftext|> is text here", 10, {27, 91, 437, 1659, 5239, 91, 29, 318, 2420, 994}},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 10, {24794, 24794, 24794, 24794, 24794, 24794, 24794, 24794, 24794, 24794}},
    {"\342\205\253 \302\275 \331\241\331\242\331\243 \342\201\264 \360\235\237\231\360\235\237\232 ''' 's's 'S 'LL", 29, {158, 227, 104, 25208, 18923, 94, 149, 95, 149, 96, 2343, 223, 112, 220, 47728, 253, 247, 47728, 253, 248, 705, 7061, 705, 82, 338, 705, 50, 705, 3069}},
    {"    \012    def f(x):\012        return x**2  # comment\012", 29, {220, 220, 220, 220, 198, 220, 220, 220, 825, 277, 7, 87, 2599, 198, 220, 220, 220, 220, 220, 220, 220, 1441, 2124, 1174, 17, 220, 1303, 2912, 198}},
};

static char g_vocab[1024], g_merges[1024], g_dir[900];

static int setup(void **state) {
  const char *d = getenv("MEGATRAIN_SHARED_DATA");
  snprintf(g_dir, sizeof(g_dir), "%s", d ? d : "../shared/data");
  snprintf(g_vocab, sizeof(g_vocab), "%s/gpt2-vocab.json", g_dir);
  snprintf(g_merges, sizeof(g_merges), "%s/gpt2-merges.txt", g_dir);
  char err[512];
  mt_bpe *b = mt_bpe_load(g_vocab, g_merges, err, sizeof(err));
  if (!b) fprintf(stderr, "load failed: %s\n", err);
  *state = b;
  return b ? 0 : -1;
}

static int teardown(void **state) {
  mt_bpe_free(*state);
  return 0;
}

static void test_vocab(void **state) {
  mt_bpe *b = *state;
  assert_int_equal(mt_bpe_vocab_size(b), 50257);
  assert_int_equal(mt_bpe_eod(b), 50256);
  size_t l;
  const char *s = mt_bpe_token_bytes(b, 220, &l);
  assert_int_equal(l, 1);
  assert_int_equal(s[0], ' ');
  assert_null(mt_bpe_token_bytes(b, 50257, &l));
}

static void test_cases(void **state) {
  mt_bpe *b = *state;
  mt_bpe_encoder *e = mt_bpe_encoder_new(b, 0);
  for (int rep = 0; rep < 2; rep++) { /* second pass runs from the cache */
    for (size_t c = 0; c < sizeof(k_cases) / sizeof(k_cases[0]); c++) {
      mt_tokvec v = {0};
      size_t n = mt_bpe_encode(e, k_cases[c].text, strlen(k_cases[c].text), &v);
      if ((int)n != k_cases[c].n || memcmp(v.data, k_cases[c].ids, n * 4) != 0) {
        fprintf(stderr, "case %zu mismatch (%zu ids, want %d):", c, n, k_cases[c].n);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", v.data[i]);
        fprintf(stderr, "\n");
        fail();
      }
      size_t dl;
      char *d = mt_bpe_decode(b, v.data, v.n, &dl);
      assert_int_equal(dl, strlen(k_cases[c].text));
      assert_memory_equal(d, k_cases[c].text, dl);
      free(d);
      mt_tokvec_free(&v);
    }
  }
  uint64_t lookups, hits;
  mt_bpe_encoder_stats(e, &lookups, &hits);
  assert_true(hits * 2 >= lookups);
  mt_bpe_encoder_free(e);
}

/* Invalid UTF-8 is encoded byte-level and decodes back to the same bytes. */
static void test_invalid_utf8(void **state) {
  mt_bpe *b = *state;
  mt_bpe_encoder *e = mt_bpe_encoder_new(b, 0);
  const char bad[] = "ok \xff\xfe bytes \xc3 trunc \xe2\x82 and \xed\xa0\x80 surrogate \xc3\xa9 fine\x80";
  mt_tokvec v = {0};
  mt_bpe_encode(e, bad, sizeof(bad) - 1, &v);
  assert_true(v.n > 0);
  for (size_t i = 0; i < v.n; i++)
    EXPECT(v.data[i] >= 0 && v.data[i] < 50256, "token %zu of %zu: id %d", i, v.n, (int)v.data[i]);
  size_t dl;
  char *d = mt_bpe_decode(b, v.data, v.n, &dl);
  assert_int_equal(dl, sizeof(bad) - 1);
  assert_memory_equal(d, bad, dl);
  free(d);
  /* every single byte value, alone and in a random-ish mixture */
  char all[512];
  for (int i = 0; i < 512; i++) all[i] = (char)((i * 131 + 7) & 255);
  v.n = 0;
  mt_bpe_encode(e, all, sizeof(all), &v);
  d = mt_bpe_decode(b, v.data, v.n, &dl);
  assert_int_equal(dl, sizeof(all));
  assert_memory_equal(d, all, dl);
  free(d);
  mt_tokvec_free(&v);
  mt_bpe_encoder_free(e);
}

/* Two 100 KB pieces (a run of spaces, one long word) stay fast (heap-based
 * merge) and round-trip. */
static void test_long_pieces(void **state) {
  mt_bpe *b = *state;
  mt_bpe_encoder *e = mt_bpe_encoder_new(b, 0);
  size_t n = 200000;
  char *s = malloc(n);
  memset(s, ' ', n);
  memset(s + n / 2, 'a', n / 2);
  mt_tokvec v = {0};
  double t0 = mt_now();
  mt_bpe_encode(e, s, n, &v);
  assert_true(mt_now() - t0 < 2.0);
  size_t dl;
  char *d = mt_bpe_decode(b, v.data, v.n, &dl);
  assert_int_equal(dl, n);
  assert_memory_equal(d, s, n);
  free(d);
  free(s);
  mt_tokvec_free(&v);
  mt_bpe_encoder_free(e);
}

/* Whole tinyshakespeare equals the reference ids (also checked, with the
 * reference's sha256, by the integration test). */
static void test_tinyshakespeare(void **state) {
  mt_bpe *b = *state;
  char path[1024], err[512];
  snprintf(path, sizeof(path), "%s/tinyshakespeare.txt", g_dir);
  size_t n, rn;
  char *text = mt_data_read_file(path, &n, err, sizeof(err));
  snprintf(path, sizeof(path), "%s/tinyshakespeare.gpt2.u16", g_dir);
  char *ref = mt_data_read_file(path, &rn, err, sizeof(err));
  assert_non_null(text);
  assert_non_null(ref);
  assert_int_equal(rn, 338025 * 2);
  mt_bpe_encoder *e = mt_bpe_encoder_new(b, 0);
  mt_tokvec v = {0};
  mt_bpe_encode(e, text, n, &v);
  assert_int_equal(v.n, 338025);
  size_t mism = 0;
  for (size_t i = 0; i < v.n; i++) {
    uint16_t r;
    memcpy(&r, ref + 2 * i, 2);
    mism += (uint16_t)v.data[i] != r;
  }
  assert_int_equal(mism, 0);
  mt_tokvec_free(&v);
  mt_bpe_encoder_free(e);
  free(text);
  free(ref);
}

static void test_bad_files(void **state) {
  (void)state;
  char err[512];
  assert_null(mt_bpe_load("/nonexistent/vocab.json", g_merges, err, sizeof(err)));
  assert_non_null(strstr(err, "/nonexistent/vocab.json"));
  assert_null(mt_bpe_load(g_merges, g_merges, err, sizeof(err))); /* merges as vocab */
  assert_non_null(strstr(err, "JSON"));
  assert_null(mt_bpe_load(g_vocab, g_vocab, err, sizeof(err))); /* vocab as merges */
  assert_non_null(strstr(err, "merge"));
}

int main(void) {
  const char *d = getenv("MEGATRAIN_SHARED_DATA");
  char probe[1024];
  snprintf(probe, sizeof probe, "%s/gpt2-vocab.json", d ? d : "../shared/data");
  if (access(probe, R_OK) != 0) {
    printf("SKIP: %s not found (shared data missing)\n", probe);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vocab),        cmocka_unit_test(test_cases),
      cmocka_unit_test(test_invalid_utf8), cmocka_unit_test(test_long_pieces),
      cmocka_unit_test(test_tinyshakespeare), cmocka_unit_test(test_bad_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
