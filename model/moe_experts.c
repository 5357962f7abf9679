/* model/moe_experts.c — the local experts' MLPs (see moe_experts.h). */
#include "model/moe_experts.h"

#include <stdlib.h>

#include "core/util.h"
#include "model/fp8_linear.h"
#include "model/linear.h"
#include "model/moe_rowbuf.h"

struct mt_moe_experts {
  mt_backend *be;
  mt_moe_experts_config c;
  mt_moe_rowbuf *rows;        /* buffers of the rows the experts see: [C, ·] each, C = the
                                 high-water mark of R (c.rows0 at first) */
  void *d_f;                  /* [C, g·F] T: gradient of the fc1 output (GELU: first of
                                 the fc2 input, in place) */
  void *d_a;                  /* [C, F] T: gradient of the fc2 input (SwiGLU only) */
  void *gx, *gy, *gd;         /* FP8 with ep_size > 1: one expert's rows gathered (input,
                                 output, output gradient), [r_max, max(g·F, h)] T each;
                                 allocated on first use */
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
  x->rows = mt_moe_rowbuf_create(be, c->rows0, c->r_max);
  mt_moe_rowbuf_add(x->rows, &x->d_f, g * c->F, be->dtype, MT_MEM_WORKSPACE, NULL);
  if (c->swiglu) mt_moe_rowbuf_add(x->rows, &x->d_a, c->F, be->dtype, MT_MEM_WORKSPACE, NULL);
  return x;
}

mt_moe_rowbuf *mt_moe_experts_rowbuf(mt_moe_experts *x) { return x->rows; }

void mt_moe_experts_destroy(mt_moe_experts *x) {
  if (!x) return;
  mt_moe_rowbuf_remove(x->rows, &x->d_f);
  if (x->c.swiglu) mt_moe_rowbuf_remove(x->rows, &x->d_a);
  mt_moe_rowbuf_destroy(x->rows);
  x->be->ops->free(x->be, x->gx);
  x->be->ops->free(x->be, x->gy);
  x->be->ops->free(x->be, x->gd);
  free(x);
}

void mt_moe_experts_acts_init(mt_moe_experts *x, mt_moe_experts_acts *a) {
  const int64_t g = x->c.swiglu ? 2 : 1;
  a->rows = 0;
  mt_moe_rowbuf_add(x->rows, &a->fc1, g * x->c.F, x->be->dtype, MT_MEM_ACT, &a->rows);
  mt_moe_rowbuf_add(x->rows, &a->act, x->c.F, x->be->dtype, MT_MEM_ACT, &a->rows);
}

