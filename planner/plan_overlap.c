/* planner/plan_overlap.c — exposed communication of bucketed gradient
 * reductions and parameter gathers, bucket by bucket, with the trainer's
 * launch rules (docs/planner.md "Overlap"; docs/communication.md):
 *
 *  - reduction (overlap_grad_reduce): the backward runs the stage's
 *    positions from the head down to the embedding; a bucket is ready when
 *    the backward of its first (lowest) parameter's position ends, and is
 *    launched then; one communication channel runs buckets one at a time
 *    in launch order, so a bucket's reduce starts at max(ready, end of the
 *    previous bucket). What ends after the backward is exposed. Without
 *    overlap every bucket runs after the backward: all of it is exposed.
 *  - gather (overlap_param_gather): every bucket's all-gather is launched in
 *    forward order when the optimizer step ends and runs one at a time; the
 *    forward of a position first waits for the buckets whose first parameter
 *    it holds. The forward's delay is exposed. Without overlap all of it.
 * Pure arithmetic. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "planner/plan_internal.h"

/* Ring alpha-beta time of one collective (plan_internal.h). */
double mt_plan_coll(const mt_hardware *hw, int kind, double n, double bytes, int intra) {
  if (n <= 1 && kind != MT_PLAN_P2P) return 0;
  double bw = (intra ? hw->intra_node_gbs : hw->inter_node_gbs) * 1e9 * hw->link_eff;
  double a = (intra ? hw->intra_latency_us : hw->inter_latency_us) * 1e-6;
  switch (kind) {
    case MT_PLAN_AR: return 2 * (n - 1) / n * bytes / bw + 2 * (n - 1) * a;
    case MT_PLAN_AG:
    case MT_PLAN_RS:
    case MT_PLAN_A2A: return (n - 1) / n * bytes / bw + (n - 1) * a;
    default: return bytes / bw + a;
  }
}

/* bucket order by readiness: backward reaches higher positions first; within
 * a position the later bucket of the layout (higher offsets) first */
typedef struct {
  double key;
  int idx;
} order_t;

static int by_key(const void *a, const void *b) {
  const order_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return y->idx - x->idx;
}

double mt_plan_overlap_reduce(const mt_plan_bucket *b, const double *cost, int n,
                              const double *bwd_pos, int n_pos, int overlap, double *total) {
  double sum = 0;
  for (int k = 0; k < n; k++) sum += cost[k];
  *total = sum;
  if (!overlap || n == 0) return sum;
  /* end of each position's backward, from the start of the backward */
  double *end = mt_xcalloc((size_t)n_pos + 1, sizeof(double));
  double t = 0;
  for (int p = n_pos - 1; p >= 0; p--) end[p] = t += bwd_pos[p];
  const double t_bwd = t;
  order_t *o = mt_xcalloc((size_t)n, sizeof *o);
  for (int k = 0; k < n; k++) {
    const int p = b[k].lo_pos >= 0 && b[k].lo_pos < n_pos ? b[k].lo_pos : 0;
    o[k] = (order_t){end[p], k};
  }
  qsort(o, (size_t)n, sizeof *o, by_key);
  double busy = 0;
  for (int k = 0; k < n; k++) busy = (o[k].key > busy ? o[k].key : busy) + cost[o[k].idx];
  free(o);
  free(end);
  return busy > t_bwd ? busy - t_bwd : 0;
}

double mt_plan_overlap_gather(const mt_plan_bucket *b, const double *cost, int n,
                              const double *fwd_pos, int n_pos, int overlap, double *total) {
  double sum = 0;
  for (int k = 0; k < n; k++) sum += cost[k];
  *total = sum;
  if (!overlap || n == 0) return sum;
  order_t *o = mt_xcalloc((size_t)n, sizeof *o);
  for (int k = 0; k < n; k++) o[k] = (order_t){b[k].lo_pos, -k}; /* forward, layout order */
  qsort(o, (size_t)n, sizeof *o, by_key);
  double *done = mt_xcalloc((size_t)n, sizeof(double));
  double busy = 0;
  for (int k = 0; k < n; k++) done[k] = busy += cost[-o[k].idx];
  double clock = 0, compute = 0;
  int k = 0;
  for (int p = 0; p < n_pos; p++) {
    for (; k < n && (int)o[k].key <= p; k++) clock = done[k] > clock ? done[k] : clock;
    clock += fwd_pos[p];
    compute += fwd_pos[p];
  }
  free(done);
  free(o);
  return clock > compute ? clock - compute : 0;
}

/* The buckets of a list seen from the end: positions mirrored, so that a
 * backward's gathers (needed at each bucket's last position, from the head
 * down) run through mt_plan_overlap_gather. */
static void mirror(mt_plan_bucket *dst, const mt_plan_bucket *src, int n, int n_pos) {
  for (int k = 0; k < n; k++) {
    dst[n - 1 - k] = src[k];
    dst[n - 1 - k].lo_pos = n_pos - 1 - src[k].hi_pos;
  }
}

