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
 * usage: moe_comm_check [tokens_per_rank h F E k] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/rng.h"
#include "core/util.h"
#include "model/moe_layer.h"
#include "parallel/comm.h"

static void fill(mt_backend *be, void *d, int64_t n, const char *name, int rank, float std) {
  float *h = mt_xmalloc(sizeof(float) * (size_t)n);
  mt_rng_key_t key = mt_rng_key(3, name, (uint64_t)rank, 0);
  for (int64_t i = 0; i < n; i++) h[i] = std * mt_rng_normal(key, (uint64_t)i);
  be->ops->memcpy_h2d(be, d, h, sizeof(float) * (size_t)n);
  free(h);
}

#define CHECK(c, ...)                        \
  do {                                       \
    if (!(c)) {                              \
      fprintf(stderr, __VA_ARGS__);          \
      fprintf(stderr, "\n");                 \
      exit(1);                               \
    }                                        \
  } while (0)

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  const int rank = mt_dist_rank(d), P = mt_dist_size(d);
  int a[5] = {24, 16, 32, 8, 2};
  for (int i = 0; i < 5 && i + 1 < argc; i++) a[i] = atoi(argv[i + 1]);
  const int n = a[0], h = a[1], F = a[2], E = a[3], k = a[4], El = E / P;
  MT_ASSERT(E % P == 0);
  int *ranks = mt_xmalloc(sizeof(int) * (size_t)P);
  for (int i = 0; i < P; i++) ranks[i] = i;
  mt_group *ep = mt_group_create(d, ranks, P, "ep", MT_ENGINE_MPI);
  char err[256];
  mt_backend_options bo = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&bo);
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) mt_fatal("%s", err);
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
    mt_moe_weights w = {router, wp, wp + El, wp + 2 * El, wp + 3 * El, NULL, NULL};
    mt_moe_grads g = {grouter, gp, gp + El, gp + 2 * El, gp + 3 * El};
    mt_group_reset_counters(ep);
    mt_moe_forward(m, acts, &w, y, x, 0);
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
    mt_moe_backward(m, acts, &w, &g, dx, y, x, 1.0f);
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
