/* optimizer/optimizer.h — AdamW over the model's flat buffers, global gradient
 * norm and clipping (Megatron optimizer/ and clip_grads.py).
 *
 * State: Adam moments m, v (fp32, MT_MEM_OPTIM) for every local parameter
 * element, an fp32 master copy when the backend stores parameters in a lower
 * precision, and the update counter `step` (saved in checkpoints: the bias
 * correction depends on it).
 */
#ifndef MT_OPTIMIZER_OPTIMIZER_H
#define MT_OPTIMIZER_OPTIMIZER_H

#include <stdint.h>

#include "core/backend.h"
#include "model/params.h"

typedef struct {
  mt_backend *be;
  const mt_param_list *params;
  void *param_buf;   /* model's flat parameters (T) */
  float *grad_buf;   /* model's flat gradients (fp32) */
  float *master;     /* fp32 master weights; == param_buf when T is fp32 */
  float *m, *v;      /* fp32 moments, params->numel elements */
  int64_t numel;
  int64_t step;      /* updates applied so far */
  float beta1, beta2, eps, weight_decay;
  double *norm_acc;  /* two doubles in backend memory (MT_MEM_COMM): the
                        gradient-norm accumulators (sumsq_acc_f32), dense
                        and expert */
} mt_adamw;

/* Allocate optimizer state for the parameters in `params` (zeroed moments). */
void mt_adamw_init(mt_adamw *opt, mt_backend *be, const mt_param_list *params, void *param_buf,
                   float *grad_buf, float beta1, float beta2, float eps, float weight_decay);
void mt_adamw_free(mt_adamw *opt);

/* The value of a gradient-norm accumulator `acc` (one double of backend
 * memory that sumsq_acc_f32 added each tensor's sum of squares to, after a
 * memset0): the one device-to-host copy (synchronising) of a norm
 * reduction. Bitwise equal to summing sumsq_f32 of the tensors in order. */
double mt_grad_sumsq_acc_read(mt_backend *be, double *acc);

/* Sum of squares of this rank's local gradients (fp64). Tensors marked
 * tp_replicated are counted only when `count_replicated` (the caller passes
 * tp_rank == 0 so that summing over the model-parallel group counts each
 * replicated tensor once). */
double mt_grad_sumsq(const mt_adamw *opt, int count_replicated);
/* The global sum of squares of the gradients (non-ZeRO path) with ONE
 * device-to-host copy: dense sums (as mt_grad_sumsq with count_replicated)
 * and, when `experts`, expert sums (as mt_grad_sumsq_experts) accumulate
 * into the two doubles of opt->norm_acc; the dense one is all-reduced (fp64
 * sum) over `mp`, the expert one over `etp_ep` then `pp`, on the backend
 * buffer (the group's engine: NCCL or staging on device memory, MPI on
 * host); then both are read at once. Returns dense + expert, bitwise equal
 * to the per-sum reads reduced on the host. Collective over those groups. */
typedef struct mt_group mt_group;
double mt_grad_sumsq_reduced(const mt_adamw *opt, int count_replicated, int experts,
                             mt_group *mp, mt_group *etp_ep, mt_group *pp);

/* One AdamW update with learning rate `lr`, gradients multiplied by
 * `grad_scale` (clip coefficient); no weight decay on biases/LayerNorm.
 * Increments opt->step. */
void mt_adamw_step(mt_adamw *opt, float lr, float grad_scale);

/* Megatron's clip coefficient: min(1, max_norm / (norm + 1e-6)); 1 when
 * max_norm <= 0. */
float mt_clip_coefficient(double grad_norm, float max_norm);

#endif
