/* tests/fuzz/fuzz_hw.c — libFuzzer target: the planner's hardware-file
 * reader (planner/plan_hw.c mt_hardware_load) from arbitrary bytes written
 * to a file under /dev/shm (or $TMPDIR). A file that loads must give
 * positive numbers and efficiency fractions <= 1 (what the reader promises
 * the planner). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_scratch.h"
#include "planner/plan.h"

static char g_path[300];

static void cleanup(void) { unlink(g_path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_scratch(g_path, sizeof g_path, "fuzz_hw", ".json");
  atexit(cleanup);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *f = fopen(g_path, "wb");
  if (!f) abort();
  if (size) fwrite(data, 1, size, f);
  fclose(f);
  mt_hardware hw;
  char err[1024];
  if (mt_hardware_load(&hw, g_path, err, sizeof err) == 0) {
    if (!(hw.peak_tflops_bf16 > 0 && hw.hbm_gib > 0 && hw.gpus_per_node > 0 &&
          hw.gemm_eff_max > 0 && hw.gemm_eff_max <= 1 && hw.hbm_eff <= 1 && hw.link_eff <= 1 &&
          hw.reserved_gib >= 0))
      abort();
  }
  return 0;
}
