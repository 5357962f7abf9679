/* tests/unit/parallel/test_topology.c — rank groups against Megatron-LM's documented
 * examples (parallel_state.initialize_model_parallel docstring) and further
 * cases derived from RankGenerator's rules, plus error cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/topology.h"

/* Format a group list as "[0,1],[2,3]". */
static void fmt_list(const mt_group_list *l, char *buf, size_t n) {
  size_t p = 0;
  buf[0] = 0;
  for (int g = 0; g < l->n_groups; g++) {
    p += snprintf(buf + p, n - p, g ? ",[" : "[");
    for (int i = 0; i < l->group_size; i++)
      p += snprintf(buf + p, n - p, i ? ",%d" : "%d", l->ranks[g * l->group_size + i]);
    p += snprintf(buf + p, n - p, "]");
  }
}

static void expect_groups(const mt_topology *t, mt_group_kind k, const char *want) {
  char buf[4096];
  fmt_list(mt_topology_groups(t, k), buf, sizeof buf);
  if (strcmp(buf, want) != 0)
    fail_msg("%s groups: got %s, want %s", mt_group_kind_name(k), buf, want);
}

static void build_cp(mt_topology *t, int world, int tp, int pp, int ep, int etp, int cp) {
  mt_topology_sizes sz = {tp, pp, ep, etp, cp};
  char err[256];
  int rc = mt_topology_build(t, world, &sz, err, sizeof err);
  if (rc != 0) fail_msg("build failed: %s", err);
}

static void build(mt_topology *t, int world, int tp, int pp, int ep, int etp) {
  build_cp(t, world, tp, pp, ep, etp, 1);
}

/* Megatron docstring: 16 GPUs, tp=2, pp=4. */
static void test_megatron_tp2_pp4(void **state) {
  (void)state;
  mt_topology t;
  build(&t, 16, 2, 4, 1, 0);
  assert_int_equal(t.dp, 2);
  expect_groups(&t, MT_GK_TP, "[0,1],[2,3],[4,5],[6,7],[8,9],[10,11],[12,13],[14,15]");
  expect_groups(&t, MT_GK_DP, "[0,2],[1,3],[4,6],[5,7],[8,10],[9,11],[12,14],[13,15]");
  expect_groups(&t, MT_GK_PP, "[0,4,8,12],[1,5,9,13],[2,6,10,14],[3,7,11,15]");
  expect_groups(&t, MT_GK_EMBD, "[0,12],[1,13],[2,14],[3,15]");
  expect_groups(&t, MT_GK_MP, "[0,1,4,5,8,9,12,13],[2,3,6,7,10,11,14,15]");
  expect_groups(&t, MT_GK_TP_DP, "[0,1,2,3],[4,5,6,7],[8,9,10,11],[12,13,14,15]");
  /* no MoE: ep groups are singletons, expert groups mirror the dense ones */
  expect_groups(&t, MT_GK_ETP, "[0,1],[2,3],[4,5],[6,7],[8,9],[10,11],[12,13],[14,15]");
  expect_groups(&t, MT_GK_EDP, "[0,2],[1,3],[4,6],[5,7],[8,10],[9,11],[12,14],[13,15]");
  mt_rank_coords c = mt_topology_coords(&t, 13);
  assert_int_equal(c.tp, 1);
  assert_int_equal(c.dp, 0);
  assert_int_equal(c.pp, 3);
  int n;
  const int *g = mt_topology_group_of(&t, MT_GK_PP, 13, &n);
  assert_int_equal(n, 4);
  assert_int_equal(g[0], 1);
  assert_null(mt_topology_group_of(&t, MT_GK_EMBD, 5, &n));
  assert_int_equal(n, 0);
  g = mt_topology_group_of(&t, MT_GK_EMBD, 14, &n);
  assert_int_equal(n, 2);
  assert_int_equal(g[0], 2);
  mt_topology_free(&t);
}

