/* optimizer/distrib_optimizer.h — ZeRO stages 1-3 over the data-parallel group
 * (Rajbhandari et al. 2020; Megatron's distributed optimizer), and for MoE
 * the expert parameters over the expert-data-parallel group (Megatron's
 * separate expert-parallel buffers, DeepSpeed-MoE's expert-data-parallel
 * ZeRO; docs/moe.md "ZeRO with experts"): sharded AdamW,
 * gradient reduce-scatter, parameter all-gather, and (stages 2/3) the model
 * hooks that gather layer parameters and reduce layer gradients during the
 * pass. The mechanism (layout, buckets, shard collectives) is parallel/zero.h;
 * this file maps it onto the GPT's layers. docs/zero.md has the formulas.
 *
 * What each stage keeps per rank (Ψ = parameters, N = dp):
 *   stage 1: full parameters (T) and gradients (fp32); Adam m, v (and the fp32
 *            master when T is bf16) for the owned shard only.
 *   stage 2: as 1, but the full gradient buffer is released: each layer's
 *            gradients live in a working buffer from its backward until they
 *            are reduce-scattered (accumulated) into the owned gradient shard.
 *   stage 3: as 2, and parameters are sharded too: each layer is all-gathered
 *            into a working buffer before its forward and again before its
 *            backward and freed after use; `prefetch` layers ahead are gathered
 *            early (blocking all-gathers on the MPI engine, issued before the
 *            layer that needs them starts: see docs/zero.md).
 * Gradient accumulation: stages 2/3 reduce-scatter after every micro-batch
 * and ADD into the owned shard; stage 1 reduce-scatters once per step.
 */
#ifndef MT_OPTIMIZER_DISTRIB_OPTIMIZER_H
#define MT_OPTIMIZER_DISTRIB_OPTIMIZER_H

#include "core/timers.h"
#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "model/gpt.h"
#include "parallel/comm.h"
#include "parallel/zero.h"
#include "optimizer/zero_residency.h"

/* One owned piece of one parameter: flat [flat_off, flat_off + n) of the
 * model's buffers is shard [shard_off, shard_off + n) of this rank (in the
 * shard buffers of the part that holds it). */
typedef struct {
  int param;
  int64_t flat_off, shard_off, n;
} mt_zero_chunk;

typedef struct {
  int stage;               /* 1, 2 or 3 */
  int prefetch;            /* stage 3: layers gathered ahead */
  int64_t bucket_size;     /* elements (parallel.ddp_bucket_size) */
  float beta1, beta2, eps, weight_decay;
} mt_zero_options;

/* The groups ZeRO shards and reduces over (borrowed handles). */
typedef struct {
  mt_group *dp;            /* dense parameters: data x context parallel */
  mt_group *mp;            /* dense norm: model-parallel (tp x pp), may be NULL */
  int tp_rank;             /* tp_replicated dense tensors counted on tp rank 0 */
  mt_group *edp;           /* expert parameters: expert-data-parallel (NULL: no MoE) */
  mt_group *etp_ep;        /* expert norm: expert tensor x expert model parallel */
  mt_group *pp;            /* expert norm: pipeline (may be NULL) */
  int etp_rank;            /* tp_replicated expert tensors counted on etp rank 0 */
  int etp, ep, ep_rank;    /* expert layout, recorded in checkpoint shard files */
} mt_zero_groups;

/* One sharded buffer family (Megatron's distributed optimizer keeps one per
 * gradient buffer: dense and expert-parallel): the layout of its segments of
 * the model's flat buffers over its group, the owned chunks, and its shard
 * buffers. part[0] holds the dense parameters over dp x cp, part[1] (MoE
 * only) the expert parameters over edp. Each model unit (embedding, layer,
 * head; one unit per pipeline stage) owns the segments
 * [unit_seg[u], unit_seg[u + 1]) of each part: the maximal runs of that
 * part's parameters inside the unit, in flat order. */
