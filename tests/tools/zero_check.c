/* tests/tools/zero_check.c — ZeRO memory and communication against the
 * formulas (docs/zero.md). Run under mpirun -np N: for zero_stage 0..3 it
 * builds the trainer from the config (plus --set overrides), runs ONE
 * training iteration and checks on every rank
 *  - memory, from the allocator's live counters after the step: bytes of
 *    parameters + gradients + optimizer state equal the layout's exact
 *    expectation, and the ZeRO formula (fp32 + Adam: 16Ψ, 8Ψ + 8Ψ/N,
 *    4Ψ + 12Ψ/N, 16Ψ/N) within 2% plus the padding bytes;
 *  - communication, from the dp group's counters for the step: elements
 *    moved (all-reduce counted as reduce-scatter + all-gather, i.e. twice)
 *    equal 2Ψ (stages 0-2) or 3Ψ (stage 3) within the padding (alignment
 *    gaps + bucket padding per pass, the head segment gathered once for
 *    forward and backward, and the scalar loss / norm all-reduces).
 * With experts (MoE: model.num_experts > 0) Ψ splits into the dense Ψ_d,
 * sharded over dp (N), and this rank's experts Ψ_e, sharded over the
 * expert-data-parallel group (N_e): the formula is the sum of both parts'
 * formulas, the expert part's exact bytes (its layout) equal its formula
 * within its gaps and padding, and the edp group's reduce-scatter +
 * all-gather elements equal 2Ψ_e (stages 1-2) / 3Ψ_e (stage 3) within the
 * padding while the dp group's equal 2Ψ_d / 3Ψ_d (stage 0 is checked for
 * memory only: its all-reduces also carry the MoE statistics).
 * The config should give one micro-batch per rank (global = dp * micro).
 * Rank 0 prints one line per stage; any mismatch exits 1.
 * Usage: zero_check --config FILE [--set section.key=value]...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/probes.h"
#include "core/util.h"
#include "parallel/comm.h"
#include "config/config.h"
#include "trainer/train_internal.h"

/* ZeRO formula bytes for x parameters sharded over n ranks at `stage`
 * (P, G, O: bytes per parameter of parameters, gradients, optimizer state). */
static double formula_bytes(int stage, double P, double G, double O, double x, double n) {
  switch (stage) {
    case 0: return (P + G + O) * x;
    case 1: return (P + G) * x + O * x / n;
    case 2: return P * x + (G + O) * x / n;
    default: return (P + G + O) * x / n;
  }
}

/* Reduce-scatter + all-gather elements of group g in the last step. */
static int64_t rs_ag_elems(const mt_group *g) {
  const mt_coll_counter *c = mt_group_counters(g);
  return c[MT_COLL_ALLGATHER].elements + c[MT_COLL_REDUCE_SCATTER].elements;
}