/* MoE folding: 8 ranks, tp=2, ep=4, etp=1. */
static void test_moe_tp2_ep4_etp1(void **state) {
  (void)state;
  mt_topology t;
  build(&t, 8, 2, 1, 4, 1);
  assert_int_equal(t.dp, 4);
  assert_int_equal(t.edp, 2);
  expect_groups(&t, MT_GK_EP, "[0,1,2,3],[4,5,6,7]");
  expect_groups(&t, MT_GK_EDP, "[0,4],[1,5],[2,6],[3,7]");
  expect_groups(&t, MT_GK_DP, "[0,2,4,6],[1,3,5,7]");
  expect_groups(&t, MT_GK_TP, "[0,1],[2,3],[4,5],[6,7]");
  expect_groups(&t, MT_GK_ETP, "[0],[1],[2],[3],[4],[5],[6],[7]");
  expect_groups(&t, MT_GK_ETP_EP, "[0,1,2,3],[4,5,6,7]");
  expect_groups(&t, MT_GK_EMBD, "[0],[1],[2],[3],[4],[5],[6],[7]");
  mt_rank_coords c = mt_topology_coords(&t, 6);
  assert_int_equal(c.ep, 2);
  assert_int_equal(c.edp, 1);
  assert_int_equal(c.etp, 0);
  assert_int_equal(c.tp, 0);
  assert_int_equal(c.dp, 3);
  mt_topology_free(&t);
}

/* Further cases derived from the same rules (rank = tp_rank + tp*(dp_rank +
 * dp*pp_rank); expert rank = etp_rank + etp*(ep_rank + ep*(edp_rank + edp*pp_rank))). */
typedef struct {
  int world, tp, pp, ep, etp;
  mt_group_kind kind;
  const char *want;
  int cp; /* 0 = 1 */
} group_case;