typedef struct {
  int expert;              /* 0: dense, 1: experts */
  mt_group *group;         /* sharding / reduction group */
  mt_zero_layout L;
  int *unit_seg;           /* [n_units + 1] */
  mt_zero_chunk *chunk;
  int n_chunk;
  void *param_shard;       /* stage 3: [shard_numel] T, MT_MEM_PARAM */
  float *grad_shard;       /* stages 2/3: [shard_numel] fp32, MT_MEM_GRAD */
  float *master;           /* [shard_numel] fp32, MT_MEM_OPTIM when T != fp32, else NULL */
  float *m, *v;            /* [shard_numel] fp32, MT_MEM_OPTIM */
  void *scratch;           /* [max_bucket_padded] fp32, MT_MEM_COMM (stages 1/2, padding) */
  void **pwork;            /* stages 2/3: [L.n_seg] gathered parameters (T) or NULL */
  float **gwork;           /* stages 2/3: [L.n_seg] gradient working buffers or NULL */
} mt_zero_part;

/* One started segment collective (zero_overlap.c): its buckets' handles. */
typedef struct {
  int part, seg, unit;
  mt_request **req;          /* [n_buckets of the segment] */
  float *work;               /* reduce-scatter: the gradient working buffer, freed when done */
} mt_zero_pending;

typedef struct {
  mt_backend *be;
  mt_gpt *model;
  const mt_param_list *params;
  mt_zero_options o;
  mt_zero_groups g;
  mt_group *dp_group;      /* = g.dp */
  int n_layers, tied;
  int n_units;             /* layers + 2 (embedding, layers, head), 1 with pipelines */
  mt_zero_part part[2];    /* dense, experts */
  int n_part;              /* 1 without expert parameters on this rank, else 2 */
  int64_t step;            /* updates applied so far */
  int defer_param_sync;    /* stages 1/2: mt_zero_opt_step leaves the parameter all-gather
                            * to the caller (overlap_param_gather) */
  /* stages 2/3 overlap (optimizer/zero_overlap.c): started gradient
   * reduce-scatters of segments, completed in start order; stage 3
   * parameter gathers of units, waited before their use */
  int overlap_grad, overlap_param;
  mt_zero_pending *pend;     /* reduce-scatters in start order */
  int n_pend, cap_pend;
  mt_zero_pending *gath;     /* parameter gathers in flight */
  int n_gath, cap_gath;
  /* stage 2/3 residency (optimizer/distrib_optimizer.c) over the units: the working
   * buffers of every part's segments of unit u live iff res.param[u] /
   * res.grad[u] */
  mt_zero_residency res;
  double *norm_acc;        /* two doubles (MT_MEM_COMM): dense, expert norm sums */
  /* optional (NULL: none): the caller's timers; gather_timer times the
   * stage-1/2 parameter all-gather of mt_zero_opt_step (Megatron's
   * params-all-gather) */
  mt_timers *timers;
  int gather_timer;
  /* fp8_param_gather (optimizer/fp8_param_gather.h; NULL: off): stages 1/2
   * gather the dense part with dense_gather(dense_ctx) instead of the bf16
   * all-gather, and mt_zero_opt_full_params first runs
   * dense_refresh(dense_ctx), which brings back the full bf16 copy */
  void (*dense_gather)(void *ctx);
  void (*dense_refresh)(void *ctx);
  void *dense_ctx;
} mt_zero_opt;

/* Build the layout over the model's flat buffers, allocate the sharded
 * optimizer state (master copies taken from the model's initial parameters),
 * and for stages 2/3 release the model's full gradient (and, stage 3,
 * parameter) buffer and install the hooks. No communication (every rank
 * starts from the same initial parameters). Fatal on a caller bug. */
void mt_zero_opt_init(mt_zero_opt *z, mt_backend *be, mt_gpt *model, const mt_zero_groups *g,
                      const mt_zero_options *o);