/* MoE: the dense part over dp and the expert part over edp (see the header). */
static int check_moe(mt_trainer *T, int stage, int rank) {
  const mt_param_list *pl = mt_gpt_params(T->model);
  int64_t psi_d = 0, psi_e = 0;
  for (int i = 0; i < pl->n; i++) {
    if (pl->p[i].is_expert) psi_e += pl->p[i].numel;
    else psi_d += pl->p[i].numel;
  }
  mt_backend *be = T->be;
  const int N = mt_group_size(T->dp_group), Ne = mt_group_size(T->ps->edp);
  mt_group_reset_counters(T->dp_group);
  mt_group_reset_counters(T->ps->edp);
  mt_step_result r = mt_trainer_step(T, 1);
  const mt_mem_stats *ms = &be->mem;
  size_t live = ms->live[MT_MEM_PARAM] + ms->live[MT_MEM_GRAD] + ms->live[MT_MEM_OPTIM];
  double P = (double)mt_dtype_size(be->dtype), G = 4.0, O = 8.0 + (be->dtype != MT_F32 ? 4 : 0);
  size_t exact[MT_MEM_NCAT] = {0}, ex_e[MT_MEM_NCAT] = {0};
  int64_t gaps = pl->numel - psi_d - psi_e, pad_d = 0, pad_e = 0, gap_e = 0, head_len = 0;
  if (T->zero) {
    mt_zero_opt_expected_bytes(T->zero, exact);
    const mt_zero_layout *Ld = &T->zero->part[0].L;
    pad_d = Ld->padding;
    head_len = Ld->seg[Ld->n_seg - 1].padded_len;
    if (T->zero->n_part > 1) {
      const mt_zero_layout *Le = &T->zero->part[1].L;
      mt_zero_opt_part_expected_bytes(T->zero, 1, ex_e);
      pad_e = Le->padding;
      gap_e = Le->sharded_numel - psi_e;
    }
  } else {
    exact[MT_MEM_PARAM] = (size_t)pl->numel * (size_t)P;
    exact[MT_MEM_GRAD] = (size_t)pl->numel * sizeof(float);
    exact[MT_MEM_OPTIM] = (size_t)pl->numel * (size_t)O;
  }
  size_t exact_total = exact[MT_MEM_PARAM] + exact[MT_MEM_GRAD] + exact[MT_MEM_OPTIM];
  double f_d = formula_bytes(stage, P, G, O, (double)psi_d, N);
  double f_e = formula_bytes(stage, P, G, O, (double)psi_e, Ne);
  double pad_bytes = (P + G + O) * (double)(gaps + pad_d + pad_e);
  int ok = live == exact_total && fabs((double)live - f_d - f_e) <= 0.02 * (f_d + f_e) + pad_bytes;
  /* the expert part alone: its layout's bytes against its formula */
  size_t exact_e = ex_e[MT_MEM_PARAM] + ex_e[MT_MEM_GRAD] + ex_e[MT_MEM_OPTIM];
  if (T->zero)
    ok = ok && fabs((double)exact_e - f_e) <= (P + G + O) * (double)(gap_e + pad_e);
  int64_t cd = 0, ce = 0, kd = stage == 3 ? 3 : 2;
  int64_t tol_d = kd * (gaps + pad_d) + (stage == 3 ? head_len : 0), tol_e = kd * (gap_e + pad_e);
  if (stage > 0) {
    cd = rs_ag_elems(T->dp_group);
    ce = rs_ag_elems(T->ps->edp);
    if (N > 1) ok = ok && llabs(cd - kd * psi_d) <= tol_d;
    if (Ne > 1) ok = ok && llabs(ce - kd * psi_e) <= tol_e;
    if (Ne == 1) ok = ok && ce == 0;
  }
  if (rank == 0 && stage == 0)
    printf("stage 0 dp %d edp %d: psi dense %lld experts %lld | model state %zu B (layout %zu) vs "
           "formula %.0f (rel %.2e) | loss %.6f %s\n", N, Ne, (long long)psi_d, (long long)psi_e,
           live, exact_total, f_d + f_e, fabs((double)live - f_d - f_e) / (f_d + f_e), r.lm_loss,
           ok ? "OK" : "MISMATCH");
  else if (rank == 0)
    printf("stage %d dp %d edp %d: psi dense %lld experts %lld | model state %zu B (layout %zu) vs "
           "formula %.0f (dense %.0f over dp + experts %.0f over edp; rel %.2e) | expert part: "
           "params %zu grads %zu optim %zu = %zu B vs formula %.0f | comm (reduce-scatter + "
           "all-gather elements) dp %lld vs %lld*psi_d = %lld (tol %lld), edp %lld vs %lld*psi_e "
           "= %lld (tol %lld) | loss %.6f %s\n",
           stage, N, Ne, (long long)psi_d, (long long)psi_e, live, exact_total, f_d + f_e, f_d,
           f_e, fabs((double)live - f_d - f_e) / (f_d + f_e), ex_e[MT_MEM_PARAM],
           ex_e[MT_MEM_GRAD], ex_e[MT_MEM_OPTIM], exact_e, f_e, (long long)cd, (long long)kd,
           (long long)(kd * psi_d), (long long)tol_d, (long long)ce, (long long)kd,
           (long long)(kd * psi_e), (long long)tol_e, r.lm_loss, ok ? "OK" : "MISMATCH");
  if (!ok)
    fprintf(stderr, "zero_check: [rank %d] MoE stage %d: memory %zu (layout %zu, formula %.0f), "
            "comm dp %lld edp %lld\n", rank, stage, live, exact_total, f_d + f_e, (long long)cd,
            (long long)ce);
  return ok;
}