void mt_plan_dp_overlap(const mt_config *cfg, const mt_plan_dims *d, const mt_hardware *hw,
                        const mt_plan_options *opt, int stage, const double *fwd_pos,
                        const double *bwd_pos, int n_pos, const int intra[2], double *exposed,
                        double *total, double *gather_bytes) {
  *exposed = *total = 0;
  if (gather_bytes) *gather_bytes = 0;
  mt_plan_bucket *b = NULL;
  int np = 0;
  const int n = mt_plan_stage_buckets(cfg, d, stage, &b, &np);
  if (n == 0 || np != n_pos) {
    free(b);
    return;
  }
  double *rs = mt_xcalloc((size_t)n, sizeof(double)), *ag = mt_xcalloc((size_t)n, sizeof(double));
  /* gathered bytes per element of each part: d->e, or with fp8_param_gather
   * the part's FP8 bytes (plan_fp8.c) spread over its buckets by elements */
  double part_elems[2] = {0, 0}, bpe[2] = {d->e, d->e};
  for (int k = 0; k < n; k++) part_elems[b[k].expert] += b[k].elems;
  for (int q = 0; q < 2 && mt_plan_fp8_on(cfg) && cfg->training.fp8_param_gather; q++)
    if (part_elems[q] > 0)
      bpe[q] = mt_plan_fp8_gather_bytes(cfg, d, stage, q, part_elems[q]) / part_elems[q];
  for (int k = 0; k < n; k++) {
    const double N = b[k].expert ? d->edp : d->d * d->c;
    const int in = intra[b[k].expert];
    rs[k] = mt_plan_coll(hw, d->zero ? MT_PLAN_RS : MT_PLAN_AR, N, b[k].elems * 4, in);
    ag[k] = d->zero ? mt_plan_coll(hw, MT_PLAN_AG, N, b[k].elems * bpe[b[k].expert], in) : 0;
  }
  if (gather_bytes && d->zero)
    *gather_bytes = (d->zero == 3 ? 2 * d->m : 1) *
                    (part_elems[0] * bpe[0] + part_elems[1] * bpe[1]);
  const int ovr = opt->overlap_grad_reduce, ovg = opt->overlap_param_gather;
  const double m = d->m;
  double tot = 0;
  if (d->zero <= 1) {
    *exposed = mt_plan_overlap_reduce(b, rs, n, bwd_pos, n_pos, ovr, &tot);
    *total = tot;
  } else { /* ZeRO-2/3: a reduce-scatter per micro-batch */
    *exposed = m * mt_plan_overlap_reduce(b, rs, n, bwd_pos, n_pos, ovr, &tot);
    *total = m * tot;
  }
  if (d->zero == 1 || d->zero == 2) { /* updated parameters before the next forward */
    *exposed += mt_plan_overlap_gather(b, ag, n, fwd_pos, n_pos, ovg, &tot);
    *total += tot;
  } else if (d->zero == 3) { /* gathered for each micro-batch's forward and backward */
    mt_plan_bucket *r = mt_xcalloc((size_t)n, sizeof *r);
    double *rev = mt_xcalloc((size_t)n_pos, sizeof(double)), *agr = mt_xcalloc((size_t)n, sizeof(double));
    mirror(r, b, n, n_pos);
    for (int p = 0; p < n_pos; p++) rev[p] = bwd_pos[n_pos - 1 - p];
    for (int k = 0; k < n; k++) agr[n - 1 - k] = ag[k];
    double t2 = 0;
    *exposed += m * (mt_plan_overlap_gather(b, ag, n, fwd_pos, n_pos, ovg, &tot) +
                     mt_plan_overlap_gather(r, agr, n, rev, n_pos, ovg, &t2));
    *total += m * (tot + t2);
    free(r);
    free(rev);
    free(agr);
  }
  free(rs);
  free(ag);
  free(b);
}

static const int k_comm[] = {MT_PT_TP_COMM, MT_PT_CP_COMM, MT_PT_EP_COMM, MT_PT_PP_COMM,
                             MT_PT_DP_COMM};

double mt_plan_compute_s(const mt_plan_time *t) {
  double s = t->comp[MT_PT_OPTIM];
  for (int i = MT_PT_GEMM; i <= MT_PT_RECOMPUTE; i++) s += t->comp[i];
  return s;
}

double mt_plan_comm_total(const mt_plan_time *t) {
  double s = 0;
  for (size_t k = 0; k < sizeof k_comm / sizeof *k_comm; k++) s += t->comm_total[k_comm[k]];
  return s;
}

double mt_plan_comm_exposed(const mt_plan_time *t) {
  double s = 0;
  for (size_t k = 0; k < sizeof k_comm / sizeof *k_comm; k++) s += t->comp[k_comm[k]];
  return s;
}
