/* model/moe_experts.c — the local experts' MLPs (see moe_experts.h). */
#include "model/moe_experts.h"

#include <stdlib.h>

#include "core/util.h"
#include "model/linear.h"

struct mt_moe_experts {
  mt_backend *be;
  mt_moe_experts_config c;
  void *d_f;                  /* [r_max, F] T: gradient of the fc2 input, then fc1 output */
};

static void *ws(mt_backend *be, int64_t n, mt_dtype t, mt_mem_cat cat) {
  return be->ops->alloc(be, (size_t)(n > 0 ? n : 1) * mt_dtype_size(t), cat);
}

mt_moe_experts *mt_moe_experts_create(mt_backend *be, const mt_moe_experts_config *c) {
  MT_ASSERT(c->E_loc >= 1 && c->ep_size >= 1);
  mt_moe_experts *x = mt_xcalloc(1, sizeof *x);
  x->be = be;
  x->c = *c;
  x->d_f = ws(be, c->r_max * c->F, be->dtype, MT_MEM_WORKSPACE);
  return x;
}

void mt_moe_experts_destroy(mt_moe_experts *x) {
  if (!x) return;
  x->be->ops->free(x->be, x->d_f);
  free(x);
}

void mt_moe_experts_acts_init(mt_moe_experts *x, mt_moe_experts_acts *a) {
  a->fc1 = ws(x->be, x->c.r_max * x->c.F, x->be->dtype, MT_MEM_ACT);
  a->gelu = ws(x->be, x->c.r_max * x->c.F, x->be->dtype, MT_MEM_ACT);
}

void mt_moe_experts_acts_free(mt_moe_experts *x, mt_moe_experts_acts *a) {
  x->be->ops->free(x->be, a->fc1);
  x->be->ops->free(x->be, a->gelu);
  a->fc1 = a->gelu = NULL;
}

/* Forward of one linear layer over every (source peer, local expert) block:
 * y[block] [n, out] = x[block] [n, in] @ W[le]^T + b[le]. */
static void blocks_fwd(const mt_moe_experts *x, const int64_t *counts, void *y, const void *in,
                       const void **W, const void **B, int64_t out, int64_t inw) {
  mt_backend *be = x->be;
  const int El = x->c.E_loc;
  const size_t es = mt_dtype_size(be->dtype);
  int64_t off = 0;
  for (int p = 0; p < x->c.ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = counts[p * El + le];
      if (n) mt_linear_fwd(be, (char *)y + off * out * es, (const char *)in + off * inw * es,
                           W[le], B[le], n, out, inw);
      off += n;
    }
}

/* Backward of blocks_fwd: dW[le], dB[le] accumulate; dx[block] overwritten. */
static void blocks_bwd(const mt_moe_experts *x, const int64_t *counts, void *dx, float **dW,
                       float **dB, const void *dy, const void *in, const void **W, int64_t out,
                       int64_t inw) {
  mt_backend *be = x->be;
  const int El = x->c.E_loc;
  const size_t es = mt_dtype_size(be->dtype);
  int64_t off = 0;
  for (int p = 0; p < x->c.ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = counts[p * El + le];
      if (n) mt_linear_bwd(be, (char *)dx + off * inw * es, dW[le], dB[le],
                           (const char *)dy + off * out * es, (const char *)in + off * inw * es,
                           W[le], n, out, inw);
      off += n;
    }
}

void mt_moe_experts_forward(mt_moe_experts *x, mt_moe_experts_acts *a,
                            const mt_moe_expert_weights *w, void *y, const void *in,
                            const int64_t *counts, int64_t R) {
  const int64_t h = x->c.h, F = x->c.F;
  /* one GEMM per (source peer, local expert) block of rows */
  blocks_fwd(x, counts, a->fc1, in, w->fc1_w, w->fc1_b, F, h);
  if (R) x->be->ops->gelu_fwd(x->be, a->gelu, a->fc1, R * F);
  blocks_fwd(x, counts, y, a->gelu, w->fc2_w, w->fc2_b, h, F);
}

void mt_moe_experts_backward(mt_moe_experts *x, mt_moe_experts_acts *a,
                             const mt_moe_expert_weights *w, const mt_moe_expert_grads *g,
                             void *dx, const void *dy, const void *in, const int64_t *counts,
                             int64_t R) {
  const int64_t h = x->c.h, F = x->c.F;
  blocks_bwd(x, counts, x->d_f, g->fc2_w, g->fc2_b, dy, a->gelu, w->fc2_w, h, F);
  if (R) x->be->ops->gelu_bwd(x->be, x->d_f, a->fc1, x->d_f, R * F);
  blocks_bwd(x, counts, dx, g->fc1_w, g->fc1_b, x->d_f, in, w->fc1_w, F, h);
}
