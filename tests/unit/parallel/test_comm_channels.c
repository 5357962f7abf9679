/* tests/unit/parallel/test_comm_channels.c — the NCCL engine's tagged-p2p channel
 * bookkeeping, checked without a GPU (parallel/comm_nccl_p2p.c):
 *   - mt_nccl_channel_slot: ring neighbours only, one distinct slot per
 *     (neighbour side, direction, tag parity), within mt_nccl_channel_count;
 *     sender and receiver agree on the channel (the id exchange pairs the
 *     sender's send block towards the receiver with the receiver's receive
 *     block from the sender, parity kept);
 *   - the pipeline (parallel/pipeline.c schedules and mt_pp_tag): on every
 *     channel (sender, receiver, tag & 1) the receiver posts its receives in
 *     the order the sender posts its sends, and each pair carries the same
 *     (tag, chunk, micro-batch) — so FIFO matching without tags is exact —
 *     for 1F1B and interleaved, p in {2,3,4,8}, v in {1,2,3}, several m. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/check.h"

#include "parallel/comm_impl.h"
#include "parallel/pipeline.h"

static void test_slots(void **state) {
  (void)state;
  assert_int_equal(mt_nccl_channel_count(1), 0);
  assert_int_equal(mt_nccl_channel_count(2), 4);
  assert_int_equal(mt_nccl_channel_count(3), 8);
  for (int n = 1; n <= 9; n++)
    for (int r = 0; r < n; r++) {
      int used[8] = {0};
      for (int q = 0; q < n; q++)
        for (int snd = 0; snd < 2; snd++)
          for (int tag = 0; tag < 6; tag++) {
            int k = mt_nccl_channel_slot(n, r, q, snd, tag);
            int nb = n >= 2 && q != r && (q == (r + 1) % n || q == (r + n - 1) % n);
            EXPECT(nb ? k >= 0 : k == -1, "n %d rank %d peer %d send %d tag %d: slot %d", n, r, q,
                   snd, tag, k);
            if (k < 0) continue;
            EXPECT(k < mt_nccl_channel_count(n), "n %d rank %d peer %d: slot %d", n, r, q, k);
            EXPECT_EQ((k >> 1) & 1, snd, "n %d rank %d peer %d tag %d", n, r, q, tag);
            EXPECT_EQ(k & 1, tag & 1, "n %d rank %d peer %d send %d", n, r, q, snd);
            /* the side block names the peer: 0 = next, 1 = prev */
            EXPECT_EQ(k / 4 == 0 ? (r + 1) % n : (r + n - 1) % n, q, "n %d rank %d slot %d", n, r, k);
            used[k] |= 1 << (tag & 1);
            /* the other end's view: the same parity, the other direction,
             * and its block for this rank */
            int k2 = mt_nccl_channel_slot(n, q, r, !snd, tag);
            EXPECT(k2 >= 0 && (k2 & 1) == (k & 1) && ((k2 >> 1) & 1) == !snd, "n %d %d<->%d", n,
                   r, q);
            EXPECT_EQ(k2 / 4 == 0 ? (q + 1) % n : (q + n - 1) % n, r, "n %d %d<->%d", n, r, q);
          }
      for (int k = 0; k < mt_nccl_channel_count(n); k++)
        EXPECT(used[k], "n %d rank %d: slot %d never used", n, r, k);
    }
  assert_int_equal(mt_nccl_channel_slot(4, 0, 0, 1, 0), -1);
  assert_int_equal(mt_nccl_channel_slot(4, 0, 2, 1, 0), -1);
  assert_int_equal(mt_nccl_channel_slot(4, 0, 5, 1, 0), -1);
}

/* One message as seen on a channel. */
typedef struct {
  int tag, chunk, mb; /* chunk: at the receiver */
} msg;

typedef struct {
  msg *m;
  int n, cap;
} fifo;

static void push(fifo *f, int tag, int chunk, int mb) {
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 16;
    f->m = realloc(f->m, sizeof(msg) * (size_t)f->cap);
  }
  f->m[f->n++] = (msg){tag, chunk, mb};
}

/* channel (sender, receiver, parity) -> index in a p x p x 2 table */
#define CH(s, r, par) (((s) * p + (r)) * 2 + (par))