void mt_moe_experts_acts_free(mt_moe_experts *x, mt_moe_experts_acts *a) {
  mt_moe_rowbuf_remove(x->rows, &a->fc1);
  mt_moe_rowbuf_remove(x->rows, &a->act);
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

/* Copy the rows of local expert le's blocks (rows of width w, blocks in
 * source-peer order) between the block layout `blk` [R, w] and one
 * contiguous [n_le, w] buffer `dense`: gather (to_dense) or scatter. */
static void expert_rows(const mt_moe_experts *x, const int64_t *counts, int le, int64_t w,
                        void *blk, void *dense, int to_dense) {
  mt_backend *be = x->be;
  const int El = x->c.E_loc;
  const size_t rb = (size_t)w * mt_dtype_size(be->dtype);
  int64_t off = 0, d = 0;
  for (int b = 0; b < x->c.ep_size * El; b++) {
    if (b % El == le && counts[b]) {
      char *pb = (char *)blk + (size_t)off * rb, *pd = (char *)dense + (size_t)d * rb;
      if (to_dense) be->ops->memcpy_d2d(be, pd, pb, (size_t)counts[b] * rb);
      else be->ops->memcpy_d2d(be, pb, pd, (size_t)counts[b] * rb);
      d += counts[b];
    }
    off += counts[b];
  }
}

/* per_block in FP8 (w->fp8): one FP8 linear per local expert over all its
 * rows (TE's GroupedLinear quantizes each GEMM of the group with its own
 * scales). With one source peer an expert's rows are one block already;
 * otherwise they are gathered in peer order, and the output scattered back. */
static void fp8_experts(mt_moe_experts *x, struct mt_fp8_linear *f, int key, const int64_t *counts,
                        void *y, float **dW, float **dB, const void *dy, const void *in,
                        const void **W, const void **B, int64_t out, int64_t inw) {
  mt_backend *be = x->be;
  const int El = x->c.E_loc, P = x->c.ep_size;
  const size_t es = mt_dtype_size(be->dtype);
  const int64_t yw = dW ? inw : out; /* width of y's rows */
  if (P > 1 && !x->gx) {
    const int64_t wmax = (x->c.swiglu ? 2 : 1) * x->c.F > x->c.h ? (x->c.swiglu ? 2 : 1) * x->c.F
                                                                  : x->c.h;
    x->gx = ws(be, x->c.r_max * wmax, be->dtype, MT_MEM_WORKSPACE);
    x->gy = ws(be, x->c.r_max * wmax, be->dtype, MT_MEM_WORKSPACE);
    x->gd = ws(be, x->c.r_max * wmax, be->dtype, MT_MEM_WORKSPACE);
  }
  int64_t off = 0; /* P == 1: expert le's rows start at off */
  for (int le = 0; le < El; le++) {
    int64_t n = 0;
    for (int p = 0; p < P; p++) n += counts[p * El + le];
    /* no rows on any replica of the expert (delayed: its expert-data-parallel
     * group): no GEMM, nothing recorded; rows elsewhere: an empty call that
     * takes part in the amax reductions */
    if (!mt_fp8_linear_group_rows(f, n)) continue;
    const void *xin = (const char *)in + off * inw * (int64_t)es;
    const void *g = dW ? (const char *)dy + off * out * (int64_t)es : NULL;
    void *yo = (char *)y + off * yw * (int64_t)es;
    if (P > 1) {
      expert_rows(x, counts, le, inw, (void *)in, x->gx, 1);
      if (dW) expert_rows(x, counts, le, out, (void *)dy, x->gd, 1);
      xin = x->gx, g = x->gd, yo = x->gy;
    }
    mt_fp8_linear_select(f, key + le); /* global expert ep_rank·E_loc + le */
    if (dW) mt_fp8_linear_bwd(f, yo, dW[le], dB[le], g, xin, W[le], n, out, inw);
    else mt_fp8_linear_fwd(f, yo, xin, W[le], B[le], n, out, inw);
    if (P > 1) expert_rows(x, counts, le, yw, y, x->gy, 0);
    off += n;
  }
}

/* One linear layer [out, inw] (fc 0: fc1, 1: fc2) of each local expert over
 * every (source peer, local expert) block of rows. Forward (dW == NULL): y[block] [n, out] =
 * in[block] [n, inw] @ W[le]^T + B[le]. Backward: dW[le], dB[le] accumulate
 * from dy[block] [n, out] and in[block]; y[block] [n, inw] (overwrite) =
 * dy[block] @ W[le]. One GEMM per block, or grouped GEMMs (x->c.grouped). */
static void per_block(mt_moe_experts *x, const mt_moe_expert_weights *w, int fc,
                      const int64_t *counts, void *y, float **dW, float **dB, const void *dy,
                      const void *in, const void **W, const void **B, int64_t out, int64_t inw) {
  if (w->fp8) {
    fp8_experts(x, w->fp8, w->fp8_key[fc], counts, y, dW, dB, dy, in, W, B, out, inw);
    return;
  }
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
  mt_moe_rowbuf_reserve(x->rows, R); /* this set's old rows are dead: kept, then overwritten */
  a->rows = R;
  /* one GEMM per (source peer, local expert) block of rows */
  per_block(x, w, 0, counts, a->fc1, NULL, NULL, NULL, in, w->fc1_w, w->fc1_b, g * F, h);
  if (R && x->c.swiglu)
    be->ops->swiglu_fwd(be, a->act, a->fc1, R, F);
  else if (R)
    be->ops->gelu_fwd(be, a->act, a->fc1, R * F);
  per_block(x, w, 1, counts, y, NULL, NULL, NULL, a->act, w->fc2_w, w->fc2_b, h, F);
}

void mt_moe_experts_backward(mt_moe_experts *x, mt_moe_experts_acts *a,
                             const mt_moe_expert_weights *w, const mt_moe_expert_grads *g,
                             void *dx, const void *dy, const void *in, const int64_t *counts,
                             int64_t R) {
  mt_backend *be = x->be;
  const int64_t h = x->c.h, F = x->c.F, gl = x->c.swiglu ? 2 : 1;
  if (x->c.swiglu) {
    per_block(x, w, 1, counts, x->d_a, g->fc2_w, g->fc2_b, dy, a->act, w->fc2_w, NULL, h, F);
    if (R) be->ops->swiglu_bwd(be, x->d_f, x->d_a, a->fc1, R, F);
  } else {
    per_block(x, w, 1, counts, x->d_f, g->fc2_w, g->fc2_b, dy, a->act, w->fc2_w, NULL, h, F);
    if (R) be->ops->gelu_bwd(be, x->d_f, a->fc1, x->d_f, R * F);
  }
  per_block(x, w, 0, counts, dx, g->fc1_w, g->fc1_b, x->d_f, in, w->fc1_w, NULL, gl * F, h);
}
