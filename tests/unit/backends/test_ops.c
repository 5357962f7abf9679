/* tests/unit/backends/test_ops.c — every backend op, from the one table of op cases
 * (op_cases.h, ggml's test-backend-ops): fp32 rows on the cpu backend
 * against double-precision loops / finite differences, bf16 rows on the cpu
 * backend with bf16 storage against cpu fp32, and on the cuda
 * backend (fp32 and bf16 storage) against cpu when a GPU is usable (else
 * the cuda column is skipped with a message). Each failure prints the op,
 * the output, the shape, the dtype, the backend and the error. Properties
 * that are not per-op numerics (op table, allocator, RNG, statistics):
 * test_backend_props.c. Every slot of the op table must have rows in the
 * table (op_slots.h: test_every_slot_has_op_cases). */
#include "tests/unit/cpu_test_common.h"
#include "tests/unit/op_cases.h"
#include "tests/unit/op_slots.h"

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

/* Every slot of mt_backend_ops is mapped (op_slots.h) to op-case rows with
 * a runner, fp32 rows and (T operands) bf16 rows; no row is orphaned. */
static void test_every_slot_has_op_cases(void **state) {
  (void)state;
  int bad = ot_check_slots(ot_slots, OT_N_SLOTS, ot_cases, OT_N_CASES, "FAIL");
  if (bad) fail_msg("%d op-table slot problem(s) (lines above)", bad);
}

/* The check itself fails on each kind of gap: a slot without a map line, an
 * op without rows, a T op without bf16 rows, a row of no slot. */
static void test_slot_check_catches_gaps(void **state) {
  (void)state;
  const char *P = "planted (expected):"; /* not a failure of this run */
  ot_slot slots[OT_N_SLOTS];
  op_case *cases = malloc(sizeof ot_cases);
  size_t ns = 0, nc;
  for (size_t i = 0; i < OT_N_SLOTS; i++)
    if (strcmp(ot_slots[i].slot, "rope_bwd")) slots[ns++] = ot_slots[i];
  assert_int_equal(ns, OT_N_SLOTS - 1);
  assert_true(ot_check_slots(slots, ns, ot_cases, OT_N_CASES, P) >= 1); /* slot unmapped */
  nc = 0;
  for (size_t i = 0; i < OT_N_CASES; i++)
    if (strcmp(ot_cases[i].op, "rope_bwd")) cases[nc++] = ot_cases[i];
  assert_true(ot_check_slots(ot_slots, OT_N_SLOTS, cases, nc, P) >= 1); /* no rows */
  nc = 0;
  for (size_t i = 0; i < OT_N_CASES; i++)
    if (strcmp(ot_cases[i].op, "rmsnorm_fwd") || ot_cases[i].dtype != MT_BF16)
      cases[nc++] = ot_cases[i];
  assert_true(nc < OT_N_CASES);
  assert_true(ot_check_slots(ot_slots, OT_N_SLOTS, cases, nc, P) >= 1); /* no bf16 row */
  memcpy(cases, ot_cases, sizeof ot_cases);
  cases[0].op = "gemm_unmapped";
  assert_true(ot_check_slots(ot_slots, OT_N_SLOTS, cases, OT_N_CASES, P) >= 1); /* orphan row */
  free(cases);
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
      cmocka_unit_test(test_every_slot_has_op_cases),
      cmocka_unit_test(test_slot_check_catches_gaps),
      cmocka_unit_test(test_op_cases),
      cmocka_unit_test(test_gemm_after_coretype_switch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
