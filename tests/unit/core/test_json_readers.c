/* tests/unit/core/test_json_readers.c — issue 26: every JSON reader refuses what
 * is not JSON and integers it cannot hold exactly, naming the file and the
 * key, through its own entry point (not only core/json, test_json.c):
 * checkpoint metadata.json (mt_dckpt_meta_parse; the CI crash input
 * "step":09007199254740993 and 2^53 + 1 without the zero), the planner's
 * hardware file (mt_hardware_load), a Hugging Face config.json
 * (mt_hf_config_check) and the config (mt_config_load_string). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "checkpoint/dist_checkpoint_internal.h"
#include "config/config.h"
#include "planner/plan.h"
#include "tools/hf_map.h"
#include "tests/unit/config_fixtures.h"

/* err must hold every needle */
static void has_all(const char *err, const char *a, const char *b, const char *c) {
  const char *n[] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (n[i] && !strstr(err, n[i])) fail_msg("message '%s' lacks '%s'", err, n[i]);
}

static void test_checkpoint_metadata(void **state) {
  (void)state;
  const char *step[] = {"09007199254740993", "9007199254740993", "1"};
  const char *want[] = {"leading zero", "beyond 2^53", NULL};
  for (int i = 0; i < 3; i++) {
    char text[512], err[512] = "";
    snprintf(text, sizeof text,
             "{\"format\": \"%s\", \"iteration\": 4, \"consumed_samples\": 32, \"step\":%s, "
             "\"skipped_iters\": 0, \"nan_iters\": 0, \"seed\": 1, \"vocab_size\": 5, "
             "\"has_optimizer\": true}",
             MT_DCKPT_FORMAT, step[i]);
    mt_dckpt_meta m;
    char *cfg = NULL;
    const int rc = mt_dckpt_meta_parse(text, "ck/iter_0000004/metadata.json", &m, &cfg, err,
                                       sizeof err);
    free(cfg);
    if (!want[i]) { /* the control: the same text with a valid step loads */
      if (rc) fail_msg("valid metadata refused: %s", err);
      assert_int_equal(m.step, 1);
      continue;
    }
    assert_int_equal(rc, -1);
    has_all(err, "ck/iter_0000004/metadata.json", want[i], "step");
  }
}

static void test_hardware_file(void **state) {
  (void)state;
  char path[] = "/tmp/mt_test_hw_XXXXXX";
  const int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  const char *bad[] = {"{\"name\": \"x\", \"peak_tflops_bf16\": 0989}",
                       "{\"name\": \"x\", \"gpus_per_node\": 9007199254740993}"};
  const char *want[][2] = {{"leading zero", "peak_tflops_bf16"}, {"beyond 2^53", "gpus_per_node"}};
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(bad[i], f);
    fclose(f);
    mt_hardware hw;
    char err[1024] = "";
    assert_int_not_equal(mt_hardware_load(&hw, path, err, sizeof err), 0);
    has_all(err, path, want[i][0], want[i][1]);
  }
  unlink(path);
}

static void test_hf_config_json(void **state) {
  (void)state;
  mt_config cfg;
  char err[1024];
  if (mt_config_load_string(&cfg, MINIMAL, SRC, NULL, 0, 1, err, sizeof err)) fail_msg("%s", err);
  mt_hf_model m;
  if (mt_hf_model_of(&cfg, &m, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(mt_hf_config_check(&m, "{\"model_type\": \"gpt2\", \"n_layer\": 02}",
                                      "hf/config.json", err, sizeof err),
                   -1);
  has_all(err, "hf/config.json", "leading zero", "n_layer");
  assert_int_equal(mt_hf_config_check(&m, "{\"model_type\": \"gpt2\", \"n_positions\": "
                                          "18446744073709551616}",
                                      "hf/config.json", err, sizeof err),
                   -1);
  has_all(err, "hf/config.json", "beyond 2^53", "n_positions");
  mt_config_free(&cfg);
}

static void test_config(void **state) {
  (void)state;
  char text[1024], err[1024];
  mt_config cfg;
  /* MINIMAL with "train_iters": 010, then 2^53 + 1 */
  const char *iters[] = {"010", "9007199254740993"};
  const char *want[] = {"leading zero", "beyond 2^53"};
  for (int i = 0; i < 2; i++) {
    snprintf(text, sizeof text,
             "{\"model\": {\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
             "\"seq_length\": 32},\n \"training\": {\"train_iters\": %s, \"lr\": 0.1, "
             "\"micro_batch_size\": 2},\n \"data\": {\"data_path\": \"prefix\"}}\n",
             iters[i]);
    assert_int_equal(mt_config_load_string(&cfg, text, SRC, NULL, 0, 1, err, sizeof err), 2);
    has_all(err, SRC, want[i], "training.train_iters");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checkpoint_metadata), cmocka_unit_test(test_hardware_file),
      cmocka_unit_test(test_hf_config_json), cmocka_unit_test(test_config)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
