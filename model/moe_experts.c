/* model/moe_experts.c — the local experts' MLPs (see moe_experts.h). */
#include "model/moe_experts.h"

#include <stdlib.h>

#include "core/util.h"
#include "model/linear.h"

struct mt_moe_experts {
  mt_backend *be;
  mt_moe_experts_config c;
  void *d_f;                  /* [r_max, g·F] T: gradient of the fc1 output (GELU: first of
                                 the fc2 input, in place) */
  void *d_a;                  /* [r_max, F] T: gradient of the fc2 input (SwiGLU only) */
};

static void *ws(mt_backend *be, int64_t n, mt_dtype t, mt_mem_cat cat) {
  return be->ops->alloc(be, (size_t)(n > 0 ? n : 1) * mt_dtype_size(t), cat);
}

mt_moe_experts *mt_moe_experts_create(mt_backend *be, const mt_moe_experts_config *c) {
  MT_ASSERT(c->E_loc >= 1 && c->ep_size >= 1);
  mt_moe_experts *x = mt_xcalloc(1, sizeof *x);
  x->be = be;
  x->c = *c;
  const int64_t g = c->swiglu ? 2 : 1;
  x->d_f = ws(be, c->r_max * g * c->F, be->dtype, MT_MEM_WORKSPACE);
  x->d_a = c->swiglu ? ws(be, c->r_max * c->F, be->dtype, MT_MEM_WORKSPACE) : NULL;
  return x;
}

void mt_moe_experts_destroy(mt_moe_experts *x) {
  if (!x) return;
  x->be->ops->free(x->be, x->d_f);
  x->be->ops->free(x->be, x->d_a);
  free(x);
}

void mt_moe_experts_acts_init(mt_moe_experts *x, mt_moe_experts_acts *a) {
  const int64_t g = x->c.swiglu ? 2 : 1;
  a->fc1 = ws(x->be, x->c.r_max * g * x->c.F, x->be->dtype, MT_MEM_ACT);
  a->act = ws(x->be, x->c.r_max * x->c.F, x->be->dtype, MT_MEM_ACT);
}

void mt_moe_experts_acts_free(mt_moe_experts *x, mt_moe_experts_acts *a) {
  x->be->ops->free(x->be, a->fc1);
  x->be->ops->free(x->be, a->act);
  a->fc1 = a->act = NULL;
}

/* The same products as grouped GEMMs (moe_grouped_gemm; Megatron-core's
 * GroupedMLP): one op over every non-empty (peer, expert) block per GEMM
 * kind, each block a group; the weight-gradient groups of one expert share
 * their C (dW[le]) and run in peer order, as the loop does, so the result is
 * the loop's (bitwise on cpu in fp32, core/backend.h). */
static void grouped(const mt_moe_experts *x, const int64_t *counts, void *y, float **dW,
                    float **dB, const void *dy, const void *in, const void **W, const void **B,
                    int64_t out, int64_t inw) {
  mt_backend *be = x->be;
  const int El = x->c.E_loc, NB = x->c.ep_size * El;
  const size_t es = mt_dtype_size(be->dtype);
  int *mnk = mt_xmalloc(sizeof(int) * 3 * (size_t)NB);
  const void **pa = mt_xmalloc(sizeof(void *) * 4 * (size_t)NB), **pb = pa + NB,
             **pbias = pa + 3 * (size_t)NB;
  void **pc = (void **)(pa + 2 * (size_t)NB);
  int64_t *off = mt_xmalloc(sizeof(int64_t) * (size_t)NB);
  int *blk = mt_xmalloc(sizeof(int) * (size_t)NB), G = 0;
  int64_t o = 0;
  for (int b = 0; b < NB; b++) {
    if (counts[b]) blk[G] = b, off[G++] = o;
    o += counts[b];
  }
  int *m = mnk, *n = mnk + NB, *k = mnk + 2 * NB;
  mt_gemm_grouped_desc d = {.alpha = 1.0f, .a_type = be->dtype, .b_type = be->dtype, .groups = G,
                            .m = m, .n = n, .k = k, .a = pa, .b = pb, .c = pc};
  for (int g = 0; g < G; g++) { /* forward y = in W^T + B, or dx = dy W */
    const int le = blk[g] % El;
    m[g] = (int)counts[blk[g]], n[g] = (int)(dW ? inw : out), k[g] = (int)(dW ? out : inw);
    pa[g] = (const char *)(dW ? dy : in) + off[g] * (dW ? out : inw) * (int64_t)es;
    pb[g] = W[le];
    pc[g] = (char *)y + off[g] * n[g] * (int64_t)es;
    pbias[g] = dW ? NULL : B[le];
  }
  d.trans_b = !dW, d.lda = dW ? out : inw, d.ldb = inw, d.ldc = dW ? inw : out;
  d.c_type = be->dtype, d.bias = dW ? NULL : pbias;
  if (dW) {
    /* dW[le] += dy[block]^T in[block] (fp32), groups of one expert in peer order */
    mt_gemm_grouped_desc w = d;
    const void **qa = mt_xmalloc(sizeof(void *) * 3 * (size_t)(G ? G : 1)), **qb = qa + G;
    void **qc = (void **)(qa + 2 * (size_t)G);
    int *wm = mt_xmalloc(sizeof(int) * 3 * (size_t)(G ? G : 1)), *wn = wm + G, *wk = wm + 2 * G;
    for (int g = 0; g < G; g++) {
      const int le = blk[g] % El;
      wm[g] = (int)out, wn[g] = (int)inw, wk[g] = m[g];
      qa[g] = pa[g], qb[g] = (const char *)in + off[g] * inw * (int64_t)es, qc[g] = dW[le];
    }
    w.trans_a = 1, w.trans_b = 0, w.beta = 1.0f, w.lda = out, w.ldb = inw, w.ldc = inw;
    w.c_type = MT_F32, w.m = wm, w.n = wn, w.k = wk, w.a = qa, w.b = qb, w.c = qc;
    be->ops->gemm_grouped(be, &w);
    for (int g = 0; g < G; g++)
      if (dB[blk[g] % El]) be->ops->bias_grad(be, dB[blk[g] % El], pa[g], m[g], out);
    free(qa);
    free(wm);
  }
  be->ops->gemm_grouped(be, &d);
  free(mnk);
  free(pa);
  free(off);
  free(blk);
}

