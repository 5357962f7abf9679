/* tests/unit/checkpoint/test_checkpoint.c — checkpoint/legacy_format.h reader on one rank
 * (no world group): a save/load round trip is bitwise, and a truncated
 * file, a flipped byte (bad CRC), a tensor whose name or shape differs from
 * the model and a missing "latest" file are each refused with a message
 * naming the problem, leaving the optimizer's buffers untouched. Also the
 * CRC-framed helper files (mt_ckpt_write_with_crc / read_with_crc). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "backends/registry.h"
#include "core/fileio.h"
#include "checkpoint/legacy_reader.h"
#include "checkpoint/legacy_records.h"
#include "checkpoint/legacy_zero.h"
#include "tests/support/legacy_writer.h"

typedef struct {
  mt_backend *be;
  mt_param_list pl;
  float *param, *grad;
  mt_adamw opt;
} model;

/* A two-tensor model; w_cols changes the weight's shape, w_name its name. */
static void model_init(model *md, const char *w_name, int64_t w_cols, float salt) {
  memset(md, 0, sizeof *md);
  mt_backend_options o = {.device = "cpu", .dtype = MT_F32};
  char err[256];
  mt_backends_process_init(&o);
  md->be = mt_backend_create(&o, err, sizeof err);
  if (!md->be) fail_msg("cpu backend: %s", err);
  mt_params_add(&md->pl, w_name, 4, w_cols, 4, w_cols, 0, 0, MT_INIT_NORMAL, 0, 0);
  mt_params_add(&md->pl, "b", 1, 6, 1, 6, 0, 0, MT_INIT_ZEROS, 1, 0);
  size_t bytes = (size_t)md->pl.numel * sizeof(float);
  md->param = md->be->ops->alloc(md->be, bytes, MT_MEM_PARAM);
  md->grad = md->be->ops->alloc(md->be, bytes, MT_MEM_GRAD);
  mt_adamw_init(&md->opt, md->be, &md->pl, md->param, md->grad, 0.9f, 0.95f, 1e-8f, 0.1f);
  for (int64_t k = 0; k < md->pl.numel; k++) {
    md->param[k] = salt + (float)k;
    md->opt.m[k] = salt * 2 + (float)k;
    md->opt.v[k] = salt * 3 + (float)k;
  }
  md->opt.step = (int64_t)salt;
}

static void model_free(model *md) {
  mt_adamw_free(&md->opt);
  md->be->ops->free(md->be, md->param);
  md->be->ops->free(md->be, md->grad);
  mt_params_free(&md->pl);
  mt_backend_destroy(md->be);
}

static const mt_ckpt_layout k_layout = {.tp_rank = 0, .pp_rank = 0, .pp_size = 1, .writer = 1};
static char g_dir[256];

static void save_reference(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/mt_test_ckpt_XXXXXX");
  if (!mkdtemp(g_dir)) fail_msg("mkdtemp failed");
  model md;
  model_init(&md, "w", 6, 7.0f);
  mt_ckpt_state st = {.iteration = 12, .consumed_samples = 96, .skipped_iters = 1, .nan_iters = 2, .seed = 1234};
  char err[512] = "";
  if (mt_checkpoint_save(g_dir, &st, "{}", &md.opt, &k_layout, err, sizeof err) != 0) fail_msg("save: %s", err);
  model_free(&md);
}

static void bin_path(char *out, size_t n) {
  snprintf(out, n, "%s/iter_0000012/mp_rank_00/model_optim_rng.bin", g_dir);
}

/* Load into a fresh model; expect failure with `needle` in the message and
 * the buffers unchanged, or success (needle NULL). */
static void load_expect(const char *w_name, int64_t w_cols, const char *needle) {
  model md;
  model_init(&md, w_name, w_cols, 1.0f);
  size_t bytes = (size_t)md.pl.numel * sizeof(float);
  float *p0 = malloc(bytes), *m0 = malloc(bytes);
  memcpy(p0, md.param, bytes);
  memcpy(m0, md.opt.m, bytes);
  mt_ckpt_state st = {0};
  char err[1024] = "";
  int rc = mt_checkpoint_load(g_dir, &st, &md.opt, &k_layout, err, sizeof err);
  if (needle) {
    if (rc == 0) fail_msg("load succeeded, want an error containing '%s'", needle);
    if (!strstr(err, needle)) fail_msg("error '%s' does not mention '%s'", err, needle);
    printf("refused as expected: %s\n", err);
    assert_memory_equal(md.param, p0, bytes);
    assert_memory_equal(md.opt.m, m0, bytes);
    assert_int_equal(md.opt.step, 1);
  } else {
    if (rc != 0) fail_msg("load failed: %s", err);
    model ref;
    model_init(&ref, "w", 6, 7.0f);
    for (int i = 0; i < md.pl.n; i++) { /* tensors only: alignment padding is not saved */
      const mt_param *p = &md.pl.p[i];
      size_t off = (size_t)p->offset, nb = (size_t)p->numel * sizeof(float);
      if (memcmp(md.param + off, ref.param + off, nb) || memcmp(md.opt.m + off, ref.opt.m + off, nb) ||
          memcmp(md.opt.v + off, ref.opt.v + off, nb))
        fail_msg("tensor '%s' [%lld elements] differs after the round trip", p->name, (long long)p->numel);
    }
    assert_int_equal(md.opt.step, 7);
    assert_int_equal(st.iteration, 12);
    assert_int_equal(st.consumed_samples, 96);
    assert_int_equal(st.skipped_iters, 1);
    assert_int_equal(st.nan_iters, 2);
    assert_int_equal(st.seed, 1234);
    model_free(&ref);
  }
  free(p0), free(m0);
  model_free(&md);
}

