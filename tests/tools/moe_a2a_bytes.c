/* tests/tools/moe_a2a_bytes.c — all-to-all bytes of the MoE token
 * dispatcher equal the analytic count, for a FIXED hand-made routing (no
 * router, no learning): run with mpirun -np P (EP group = all ranks, each
 * rank its own n tokens, as under dp = ep).
 *
 * Routing: token i of rank r picks experts (b + j) mod E for slots j < k,
 * b = 0 when i % 3 == 0 (a hot expert 0), else (i·(r+1) + r) mod E; gate
 * 1/(j+1). Every rank computes every peer's routing, hence the token counts
 * cnt[p][e] (slots of rank p for expert e), and from them:
 *   dropless:  S_r = Σ_e cnt[r][e] rows sent, R_r = Σ_p Σ_{e local to r}
 *              cnt[p][e] received; forward = 1 all-to-all of E int64 counts
 *              (8E bytes) + all-to-allv dispatch S_r·h·4 + combine R_r·h·4
 *              bytes; backward = the same two all-to-allv again;
 *   padded (moe_pad_expert_input_to_capacity, capacity C; kept = the first C
 *              slots of each expert in token order, dropped slots computed
 *              here too): no counts all-to-all, every all-to-allv moves
 *              E·C·h·4 bytes per rank.
 * The rows themselves are checked too: the expert input block (peer p,
 * local expert le) holds exactly p's kept tokens for that expert in token
 * order (then zero rows when padded); with identity experts the combine
 * returns Σ_j gate_j·x_i, and backward dx_i = Σ_j gate_j·dy_i, dgate = dy·x
 * (0 for dropped slots). Prints one line per case on rank 0; exits non-zero
 * on a mismatch.
 * usage: moe_a2a_bytes [tokens_per_rank h E k] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/moe_token_dispatcher.h"
#include "parallel/comm.h"
#include "tests/tools/tool_util.h"

static int expert_of(int r, int i, int j, int E) {
  int b = i % 3 == 0 ? 0 : (i * (r + 1) + r) % E;
  return (b + j) % E;
}

/* kept[p][i·k + j] for capacity C (<= 0: dropless): first C slots of each
 * expert in (token, slot) order. cnt[p·E + e]: kept slots. */
static void route_all(int P, int n, int E, int k, int64_t C, uint8_t *kept, int64_t *cnt) {
  memset(cnt, 0, sizeof(int64_t) * (size_t)P * E);
  for (int p = 0; p < P; p++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < k; j++) {
        int e = expert_of(p, i, j, E);
        int ok = C <= 0 || cnt[p * E + e] < C;
        kept[((int64_t)p * n + i) * k + j] = (uint8_t)ok;
        cnt[p * E + e] += ok;
      }
}

