/* tests/tools/tp_check.c — multi-rank checks of the tensor/sequence-parallel
 * building blocks (run by tests/integration/test_tp_units.sh under
 * mpirun -np 2 and 4, all ranks forming one TP group):
 *   1. each TP/SP region function on known inputs: forward value and backward
 *      gradient on every rank;
 *   2. vocab-parallel cross-entropy against a plain cross-entropy over the
 *      full logits (double precision), with targets at the first and last id
 *      of every rank's vocabulary slice and padding on the last rank;
 *   3. the collective counters of one GPT forward+backward (per layer, per
 *      step) against the analytic counts of docs/memory.md "Communication",
 *      without and with sequence parallelism.
 * Prints "ok ..." lines; exits non-zero (mt_fatal) on the first mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "model/tensor_parallel.h"
#include "parallel/mappings.h"
#include "parallel/parallel_state.h"
#include "tests/tools/tiny_gpt.h"

#define CHECK(c, ...)                   \
  do {                                  \
    if (!(c)) mt_fatal(__VA_ARGS__);    \
  } while (0)

static float val(int rank, int64_t i) { return (float)(rank + 1) * 0.5f + (float)(i % 7) * 0.25f; }

static void check_regions(mt_group *tp) {
  const int n = mt_group_size(tp), r = mt_group_rank(tp);
  const int64_t shard = 6, full = shard * n;
  float x[64], y[64];
  /* reduce_from_tp fwd / copy_to_tp bwd: all-reduce */
  for (int64_t i = 0; i < full; i++) x[i] = val(r, i);
  mt_reduce_from_tp_region_fwd(tp, x, full, MT_F32);
  for (int64_t i = 0; i < full; i++) {
    float want = 0;
    for (int q = 0; q < n; q++) want += val(q, i);
    CHECK(x[i] == want, "reduce_from_tp fwd [%lld] %g != %g", (long long)i, x[i], want);
  }
  /* gather_from_sp fwd: all-gather of shards */
  for (int64_t i = 0; i < shard; i++) x[i] = val(r, i);
  mt_gather_from_sp_region_fwd(tp, x, y, shard, MT_F32);
  for (int q = 0; q < n; q++)
    for (int64_t i = 0; i < shard; i++)
      CHECK(y[q * shard + i] == val(q, i), "gather_from_sp fwd rank %d elem %lld", q, (long long)i);
  /* gather_from_sp bwd = reduce_scatter_to_sp fwd: reduce-scatter */
  for (int64_t i = 0; i < full; i++) x[i] = val(r, i);
  mt_gather_from_sp_region_bwd(tp, x, y, shard, MT_F32);
  for (int64_t i = 0; i < shard; i++) {
    float want = 0;
    for (int q = 0; q < n; q++) want += val(q, r * shard + i);
    CHECK(y[i] == want, "gather_from_sp bwd [%lld] %g != %g", (long long)i, y[i], want);
  }
  /* reduce_scatter_to_sp bwd = all-gather (identical to gather fwd) */
  for (int64_t i = 0; i < shard; i++) x[i] = -val(r, i);
  mt_reduce_scatter_to_sp_region_bwd(tp, x, y, shard, MT_F32);
  for (int q = 0; q < n; q++)
    for (int64_t i = 0; i < shard; i++)
      CHECK(y[q * shard + i] == -val(q, i), "reduce_scatter_to_sp bwd rank %d elem %lld: %g != %g", q,
            (long long)i, y[q * shard + i], -val(q, i));
  if (r == 0) printf("ok regions: copy/reduce/gather/reduce-scatter forward and backward on %d ranks\n", n);
}

