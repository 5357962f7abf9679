/* tests/unit/parallel/test_pp_schedule.c — the pipeline schedule generator
 * (parallel/pipeline.c: mt_pp_schedule_1f1b for v = 1,
 * mt_pp_schedule_interleaved for v > 1) for p in {1,2,4,8}, v in {1,2,4}, m in {p, 2p, 8, 32}:
 *   - every (chunk, micro-batch) runs exactly one forward and one backward,
 *     the forward first;
 *   - warm-up / steady / cool-down counts follow Megatron's formulas;
 *   - the whole pipeline runs to completion when simulated with blocking
 *     receives and non-blocking sends (what mt_pp_run does): every receive
 *     finds its matching send, in order, so no deadlock is possible
 *     (overlap_p2p_comm only posts receives earlier, without blocking, and
 *     waits at the same points);
 *   - peak micro-batches in flight: min(p - r, m) for 1F1B;
 *   - invalid combinations (interleaved with m % p != 0) are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/check.h"

#include "parallel/pipeline.h"

static void check_one(int p, int v, int m) {
  char err[256];
  mt_pp_schedule *s = calloc((size_t)p, sizeof *s);
  for (int r = 0; r < p; r++) {
    int built = v > 1 ? mt_pp_schedule_interleaved(&s[r], p, v, m, r, 0, err, sizeof err)
                      : mt_pp_schedule_1f1b(&s[r], p, m, r, 0, err, sizeof err);
    if (built != 0)
      fail_msg("p=%d v=%d m=%d r=%d: %s", p, v, m, r, err);
    const mt_pp_schedule *q = &s[r];
    EXPECT_EQ(q->n_actions, 2 * m * v, "p=%d v=%d m=%d r=%d", p, v, m, r);
    int warm_expected;
    if (v == 1) warm_expected = p - r - 1 < m ? p - r - 1 : m;
    else if (m == p) warm_expected = m * v;
    else {
      warm_expected = (p - r - 1) * 2 + (v - 1) * p;
      if (warm_expected > m * v) warm_expected = m * v;
    }
    EXPECT_EQ(q->n_warmup, warm_expected, "p=%d v=%d m=%d r=%d", p, v, m, r);
    EXPECT_EQ(q->n_steady, m * v - warm_expected, "p=%d v=%d m=%d r=%d", p, v, m, r);
    EXPECT_EQ(q->n_cooldown, warm_expected, "p=%d v=%d m=%d r=%d", p, v, m, r);
    /* one F and one B per (chunk, mb), F before B; in-flight peak */
    int *state = calloc((size_t)(m * v), sizeof(int));
    int in_flight = 0, peak = 0;
    for (int i = 0; i < q->n_actions; i++) {
      const mt_pp_action *a = &q->actions[i];
      EXPECT(a->chunk >= 0 && a->chunk < v && a->mb >= 0 && a->mb < m, "p=%d v=%d m=%d r=%d action %d: chunk %d mb %d", p, v,
             m, r, i, a->chunk, a->mb);
      int *st = &state[a->mb * v + a->chunk];
      if (a->fwd) {
        EXPECT_EQ(*st, 0, "p=%d v=%d m=%d r=%d action %d: F of chunk %d mb %d", p, v, m, r, i, a->chunk, a->mb);
        *st = 1;
        if (++in_flight > peak) peak = in_flight;
      } else {
        EXPECT_EQ(*st, 1, "p=%d v=%d m=%d r=%d action %d: B of chunk %d mb %d", p, v, m, r, i, a->chunk, a->mb);
        *st = 2;
        in_flight--;
      }
    }
    for (int k = 0; k < m * v; k++) EXPECT_EQ(state[k], 2, "p=%d v=%d m=%d r=%d (mb, chunk) index %d", p, v, m, r, k);
    if (v == 1) EXPECT_EQ(peak, p - r < m ? p - r : m, "p=%d v=%d m=%d r=%d in-flight peak", p, v, m, r);
    free(state);
  }
  /* Simulation: each stage executes its actions in order; a forward that has
   * a previous stage needs that stage's forward of (peer chunk, mb) done; a
   * backward that has a next stage needs the next stage's backward done.
   * Sends never block. Progress must reach the end. */
  int *pos = calloc((size_t)p, sizeof(int));
  char *fdone = calloc((size_t)(p * v * m), 1), *bdone = calloc((size_t)(p * v * m), 1);
#define IDX(r, c, mb) (((r) * v + (c)) * m + (mb))
  int remaining = 0;
  for (int r = 0; r < p; r++) remaining += s[r].n_actions;
  while (remaining > 0) {
    int progressed = 0;
    for (int r = 0; r < p; r++) {
      while (pos[r] < s[r].n_actions) {
        const mt_pp_action *a = &s[r].actions[pos[r]];
        int pc, ready = 1;
        if (a->fwd) {
          int prev = mt_pp_prev_stage(p, v, r, a->chunk, &pc);
          if (prev >= 0) ready = fdone[IDX(prev, pc, a->mb)];
        } else {
          int next = mt_pp_next_stage(p, v, r, a->chunk, &pc);
          if (next >= 0) ready = bdone[IDX(next, pc, a->mb)];
          else ready = fdone[IDX(r, a->chunk, a->mb)];
        }
        if (!ready) break;
        (a->fwd ? fdone : bdone)[IDX(r, a->chunk, a->mb)] = 1;
        pos[r]++;
        remaining--;
        progressed = 1;
      }
    }
    if (!progressed) fail_msg("p=%d v=%d m=%d: the schedule deadlocks", p, v, m);
  }
#undef IDX
  free(pos);
  free(fdone);
  free(bdone);
  for (int r = 0; r < p; r++) mt_pp_schedule_free(&s[r]);
  free(s);
}

static void test_schedules(void **state) {
  (void)state;
  const int ps[] = {1, 2, 4, 8}, vs[] = {1, 2, 4};
  int checked = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      int p = ps[i], v = vs[j];
      int ms[] = {p, 2 * p, 8, 32};
      for (int k = 0; k < 4; k++) {
        if (v > 1 && ms[k] % p != 0) continue;
        check_one(p, v, ms[k]);
        checked++;
      }
    }
  print_message("%d (p, v, m) combinations checked\n", checked);
}

static void test_invalid(void **state) {
  (void)state;
  mt_pp_schedule s;
  char err[256];
  assert_int_equal(mt_pp_schedule_interleaved(&s, 4, 2, 6, 0, 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "multiple"));
  assert_int_equal(mt_pp_schedule_1f1b(&s, 2, 0, 0, 0, err, sizeof err), -1);
  assert_int_equal(mt_pp_schedule_interleaved(&s, 4, 1, 8, 0, 0, err, sizeof err), -1);
  /* forward-only: m*v forwards */
  assert_int_equal(mt_pp_schedule_interleaved(&s, 4, 2, 8, 1, 1, err, sizeof err), 0);
  assert_int_equal(s.n_actions, 16);
  mt_pp_schedule_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schedules),
      cmocka_unit_test(test_invalid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
