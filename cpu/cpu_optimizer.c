/* cpu/cpu_optimizer.c — the optimizer ops of the CPU backend: the AdamW
 * update (fp32 master, optional low-precision copy) and the reductions of
 * the gradient norm (sum, sum of squares, sum of squares accumulated in
 * backend memory); cuda/cuda_optimizer.cu is the GPU counterpart. Reductions
 * use a fixed number of chunks summed in order, so every result is bitwise
 * independent of the thread count. */
#include <math.h>

#include "core/util.h"
#include "cpu_bf16.h"

/* ---- AdamW ---- */

/* AdamW in fp32 per element (mt_adamw_update, core/scalar_math.h, shared
 * with cuda/); the bias corrections 1 - beta^step are computed once in
 * double and rounded to float (mt_adamw_coef_make). */
void cpu_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m, float *v,
               const float *grad, void *param_lowp, int64_t n) {
  (void)be;
  MT_ASSERT(hp->step >= 1);
  const mt_adamw_coef c = mt_adamw_coef_make(hp->lr, hp->beta1, hp->beta2, hp->eps,
                                             hp->weight_decay, hp->grad_scale, hp->step);
  float *pl = (float *)param_lowp;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) {
    float w = mt_adamw_update(c, grad[i], &m[i], &v[i], master[i]);
    master[i] = w;
    if (pl) pl[i] = w;
  }
}

/* ---- reductions ---- */

#define RED_CHUNKS 64

static double reduce_f32(mt_backend *be, const float *x, int64_t n, int squares) {
  double part[RED_CHUNKS];
  int64_t chunk = (n + RED_CHUNKS - 1) / RED_CHUNKS;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
  for (int c = 0; c < RED_CHUNKS; c++) {
    int64_t i0 = c * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double acc = 0.0;
    if (squares) {
#pragma omp simd reduction(+ : acc)
      for (int64_t i = i0; i < i1; i++) acc += (double)x[i] * (double)x[i];
    } else {
#pragma omp simd reduction(+ : acc)
      for (int64_t i = i0; i < i1; i++) acc += (double)x[i];
    }
    part[c] = acc;
  }
  double s = 0.0;
  for (int c = 0; c < RED_CHUNKS; c++) s += part[c];
  return s;
}

double cpu_sumsq_f32(mt_backend *be, const float *x, int64_t n) {
  return reduce_f32(be, x, n, 1);
}

double cpu_sum_f32(mt_backend *be, const float *x, int64_t n) {
  return reduce_f32(be, x, n, 0);
}

void cpu_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n) {
  *acc += reduce_f32(be, x, n, 1);
}

/* ---- bf16 storage: the fp32 update, then the bf16 parameter = master rounded ---- */

void cpu_bf16_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m,
                    float *v, const float *grad, void *param_lowp, int64_t n) {
  cpu_adamw(be, hp, master, m, v, grad, NULL, n);
  if (param_lowp) bf_narrow(be, param_lowp, master, n);
}