void mt_zero_opt_free(mt_zero_opt *z);

/* Start of an iteration: zero the gradients this stage keeps. */
void mt_zero_opt_zero_grad(mt_zero_opt *z);

/* After all micro-batches: stage 1 reduce-scatters the full gradient buffer
 * bucket by bucket, each part over its group (dense over dp x cp, experts
 * over edp; stages 2/3 already did it during backward). */
void mt_zero_opt_reduce_gradients(mt_zero_opt *z);

/* After each forward(_backward) call: release gathered parameters that are
 * still resident (stage 3; e.g. the head after an evaluation forward). */
void mt_zero_opt_flush(mt_zero_opt *z);

/* Global sum of squared gradients (fp64) from the owned shards only:
 * dense: tp_replicated tensors on tp rank 0 only, pipeline copies skipped,
 * summed over dp x cp then the model-parallel group (tp x pp); experts (MoE):
 * tp_replicated expert tensors on etp rank 0 only, summed over edp, then
 * etp x ep, then pp, so every expert shard counts once; every rank of a MoE
 * model joins these, also a pipeline stage without MoE layers. Both sums are
 * reduced on the backend buffer norm_acc and read with ONE device-to-host
 * copy. Identical on every rank. Collective over those groups. */
double mt_zero_opt_grad_sumsq(mt_zero_opt *z);

/* AdamW on the owned shards of both parts (gradients times grad_scale),
 * then (stages 1/2) all-gather the updated parameters, each part over its
 * group. Increments step. */
void mt_zero_opt_step(mt_zero_opt *z, float lr, float grad_scale);

/* Write the full parameter buffer [flat numel] (dtype T, device memory of
 * be) into dst: a copy (stages 1/2) or an all-gather of every segment, each
 * part over its group (stage 3; collective over dp x cp and edp). */
void mt_zero_opt_full_params(mt_zero_opt *z, void *dst);


/* Print "> ZeRO stage S over dp=N: ..." lines (layout and per-rank state). */
void mt_zero_opt_print_summary(const mt_zero_opt *z, FILE *f);

/* After a successful load of this rank's shards by a checkpoint reader
 * (checkpoint/legacy_zero.c) on every rank: stages 1/2 all-gather the
 * loaded shards into the full parameter buffer, each part over its group;
 * no-op for stage 3. */
void mt_zero_opt_sync_params(mt_zero_opt *z);

/* Stages 2/3 overlap (optimizer/zero_overlap.c; docs/communication.md,
 * "Overlap"). reduce_start: start the reduce-scatter of segment s of part k
 * from its working buffer `work` (owned from now on: freed when done);
 * finish_grads: complete every started one in start order (wait, add into
 * the gradient shard, free); called by mt_zero_opt_reduce_gradients.
 * gather_start: start the all-gather of segment s of part k (unit u) into
 * P->pwork[s]; gather_wait: wait for the gathers of unit u (u < 0: all).
 * free: complete everything (teardown). */
void mt_zero_ov_reduce_start(mt_zero_opt *z, int k, int s, float *work);
void mt_zero_ov_finish_grads(mt_zero_opt *z);
/* finish_segment: the same for part k's segment s only (before its next
 * working buffer is allocated, so that memory is reused). */
void mt_zero_ov_finish_segment(mt_zero_opt *z, int k, int s);
void mt_zero_ov_gather_start(mt_zero_opt *z, int k, int s, int u);
void mt_zero_ov_gather_wait(mt_zero_opt *z, int u);
void mt_zero_ov_free(mt_zero_opt *z);

/* Install the stage 2/3 hooks on the model (optimizer/distrib_optimizer.c). */
void mt_zero_hooks_install(mt_zero_opt *z);
/* Release every working buffer (parameters); gradient buffers must already
 * be reduced. */
void mt_zero_hooks_release_all(mt_zero_opt *z);

#endif
