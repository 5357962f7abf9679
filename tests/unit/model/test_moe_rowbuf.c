/* tests/unit/model/test_moe_rowbuf.c — the grow-only row groups of the MoE
 * buffers (model/moe_rowbuf.h) on the cpu backend: buffers start at rows0
 * (1 element when 0 rows), reserve() grows every buffer of the group to the
 * new row count at once and only upwards, the leading `keep` rows of a
 * buffer survive a growth bit for bit, the allocator's live and peak bytes
 * per category are exactly the sizes at the high-water mark (no buffer is
 * ever held twice), and removal frees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "backends/registry.h"
#include "model/moe_rowbuf.h"
#include "tests/unit/check.h"

static void test_grow_keep(void **state) {
  (void)state;
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 0, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  assert_non_null(be);
  const size_t act0 = be->mem.live[MT_MEM_ACT], ws0 = be->mem.live[MT_MEM_WORKSPACE];
  mt_moe_rowbuf *g = mt_moe_rowbuf_create(be, 0, 100);
  float *a = NULL, *w = NULL;
  int64_t rows_a = 0;
  mt_moe_rowbuf_add(g, (void **)&a, 3, MT_F32, MT_MEM_ACT, &rows_a);
  mt_moe_rowbuf_add(g, (void **)&w, 5, MT_F32, MT_MEM_WORKSPACE, NULL);
  /* 0 rows: one element each */
  assert_int_equal(be->mem.live[MT_MEM_ACT] - act0, 4);
  assert_int_equal(be->mem.live[MT_MEM_WORKSPACE] - ws0, 4);
  mt_moe_rowbuf_reserve(g, 10);
  assert_int_equal(mt_moe_rowbuf_rows(g), 10);
  assert_int_equal(be->mem.live[MT_MEM_ACT] - act0, 10 * 3 * 4);
  assert_int_equal(be->mem.live[MT_MEM_WORKSPACE] - ws0, 10 * 5 * 4);
  for (int i = 0; i < 30; i++) a[i] = (float)i + 0.5f;
  rows_a = 7; /* the set holds 7 live rows */
  mt_moe_rowbuf_reserve(g, 4); /* never shrinks */
  assert_int_equal(mt_moe_rowbuf_rows(g), 10);
  mt_moe_rowbuf_reserve(g, 64);
  assert_int_equal(mt_moe_rowbuf_rows(g), 64);
  for (int i = 0; i < 21; i++) EXPECT_EQ(a[i], (float)i + 0.5f, "kept element %d", i);
  assert_int_equal(be->mem.live[MT_MEM_ACT] - act0, 64 * 3 * 4);
  assert_int_equal(be->mem.live[MT_MEM_WORKSPACE] - ws0, 64 * 5 * 4);
  /* free-then-allocate: the peak is the high-water sizes, not old + new */
  assert_int_equal(be->mem.peak[MT_MEM_ACT] - act0, 64 * 3 * 4);
  assert_int_equal(be->mem.peak[MT_MEM_WORKSPACE] - ws0, 64 * 5 * 4);
  /* a buffer added later gets the current rows */
  float *b = NULL;
  mt_moe_rowbuf_add(g, (void **)&b, 2, MT_F32, MT_MEM_ACT, NULL);
  assert_int_equal(be->mem.live[MT_MEM_ACT] - act0, 64 * 3 * 4 + 64 * 2 * 4);
  mt_moe_rowbuf_reserve(g, 100); /* the worst case is allowed */
  mt_moe_rowbuf_remove(g, (void **)&a);
  mt_moe_rowbuf_remove(g, (void **)&b);
  mt_moe_rowbuf_remove(g, (void **)&w);
  assert_null(a);
  assert_int_equal(be->mem.live[MT_MEM_ACT], act0);
  assert_int_equal(be->mem.live[MT_MEM_WORKSPACE], ws0);
  mt_moe_rowbuf_destroy(g);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_grow_keep)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