static const group_case cases[] = {
    {1, 1, 1, 1, 0, MT_GK_TP, "[0]", 1},
    {1, 1, 1, 1, 0, MT_GK_EMBD, "[0]", 1},
    {4, 1, 1, 1, 0, MT_GK_DP, "[0,1,2,3]", 1},
    {4, 4, 1, 1, 0, MT_GK_DP, "[0],[1],[2],[3]", 1},
    {4, 1, 4, 1, 0, MT_GK_EMBD, "[0,3]", 1},
    {8, 2, 2, 1, 0, MT_GK_DP, "[0,2],[1,3],[4,6],[5,7]", 1},
    {8, 2, 2, 1, 0, MT_GK_PP, "[0,4],[1,5],[2,6],[3,7]", 1},
    {8, 2, 2, 1, 0, MT_GK_MP, "[0,1,4,5],[2,3,6,7]", 1},
    {8, 2, 2, 2, 1, MT_GK_EP, "[0,1],[2,3],[4,5],[6,7]", 1},
    {8, 2, 2, 2, 1, MT_GK_EDP, "[0,2],[1,3],[4,6],[5,7]", 1},
    {8, 2, 2, 2, 2, MT_GK_EP, "[0,2],[1,3],[4,6],[5,7]", 1},
    {8, 2, 2, 2, 2, MT_GK_EDP, "[0],[1],[2],[3],[4],[5],[6],[7]", 1},
    {8, 2, 2, 2, 2, MT_GK_ETP_EP, "[0,1,2,3],[4,5,6,7]", 1},
    {8, 1, 1, 4, 1, MT_GK_EP, "[0,1,2,3],[4,5,6,7]", 1},
    {8, 1, 1, 4, 1, MT_GK_EDP, "[0,4],[1,5],[2,6],[3,7]", 1},
    {8, 4, 1, 2, 1, MT_GK_EP, "[0,1],[2,3],[4,5],[6,7]", 1},
    {8, 4, 1, 2, 1, MT_GK_EDP, "[0,2,4,6],[1,3,5,7]", 1},
    {8, 2, 1, 2, 2, MT_GK_EP, "[0,2],[1,3],[4,6],[5,7]", 1},
    {8, 2, 1, 2, 2, MT_GK_EDP, "[0,4],[1,5],[2,6],[3,7]", 1},
    {16, 2, 2, 4, 1, MT_GK_EP, "[0,1,2,3],[4,5,6,7],[8,9,10,11],[12,13,14,15]", 1},
    {16, 2, 2, 4, 1, MT_GK_EDP, "[0,4],[1,5],[2,6],[3,7],[8,12],[9,13],[10,14],[11,15]", 1},
    {16, 2, 2, 4, 1, MT_GK_TP_DP, "[0,1,2,3,4,5,6,7],[8,9,10,11,12,13,14,15]", 1},
    {16, 2, 2, 4, 1, MT_GK_EMBD, "[0,8],[1,9],[2,10],[3,11],[4,12],[5,13],[6,14],[7,15]", 1},
    {12, 3, 2, 1, 0, MT_GK_DP, "[0,3],[1,4],[2,5],[6,9],[7,10],[8,11]", 1},
    {12, 1, 3, 2, 1, MT_GK_EP, "[0,1],[2,3],[4,5],[6,7],[8,9],[10,11]", 1},
    /* context parallelism: rank = tp_rank + tp*(cp_rank + cp*(dp_rank + dp*pp_rank)) */
    {1, 1, 1, 1, 0, MT_GK_CP, "[0]", 1},
    {1, 1, 1, 1, 0, MT_GK_DP_CP, "[0]", 1},
    {4, 1, 1, 1, 0, MT_GK_DP_CP, "[0,1,2,3]", 1},
    {4, 1, 1, 1, 0, MT_GK_CP, "[0],[1],[2],[3]", 1},
    {2, 1, 1, 1, 0, MT_GK_CP, "[0,1]", 2},
    {2, 1, 1, 1, 0, MT_GK_DP, "[0],[1]", 2},
    {2, 1, 1, 1, 0, MT_GK_DP_CP, "[0,1]", 2},
    {4, 1, 1, 1, 0, MT_GK_CP, "[0,1,2,3]", 4},
    {4, 1, 1, 1, 0, MT_GK_DP, "[0],[1],[2],[3]", 4},
    {4, 1, 1, 1, 0, MT_GK_CP, "[0,1],[2,3]", 2},
    {4, 1, 1, 1, 0, MT_GK_DP, "[0,2],[1,3]", 2},
    {4, 1, 1, 1, 0, MT_GK_DP_CP, "[0,1,2,3]", 2},
    {4, 2, 1, 1, 0, MT_GK_CP, "[0,2],[1,3]", 2},
    {4, 2, 1, 1, 0, MT_GK_TP_CP, "[0,1,2,3]", 2},
    {4, 2, 1, 1, 0, MT_GK_DP_CP, "[0,2],[1,3]", 2},
    {4, 1, 2, 1, 0, MT_GK_CP, "[0,1],[2,3]", 2},
    {4, 1, 2, 1, 0, MT_GK_PP, "[0,2],[1,3]", 2},
    {4, 1, 2, 1, 0, MT_GK_EMBD, "[0,2],[1,3]", 2},
    {4, 1, 2, 1, 0, MT_GK_MP, "[0,2],[1,3]", 2},
    {8, 2, 1, 1, 0, MT_GK_CP, "[0,2],[1,3],[4,6],[5,7]", 2},
    {8, 2, 1, 1, 0, MT_GK_DP, "[0,4],[1,5],[2,6],[3,7]", 2},
    {8, 2, 1, 1, 0, MT_GK_DP_CP, "[0,2,4,6],[1,3,5,7]", 2},
    {8, 2, 1, 1, 0, MT_GK_TP_CP, "[0,1,2,3],[4,5,6,7]", 2},
    {8, 2, 1, 1, 0, MT_GK_TP_DP, "[0,1,4,5],[2,3,6,7]", 2},
    {8, 2, 1, 1, 0, MT_GK_MP, "[0,1],[2,3],[4,5],[6,7]", 2},
    {8, 2, 2, 1, 0, MT_GK_CP, "[0,2],[1,3],[4,6],[5,7]", 2},
    {8, 2, 2, 1, 0, MT_GK_PP, "[0,4],[1,5],[2,6],[3,7]", 2},
    {8, 2, 2, 1, 0, MT_GK_DP_CP, "[0,2],[1,3],[4,6],[5,7]", 2},
    {8, 1, 1, 1, 0, MT_GK_CP, "[0,1,2,3],[4,5,6,7]", 4},
    {8, 1, 1, 1, 0, MT_GK_DP, "[0,4],[1,5],[2,6],[3,7]", 4},
    {16, 2, 2, 1, 0, MT_GK_CP, "[0,2],[1,3],[4,6],[5,7],[8,10],[9,11],[12,14],[13,15]", 2},
    {16, 2, 2, 1, 0, MT_GK_DP_CP, "[0,2,4,6],[1,3,5,7],[8,10,12,14],[9,11,13,15]", 2},
    /* MoE folding with cp (Megatron's expert generator has no cp: cp ranks
     * are folded into ep x edp; etp 1 and ep = tp make edp = dp x cp) */
    {4, 1, 1, 2, 1, MT_GK_EP, "[0,1],[2,3]", 2},
    {4, 1, 1, 2, 1, MT_GK_EDP, "[0,2],[1,3]", 2},
    {8, 2, 1, 2, 1, MT_GK_EP, "[0,1],[2,3],[4,5],[6,7]", 2},
    {8, 2, 1, 2, 1, MT_GK_EDP, "[0,2,4,6],[1,3,5,7]", 2},
    {8, 1, 1, 2, 1, MT_GK_EDP, "[0,2,4,6],[1,3,5,7]", 2},
    {8, 1, 1, 4, 1, MT_GK_EP, "[0,1,2,3],[4,5,6,7]", 2},
    {8, 1, 1, 4, 1, MT_GK_EDP, "[0,4],[1,5],[2,6],[3,7]", 2},
    {8, 1, 2, 2, 1, MT_GK_EDP, "[0,2],[1,3],[4,6],[5,7]", 2},
};

