/* optimizer/optimizer.c — AdamW, gradient norm and clipping (see optimizer.h). */
#include "optimizer/optimizer.h"

#include <string.h>

#include "core/util.h"
#include "parallel/comm.h"

void mt_adamw_init(mt_adamw *opt, mt_backend *be, const mt_param_list *params, void *param_buf,
                   float *grad_buf, float beta1, float beta2, float eps, float weight_decay) {
  memset(opt, 0, sizeof *opt);
  opt->be = be;
  opt->params = params;
  opt->param_buf = param_buf;
  opt->grad_buf = grad_buf;
  opt->numel = params->numel;
  opt->beta1 = beta1;
  opt->beta2 = beta2;
  opt->eps = eps;
  opt->weight_decay = weight_decay;
  size_t bytes = (size_t)opt->numel * sizeof(float);
  opt->m = be->ops->alloc(be, bytes, MT_MEM_OPTIM);
  opt->v = be->ops->alloc(be, bytes, MT_MEM_OPTIM);
  be->ops->memset0(be, opt->m, bytes);
  be->ops->memset0(be, opt->v, bytes);
  if (be->dtype == MT_F32) {
    opt->master = param_buf;
  } else {
    opt->master = be->ops->alloc(be, bytes, MT_MEM_OPTIM);
    be->ops->cast(be, opt->master, MT_F32, param_buf, be->dtype, opt->numel);
  }
  opt->norm_acc = be->ops->alloc(be, 2 * sizeof(double), MT_MEM_COMM);
}

void mt_adamw_free(mt_adamw *opt) {
  mt_backend *be = opt->be;
  if (!be) return;
  be->ops->free(be, opt->m);
  be->ops->free(be, opt->v);
  if (opt->master != opt->param_buf) be->ops->free(be, opt->master);
  be->ops->free(be, opt->norm_acc);
  memset(opt, 0, sizeof *opt);
}

/* The gradient norm is accumulated on the backend (sumsq_acc_f32 per tensor
 * into one device double, no synchronisation per tensor) and read once. */
double mt_grad_sumsq_acc_read(mt_backend *be, double *acc) {
  double s = 0.0;
  be->ops->memcpy_d2h(be, &s, acc, sizeof s);
  return s;
}

double mt_grad_sumsq(const mt_adamw *opt, int count_replicated) {
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  be->ops->memset0(be, opt->norm_acc, sizeof(double));
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    if (p->shared_copy || p->is_expert || (p->tp_replicated && !count_replicated)) continue;
    be->ops->sumsq_acc_f32(be, opt->norm_acc, opt->grad_buf + p->offset, p->numel);
  }
  return mt_grad_sumsq_acc_read(be, opt->norm_acc);
}

double mt_grad_sumsq_reduced(const mt_adamw *opt, int count_replicated, int experts,
                             mt_group *mp, mt_group *etp_ep, mt_group *pp) {
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  double *acc = opt->norm_acc, v[2];
  be->ops->memset0(be, acc, 2 * sizeof(double));
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    if (p->is_expert) { /* as mt_grad_sumsq_experts */
      if (experts) be->ops->sumsq_acc_f32(be, acc + 1, opt->grad_buf + p->offset, p->numel);
    } else if (!p->shared_copy && (!p->tp_replicated || count_replicated)) { /* as mt_grad_sumsq */
      be->ops->sumsq_acc_f32(be, acc, opt->grad_buf + p->offset, p->numel);
    }
  }
  mt_allreduce(mp, acc, 1, MT_F64, MT_OP_SUM);
  if (experts) {
    mt_allreduce(etp_ep, acc + 1, 1, MT_F64, MT_OP_SUM);
    mt_allreduce(pp, acc + 1, 1, MT_F64, MT_OP_SUM);
  }
  be->ops->memcpy_d2h(be, v, acc, sizeof v);
  return v[0] + v[1];
}

void mt_adamw_step(mt_adamw *opt, float lr, float grad_scale) {
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  size_t es = mt_dtype_size(be->dtype);
  opt->step++;
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    mt_adamw_hparams hp = {.lr = lr,
                           .beta1 = opt->beta1,
                           .beta2 = opt->beta2,
                           .eps = opt->eps,
                           .weight_decay = p->no_weight_decay ? 0.0f : opt->weight_decay,
                           .step = opt->step,
                           .grad_scale = grad_scale};
    void *lowp = opt->master == opt->param_buf ? NULL
                                                : (char *)opt->param_buf + (size_t)p->offset * es;
    be->ops->adamw(be, &hp, opt->master + p->offset, opt->m + p->offset, opt->v + p->offset,
                   opt->grad_buf + p->offset, lowp, p->numel);
  }
}

float mt_clip_coefficient(double grad_norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  double c = (double)max_norm / (grad_norm + 1.0e-6);
  return c < 1.0 ? (float)c : 1.0f;
}
