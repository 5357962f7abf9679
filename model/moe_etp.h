/* model/moe_etp.h — expert tensor parallelism (ETP) of an MoE layer:
 * Megatron-core's MoE parallel folding (Liu et al. 2025, arXiv:2504.14960
 * §3; token_dispatcher.py MoEAlltoAllTokenDispatcher with tp > 1 on the
 * expert side). Each expert's MLP is split over the ETP group of etp ranks
 * like a dense tensor-parallel MLP: fc1 column-parallel (this rank holds
 * rows [r·F/etp, (r+1)·F/etp) of [F, h], with SwiGLU the same slice of the
 * gate half and of the up half), fc2 row-parallel (columns [r·F/etp, ...) of
 * [h, F]). The experts (model/moe_experts.h) only see F/etp.
 *
 * Token flow around the local experts (forward), after the EP all-to-all
 * has delivered R_r rows to ETP rank r (grouped by source EP peer p, local
 * expert le; counts cnt_recv[p·E_loc + le]):
 *   1. all-gather of the counts over ETP (etp · ep · E_loc int64);
 *   2. variable all-gather of the rows over ETP: every ETP rank then holds
 *      the R = Σ_r R_r rows, ordered (ETP rank r, peer p, local expert le);
 *      the experts treat them as etp·ep blocks (block r·ep + p, expert le);
 *   3. experts: fc1 shard, activation, fc2 shard -> partial sums [R, h];
 *   4. variable reduce-scatter over ETP: rank r gets the sum over the ETP
 *      ranks of its own R_r rows, which then go back by the combine
 *      all-to-all.
 * Backward mirrors it: the output gradient [R_r, h] is all-gathered
 * (variable) over ETP, the experts' input gradient partials [R, h] are
 * reduce-scattered (variable). Routing is untouched (whole micro-batch).
 *
 * Communication per MoE layer and micro-batch over the ETP group of n =
 * etp ranks (element size S of the storage dtype T): forward one all-gather
 * of n·ep·E_loc int64 counts, one all-gatherv and one reduce-scatterv of R·h
 * elements each; backward one all-gatherv and one reduce-scatterv of R·h
 * each. Counters record bytes = R·h·S, bus_bytes = (R − R_r)·h·S per call.
 *
 * Biases: none with ETP > 1 (Megatron: "Bias in Moe is only supported when
 * ETP==1"; config error on model.add_bias_linear).
 * Dtypes: rows T (backend storage dtype), counts int64 (host).
 */
#ifndef MT_MODEL_MOE_ETP_H
#define MT_MODEL_MOE_ETP_H

#include <stdint.h>

#include "core/backend.h"
#include "model/moe_experts.h"
#include "parallel/comm.h"

typedef struct {
  mt_group *etp;              /* ETP group, size >= 2 */
  int n_blocks;               /* count entries of one rank: ep · E/ep */
  int64_t h;                  /* hidden size */
  int64_t r_max;              /* rows one ETP rank may receive from the EP all-to-all */
  mt_moe_rowbuf *rows;        /* the experts' row group (mt_moe_experts_rowbuf): the gathered
                                 rows' buffers are C rows, grown to Σ_r R_r after the counts
                                 all-gather */
} mt_moe_etp_config;

/* What one layer keeps between forward and backward. */
typedef struct {
  int64_t *counts;            /* [etp · n_blocks] host: rows per (ETP rank, peer, local expert) */
  int64_t *rows, *displ;      /* [etp] host: rows of each ETP rank, their offset (rows) */
  int64_t R;                  /* Σ rows */
  void *x;                    /* [C, h] T (MT_MEM_ACT): gathered expert input (R used) */
} mt_moe_etp_state;

typedef struct mt_moe_etp mt_moe_etp;

/* ETP exchange of one model; scratch (MT_MEM_WORKSPACE) for the gathered
 * output gradient and the partial sums, 2 · C · h elements (C: the rows of
 * c->rows, the high-water mark of the gathered R). */
mt_moe_etp *mt_moe_etp_create(mt_backend *be, const mt_moe_etp_config *c);
void mt_moe_etp_destroy(mt_moe_etp *t);
/* Rows the experts may see at most: etp · r_max. */
int64_t mt_moe_etp_rows_capacity(const mt_moe_etp *t);
void mt_moe_etp_state_init(mt_moe_etp *t, mt_moe_etp_state *s);
void mt_moe_etp_state_free(mt_moe_etp *t, mt_moe_etp_state *s);

/* Forward of the local experts on this rank's R received rows in [R, h]
 * (T, counts[n_blocks] per (peer, local expert)), writing y [R, h] (T,
 * overwrite). t == NULL (etp 1): mt_moe_experts_forward unchanged.
 * Otherwise steps 1-4 above; collective over ETP. */
void mt_moe_etp_experts_forward(mt_moe_etp *t, mt_moe_etp_state *s, mt_moe_experts *x,
                                mt_moe_experts_acts *a, const mt_moe_expert_weights *w, void *y,
                                const void *in, const int64_t *counts, int64_t R);
/* Backward: dx [R, h] (T, overwrite) from dy [R, h] (T) of this rank's
 * rows; the expert shards' gradients accumulate. t == NULL:
 * mt_moe_experts_backward unchanged (in, counts, R as in the forward).
 * Collective over ETP. */
void mt_moe_etp_experts_backward(mt_moe_etp *t, mt_moe_etp_state *s, mt_moe_experts *x,
                                 mt_moe_experts_acts *a, const mt_moe_expert_weights *w,
                                 const mt_moe_expert_grads *g, void *dx, const void *dy,
                                 const void *in, const int64_t *counts, int64_t R);

#endif