static void test_case_table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const group_case *c = &cases[i];
    mt_topology t;
    build_cp(&t, c->world, c->tp, c->pp, c->ep, c->etp, c->cp ? c->cp : 1);
    expect_groups(&t, c->kind, c->want);
    mt_topology_free(&t);
  }
}

/* Invariants on many layouts: every kind partitions the ranks, each rank's
 * group under mt_topology_group_of matches its coordinates. */
static void test_partitions(void **state) {
  (void)state;
  const int worlds[] = {1, 2, 4, 6, 8, 12, 16, 24, 32};
  for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
    for (int tp = 1; tp <= 8; tp++)
      for (int pp = 1; pp <= 4; pp++)
        for (int ep = 1; ep <= 8; ep *= 2)
          for (int etp = 1; etp <= 4; etp++)
          for (int cp = 1; cp <= 4; cp++) {
            int world = worlds[w];
            mt_topology_sizes sz = {tp, pp, ep, etp, cp};
            mt_topology t;
            char err[256];
            int ok = world % (tp * cp * pp) == 0 && world % (etp * ep * pp) == 0;
            int rc = mt_topology_build(&t, world, &sz, err, sizeof err);
            assert_int_equal(rc, ok ? 0 : -1);
            if (!ok) continue;
            assert_int_equal(t.tp * t.cp * t.dp * t.pp, world);
            assert_int_equal(t.etp * t.ep * t.edp * t.pp, world);
            for (int k = 0; k < MT_GK_N; k++) {
              if (k == MT_GK_EMBD) continue;
              const mt_group_list *l = mt_topology_groups(&t, (mt_group_kind)k);
              EXPECT_EQ(l->n_groups * l->group_size, world, "world %d tp %d pp %d ep %d etp %d cp %d kind %d",
                        world, tp, pp, ep, etp, cp, k);
              int *seen = calloc((size_t)world, sizeof(int));
              for (int i = 0; i < world; i++) seen[l->ranks[i]]++;
              for (int i = 0; i < world; i++)
                EXPECT_EQ(seen[i], 1, "world %d tp %d pp %d ep %d etp %d kind %d rank %d", world, tp, pp, ep, etp,
                          k, i);
              free(seen);
            }
            for (int r = 0; r < world; r++) {
              mt_rank_coords c = mt_topology_coords(&t, r);
              int n;
              const int *g = mt_topology_group_of(&t, MT_GK_TP, r, &n);
              assert_int_equal(g[c.tp], r);
              g = mt_topology_group_of(&t, MT_GK_DP, r, &n);
              assert_int_equal(g[c.dp], r);
              g = mt_topology_group_of(&t, MT_GK_PP, r, &n);
              assert_int_equal(g[c.pp], r);
              g = mt_topology_group_of(&t, MT_GK_EP, r, &n);
              assert_int_equal(g[c.ep], r);
              g = mt_topology_group_of(&t, MT_GK_ETP, r, &n);
              assert_int_equal(g[c.etp], r);
              g = mt_topology_group_of(&t, MT_GK_EDP, r, &n);
              assert_int_equal(g[c.edp], r);
              g = mt_topology_group_of(&t, MT_GK_CP, r, &n);
              assert_int_equal(n, cp);
              assert_int_equal(g[c.cp], r);
              g = mt_topology_group_of(&t, MT_GK_DP_CP, r, &n);
              assert_int_equal(n, cp * t.dp);
              assert_int_equal(g[c.cp + cp * c.dp], r);
              g = mt_topology_group_of(&t, MT_GK_TP_CP, r, &n);
              assert_int_equal(g[c.tp + tp * c.cp], r);
              assert_int_equal(r, c.tp + tp * (c.cp + cp * (c.dp + t.dp * c.pp)));
              assert_int_equal(r, c.etp + etp * (c.ep + ep * (c.edp + t.edp * c.pp)));
            }
            mt_topology_free(&t);
          }
}

