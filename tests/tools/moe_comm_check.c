/* tests/tools/moe_comm_check.c — MoE token dispatcher over an EP group of
 * all ranks (run with mpirun -np N): per layer pass, the EP counters must
 * show 1 all-to-all of E int64 counts and 2 all-to-allv of token rows in
 * forward, 2 all-to-allv in backward (no more all-to-all), with the bytes the
 * routing implies: forward dispatch sends this rank's kept slots S·h
 * elements, the combine sends back what it received, R·h (Σ R = Σ S over
 * the group); backward moves the same amounts. Then a skewed router (all
 * weights 0: every token picks experts 0..k-1, dropless) must complete
 * without a hang, with rank 0 receiving every token. Prints one line per
 * case on rank 0; exits non-zero on a mismatch.
 * With a 6th argument etp > 1 (world = etp x ep, ranks etp-major as in the
 * expert generator): expert tensor parallelism instead (model/moe_etp.h):
 * mt_allgatherv / mt_reduce_scatterv values with unequal (and zero) counts,
 * then per MoE layer pass the ETP counters must show, forward, one
 * all-gather of etp·E int64 counts, one all-gatherv and one
 * reduce-scatterv of Rt·h elements (Rt = Σ over the ETP group of the rows
 * each rank received from its EP all-to-all), backward one more of each,
 * bus bytes (Rt − R)·h·4 per call; the EP counters are unchanged.
 * usage: moe_comm_check [tokens_per_rank h F E k [etp]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/probes.h"
#include "backends/registry.h"
#include "core/rng.h"
#include "core/util.h"
#include "model/moe_layer.h"
#include "parallel/comm.h"
#include "tests/tools/tool_util.h"

static void fill(mt_backend *be, void *d, int64_t n, const char *name, int rank, float std) {
  float *h = mt_xmalloc(sizeof(float) * (size_t)n);
  mt_rng_key_t key = mt_rng_key(3, name, (uint64_t)rank, 0);
  for (int64_t i = 0; i < n; i++) h[i] = std * mt_rng_normal(key, (uint64_t)i);
  be->ops->memcpy_h2d(be, d, h, sizeof(float) * (size_t)n);
  free(h);
}

static int etp_main(mt_dist *d, const int *a, int etp);

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  if (argc > 6 && atoi(argv[6]) > 1) {
    int a6[5];
    for (int i = 0; i < 5; i++) a6[i] = atoi(argv[i + 1]);
    return etp_main(d, a6, atoi(argv[6]));
  }
  const int rank = mt_dist_rank(d), P = mt_dist_size(d);
  int a[5] = {24, 16, 32, 8, 2};
  for (int i = 0; i < 5 && i + 1 < argc; i++) a[i] = atoi(argv[i + 1]);
  const int n = a[0], h = a[1], F = a[2], E = a[3], k = a[4], El = E / P;
  MT_ASSERT(E % P == 0);
  int *ranks = mt_xmalloc(sizeof(int) * (size_t)P);
  for (int i = 0; i < P; i++) ranks[i] = i;
  mt_group *ep = mt_group_create(d, ranks, P, "ep", MT_ENGINE_MPI);
  mt_backend *be = mt_tool_cpu_backend();
  for (int skew = 0; skew < 2; skew++) {
    mt_moe_config c = {.E = E, .k = k, .h = h, .F = F, .n_loc = n, .n_full = n, .ep = ep,
                       .ep_size = P, .ep_rank = rank, .n_moe_layers = 1, .lb_coeff = 0.01f};
    c.route.capacity_factor = skew ? 0.0f : 1.0f;
    mt_moe *m = mt_moe_create(be, &c);
    mt_moe_acts *acts = mt_moe_acts_create(m);
    void *x = be->ops->alloc(be, sizeof(float) * (size_t)n * h, MT_MEM_ACT);
    void *y = be->ops->alloc(be, sizeof(float) * (size_t)n * h, MT_MEM_ACT);
    void *dx = be->ops->alloc(be, sizeof(float) * (size_t)n * h, MT_MEM_ACT);
    void *router = be->ops->alloc(be, sizeof(float) * (size_t)E * h, MT_MEM_PARAM);
    float *grouter = be->ops->alloc(be, sizeof(float) * (size_t)E * h, MT_MEM_GRAD);
    fill(be, x, (int64_t)n * h, "x", rank, 1.0f);
    if (skew) be->ops->memset0(be, router, sizeof(float) * (size_t)E * h);
    else fill(be, router, (int64_t)E * h, "router", 0, 1.0f);
    be->ops->memset0(be, grouter, sizeof(float) * (size_t)E * h);
    const void **wp = mt_xcalloc((size_t)4 * El, sizeof(void *));
    float **gp = mt_xcalloc((size_t)4 * El, sizeof(float *));
    const int64_t sz[4] = {(int64_t)F * h, F, (int64_t)h * F, h};
    for (int le = 0; le < El; le++)
      for (int j = 0; j < 4; j++) {
        void *p = be->ops->alloc(be, sizeof(float) * (size_t)sz[j], MT_MEM_PARAM);
        fill(be, p, sz[j], "w", (rank * El + le) * 4 + j, 0.2f);
        wp[j * El + le] = p;
        gp[j * El + le] = be->ops->alloc(be, sizeof(float) * (size_t)sz[j], MT_MEM_GRAD);
        be->ops->memset0(be, gp[j * El + le], sizeof(float) * (size_t)sz[j]);
      }
    mt_moe_weights w = {router, wp, wp + El, wp + 2 * El, wp + 3 * El, NULL, NULL, NULL, {0, 0}};
    mt_moe_grads g = {grouter, gp, gp + El, gp + 2 * El, gp + 3 * El};
    mt_group_reset_counters(ep);
    mt_moe_forward(m, acts, &w, y, x, 0, NULL);
    const mt_coll_counter *cc = mt_group_counters(ep);
    const mt_moe_routing *r = mt_moe_acts_routing(acts);
    int64_t S = 0;
    for (int64_t i = 0; i < (int64_t)n * k; i++) S += r->kept[i];
    int64_t f_calls = cc[MT_COLL_ALLTOALLV].calls, f_bytes = cc[MT_COLL_ALLTOALLV].bytes;
    CHECK(cc[MT_COLL_ALLTOALL].calls == 1 && cc[MT_COLL_ALLTOALL].bytes == (int64_t)E * 8,
          "rank %d: counts all-to-all: %lld calls %lld bytes", rank,
          (long long)cc[MT_COLL_ALLTOALL].calls, (long long)cc[MT_COLL_ALLTOALL].bytes);
    CHECK(f_calls == 2, "rank %d: forward all-to-allv calls %lld (expected 2)", rank,
          (long long)f_calls);
    int64_t R = f_bytes / (4 * h) - S; /* the combine sends back the received rows */
    CHECK(R >= 0 && (f_bytes % (4 * h)) == 0, "rank %d: forward bytes %lld", rank, (long long)f_bytes);
    int64_t tot[2] = {S, R};
    mt_allreduce(mt_dist_world(d), tot, 2, MT_I64, MT_OP_SUM);
    CHECK(tot[0] == tot[1], "sent rows %lld != received rows %lld", (long long)tot[0],
          (long long)tot[1]);
    if (skew) { /* every token to experts 0..k-1 (on rank 0 when k <= E/P) */
      CHECK(S == (int64_t)n * k, "rank %d: skewed S %lld", rank, (long long)S);
      if (k <= El) CHECK(R == (rank == 0 ? (int64_t)P * n * k : 0), "rank %d: skewed R %lld", rank,
                         (long long)R);
    }
    mt_moe_backward(m, acts, &w, &g, dx, y, x, 1.0f, NULL);
    CHECK(cc[MT_COLL_ALLTOALLV].calls == 4 && cc[MT_COLL_ALLTOALL].calls == 1,
          "rank %d: backward added %lld all-to-allv, %lld all-to-all", rank,
          (long long)(cc[MT_COLL_ALLTOALLV].calls - 2), (long long)(cc[MT_COLL_ALLTOALL].calls - 1));
    CHECK(cc[MT_COLL_ALLTOALLV].bytes == 2 * f_bytes, "rank %d: backward bytes %lld vs forward %lld",
          rank, (long long)(cc[MT_COLL_ALLTOALLV].bytes - f_bytes), (long long)f_bytes);
    if (rank == 0)
      printf("moe_comm_check ep=%d %s: forward 1 all-to-all (%d B counts) + 2 all-to-allv, backward "
             "2 all-to-allv; rank 0 sent %lld + %lld rows each way (group total %lld rows, "
             "%lld dropped slots)\n",
             P, skew ? "skewed router, dropless" : "capacity 1.0", E * 8, (long long)S,
             (long long)R, (long long)tot[0], (long long)r->dropped);
    mt_moe_acts_free(m, acts);
    mt_moe_destroy(m);
  }
  fflush(stdout);
  mt_group_destroy(ep);
  mt_dist_finalize(d);
  return 0; /* process exit releases the test buffers */
}

