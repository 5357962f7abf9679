/* tests/unit/cuda/test_cuda_table.c — the CUDA backend's op table without a GPU:
 * every entry is set, none is a cpu/ function (no host fallback), and
 * creating the backend on a machine without a usable GPU fails cleanly with
 * a message naming the CUDA error. Built without CUDA: prints SKIP, exit 77. */
#include <stdio.h>

#ifdef MT_HAVE_CUDA
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "backends/registry.h"
#include "cuda/cuda_backend.h"

typedef void (*fn)(void);

static void test_table_complete_no_host_fallback(void **state) {
  (void)state;
  const fn *tab = (const fn *)mt_cuda_backend_ops();
  assert_non_null(tab);
  assert_true(MT_BACKEND_N_OPS >= 37);
  mt_backend_options o = {.device = "cpu", .dtype = MT_F32};
  char err[256] = "";
  mt_backends_process_init(&o);
  mt_backend *cpu = mt_backend_create(&o, err, sizeof err);
  assert_non_null(cpu);
  const fn *ctab = (const fn *)cpu->ops;
  for (size_t i = 0; i < MT_BACKEND_N_OPS; i++) {
    if (!tab[i]) fail_msg("cuda op table entry %zu is NULL", i);
    for (size_t j = 0; j < MT_BACKEND_N_OPS; j++)
      if (tab[i] == ctab[j]) fail_msg("cuda op table entry %zu is cpu entry %zu", i, j);
  }
  mt_backend_destroy(cpu);
}

/* With a GPU this creates a backend (fp32 and bf16); without one creation
 * must fail with a message (no crash). */
static void test_create_or_clean_error(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    mt_backend_options o = {.device = "cuda", .dtype = k ? MT_BF16 : MT_F32};
    char err[512] = "";
    mt_backend *be = mt_backend_create(&o, err, sizeof err);
    if (!be) {
      printf("cuda backend unavailable (expected without a GPU): %s\n", err);
      assert_non_null(strstr(err, "CUDA"));
      continue;
    }
    assert_string_equal(be->name, "cuda");
    assert_int_equal(be->dtype, o.dtype);
    assert_ptr_equal(be->ops, mt_cuda_backend_ops());
    void *a = be->ops->alloc(be, 1000, MT_MEM_ACT);
    void *b = be->ops->alloc(be, 24, MT_MEM_PARAM);
    assert_int_equal(be->mem.live[MT_MEM_ACT], 1000);
    assert_int_equal(be->mem.live[MT_MEM_PARAM], 24);
    be->ops->free(be, a);
    assert_int_equal(be->mem.live[MT_MEM_ACT], 0);
    assert_int_equal(be->mem.peak[MT_MEM_ACT], 1000);
    be->ops->free(be, b);
    assert_int_equal(be->mem.live_total, 0);
    mt_backend_destroy(be);
  }
  mt_backend_options bad = {.device = "cuda", .dtype = MT_I32};
  char err[256] = "";
  assert_null(mt_backend_create(&bad, err, sizeof err));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_complete_no_host_fallback),
      cmocka_unit_test(test_create_or_clean_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
  printf("SKIP: built without CUDA\n");
  return 77;
}

#endif