static void expect_error(int world, int tp, int pp, int ep, int etp, int cp, const char *needle) {
  mt_topology_sizes sz = {tp, pp, ep, etp, cp};
  mt_topology t;
  char err[256] = "";
  assert_int_equal(mt_topology_build(&t, world, &sz, err, sizeof err), -1);
  if (!strstr(err, needle)) fail_msg("error '%s' does not contain '%s'", err, needle);
  mt_topology_free(&t); /* safe after failure */
}

static void test_errors(void **state) {
  (void)state;
  expect_error(6, 4, 1, 1, 0, 1, "world_size 6 is not divisible by");
  expect_error(8, 2, 3, 1, 0, 1, "= 6");
  expect_error(8, 2, 1, 8, 2, 1, "expert_tensor_parallel_size 2 x expert_model_parallel_size 8");
  expect_error(4, 2, 1, 4, 0, 1, "does not divide tensor_model_parallel_size 2 x "
                                 "data_parallel_size 2 = 4");
  expect_error(4, 1, 1, 1, 0, 3, "context_parallel_size 3 x pipeline_model_parallel_size 1 = 3");
  expect_error(4, 1, 1, 1, 0, -1, "context_parallel_size -1");
  expect_error(0, 1, 1, 1, 0, 1, "world_size 0");
  expect_error(4, -1, 1, 1, 0, 1, "tensor_model_parallel_size -1");
}

static void test_print(void **state) {
  (void)state;
  mt_topology t;
  build(&t, 8, 2, 1, 4, 1);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(mt_topology_print(&t, f, 1), 0);
  fclose(f);
  assert_non_null(strstr(buf, "\"ep\":\t[[0, 1, 2, 3], [4, 5, 6, 7]]"));
  assert_non_null(strstr(buf, "\"expert_data_parallel_size\":\t2"));
  free(buf);
  f = open_memstream(&buf, &len);
  assert_int_equal(mt_topology_print(&t, f, 0), 0);
  fclose(f);
  assert_non_null(strstr(buf, "edp       4 x 2   [0,4], [1,5], [2,6], [3,7]"));
  free(buf);
  mt_topology_free(&t);
}

/* 8 ranks, tp 2, cp 2 (dp 2): the cp, dp_cp and tp_cp groups and the cp
 * coordinate in both forms (`megatrain topology`). */
static void test_print_cp(void **state) {
  (void)state;
  mt_topology t;
  build_cp(&t, 8, 2, 1, 1, 0, 2);
  assert_int_equal(t.dp, 2);
  mt_rank_coords c = mt_topology_coords(&t, 6);
  assert_int_equal(c.tp, 0);
  assert_int_equal(c.cp, 1);
  assert_int_equal(c.dp, 1);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(mt_topology_print(&t, f, 1), 0);
  fclose(f);
  assert_non_null(strstr(buf, "\"cp\":\t[[0, 2], [1, 3], [4, 6], [5, 7]]"));
  assert_non_null(strstr(buf, "\"dp_cp\":\t[[0, 2, 4, 6], [1, 3, 5, 7]]"));
  assert_non_null(strstr(buf, "\"context_parallel_size\":\t2"));
  free(buf);
  f = open_memstream(&buf, &len);
  assert_int_equal(mt_topology_print(&t, f, 0), 0);
  fclose(f);
  assert_non_null(strstr(buf, "world 8 = tp 2 x cp 2 x dp 2 x pp 1"));
  assert_non_null(strstr(buf, "cp        4 x 2   [0,2], [1,3], [4,6], [5,7]"));
  assert_non_null(strstr(buf, "dp_cp     2 x 4   [0,2,4,6], [1,3,5,7]"));
  assert_non_null(strstr(buf, "     6    0    1    0    1"));
  free(buf);
  mt_topology_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_tp2_pp4), cmocka_unit_test(test_moe_tp2_ep4_etp1),
      cmocka_unit_test(test_case_table),       cmocka_unit_test(test_partitions),
      cmocka_unit_test(test_errors),           cmocka_unit_test(test_print),
      cmocka_unit_test(test_print_cp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