static void check_vocab_parallel_xent(mt_backend *be, mt_group *tp) {
  const int n = mt_group_size(tp), r = mt_group_rank(tp);
  const int64_t V = 4 * n * 5 - 3; /* last rank has 3 padding columns */
  const int64_t vl = (V + 3) / n, rows = 2 * n + 2;
  const int64_t v_start = r * vl, valid = V - v_start < vl ? V - v_start : vl;
  /* full logits known to every rank */
  float *full = mt_xmalloc((size_t)(rows * n * vl) * sizeof(float));
  for (int64_t i = 0; i < rows * n * vl; i++) full[i] = sinf(0.37f * (float)i) * 3.0f;
  int32_t *tg = mt_xmalloc((size_t)rows * sizeof(int32_t));
  for (int64_t i = 0; i < rows; i++) { /* first and last id of each slice */
    int q = (int)(i / 2) % n;
    int64_t last = (q + 1) * vl - 1 < V - 1 ? (q + 1) * vl - 1 : V - 1;
    tg[i] = (int32_t)(i % 2 ? last : q * vl);
  }
  float *logits = be->ops->alloc(be, (size_t)(rows * vl) * sizeof(float), MT_MEM_ACT);
  for (int64_t i = 0; i < rows; i++)
    memcpy((float *)logits + i * vl, full + i * n * vl + r * vl, (size_t)vl * sizeof(float));
  float loss[64], rmax[64], stats[128];
  mt_tp_ctx c = {.be = be, .tp = tp, .tp_size = n, .tp_rank = r, .s = rows, .b = 1};
  double sum = mt_vocab_parallel_cross_entropy_fwd(&c, loss, rmax, stats, logits, tg, vl, valid,
                                                   v_start, NULL);
  double want_sum = 0;
  for (int64_t i = 0; i < rows; i++) {
    const float *row = full + i * n * vl;
    double mx = -INFINITY, se = 0;
    for (int64_t j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
    for (int64_t j = 0; j < V; j++) se += exp(row[j] - mx);
    double l = log(se) + mx - row[tg[i]];
    want_sum += l;
    CHECK(fabs(loss[i] - l) <= 1e-5 * fabs(l) + 1e-6, "xent row %lld: %g vs %g", (long long)i,
          loss[i], l);
  }
  CHECK(fabs(sum - want_sum) <= 1e-5 * fabs(want_sum), "xent sum %g vs %g", sum, want_sum);
  /* backward: local slice of softmax - onehot, zero on padding */
  const float scale = 0.5f;
  mt_vocab_parallel_cross_entropy_bwd(&c, logits, rmax, stats, tg, vl, valid, v_start, scale,
                                      NULL);
  for (int64_t i = 0; i < rows; i++) {
    const float *row = full + i * n * vl;
    double mx = -INFINITY, se = 0;
    for (int64_t j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
    for (int64_t j = 0; j < V; j++) se += exp(row[j] - mx);
    for (int64_t j = 0; j < vl; j++) {
      int64_t gj = v_start + j;
      double g = gj < V ? scale * (exp(row[gj] - mx) / se - (gj == tg[i])) : 0.0;
      float got = ((float *)logits)[i * vl + j];
      CHECK(fabs(got - g) <= 1e-6, "xent grad row %lld col %lld: %g vs %g", (long long)i,
            (long long)gj, got, g);
    }
  }
  be->ops->free(be, logits);
  free(full);
  free(tg);
  if (r == 0)
    printf("ok vocab-parallel cross-entropy: V=%lld over %d ranks (slice %lld, padding %lld), "
           "loss and gradient match a plain cross-entropy, targets at slice edges\n",
           (long long)V, n, (long long)vl, (long long)(n * vl - V));
}

static void check_counters(mt_backend *be, mt_group *tp, int sp) {
  const int n = mt_group_size(tp), r = mt_group_rank(tp);
  mt_gpt_config c = mt_tiny_gpt(2, 32, 4, 128, 8, 301, 2, 5);
  c.padded_vocab_size = mt_round_up(301, 8 * n);
  c.tp_size = n;
  c.tp_rank = r;
  c.tp_group = tp;
  c.sequence_parallel = sp;
  mt_gpt *m = mt_gpt_create(be, &c);
  int32_t tok[2 * 9];
  for (int i = 0; i < 18; i++) tok[i] = (i * 37) % 301;
  int64_t ids[2] = {0, 1};
  mt_group_reset_counters(tp);
  mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / 16);
  mt_gpt_finalize_grads(m);
  const mt_coll_counter *k = mt_group_counters(tp);
  const int64_t L = c.model.num_layers, sbh = 8 * 2 * 32, sb = 16;
  if (!sp) {
    /* fwd: embedding 1 + 2 per layer; head: max + (sumexp, target) over s*b;
     * bwd: output layer 1 + 2 per layer (copy_to_tp backward) */
    int64_t calls = 1 + 2 * L + 2 + 1 + 2 * L;
    int64_t elems = (1 + 2 * L + 1 + 2 * L) * sbh + 3 * sb;
    CHECK(k[MT_COLL_ALLREDUCE].calls == calls && k[MT_COLL_ALLREDUCE].elements == elems,
          "no-SP all-reduce: %lld calls %lld elements, expected %lld / %lld",
          (long long)k[MT_COLL_ALLREDUCE].calls, (long long)k[MT_COLL_ALLREDUCE].elements,
          (long long)calls, (long long)elems);
    CHECK(k[MT_COLL_ALLGATHER].calls == 0 && k[MT_COLL_REDUCE_SCATTER].calls == 0, "no-SP AG/RS");
    if (r == 0)
      printf("ok counters tp=%d: per layer 2 all-reduces of s*b*h fwd + 2 bwd; step total %lld "
             "all-reduces, %lld elements, %lld bytes\n",
             n, (long long)calls, (long long)elems, (long long)k[MT_COLL_ALLREDUCE].bytes);
  } else {
    /* fwd: embedding RS; per layer AG+RS twice; head AG (lnf) + CE all-reduces;
     * bwd: output layer AG (re-gather) + RS; per layer: row bwd AG (dy) x2,
     * column bwd AG (re-gather input) + RS x2; embedding bwd AG;
     * finalize: all-reduce of LayerNorm (4h per layer + 2h) and position grads */
    int64_t ag = 2 * L + 1 + 1 + 4 * L + 1, rs = 1 + 2 * L + 1 + 2 * L;
    int64_t ar_calls = 2 + 4 * L + 2 + 1;
    int64_t ar_elems = 3 * sb + (4 * L + 2) * 32 + 8 * 32;
    CHECK(k[MT_COLL_ALLGATHER].calls == ag && k[MT_COLL_ALLGATHER].elements == ag * sbh,
          "SP all-gather: %lld calls %lld elements, expected %lld / %lld",
          (long long)k[MT_COLL_ALLGATHER].calls, (long long)k[MT_COLL_ALLGATHER].elements,
          (long long)ag, (long long)(ag * sbh));
    CHECK(k[MT_COLL_REDUCE_SCATTER].calls == rs && k[MT_COLL_REDUCE_SCATTER].elements == rs * sbh,
          "SP reduce-scatter: %lld calls %lld elements, expected %lld / %lld",
          (long long)k[MT_COLL_REDUCE_SCATTER].calls,
          (long long)k[MT_COLL_REDUCE_SCATTER].elements, (long long)rs, (long long)(rs * sbh));
    CHECK(k[MT_COLL_ALLREDUCE].calls == ar_calls && k[MT_COLL_ALLREDUCE].elements == ar_elems,
          "SP all-reduce: %lld calls %lld elements, expected %lld / %lld",
          (long long)k[MT_COLL_ALLREDUCE].calls, (long long)k[MT_COLL_ALLREDUCE].elements,
          (long long)ar_calls, (long long)ar_elems);
    if (r == 0)
      printf("ok counters tp=%d+SP: per layer fwd 2 all-gathers + 2 reduce-scatters of s*b*h, bwd "
             "4 all-gathers + 2 reduce-scatters; step total %lld AG + %lld RS\n",
             n, (long long)ag, (long long)rs);
  }
  mt_gpt_destroy(m);
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  mt_group *tp = mt_dist_world(d);
  check_regions(tp);
  check_vocab_parallel_xent(be, tp);
  check_counters(be, tp, 0);
  check_counters(be, tp, 1);
  mt_backend_destroy(be);
  mt_dist_finalize(d);
  return 0;
}