static int check_stage(mt_dist *dist, const char *path, const char **sets, int n_sets, int stage) {
  const int rank = mt_dist_rank(dist);
  char err[4096], st_set[64];
  snprintf(st_set, sizeof st_set, "parallel.zero_stage=%d", stage);
  sets[n_sets] = st_set;
  mt_config cfg;
  if (mt_config_load(&cfg, path, sets, n_sets + 1, mt_dist_size(dist), err, sizeof err) != 0) {
    if (rank == 0) fprintf(stderr, "zero_check: %s\n", err);
    return 1;
  }
  mt_trainer T;
  if (mt_trainer_setup(&T, &cfg, dist, err, sizeof err) != 0) {
    fprintf(stderr, "zero_check: [rank %d] %s\n", rank, err);
    return 1;
  }
  const int N = T.dp;
  if (cfg.model.num_experts > 0) {
    int ok = check_moe(&T, stage, rank);
    mt_trainer_teardown(&T);
    mt_config_free(&cfg);
    int32_t bad = !ok;
    mt_allreduce(mt_dist_world(dist), &bad, 1, MT_I32, MT_OP_MAX);
    return bad;
  }
  const int64_t psi = mt_gpt_num_parameters(T.model);
  const int64_t flat = mt_gpt_params(T.model)->numel;
  mt_backend *be = T.be;
  mt_group_reset_counters(T.dp_group);
  mt_mem_reset_peak(&be->mem);
  size_t peak_param_before = be->mem.live[MT_MEM_PARAM];
  mt_step_result r = mt_trainer_step(&T, 1);
  const mt_mem_stats *ms = &be->mem;
  size_t live = ms->live[MT_MEM_PARAM] + ms->live[MT_MEM_GRAD] + ms->live[MT_MEM_OPTIM];
  size_t work_peak = ms->peak[MT_MEM_PARAM] - peak_param_before;

  /* the layout's exact expectation */
  size_t exact[MT_MEM_NCAT] = {0};
  int64_t pad_elems = flat - psi, head_len = 0;
  size_t es = mt_dtype_size(be->dtype), optim_pe = 8 + (be->dtype != MT_F32 ? 4 : 0);
  if (T.zero) {
    mt_zero_opt_expected_bytes(T.zero, exact);
    const mt_zero_layout *L = &T.zero->part[0].L;
    pad_elems += L->padding;
    head_len = L->seg[L->n_seg - 1].padded_len;
  } else {
    exact[MT_MEM_PARAM] = (size_t)flat * es;
    exact[MT_MEM_GRAD] = (size_t)flat * sizeof(float);
    exact[MT_MEM_OPTIM] = (size_t)flat * optim_pe;
  }
  size_t exact_total = exact[MT_MEM_PARAM] + exact[MT_MEM_GRAD] + exact[MT_MEM_OPTIM];
  /* the ZeRO formula: bytes per parameter P (params), G (grads), O (optimizer) */
  double P = (double)es, G = 4.0, O = (double)optim_pe, n = N, x = (double)psi, formula;
  switch (stage) {
    case 0: formula = (P + G + O) * x; break;
    case 1: formula = (P + G) * x + O * x / n; break;
    case 2: formula = P * x + (G + O) * x / n; break;
    default: formula = (P + G + O) * x / n; break;
  }
  double pad_bytes = (P + G + O) * (double)pad_elems;
  double mem_dev = fabs((double)live - formula);
  int ok = live == exact_total && mem_dev <= 0.02 * formula + pad_bytes;

  const mt_coll_counter *c = mt_group_counters(T.dp_group);
  int64_t elems = 2 * c[MT_COLL_ALLREDUCE].elements + c[MT_COLL_ALLGATHER].elements +
                  c[MT_COLL_REDUCE_SCATTER].elements;
  int k = stage == 3 ? 3 : 2;
  int64_t comm_tol = k * pad_elems + (stage == 3 ? head_len : 0) + 4;
  int64_t comm_dev = elems - (int64_t)k * psi;
  if (comm_dev < 0) comm_dev = -comm_dev;
  if (N > 1) ok = ok && comm_dev <= comm_tol;
  if (rank == 0)
    printf("stage %d dp %d: psi %lld | model state %zu B (params %zu, grads %zu, optim %zu; "
           "layout %zu) vs formula %.0f (rel %.2e) | stage-3 working params peak %zu B | "
           "dp comm %lld elements vs %d*psi = %lld (|diff| %lld <= %lld) | dp comm bytes %lld | "
           "loss %.6f %s\n",
           stage, N, (long long)psi, live, ms->live[MT_MEM_PARAM], ms->live[MT_MEM_GRAD],
           ms->live[MT_MEM_OPTIM], exact_total, formula, mem_dev / formula,
           stage == 3 ? work_peak : 0, (long long)elems, k, (long long)k * psi,
           (long long)comm_dev, (long long)comm_tol, (long long)r.comm_bytes[MT_GK_DP], r.lm_loss,
           ok ? "OK" : "MISMATCH");
  if (!ok)
    fprintf(stderr, "zero_check: [rank %d] stage %d: memory %zu (layout %zu, formula %.0f) comm %lld\n",
            rank, stage, live, exact_total, formula, (long long)elems);
  mt_trainer_teardown(&T);
  mt_config_free(&cfg);
  int32_t bad = !ok;
  mt_allreduce(mt_dist_world(dist), &bad, 1, MT_I32, MT_OP_MAX);
  return bad;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  const char **sets = calloc((size_t)argc + 2, sizeof(char *));
  int n_sets = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
  }
  if (!path) {
    fprintf(stderr, "usage: zero_check --config FILE [--set k=v]...\n");
    return 2;
  }
  mt_dist *dist = mt_dist_init(&argc, &argv);
  int bad = 0;
  for (int stage = 0; stage <= 3; stage++) bad |= check_stage(dist, path, sets, n_sets, stage);
  if (mt_dist_rank(dist) == 0) printf(bad ? "zero_check FAILED\n" : "zero_check OK\n");
  mt_dist_finalize(dist);
  free(sets);
  return bad ? 1 : 0;
}
