/* tests/unit/data/test_data_np_random.c — data/np_random.h against values
 * printed by Debian's numpy 1.24 (python3-numpy):
 *   r = numpy.random.RandomState(1234); r.bytes(12) -> three 32-bit draws
 *   numpy.random.RandomState(1234).randint(0, 2**40) (64-bit draws)
 *   RandomState(7).shuffle(numpy.arange(10, dtype=numpy.int32))
 *   RandomState(42).shuffle(numpy.arange(100000)): elements 0, 1, 99999
 * tests/integration/test_data_megatron_order.sh compares more with numpy
 * itself when it is installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "data/np_random.h"

static void test_mt19937(void **state) {
  (void)state;
  mt_np_random r;
  mt_np_random_seed(&r, 1234);
  assert_int_equal(mt_np_random_u32(&r), 822569775u);
  assert_int_equal(mt_np_random_u32(&r), 2137449171u);
  assert_int_equal(mt_np_random_u32(&r), 2671936806u);
  mt_np_random_seed(&r, 1234); /* randint(0, 2**40): next_uint64 & mask, high word first */
  assert_int_equal(mt_np_random_u64(&r) & ((1ull << 40) - 1), 204000912083ull);
}

static void test_shuffle(void **state) {
  (void)state;
  mt_np_random r;
  int32_t a[10];
  const int32_t want[10] = {8, 5, 0, 2, 1, 9, 7, 3, 6, 4};
  for (int i = 0; i < 10; i++) a[i] = i;
  mt_np_random_seed(&r, 7);
  mt_np_shuffle_i32(&r, a, 10);
  for (int i = 0; i < 10; i++) assert_int_equal(a[i], want[i]);
  int64_t *b = malloc(100000 * sizeof(int64_t));
  for (int i = 0; i < 100000; i++) b[i] = i;
  mt_np_random_seed(&r, 42);
  mt_np_shuffle_i64(&r, b, 100000);
  assert_int_equal(b[0], 75721);
  assert_int_equal(b[1], 80184);
  assert_int_equal(b[99999], 15795);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_mt19937), cmocka_unit_test(test_shuffle)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