/* mt_allgatherv / mt_reduce_scatterv on group g with rank r holding
 * (r·3 + 1) % 4 elements (some ranks 0): values and counters. */
static void check_v_collectives(mt_group *g) {
  const int n = mt_group_size(g), me = mt_group_rank(g);
  int64_t cnt[64], dsp[64], tot = 0;
  MT_ASSERT(n <= 64);
  for (int r = 0; r < n; r++) {
    cnt[r] = (r * 3 + 1) % 4;
    dsp[r] = tot;
    tot += cnt[r];
  }
  float send[4], all[256], red[4];
  for (int i = 0; i < cnt[me]; i++) send[i] = (float)(100 * me + i);
  mt_group_reset_counters(g);
  mt_allgatherv(g, send, cnt[me], all, cnt, dsp, MT_F32);
  for (int r = 0; r < n; r++)
    for (int i = 0; i < cnt[r]; i++)
      CHECK(all[dsp[r] + i] == (float)(100 * r + i), "all-gatherv: rank %d block %d wrong", me, r);
  for (int64_t i = 0; i < tot; i++) all[i] = (float)(me + 1) * (float)(i + 1);
  mt_reduce_scatterv(g, all, cnt, red, MT_F32, MT_OP_SUM);
  const float ranksum = (float)(n * (n + 1) / 2);
  for (int i = 0; i < cnt[me]; i++)
    CHECK(red[i] == ranksum * (float)(dsp[me] + i + 1), "reduce-scatterv: rank %d element %d", me,
          i);
  const mt_coll_counter *cc = mt_group_counters(g);
  for (int k = MT_COLL_ALLGATHER; k <= MT_COLL_REDUCE_SCATTER; k++)
    CHECK(cc[k].calls == 1 && cc[k].bytes == tot * 4 && cc[k].bus_bytes == (tot - cnt[me]) * 4,
          "rank %d: %s counters %lld calls %lld bytes %lld bus", me, mt_coll_name(k),
          (long long)cc[k].calls, (long long)cc[k].bytes, (long long)cc[k].bus_bytes);
}

