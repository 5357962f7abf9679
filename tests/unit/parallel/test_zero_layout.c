/* tests/unit/parallel/test_zero_layout.c — parallel/zero.h layout: buckets are cut at
 * multiples of dp inside each segment, only a segment's last bucket is
 * padded, every real element of every segment is owned by exactly one rank,
 * shard buffers are contiguous and equal-sized on every rank, and elements
 * between segments are owned by nobody. (The collectives are exercised by
 * tests/integration/test_zero_*.sh.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/check.h"
#include <stdlib.h>
#include <string.h>

#include "parallel/zero.h"

static void check_layout(const int64_t *bounds, int n_seg, int64_t flat, int64_t bucket, int dp) {
  int *owner = calloc((size_t)flat, sizeof(int));
  int64_t shard_numel = -1;
  for (int r = 0; r < dp; r++) {
    mt_zero_layout L;
    mt_zero_layout_build(&L, bounds, n_seg, flat, bucket, dp, r);
    EXPECT_EQ(L.bucket_size % dp, 0, "dp %d rank %d bucket %lld", dp, r, (long long)L.bucket_size);
    if (shard_numel < 0) shard_numel = L.shard_numel;
    EXPECT_EQ(L.shard_numel, shard_numel, "dp %d rank %d", dp, r); /* equal shards on every rank */
    int64_t pad = 0, expect_shard_off = 0;
    for (int s = 0; s < L.n_seg; s++) {
      const mt_zero_segment *sg = &L.seg[s];
      EXPECT_EQ(sg->flat_start, bounds[2 * s], "dp %d rank %d segment %d", dp, r, s);
      EXPECT_EQ(sg->len, bounds[2 * s + 1] - bounds[2 * s], "dp %d rank %d segment %d", dp, r, s);
      EXPECT_EQ(sg->shard_offset, expect_shard_off, "dp %d rank %d segment %d", dp, r, s);
      for (int b = sg->first_bucket; b < sg->first_bucket + sg->n_buckets; b++) {
        const mt_zero_bucket *k = &L.bkt[b];
        EXPECT_EQ(k->shard_offset, expect_shard_off, "dp %d rank %d segment %d bucket %d", dp, r, s, b);
        expect_shard_off += k->shard_len;
        int64_t plen = k->shard_len * dp;
        EXPECT(plen >= k->len && plen - k->len < dp, "dp %d rank %d segment %d bucket %d: len %lld padded %lld", dp, r, s, b,
               (long long)k->len, (long long)plen);
        if (b < sg->first_bucket + sg->n_buckets - 1) EXPECT_EQ(plen, k->len, "dp %d rank %d segment %d bucket %d", dp, r, s, b);
        pad += plen - k->len;
        int64_t lo, hi;
        mt_zero_owned_range(&L, b, r, &lo, &hi);
        EXPECT(lo <= hi, "dp %d rank %d segment %d bucket %d: owned [%lld, %lld)", dp, r, s, b, (long long)lo, (long long)hi);
        for (int64_t i = lo; i < hi; i++) owner[i]++;
      }
      const mt_zero_bucket *last = &L.bkt[sg->first_bucket + sg->n_buckets - 1];
      EXPECT_EQ(sg->padded_len, sg->len + last->shard_len * dp - last->len, "dp %d rank %d segment %d", dp, r, s);
    }
    EXPECT_EQ(pad, L.padding, "dp %d rank %d", dp, r);
    EXPECT_EQ(expect_shard_off, L.shard_numel, "dp %d rank %d", dp, r);
    mt_zero_layout_free(&L);
  }
  for (int64_t i = 0; i < flat; i++) {
    int in_seg = 0;
    for (int s = 0; s < n_seg; s++) in_seg |= i >= bounds[2 * s] && i < bounds[2 * s + 1];
    EXPECT_EQ(owner[i], in_seg, "dp %d element %lld of %lld", dp, (long long)i, (long long)flat); /* each real element once */
  }
  free(owner);
}

static void test_layouts(void **state) {
  (void)state;
  const int64_t b1[] = {0, 1000};
  const int64_t b3[] = {0, 37, 48, 291, 304, 305};
  for (int dp = 1; dp <= 8; dp++) {
    check_layout(b1, 1, 1000, 0, dp);
    check_layout(b1, 1, 1000, 101, dp);
    check_layout(b3, 3, 320, 17, dp);
    check_layout(b3, 3, 320, 1, dp); /* bucket < dp: rounded up to dp */
    check_layout(b3, 3, 320, 1 << 20, dp);
  }
}

static void test_padding_counts(void **state) {
  (void)state;
  const int64_t b[] = {0, 10, 16, 23};
  mt_zero_layout L;
  mt_zero_layout_build(&L, b, 2, 32, 4, 4, 1); /* buckets: 4,4,2 | 4,3 */
  assert_int_equal(L.n_bkt, 5);
  assert_int_equal(L.padding, 2 + 1);
  assert_int_equal(L.shard_numel, 1 + 1 + 1 + 1 + 1);
  assert_int_equal(L.seg[0].padded_len, 12);
  assert_int_equal(L.seg[1].padded_len, 8);
  assert_int_equal(L.max_bucket_padded, 4);
  int64_t lo, hi;
  mt_zero_owned_range(&L, 2, 1, &lo, &hi); /* bucket [8,10): rank 1 owns element 9 */
  assert_int_equal(lo, 9);
  assert_int_equal(hi, 10);
  mt_zero_owned_range(&L, 2, 3, &lo, &hi); /* rank 3: padding only */
  assert_int_equal(lo, hi);
  mt_zero_layout_free(&L);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layouts),
                                     cmocka_unit_test(test_padding_counts)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
