/* tests/unit/model/test_cp_layout.c — the context-parallel token layout and ring
 * schedule (model/context_parallel.c), pure functions:
 *   - over cp in {1,2,3,4,8} and chunk lengths c in {1,2,3,5}, the ranks'
 *     local rows map to global positions that cover 0..s-1 exactly once;
 *     rank r holds chunks r and 2cp-1-r in that order;
 *   - mt_cp_runs splits every sequence-parallel shard (tp dividing 2c,
 *     odd tp included, whose shards straddle the two chunks) into runs of
 *     consecutive global positions that reproduce mt_cp_global_pos;
 *   - the ring schedule: over the cp steps each rank computes every
 *     (query, key) pair with kpos <= qpos exactly once and never a block
 *     entirely in the future; every step has 2c^2 visible query-key pairs
 *     (+ c on the diagonal at step 0): all ranks equal at every step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/check.h"

#include "model/context_parallel.h"

static void test_positions(void **state) {
  (void)state;
  const int cps[] = {1, 2, 3, 4, 8}, cs[] = {1, 2, 3, 5};
  for (size_t a = 0; a < sizeof cps / sizeof *cps; a++)
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
      const int cp = cps[a], c = cs[k];
      const int64_t s = 2 * cp * c;
      char *seen = calloc((size_t)s, 1);
      for (int r = 0; r < cp; r++) {
        mt_cp_layout L = mt_cp_layout_make(s, cp, r);
        EXPECT_EQ(mt_cp_local_len(&L), s / cp, "cp=%d c=%d r=%d", cp, c, r);
        for (int64_t i = 0; i < s / cp; i++) {
          int64_t p = mt_cp_global_pos(&L, i);
          EXPECT(p >= 0 && p < s && !seen[p], "cp=%d c=%d r=%d row %lld", cp, c, r, (long long)i);
          seen[p] = 1;
          if (cp > 1) {
            int64_t chunk = i < c ? r : 2 * cp - 1 - r;
            EXPECT_EQ(p, chunk * c + i % c, "cp=%d c=%d r=%d row %lld", cp, c, r, (long long)i);
          } else {
            EXPECT_EQ(p, i, "cp=1 c=%d row %lld", c, (long long)i);
          }
        }
      }
      free(seen);
    }
}

static void test_runs(void **state) {
  (void)state;
  const int cps[] = {1, 2, 3, 4}, cs[] = {2, 3, 6};
  int straddled = 0;
  for (size_t a = 0; a < sizeof cps / sizeof *cps; a++)
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++)
      for (int tp = 1; tp <= 12; tp++) {
        const int cp = cps[a], c = cs[k];
        const int64_t s = 2 * cp * c, sloc = s / cp;
        if (sloc % tp) continue;
        const int64_t sl = sloc / tp;
        for (int r = 0; r < cp; r++)
          for (int t = 0; t < tp; t++) {
            mt_cp_layout L = mt_cp_layout_make(s, cp, r);
            mt_cp_run run[2];
            int n = mt_cp_runs(&L, t * sl, sl, run);
            EXPECT(n == 1 || n == 2, "cp=%d c=%d tp=%d", cp, c, tp);
            straddled += n == 2;
            int64_t row = t * sl;
            for (int j = 0; j < n; j++) {
              EXPECT_EQ(run[j].row, row, "cp=%d c=%d tp=%d r=%d t=%d run %d", cp, c, tp, r, t, j);
              for (int64_t q = 0; q < run[j].n; q++)
                EXPECT_EQ(run[j].pos + q, mt_cp_global_pos(&L, row + q),
                          "cp=%d c=%d tp=%d r=%d t=%d run %d", cp, c, tp, r, t, j);
              row += run[j].n;
            }
            EXPECT_EQ(row, (t + 1) * sl, "cp=%d c=%d tp=%d r=%d t=%d", cp, c, tp, r, t);
          }
      }
  EXPECT(straddled > 0, "%s", "no case straddled the two chunks");
}

static void test_ring(void **state) {
  (void)state;
  for (int cp = 2; cp <= 8; cp++) {
    const int c = 3;
    const int64_t s = 2 * cp * c;
    for (int r = 0; r < cp; r++) {
      mt_cp_layout L = mt_cp_layout_make(s, cp, r);
      /* count[q][k] over local query rows q and global key positions k */
      int *count = calloc((size_t)(2 * c * s), sizeof(int));
      for (int i = 0; i < cp; i++) {
        const int src = (r - i + cp) % cp;
        mt_cp_layout S = mt_cp_layout_make(s, cp, src);
        int h[2], full[2];
        int n = mt_cp_ring_step(&L, i, h, full);
        int64_t area = 0, visible = 0;
        for (int j = 0; j < n; j++) {
          const int sk = full[j] ? 2 * c : c;
          area += (int64_t)c * sk;
          for (int q = 0; q < c; q++) {
            int64_t qrow = h[j] * c + q, qp = mt_cp_global_pos(&L, qrow);
            for (int kk = 0; kk < sk; kk++) {
              int64_t kp = mt_cp_global_pos(&S, kk);
              if (kp <= qp) count[qrow * s + kp]++, visible++;
            }
          }
        }
        /* balance: 2c^2 visible pairs per step (+ the c diagonal ones at step 0);
         * the blocks computed hold no more than the diagonal's masked half */
        EXPECT_EQ(visible, 2 * c * c + (i == 0 ? c : 0), "cp=%d r=%d step %d", cp, r, i);
        EXPECT_EQ(area, i == 0 ? 3 * c * c : 2 * c * c, "cp=%d r=%d step %d", cp, r, i);
      }
      for (int64_t q = 0; q < 2 * c; q++)
        for (int64_t k = 0; k < s; k++)
          EXPECT_EQ(count[q * s + k], k <= mt_cp_global_pos(&L, q) ? 1 : 0,
                    "cp=%d r=%d q row %lld key %lld", cp, r, (long long)q, (long long)k);
      free(count);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_runs),
      cmocka_unit_test(test_ring),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
