/* tests/unit/test_ops.c — every backend op, from the one table of op cases
 * (op_cases.h, ggml's test-backend-ops): fp32 rows on the cpu backend
 * against double-precision loops / finite differences, bf16 rows on the cpu
 * backend with bf16 storage against cpu fp32, and on the cuda
 * backend (fp32 and bf16 storage) against cpu when a GPU is usable (else
 * the cuda column is skipped with a message). Each failure prints the op,
 * the output, the shape, the dtype, the backend and the error. Properties
 * that are not per-op numerics (op table, allocator, RNG, statistics):
 * test_backend_props.c. */
#include "cpu_test_common.h"
#include "op_cases.h"

/* The cuda backends (fp32, bf16 storage), or NULLs with a message. */
static void gpu_backends(mt_backend *gpu[2]) {
  gpu[0] = gpu[1] = NULL;
  for (int k = 0; k < 2; k++) {
    mt_backend_options o = {.device = "cuda", .dtype = k ? MT_BF16 : MT_F32};
    char err[512] = "";
    gpu[k] = mt_backend_create(&o, err, sizeof err);
    if (!gpu[k]) {
      printf("cuda column skipped (%s storage): %s\n", k ? "bf16" : "fp32", err);
      return;
    }
  }
}

static void run_table(const char *prefix) {
  mt_backend *cpu = tc_backend(), *gpu[2];
  mt_backend_options ob = {.device = "cpu", .dtype = MT_BF16};
  char err[256] = "";
  mt_backend *cpu_bf16 = mt_backend_create(&ob, err, sizeof err);
  if (!cpu_bf16) fail_msg("cpu backend with bf16 storage: %s", err);
  assert_int_equal(cpu_bf16->dtype, MT_BF16);
  gpu_backends(gpu);
  int fails = ot_run_table(cpu, cpu_bf16, gpu, prefix);
  for (int k = 0; k < 2; k++)
    if (gpu[k]) mt_backend_destroy(gpu[k]);
  mt_backend_destroy(cpu_bf16);
  mt_backend_destroy(cpu);
  if (fails) fail_msg("%d op case(s) failed (lines above)", fails);
}

/* env MEGATRAIN_TEST_OPS=PREFIX: only the rows whose op starts with it
 * (tests/integration/test_cuda_emu_bugs.sh runs the rows a planted bug
 * reaches). */
static void test_op_cases(void **state) {
  (void)state;
  const char *only = getenv("MEGATRAIN_TEST_OPS");
  run_table(only ? only : "");
}

/* MEGATRAIN_OPENBLAS_CORETYPE=auto re-selects OpenBLAS kernels in the process-wide
 * set-up (mt_backends_process_init, run by tc_backend)
 * (SkylakeX on AVX-512 CPUs); GEMM results must stay correct. Runs last: it
 * changes process-wide OpenBLAS state. */
static void test_gemm_after_coretype_switch(void **state) {
  (void)state;
  setenv("MEGATRAIN_OPENBLAS_CORETYPE", "auto", 1);
  run_table("gemm");
  unsetenv("MEGATRAIN_OPENBLAS_CORETYPE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_op_cases),
      cmocka_unit_test(test_gemm_after_coretype_switch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