static void check_pipeline(int p, int v, int m) {
  char err[256];
  fifo *sent = calloc((size_t)(p * p * 2), sizeof(fifo));
  fifo *recvd = calloc((size_t)(p * p * 2), sizeof(fifo));
  for (int r = 0; r < p; r++) {
    mt_pp_schedule s;
    int built = v > 1 ? mt_pp_schedule_interleaved(&s, p, v, m, r, 0, err, sizeof err)
                      : mt_pp_schedule_1f1b(&s, p, m, r, 0, err, sizeof err);
    if (built != 0) fail_msg("p=%d v=%d m=%d r=%d: %s", p, v, m, r, err);
    /* mt_pp_run's posting order: per action, the receive before compute,
     * the send after it. With overlap_p2p_comm the receive of action i + 1
     * is posted during action i, before its compute and before action i's
     * send: on each channel the receives still come in action order (the
     * receives and the sends of one rank use different channels), so the
     * sequences checked here are those of both modes. */
    for (int i = 0; i < s.n_actions; i++) {
      const mt_pp_action *a = &s.actions[i];
      int pc, prev, next;
      if (a->fwd) {
        if ((prev = mt_pp_prev_stage(p, v, r, a->chunk, &pc)) >= 0) {
          int tag = mt_pp_tag(v, a->chunk, a->mb, 0);
          EXPECT(mt_nccl_channel_slot(p, r, prev, 0, tag) >= 0, "p=%d r=%d prev %d", p, r, prev);
          push(&recvd[CH(prev, r, tag & 1)], tag, a->chunk, a->mb);
        }
        if ((next = mt_pp_next_stage(p, v, r, a->chunk, &pc)) >= 0) {
          int tag = mt_pp_tag(v, pc, a->mb, 0);
          EXPECT(mt_nccl_channel_slot(p, r, next, 1, tag) >= 0, "p=%d r=%d next %d", p, r, next);
          push(&sent[CH(r, next, tag & 1)], tag, pc, a->mb);
        }
      } else {
        if ((next = mt_pp_next_stage(p, v, r, a->chunk, &pc)) >= 0) {
          int tag = mt_pp_tag(v, a->chunk, a->mb, 1);
          EXPECT(mt_nccl_channel_slot(p, r, next, 0, tag) >= 0, "p=%d r=%d next %d", p, r, next);
          push(&recvd[CH(next, r, tag & 1)], tag, a->chunk, a->mb);
        }
        if ((prev = mt_pp_prev_stage(p, v, r, a->chunk, &pc)) >= 0) {
          int tag = mt_pp_tag(v, pc, a->mb, 1);
          EXPECT(mt_nccl_channel_slot(p, r, prev, 1, tag) >= 0, "p=%d r=%d prev %d", p, r, prev);
          push(&sent[CH(r, prev, tag & 1)], tag, pc, a->mb);
        }
      }
    }
    mt_pp_schedule_free(&s);
  }
  int messages = 0;
  for (int c = 0; c < p * p * 2; c++) {
    EXPECT_EQ(sent[c].n, recvd[c].n, "p=%d v=%d m=%d channel %d->%d parity %d", p, v, m,
              c / 2 / p, c / 2 % p, c % 2);
    for (int i = 0; i < sent[c].n; i++) {
      const msg *a = &sent[c].m[i], *b = &recvd[c].m[i];
      EXPECT(a->tag == b->tag && a->chunk == b->chunk && a->mb == b->mb,
             "p=%d v=%d m=%d channel %d->%d parity %d message %d: sent tag %d, received tag %d", p,
             v, m, c / 2 / p, c / 2 % p, c % 2, i, a->tag, b->tag);
    }
    messages += sent[c].n;
    free(sent[c].m);
    free(recvd[c].m);
  }
  /* every (chunk, mb) boundary but the model's ends crosses once each way */
  EXPECT_EQ(messages, 2 * m * (p * v - 1), "p=%d v=%d m=%d", p, v, m);
  free(sent);
  free(recvd);
}

static void test_pipeline_fifo(void **state) {
  (void)state;
  const int ps[] = {2, 3, 4, 8}, vs[] = {1, 2, 3};
  int checked = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      int p = ps[i], v = vs[j];
      const int ms[] = {p, 2 * p, 3 * p, 8, 13};
      for (int k = 0; k < 5; k++) {
        if ((v > 1 && ms[k] % p != 0)) continue;
        check_pipeline(p, v, ms[k]);
        checked++;
      }
    }
  print_message("%d (p, v, m) combinations checked\n", checked);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slots),
      cmocka_unit_test(test_pipeline_fifo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