int main(int argc, char **argv) {
  mt_dist *dist = mt_dist_init(&argc, &argv);
  const int rank = mt_dist_rank(dist), P = mt_dist_size(dist);
  int a[4] = {24, 16, 8, 2};
  for (int i = 0; i < 4 && i + 1 < argc; i++) a[i] = atoi(argv[i + 1]);
  const int n = a[0], h = a[1], E = a[2], k = a[3], El = E / P;
  MT_ASSERT(E % P == 0 && k <= E);
  int *ranks = mt_xmalloc(sizeof(int) * (size_t)P);
  for (int i = 0; i < P; i++) ranks[i] = i;
  mt_group *ep = mt_group_create(dist, ranks, P, "ep", MT_ENGINE_MPI);
  mt_backend *be = mt_tool_cpu_backend();
  uint8_t *kept = mt_xmalloc((size_t)P * n * k);
  int64_t *cnt = mt_xmalloc(sizeof(int64_t) * (size_t)P * E);
  float *xh = mt_xmalloc(sizeof(float) * (size_t)n * h), *dyh = mt_xmalloc(sizeof(float) * (size_t)n * h);
  for (int i = 0; i < n; i++)
    for (int c = 0; c < h; c++) {
      xh[i * h + c] = (float)(rank * n + i) + 0.001f * (float)c;
      dyh[i * h + c] = 0.5f + 0.01f * (float)((i + c) % 7);
    }
  const size_t xb = sizeof(float) * (size_t)n * h;
  for (int padded = 0; padded < 2; padded++) {
    const int64_t C = padded ? (int64_t)ceil((double)n * k / E) : 0; /* capacity factor 1.0 */
    route_all(P, n, E, k, C, kept, cnt);
    mt_moe_routing rt;
    mt_moe_routing_init(&rt, n, E, k);
    rt.n = n;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < k; j++) {
        rt.expert[i * k + j] = expert_of(rank, i, j, E);
        rt.gate[i * k + j] = 1.0f / (float)(j + 1);
        rt.kept[i * k + j] = kept[((int64_t)rank * n + i) * k + j];
      }
    mt_moe_dispatcher_config dc = {.E = E, .k = k, .h = h, .n_loc = n, .t0 = 0, .ep = ep,
                                   .ep_size = P, .pad_capacity = C};
    mt_moe_dispatcher *dp = mt_moe_dispatcher_create(be, &dc);
    mt_moe_dispatch_state st;
    mt_moe_dispatch_state_init(dp, &st);
    void *x = be->ops->alloc(be, xb, MT_MEM_ACT), *y = be->ops->alloc(be, xb, MT_MEM_ACT);
    void *dy = be->ops->alloc(be, xb, MT_MEM_ACT), *dx = be->ops->alloc(be, xb, MT_MEM_ACT);
    be->ops->memcpy_h2d(be, x, xh, xb);
    be->ops->memcpy_h2d(be, dy, dyh, xb);
    /* analytic rows */
    int64_t S = 0, R = 0;
    for (int e = 0; e < E; e++) S += cnt[rank * E + e];
    for (int p = 0; p < P; p++)
      for (int le = 0; le < El; le++) R += cnt[p * E + rank * El + le];
    if (padded) S = R = (int64_t)E * C;
    mt_group_reset_counters(ep);
    mt_moe_token_dispatch(dp, &st, &rt, x, NULL);
    const mt_coll_counter *cc = mt_group_counters(ep);
    const int64_t want_cnt_bytes = padded ? 0 : (int64_t)E * 8;
    const int64_t want_f = (S + R) * h * 4;
    /* expert input rows: block (p, le) = p's kept tokens for expert rank·El + le */
    CHECK(st.R == R && st.S == S, "rank %d: dispatcher S %lld R %lld, analytic %lld %lld", rank,
          (long long)st.S, (long long)st.R, (long long)S, (long long)R);
    float *xr = mt_xmalloc(sizeof(float) * (size_t)(R ? R : 1) * h);
    be->ops->memcpy_d2h(be, xr, st.x_recv, sizeof(float) * (size_t)R * h);
    int64_t row = 0;
    for (int p = 0; p < P; p++)
      for (int le = 0; le < El; le++) {
        const int e = rank * El + le;
        int64_t got = 0;
        for (int i = 0; i < n; i++)
          for (int j = 0; j < k; j++)
            if (kept[((int64_t)p * n + i) * k + j] && expert_of(p, i, j, E) == e) {
              CHECK(xr[row * h] == (float)(p * n + i) && xr[row * h + h - 1] == (float)(p * n + i) + 0.001f * (float)(h - 1),
                    "rank %d: expert %d row %lld from peer %d holds %g, expected token %d", rank, e,
                    (long long)row, p, (double)xr[row * h], p * n + i);
              row++, got++;
            }
        for (; padded && got < C; got++, row++)
          for (int c = 0; c < h; c++)
            CHECK(xr[row * h + c] == 0.0f, "rank %d: padding row %lld not zero", rank, (long long)row);
      }
    CHECK(row == R, "rank %d: %lld rows checked of %lld", rank, (long long)row, (long long)R);
    /* identity experts, combine */
    be->ops->memcpy_d2d(be, mt_moe_dispatch_expert_out(dp, &st), st.x_recv, sizeof(float) * (size_t)R * h);
    mt_moe_token_combine(dp, &st, y, NULL);
    int64_t f_a2a = cc[MT_COLL_ALLTOALL].bytes, f_a2av = cc[MT_COLL_ALLTOALLV].bytes;
    CHECK(cc[MT_COLL_ALLTOALL].calls == (padded ? 0 : 1) && f_a2a == want_cnt_bytes,
          "rank %d: counts all-to-all %lld calls %lld bytes (expected %d, %lld)", rank,
          (long long)cc[MT_COLL_ALLTOALL].calls, (long long)f_a2a, padded ? 0 : 1,
          (long long)want_cnt_bytes);
    CHECK(cc[MT_COLL_ALLTOALLV].calls == 2 && f_a2av == want_f,
          "rank %d: forward all-to-allv %lld calls %lld bytes, analytic 2 calls %lld bytes", rank,
          (long long)cc[MT_COLL_ALLTOALLV].calls, (long long)f_a2av, (long long)want_f);
    float *yh = mt_xmalloc(xb), *dxh = mt_xmalloc(xb);
    be->ops->memcpy_d2h(be, yh, y, xb);
    for (int i = 0; i < n; i++) {
      double g = 0;
      for (int j = 0; j < k; j++) g += rt.kept[i * k + j] ? rt.gate[i * k + j] : 0.0;
      for (int c = 0; c < h; c++)
        CHECK(fabs(yh[i * h + c] - g * xh[i * h + c]) <= 1e-5 * fabs(g * xh[i * h + c]) + 1e-6,
              "rank %d: combine token %d col %d: %g vs %g", rank, i, c, (double)yh[i * h + c],
              g * xh[i * h + c]);
    }
    /* backward: identity experts again */
    const float *dgate;
    const void *dyr = mt_moe_token_combine_bwd(dp, &st, dy, &dgate, NULL);
    be->ops->memcpy_d2d(be, mt_moe_dispatch_expert_dgrad(dp, &st), dyr, sizeof(float) * (size_t)R * h);
    mt_moe_token_dispatch_bwd(dp, &st, dx);
    CHECK(cc[MT_COLL_ALLTOALLV].calls == 4 && cc[MT_COLL_ALLTOALLV].bytes == 2 * want_f &&
              cc[MT_COLL_ALLTOALL].bytes == want_cnt_bytes,
          "rank %d: backward all-to-allv %lld calls %lld bytes in all, analytic 4 calls %lld", rank,
          (long long)cc[MT_COLL_ALLTOALLV].calls, (long long)cc[MT_COLL_ALLTOALLV].bytes,
          (long long)(2 * want_f));
    float *dgh = mt_xmalloc(sizeof(float) * (size_t)n * k);
    be->ops->memcpy_d2h(be, dxh, dx, xb);
    be->ops->memcpy_d2h(be, dgh, dgate, sizeof(float) * (size_t)n * k);
    for (int i = 0; i < n; i++) {
      double g = 0, dot = 0;
      for (int j = 0; j < k; j++) g += rt.kept[i * k + j] ? rt.gate[i * k + j] : 0.0;
      for (int c = 0; c < h; c++) {
        dot += (double)dyh[i * h + c] * xh[i * h + c];
        CHECK(fabs(dxh[i * h + c] - g * dyh[i * h + c]) <= 1e-5 * fabs(g * dyh[i * h + c]) + 1e-6,
              "rank %d: dx token %d col %d: %g vs %g", rank, i, c, (double)dxh[i * h + c],
              g * dyh[i * h + c]);
      }
      for (int j = 0; j < k; j++) {
        double want = rt.kept[i * k + j] ? dot : 0.0;
        CHECK(fabs(dgh[i * k + j] - want) <= 1e-5 * fabs(want) + 1e-5,
              "rank %d: dgate (%d, %d): %g vs %g", rank, i, j, (double)dgh[i * k + j], want);
      }
    }
    int64_t tot[2] = {S, R};
    mt_allreduce(mt_dist_world(dist), tot, 2, MT_I64, MT_OP_SUM);
    CHECK(tot[0] == tot[1], "group sent %lld rows, received %lld", (long long)tot[0], (long long)tot[1]);
    int64_t dropped = 0;
    for (int i = 0; i < n * k; i++) dropped += !rt.kept[i];
    if (rank == 0)
      printf("moe_a2a_bytes ep=%d n=%d h=%d E=%d k=%d %s: rank 0 sends %lld rows, receives %lld "
             "(analytic from the token counts); forward %lld B counts all-to-all + %lld B "
             "all-to-allv, backward %lld B, equal to the formula (rank 0 dropped %lld slots)\n",
             P, n, h, E, k, padded ? "padded to capacity" : "dropless", (long long)S,
             (long long)R, (long long)f_a2a, (long long)f_a2av,
             (long long)(cc[MT_COLL_ALLTOALLV].bytes - f_a2av), (long long)dropped);
    free(xr), free(yh), free(dxh), free(dgh);
    void *bufs[] = {x, y, dy, dx};
    for (int i = 0; i < 4; i++) be->ops->free(be, bufs[i]);
    mt_moe_dispatch_state_free(dp, &st);
    mt_moe_dispatcher_destroy(dp);
    mt_moe_routing_free(&rt);
  }
  fflush(stdout);
  free(kept), free(cnt), free(xh), free(dyh), free(ranks);
  mt_group_destroy(ep);
  mt_backend_destroy(be);
  mt_dist_finalize(dist);
  return 0;
}