static int etp_main(mt_dist *d, const int *a, int etp) {
  const int rank = mt_dist_rank(d), P = mt_dist_size(d);
  const int n = a[0], h = a[1], F = a[2], E = a[3], k = a[4];
  MT_ASSERT(P % etp == 0 && F % etp == 0);
  const int ep_size = P / etp, El = E / ep_size, er = rank % etp, pr = rank / etp;
  MT_ASSERT(E % ep_size == 0);
  int ranks[64];
  MT_ASSERT(P <= 64);
  for (int i = 0; i < ep_size; i++) ranks[i] = er + etp * i;
  mt_group *ep = ep_size > 1 ? mt_group_create(d, ranks, ep_size, "ep", MT_ENGINE_MPI) : NULL;
  for (int i = 0; i < etp; i++) ranks[i] = pr * etp + i;
  mt_group *tg = mt_group_create(d, ranks, etp, "etp", MT_ENGINE_MPI);
  check_v_collectives(tg);
  mt_backend *be = mt_tool_cpu_backend();
  for (int drop = 0; drop < 2; drop++) {
    mt_moe_config c = {.E = E, .k = k, .h = h, .F = F, .n_loc = n, .n_full = n, .ep = ep,
                       .ep_size = ep_size, .ep_rank = pr, .etp = tg, .n_moe_layers = 1,
                       .lb_coeff = 0.01f};
    c.route.capacity_factor = drop ? 1.0f : 0.0f;
    mt_moe *m = mt_moe_create(be, &c);
    mt_moe_acts *acts = mt_moe_acts_create(m);
    const int64_t nh = (int64_t)n * h, Fl = F / etp;
    void *x = be->ops->alloc(be, sizeof(float) * (size_t)nh, MT_MEM_ACT);
    void *y = be->ops->alloc(be, sizeof(float) * (size_t)nh, MT_MEM_ACT);
    void *dx = be->ops->alloc(be, sizeof(float) * (size_t)nh, MT_MEM_ACT);
    void *router = be->ops->alloc(be, sizeof(float) * (size_t)E * h, MT_MEM_PARAM);
    float *grouter = be->ops->alloc(be, sizeof(float) * (size_t)E * h, MT_MEM_GRAD);
    fill(be, x, nh, "x", rank, 1.0f);
    fill(be, router, (int64_t)E * h, "router", 0, 1.0f);
    be->ops->memset0(be, grouter, sizeof(float) * (size_t)E * h);
    const void **wp = mt_xcalloc((size_t)4 * El, sizeof(void *));
    float **gp = mt_xcalloc((size_t)4 * El, sizeof(float *));
    for (int le = 0; le < El; le++)
      for (int j = 0; j < 4; j += 2) { /* no biases with ETP */
        void *p = be->ops->alloc(be, sizeof(float) * (size_t)(Fl * h), MT_MEM_PARAM);
        fill(be, p, Fl * h, "w", ((pr * El + le) * 4 + j) * etp + er, 0.2f);
        wp[j * El + le] = p;
        gp[j * El + le] = be->ops->alloc(be, sizeof(float) * (size_t)(Fl * h), MT_MEM_GRAD);
        be->ops->memset0(be, gp[j * El + le], sizeof(float) * (size_t)(Fl * h));
      }
    mt_moe_weights w = {.router = router, .fc1_w = wp, .fc1_b = wp + El, .fc2_w = wp + 2 * El,
                        .fc2_b = wp + 3 * El};
    mt_moe_grads g = {grouter, gp, gp + El, gp + 2 * El, gp + 3 * El};
    if (ep) mt_group_reset_counters(ep);
    mt_group_reset_counters(tg);
    mt_moe_forward(m, acts, &w, y, x, 0, NULL);
    /* rows this rank received from the EP all-to-all: Σ over tokens of the
     * group that picked one of its experts (routing is global) */
    int64_t R = 0;
    if (ep) {
      const mt_coll_counter *ec = mt_group_counters(ep);
      int64_t S = 0;
      const mt_moe_routing *r = mt_moe_acts_routing(acts);
      for (int64_t i = 0; i < (int64_t)n * k; i++) S += r->kept[i];
      R = ec[MT_COLL_ALLTOALLV].bytes / (4 * h) - S;
    } else {
      const mt_moe_routing *r = mt_moe_acts_routing(acts);
      for (int64_t i = 0; i < (int64_t)n * k; i++) R += r->kept[i];
    }
    mt_coll_counter fw[MT_COLL_N];
    memcpy(fw, mt_group_counters(tg), sizeof fw);
    int64_t rows[64], Rt = 0;
    mt_allgather(tg, &R, rows, 1, MT_I64);
    for (int i = 0; i < etp; i++) Rt += rows[i];
    const mt_coll_counter *cc = fw;
    const int64_t want = Rt * h * 4, bus = (Rt - R) * h * 4;
    CHECK(cc[MT_COLL_ALLGATHER].calls == 2 &&
              cc[MT_COLL_ALLGATHER].bytes == (int64_t)etp * E * 8 + want,
          "rank %d: forward ETP all-gathers %lld calls %lld bytes (expected 1 counts + 1 rows "
          "%lld B)", rank, (long long)cc[MT_COLL_ALLGATHER].calls,
          (long long)cc[MT_COLL_ALLGATHER].bytes, (long long)want);
    CHECK(cc[MT_COLL_REDUCE_SCATTER].calls == 1 && cc[MT_COLL_REDUCE_SCATTER].bytes == want &&
              cc[MT_COLL_REDUCE_SCATTER].bus_bytes == bus,
          "rank %d: forward ETP reduce-scatterv %lld calls %lld bytes %lld bus (expected %lld, "
          "%lld)", rank, (long long)cc[MT_COLL_REDUCE_SCATTER].calls,
          (long long)cc[MT_COLL_REDUCE_SCATTER].bytes,
          (long long)cc[MT_COLL_REDUCE_SCATTER].bus_bytes, (long long)want, (long long)bus);
    mt_group_reset_counters(tg);
    if (ep) mt_group_reset_counters(ep);
    mt_moe_backward(m, acts, &w, &g, dx, y, x, 1.0f, NULL);
    cc = mt_group_counters(tg);
    for (int kk = MT_COLL_ALLGATHER; kk <= MT_COLL_REDUCE_SCATTER; kk++)
      CHECK(cc[kk].calls == 1 && cc[kk].bytes == want && cc[kk].bus_bytes == bus,
            "rank %d: backward ETP %s %lld calls %lld bytes %lld bus (expected 1, %lld, %lld)",
            rank, mt_coll_name(kk), (long long)cc[kk].calls, (long long)cc[kk].bytes,
            (long long)cc[kk].bus_bytes, (long long)want, (long long)bus);
    CHECK(cc[MT_COLL_ALLREDUCE].calls == 0 && cc[MT_COLL_ALLTOALLV].calls == 0,
          "rank %d: unexpected ETP traffic in backward", rank);
    if (ep)
      CHECK(mt_group_counters(ep)[MT_COLL_ALLTOALLV].calls == 2,
            "rank %d: backward EP all-to-allv calls %lld (expected 2)", rank,
            (long long)mt_group_counters(ep)[MT_COLL_ALLTOALLV].calls);
    if (rank == 0)
      printf("moe_comm_check etp=%d ep=%d %s: all-gatherv/reduce-scatterv with unequal counts "
             "exact; per pass over ETP: fwd 1 all-gather (%d B counts) + 1 all-gatherv + 1 "
             "reduce-scatterv, bwd 1 + 1, each %lld B (rank 0 received %lld of %lld rows)\n",
             etp, ep_size, drop ? "capacity 1.0" : "dropless", etp * E * 8, (long long)want,
             (long long)R, (long long)Rt);
    mt_moe_acts_free(m, acts);
    mt_moe_destroy(m);
  }
  fflush(stdout);
  mt_group_destroy(tg);
  mt_group_destroy(ep);
  mt_dist_finalize(d);
  return 0; /* process exit releases the test buffers */
}