static unsigned char *slurp(const char *path, size_t *n) {
  int e = 0;
  unsigned char *d = (unsigned char *)mt_read_file(path, (size_t)1 << 30, n, &e);
  if (!d) fail_msg("cannot read %s: errno %d", path, e);
  return d;
}

static void spit(const char *path, const unsigned char *d, size_t n) {
  char err[512];
  if (mt_write_file_synced(path, d, n, err, sizeof err) != 0) fail_msg("%s", err);
}

static void test_round_trip(void **state) {
  (void)state;
  load_expect("w", 6, NULL);
}

static void test_truncated_and_flipped(void **state) {
  (void)state;
  char path[512];
  bin_path(path, sizeof path);
  size_t n;
  unsigned char *orig = slurp(path, &n);
  spit(path, orig, n / 2);
  load_expect("w", 6, "truncated");
  spit(path, orig, 10);
  load_expect("w", 6, "truncated");
  unsigned char *flip = malloc(n);
  memcpy(flip, orig, n);
  flip[n / 2] ^= 0x10;
  spit(path, flip, n);
  load_expect("w", 6, "checksum mismatch");
  spit(path, orig, n);
  load_expect("w", 6, NULL);
  free(flip), free(orig);
}

static void test_wrong_name_or_shape(void **state) {
  (void)state;
  load_expect("w_other", 6, "checkpoint tensor 'w' does not exist");
  load_expect("w", 7, "checkpoint tensor 'w' has shape [4, 6]");
}

static void test_missing_latest(void **state) {
  (void)state;
  char latest[512], moved[520];
  snprintf(latest, sizeof latest, "%s/latest_checkpointed_iteration.txt", g_dir);
  snprintf(moved, sizeof moved, "%s.bak", latest);
  assert_int_equal(mt_checkpoint_latest(g_dir), 12);
  assert_int_equal(rename(latest, moved), 0);
  assert_int_equal(mt_checkpoint_latest(g_dir), -1);
  load_expect("w", 6, "no checkpoint to load");
  assert_int_equal(rename(moved, latest), 0);
}

static void test_crc_files(void **state) {
  (void)state;
  char path[512], err[512] = "";
  snprintf(path, sizeof path, "%s/blob.bin", g_dir);
  const char payload[] = "megatrain crc payload";
  assert_int_equal(mt_ckpt_write_with_crc(path, payload, sizeof payload, err, sizeof err), 0);
  size_t n = 0;
  char *back = mt_ckpt_read_with_crc(path, &n, err, sizeof err);
  assert_non_null(back);
  assert_int_equal(n, sizeof payload);
  assert_memory_equal(back, payload, sizeof payload);
  free(back);
  size_t fn;
  unsigned char *raw = slurp(path, &fn);
  raw[3] ^= 1;
  spit(path, raw, fn);
  assert_null(mt_ckpt_read_with_crc(path, &n, err, sizeof err));
  if (!strstr(err, "checksum mismatch")) fail_msg("flipped byte: error '%s'", err);
  raw[3] ^= 1;
  spit(path, raw, fn - 2);
  assert_null(mt_ckpt_read_with_crc(path, &n, err, sizeof err));
  if (!strstr(err, "truncated") && !strstr(err, "checksum")) fail_msg("truncated: error '%s'", err);
  snprintf(path, sizeof path, "%s/does-not-exist.bin", g_dir);
  assert_null(mt_ckpt_read_with_crc(path, &n, err, sizeof err));
  if (!strstr(err, "does-not-exist.bin")) fail_msg("missing file: error '%s'", err);
  free(raw);
}

static int group_setup(void **state) {
  (void)state;
  save_reference();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),         cmocka_unit_test(test_truncated_and_flipped),
      cmocka_unit_test(test_wrong_name_or_shape), cmocka_unit_test(test_missing_latest),
      cmocka_unit_test(test_crc_files),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
