/* planner/plan_moe.c — the MoE layer's activation and workspace bytes on
 * one rank, buffer by buffer as the implementation allocates them
 * (docs/moe_parallel.md "Memory and communication formulas"; checked byte for byte
 * against the allocator by tests/integration/test_plan_memory.sh):
 *
 *  - router (model/moe_layer.c mt_moe_create): fp32 logits [n_loc, E], the
 *    whole micro-batch's [b s, E] when gathered over TP (SP) or CP, the
 *    TP-gathered stage [b s / cp, E] with both, dlogits [n_loc, E] fp32 (and
 *    in the storage dtype under bf16);
 *  - dispatcher (model/moe_token_dispatcher.c): send buffers x_send,
 *    d_yback, dx_send [s_max, h] and receive buffers y_recv, d_yrecv,
 *    dx_recv [r_max, h] (workspace); per layer set slot, send_idx (int32),
 *    gate (fp32) [n_loc k] and x_recv [r_max, h], y_back [s_max, h]
 *    (activations); s_max = n_loc k, r_max = ep n_loc k, both E C with
 *    moe_pad_expert_input_to_capacity;
 *  - experts (model/moe_experts.c): per set fc1 [r_x, g F_x] and the
 *    activation [r_x, F_x]; workspaces d_f [r_x, g F_x] and (SwiGLU) d_a
 *    [r_x, F_x], with r_x = etp r_max rows (the ETP group's gathered rows)
 *    and F_x = F / etp columns;
 *  - ETP exchange (model/moe_etp.c, etp > 1): per set the gathered input
 *    [etp r_max, h], workspaces buf0, buf1 [etp r_max, h];
 *  - shared expert (model/moe_shared_experts.c, S > 0): per set fc1
 *    [b s_loc, g S / t] and activation [b s_loc, S / t] (on the TP-gathered
 *    sequence), workspace sh_out [n_loc, h]; the model's dffn / dact
 *    workspaces are sized for max(ffn, S) (mt_plan_mlp_ws_width).
 * Grouped GEMM (moe_grouped_gemm) keeps its pointer tables on the host and
 * allocates no device buffer of its own (the CPU op scratch is the
 * backend's, not predicted). Every buffer of n < 1 elements takes 1
 * element, as the implementation allocates it.
 */
#include <math.h>

#include "planner/plan_internal.h"

/* Tokens of this rank in one micro-batch: its CP share, split over TP under SP. */
static double n_loc_of(const mt_plan_dims *d) {
  const double rows = d->b * d->s_loc;
  return d->sp ? rows / d->t : rows;
}

double mt_plan_moe_worst_rows(const mt_plan_dims *d) {
  const double nk = n_loc_of(d) * d->topk;
  if (d->cap > 0) return d->cap * d->E;
  const double w = nk * d->ep;
  return d->cap_drop > 0 && d->cap_drop * d->E < w ? d->cap_drop * d->E : w;
}

void mt_plan_moe_rows(const mt_plan_dims *d, double *s_max, double *r_max) {
  const double nk = n_loc_of(d) * d->topk, worst = mt_plan_moe_worst_rows(d);
  if (d->cap > 0) {
    *s_max = *r_max = worst;
    return;
  }
  *s_max = nk;
  if (d->worst) *r_max = worst;
  else if (d->r_given) *r_max = d->r_fix;
  else *r_max = fmin(worst, ceil(d->lf * nk - 1e-9));
}

double mt_plan_moe_expert_rows(const mt_plan_dims *d) {
  double s_max, r_max;
  mt_plan_moe_rows(d, &s_max, &r_max);
  if (d->cap <= 0 && !d->worst && d->rx_given) return d->rx_fix;
  return (d->etp > 1 ? d->etp : 1) * r_max;
}

double mt_plan_mlp_ws_width(const mt_plan_dims *d) {
  const double fl = d->f / d->t, sl = d->S / d->t;
  return fl > sl ? fl : sl;
}

static double at_least_1(double n) { return n > 1 ? n : 1; }

double mt_plan_moe_set_bytes(const mt_plan_dims *d) {
  if (d->E <= 0) return 0;
  const double e = d->e, h = d->h, nk = n_loc_of(d) * d->topk;
  double smax, rmax;
  mt_plan_moe_rows(d, &smax, &rmax);
  const double etp = d->etp > 1 ? d->etp : 1, rx = mt_plan_moe_expert_rows(d), Fx = d->fm / etp;
  double b = 3 * at_least_1(nk) * 4 +                        /* slot, send_idx, gate */
             (at_least_1(rmax * h) + at_least_1(smax * h)) * e + /* x_recv, y_back */
             (at_least_1(rx * d->g * Fx) + at_least_1(rx * Fx)) * e; /* experts fc1, act */
  if (etp > 1) b += at_least_1(rx * h) * e;                  /* ETP-gathered input */
  if (d->S > 0) {
    const double rows = d->b * d->s_loc, sl = d->S / d->t;
    b += (rows * d->g * sl + rows * sl) * e;
  }
  return b;
}

double mt_plan_moe_workspace_bytes(const mt_plan_dims *d) {
  if (d->E <= 0) return 0;
  const double e = d->e, h = d->h, E = d->E, n = n_loc_of(d), nk = n * d->topk;
  const double rows = d->b * d->s_loc;
  double smax, rmax;
  mt_plan_moe_rows(d, &smax, &rmax);
  const double etp = d->etp > 1 ? d->etp : 1, rx = mt_plan_moe_expert_rows(d), Fx = d->fm / etp;
  /* router logits: local, gathered over the whole micro-batch (SP: TP,
   * then CP; model/moe_layer.c logits_full) and the TP-gathered stage with
   * both; dlogits fp32 (+ in T under bf16) */
  const int gtp = n < rows, gcp = d->c > 1;
  double ws = at_least_1(n * E) * 4 + (gtp || gcp ? at_least_1(rows * d->c * E) * 4 : 0) +
              (gtp && gcp ? at_least_1(rows * E) * 4 : 0) + at_least_1(n * E) * 4 +
              (e < 4 ? at_least_1(n * E) * e : 0);
  /* dispatcher: 3 send + 3 receive buffers, dgate [n_loc k] fp32 */
  ws += (3 * at_least_1(smax * h) + 3 * at_least_1(rmax * h)) * e + at_least_1(nk) * 4;
  /* experts: d_f, d_a (SwiGLU) */
  ws += (at_least_1(rx * d->g * Fx) + (d->swiglu ? at_least_1(rx * Fx) : 0)) * e;
  if (etp > 1) ws += 2 * at_least_1(rx * h) * e; /* ETP buf0, buf1 */
  if (d->S > 0) ws += n * h * e;                  /* shared expert output */
  return ws;
}