/* One linear layer [out, inw] of each local expert over every (source peer,
 * local expert) block of rows. Forward (dW == NULL): y[block] [n, out] =
 * in[block] [n, inw] @ W[le]^T + B[le]. Backward: dW[le], dB[le] accumulate
 * from dy[block] [n, out] and in[block]; y[block] [n, inw] (overwrite) =
 * dy[block] @ W[le]. One GEMM per block, or grouped GEMMs (x->c.grouped). */
static void per_block(const mt_moe_experts *x, const int64_t *counts, void *y, float **dW,
                      float **dB, const void *dy, const void *in, const void **W, const void **B,
                      int64_t out, int64_t inw) {
  if (x->c.grouped) {
    grouped(x, counts, y, dW, dB, dy, in, W, B, out, inw);
    return;
  }
  mt_backend *be = x->be;
  const int El = x->c.E_loc;
  const size_t es = mt_dtype_size(be->dtype);
  int64_t off = 0;
  for (int p = 0; p < x->c.ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = counts[p * El + le];
      const char *inb = (const char *)in + off * inw * es;
      if (n && dW)
        mt_linear_bwd(be, (char *)y + off * inw * es, dW[le], dB[le],
                      (const char *)dy + off * out * es, inb, W[le], n, out, inw);
      else if (n)
        mt_linear_fwd(be, (char *)y + off * out * es, inb, W[le], B[le], n, out, inw);
      off += n;
    }
}

void mt_moe_experts_forward(mt_moe_experts *x, mt_moe_experts_acts *a,
                            const mt_moe_expert_weights *w, void *y, const void *in,
                            const int64_t *counts, int64_t R) {
  mt_backend *be = x->be;
  const int64_t h = x->c.h, F = x->c.F, g = x->c.swiglu ? 2 : 1;
  /* one GEMM per (source peer, local expert) block of rows */
  per_block(x, counts, a->fc1, NULL, NULL, NULL, in, w->fc1_w, w->fc1_b, g * F, h);
  if (R && x->c.swiglu)
    be->ops->swiglu_fwd(be, a->act, a->fc1, R, F);
  else if (R)
    be->ops->gelu_fwd(be, a->act, a->fc1, R * F);
  per_block(x, counts, y, NULL, NULL, NULL, a->act, w->fc2_w, w->fc2_b, h, F);
}

void mt_moe_experts_backward(mt_moe_experts *x, mt_moe_experts_acts *a,
                             const mt_moe_expert_weights *w, const mt_moe_expert_grads *g,
                             void *dx, const void *dy, const void *in, const int64_t *counts,
                             int64_t R) {
  mt_backend *be = x->be;
  const int64_t h = x->c.h, F = x->c.F, gl = x->c.swiglu ? 2 : 1;
  if (x->c.swiglu) {
    per_block(x, counts, x->d_a, g->fc2_w, g->fc2_b, dy, a->act, w->fc2_w, NULL, h, F);
    if (R) be->ops->swiglu_bwd(be, x->d_f, x->d_a, a->fc1, R, F);
  } else {
    per_block(x, counts, x->d_f, g->fc2_w, g->fc2_b, dy, a->act, w->fc2_w, NULL, h, F);
    if (R) be->ops->gelu_bwd(be, x->d_f, a->fc1, x->d_f, R * F);
  }
  per_block(x, counts, dx, g->fc1_w, g->fc1_b, x->d_f, in, w->fc1_w, NULL, gl * F, h);
}
