/* tests/unit/core/test_safetensors.c — core/safetensors.h: a write/read round
 * trip is bitwise (F32, BF16, I64, a zero-size tensor, metadata, header
 * padded to 8 bytes), a sharded directory reads back the same as one file,
 * and every malformed header (truncated, too long, not JSON, not an object,
 * unknown dtype, bad shape, reversed / outside / overlapping / holed /
 * wrongly sized offsets, a duplicate name, trailing bytes, bad metadata, an
 * inconsistent index) is refused with a message naming the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/support/probes.h"
#include "core/fileio.h"
#include "core/safetensors.h"

static char g_dir[256];

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/mt_st_test_XXXXXX");
  if (!mkdtemp(g_dir)) fail_msg("mkdtemp");
}

static void rm_dir(void) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd)) fail_msg("rm");
}

static void test_round_trip(void **state) {
  (void)state;
  make_dir();
  float a[6] = {1, -2, 3.5f, 4, 5, 6e-8f};
  uint16_t b[3] = {0x3f80, 0xc000, 0x7f80};
  int64_t c[2] = {-5, (int64_t)1 << 40};
  mt_st_tensor t[4] = {
      {.name = "a.weight", .dtype = MT_ST_F32, .ndim = 2, .shape = {2, 3}, .data = a},
      {.name = "b", .dtype = MT_ST_BF16, .ndim = 1, .shape = {3}, .data = b},
      {.name = "empty", .dtype = MT_ST_F32, .ndim = 2, .shape = {0, 4}, .data = a},
      {.name = "c", .dtype = MT_ST_I64, .ndim = 1, .shape = {2}, .data = c},
  };
  const char *meta[] = {"format", "pt"};
  char path[600], err[512];
  snprintf(path, sizeof path, "%s/x.safetensors", g_dir);
  assert_int_equal(mt_st_write(path, t, 4, meta, 1, err, sizeof err), 0);
  /* header length is a multiple of 8 */
  FILE *fp = fopen(path, "rb");
  unsigned char lenb[8];
  assert_int_equal(fread(lenb, 1, 8, fp), 8);
  fclose(fp);
  assert_int_equal(lenb[0] % 8, 0);
  mt_st_file *f;
  if (mt_st_open(path, &f, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(mt_st_count(f), 4);
  assert_string_equal(mt_st_metadata(f, "format"), "pt");
  for (int i = 0; i < 4; i++) {
    int k = mt_st_find(f, t[i].name);
    assert_int_equal(k, i);
    const mt_st_info *in = mt_st_info_at(f, k);
    assert_int_equal(in->dtype, t[i].dtype);
    assert_int_equal(in->ndim, t[i].ndim);
    for (int d = 0; d < in->ndim; d++) assert_int_equal(in->shape[d], t[i].shape[d]);
    char buf[64];
    assert_int_equal(mt_st_read(f, k, buf, err, sizeof err), 0);
    assert_memory_equal(buf, t[i].data, mt_st_tensor_bytes(&t[i]));
  }
  mt_st_close(f);

  /* the same tensors sharded (limit 16 bytes: a, then b+c... each file <= 16
   * unless one tensor is bigger) read back identically through the index */
  char sdir[300];
  snprintf(sdir, sizeof sdir, "%s/sharded", g_dir);
  mkdir(sdir, 0755);
  assert_int_equal(mt_st_dir_write(sdir, t, 4, 16, meta, 1, err, sizeof err), 0);
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", sdir);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/model-00001-of-00003.safetensors", sdir);
  assert_int_equal(access(path, F_OK), 0);
  mt_st_dir *d;
  if (mt_st_dir_open(sdir, &d, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(mt_st_dir_count(d), 4);
  for (int i = 0; i < 4; i++) {
    int k = mt_st_dir_find(d, t[i].name);
    assert_true(k >= 0);
    char buf[64];
    assert_int_equal(mt_st_dir_read(d, k, buf, err, sizeof err), 0);
    assert_memory_equal(buf, t[i].data, mt_st_tensor_bytes(&t[i]));
  }
  mt_st_dir_close(d);
  { /* every shard carries the metadata */
    mt_st_file *f0;
    snprintf(path, sizeof path, "%s/model-00001-of-00003.safetensors", sdir);
    if (mt_st_open(path, &f0, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(mt_st_metadata(f0, "format"), "pt");
    mt_st_close(f0);
  }
  /* unsharded directory */
  snprintf(sdir, sizeof sdir, "%s/single", g_dir);
  mkdir(sdir, 0755);
  assert_int_equal(mt_st_dir_write(sdir, t, 4, 0, meta, 1, err, sizeof err), 0);
  if (mt_st_dir_open(sdir, &d, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(mt_st_dir_count(d), 4);
  mt_st_dir_close(d);
  rm_dir();
}

/* A file: 8-byte length `hlen` (or the header's length when hlen < 0), the
 * header text, then data_len zero bytes. */
static void craft(const char *path, const char *header, long long hlen, size_t data_len) {
  FILE *fp = fopen(path, "wb");
  uint64_t n = hlen < 0 ? strlen(header) : (uint64_t)hlen;
  for (int i = 0; i < 8; i++) fputc((int)(n >> (8 * i)) & 0xff, fp);
  fputs(header, fp);
  for (size_t i = 0; i < data_len; i++) fputc(0, fp);
  fclose(fp);
}

static void expect_refused(const char *header, long long hlen, size_t data_len,
                           const char *want) {
  char path[600], err[512] = "";
  snprintf(path, sizeof path, "%s/bad.safetensors", g_dir);
  craft(path, header, hlen, data_len);
  mt_st_file *f = NULL;
  int rc = mt_st_open(path, &f, err, sizeof err);
  if (rc == 0) fail_msg("accepted header %s", header);
  assert_null(f);
  if (!strstr(err, want)) fail_msg("message '%s' lacks '%s'", err, want);
  if (!strstr(err, "bad.safetensors")) fail_msg("message '%s' does not name the file", err);
}

#define T(name, dt, shape, b, e) \
  "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_malformed(void **state) {
  (void)state;
  make_dir();
  char path[600], err[512];
  /* fewer than 8 bytes */
  snprintf(path, sizeof path, "%s/bad.safetensors", g_dir);
  FILE *fp = fopen(path, "wb");
  fputs("abc", fp);
  fclose(fp);
  mt_st_file *f;
  assert_int_equal(mt_st_open(path, &f, err, sizeof err), -1);
  assert_non_null(strstr(err, "too short"));
  expect_refused("{}", 1000, 0, "beyond the end of the file");
  expect_refused("{}", (long long)1 << 40, 0, "above the format's limit");
  expect_refused("{\"a\":", -1, 0, "not valid JSON");
  expect_refused("[1, 2]", -1, 0, "not a JSON object");
  expect_refused("{}  x     ", -1, 0, "bytes after its JSON object");
  expect_refused("{" T("w", "F33", "[2]", 0, 8) "}", -1, 8, "unknown dtype \"F33\"");
  expect_refused("{" T("w", "F32", "[-2]", 0, 8) "}", -1, 8, "'w': \"shape\" is not a list");
  expect_refused("{" T("w", "F32", "[2.5]", 0, 8) "}", -1, 8, "\"shape\" is not a list");
  expect_refused("{" T("w", "F32", "\"2\"", 0, 8) "}", -1, 8, "\"shape\" is not a list");
  expect_refused("{" T("w", "F32", "[2]", 8, 0) "}", -1, 8, "are reversed");
  expect_refused("{" T("w", "F32", "[2]", 0, 8) "}", -1, 4, "beyond the data buffer");
  expect_refused("{" T("w", "F32", "[3]", 0, 8) "}", -1, 8, "needs 12");
  expect_refused("{" T("w", "F32", "[2]", 0, 8) "," T("v", "F32", "[2]", 4, 12) "}", -1, 12,
                 "overlap");
  expect_refused("{" T("w", "F32", "[2]", 0, 8) "," T("v", "F32", "[2]", 12, 20) "}", -1, 20,
                 "belong to no tensor");
  expect_refused("{" T("w", "F32", "[2]", 0, 8) "," T("w", "F32", "[2]", 8, 16) "}", -1, 16,
                 "'w' is listed twice");
  expect_refused("{" T("w", "F32", "[2]", 0, 8) "}", -1, 12, "trailing bytes");
  expect_refused("{\"__metadata__\":{\"format\":1}}", -1, 0, "is not a string");
  expect_refused("{\"__metadata__\":{},\"__metadata__\":{}}", -1, 0, "given twice");
  { /* more metadata keys than header entries (once a heap overflow, found by fuzzing) */
    const char *h = "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\"}}";
    uint64_t hl = strlen(h);
    snprintf(path, sizeof path, "%s/meta.safetensors", g_dir);
    fp = fopen(path, "wb");
    fwrite(&hl, 8, 1, fp);
    fputs(h, fp);
    fclose(fp);
    assert_int_equal(mt_st_open(path, &f, err, sizeof err), 0);
    assert_string_equal(mt_st_metadata(f, "d"), "4");
    mt_st_close(f);
  }
  expect_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", -1, 8, "\"data_offsets\"");
  /* an empty file with a space-padded header is valid */
  craft(path, "{}      ", -1, 0);
  if (mt_st_open(path, &f, err, sizeof err)) fail_msg("padded empty header: %s", err);
  assert_int_equal(mt_st_count(f), 0);
  mt_st_close(f);
  /* a valid file for the index cases */
  char sdir[300], ip[700];
  snprintf(sdir, sizeof sdir, "%s/idx", g_dir);
  mkdir(sdir, 0755);
  float a[2] = {1, 2};
  mt_st_tensor t = {.name = "w", .dtype = MT_ST_F32, .ndim = 1, .shape = {2}, .data = a};
  snprintf(path, sizeof path, "%s/part1.safetensors", sdir);
  assert_int_equal(mt_st_write(path, &t, 1, NULL, 0, err, sizeof err), 0);
  mt_st_tensor t2[2] = {t, t};
  t2[1].name = "v";
  snprintf(path, sizeof path, "%s/part2.safetensors", sdir);
  assert_int_equal(mt_st_write(path, t2, 2, NULL, 0, err, sizeof err), 0);
  snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", sdir);
  const char *bad_index[][2] = {
      {"{\"weight_map\":{\"w\":\"missing.safetensors\"}}", "cannot open"},
      {"{\"weight_map\":{\"w\":\"../x.safetensors\"}}", "not a file name of this directory"},
      {"{\"weight_map\":{\"w\":\"part1.safetensors\",\"v\":\"part1.safetensors\"}}",
       "maps tensor 'v'"},
      {"{\"weight_map\":{\"w\":\"part2.safetensors\"}}", "'v' of"},
      {"{\"weight_map\":{}}", "lists no tensors"},
      {"[]", "\"weight_map\""},
  };
  for (size_t i = 0; i < sizeof bad_index / sizeof *bad_index; i++) {
    if (mt_write_file_synced(ip, bad_index[i][0], strlen(bad_index[i][0]), err, sizeof err))
      fail_msg("%s", err);
    mt_st_dir *d = NULL;
    assert_int_equal(mt_st_dir_open(sdir, &d, err, sizeof err), -1);
    if (!strstr(err, bad_index[i][1])) fail_msg("index %s: message '%s'", bad_index[i][0], err);
  }
  /* ... and a good one */
  const char *good = "{\"metadata\":{\"total_size\":8},\"weight_map\":{\"w\":\"part1.safetensors\"}}";
  assert_int_equal(mt_write_file_synced(ip, good, strlen(good), err, sizeof err), 0);
  mt_st_dir *d = NULL;
  if (mt_st_dir_open(sdir, &d, err, sizeof err)) fail_msg("%s", err);
  mt_st_dir_close(d);
  /* no model.safetensors at all */
  snprintf(sdir, sizeof sdir, "%s/none", g_dir);
  mkdir(sdir, 0755);
  assert_int_equal(mt_st_dir_open(sdir, &d, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.safetensors"));
  rm_dir();
}

static void test_sizes(void **state) {
  (void)state;
  uint64_t b;
  assert_int_equal(mt_st_parse_size("5GB", &b), 0);
  assert_true(b == 5000000000ull);
  assert_int_equal(mt_st_parse_size("2MiB", &b), 0);
  assert_true(b == 2097152ull);
  assert_int_equal(mt_st_parse_size("100", &b), 0);
  assert_true(b == 100);
  assert_int_equal(mt_st_parse_size("5 GB", &b), -1);
  assert_int_equal(mt_st_parse_size("GB", &b), -1);
  assert_int_equal(mt_st_parse_size("-1KB", &b), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
