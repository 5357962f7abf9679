/* model/fp8_linear.c — see fp8_linear.h. */
#include "model/fp8_linear.h"

#include <stdlib.h>
#include <string.h>

#include "core/fp8.h"
#include "core/util.h"

/* Delayed-scaling state of one linear layer's three roles (x, w, dy):
 * meta[r] = [scale the next use takes, history[0..L) most recent first]
 * (the checkpoint's layout, mt_fp8_linear_meta). */
typedef struct {
  int key;                  /* the caller's key (mt_fp8_linear_select) */
  float *meta[3];           /* [1 + history_len] each */
  float used[3];            /* the scale the last use took (x, w: reused by the backward) */
  /* training forwards awaiting their backward, oldest first: the x and w
   * scales each took (the backward and a recomputed forward reuse them) */
  float (*pend)[2];
  int pend_head, pend_n, pend_cap;
} fp8_state;

enum { R_X = 0, R_W = 1, R_G = 2 };

struct mt_fp8_linear {
  mt_backend *be;
  mt_fp8_options o;
  mt_group *red[3];         /* amax reduction groups: tp, cp, dp (NULL = none) */
  int next_key;             /* key of the next forward / backward call (-1: none) */
  fp8_state *st;
  int nst, capst;
  mt_fp8_pass pass;         /* what the next forwards are (mt_fp8_linear_set_pass) */
  void *ws;                 /* grow-only workspace (MT_MEM_WORKSPACE) */
  size_t ws_bytes;
  const mt_fp8_wcode *wcode; /* fp8_param_gather: pre-quantized weights (borrowed) */
  int n_wcode;
};

int mt_fp8_options_parse(mt_fp8_options *o, const char *format, const char *recipe,
                         const char *algo, int wgrad, int margin, int history_len) {
  memset(o, 0, sizeof *o);
  if (!strcmp(format, "hybrid")) o->hybrid = 1;
  else if (strcmp(format, "e4m3")) return -1;
  static const char *const names[] = {"tensorwise", "delayed", "blockwise", "mxfp8"};
  o->recipe = (mt_fp8_recipe)-1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(recipe, names[i])) o->recipe = (mt_fp8_recipe)i;
  if ((int)o->recipe < 0) return -1;
  if (!strcmp(algo, "max")) o->algo_max = 1;
  else if (strcmp(algo, "most_recent")) return -1;
  o->wgrad = wgrad, o->margin = margin, o->history_len = history_len > 0 ? history_len : 1;
  return 0;
}

mt_fp8_linear *mt_fp8_linear_create(mt_backend *be, const mt_fp8_options *o, mt_group *tp,
                                    mt_group *cp) {
  mt_fp8_linear *f = calloc(1, sizeof *f);
  if (!f) mt_fatal("fp8 linear: out of host memory");
  f->be = be, f->o = *o, f->red[0] = tp, f->red[1] = cp, f->next_key = -1;
  return f;
}

void mt_fp8_linear_destroy(mt_fp8_linear *f) {
  if (!f) return;
  for (int i = 0; i < f->nst; i++)
    for (int r = 0; r < 3; r++) free(f->st[i].meta[r]);
  for (int i = 0; i < f->nst; i++) free(f->st[i].pend);
  free(f->st);
  if (f->ws) f->be->ops->free(f->be, f->ws);
  free(f);
}

void mt_fp8_linear_select(mt_fp8_linear *f, int key) { f->next_key = key; }

/* The state of key (>= 0), created empty if new. */
static fp8_state *state_of(mt_fp8_linear *f, int key) {
  MT_ASSERT(key >= 0);
  for (int i = 0; i < f->nst; i++)
    if (f->st[i].key == key) return &f->st[i];
  if (f->nst == f->capst) {
    f->capst = f->capst ? 2 * f->capst : 16;
    f->st = realloc(f->st, (size_t)f->capst * sizeof *f->st);
    if (!f->st) mt_fatal("fp8 linear: out of host memory");
  }
  fp8_state *s = &f->st[f->nst++];
  memset(s, 0, sizeof *s);
  s->key = key;
  for (int r = 0; r < 3; r++) {
    s->meta[r] = calloc((size_t)f->o.history_len + 1, sizeof(float)); /* empty history */
    if (!s->meta[r]) mt_fatal("fp8 linear: out of host memory");
    s->meta[r][0] = s->used[r] = 1.0f; /* TE's initial scale */
  }
  return s;
}

/* The state of the next call: its selected key (consumed). A delayed call
 * without one is a caller's bug: the state would have no identity that
 * survives re-pointed weights or a checkpoint. */
static fp8_state *state_next(mt_fp8_linear *f) {
  const int key = f->next_key;
  f->next_key = -1;
  if (key < 0) mt_fatal("fp8 linear: delayed-scaling call without a key (mt_fp8_linear_select)");
  return state_of(f, key);
}

float *mt_fp8_linear_meta(mt_fp8_linear *f, int key, int role) {
  return state_of(f, key)->meta[role];
}

int64_t mt_fp8_linear_meta_len(const mt_fp8_linear *f) { return (int64_t)f->o.history_len + 1; }

void mt_fp8_linear_set_dp(mt_fp8_linear *f, mt_group *dp) { f->red[2] = dp; }

int64_t mt_fp8_linear_group_rows(mt_fp8_linear *f, int64_t n) {
  if (f->o.recipe != MT_FP8_RECIPE_DELAYED || !f->red[2]) return n;
  int64_t tot = n;
  mt_allreduce(f->red[2], &tot, 1, MT_I64, MT_OP_SUM);
  return tot;
}

void mt_fp8_linear_set_pass(mt_fp8_linear *f, mt_fp8_pass pass) {
  if (f) f->pass = pass;
}

/* Queue the scales of a training forward for its backward (FIFO per weight:
 * micro-batches reach the backward in their forward order). */
static void pend_push(fp8_state *s, float sx, float sw) {
  if (s->pend_head == s->pend_n) s->pend_head = s->pend_n = 0;
  if (s->pend_n == s->pend_cap && s->pend_head > 0) { /* compact */
    memmove(s->pend, s->pend + s->pend_head, (size_t)(s->pend_n - s->pend_head) * sizeof *s->pend);
    s->pend_n -= s->pend_head, s->pend_head = 0;
  }
  if (s->pend_n == s->pend_cap) {
    s->pend_cap = s->pend_cap ? 2 * s->pend_cap : 4;
    s->pend = realloc(s->pend, (size_t)s->pend_cap * sizeof *s->pend);
    if (!s->pend) mt_fatal("fp8 linear: out of host memory");
  }
  s->pend[s->pend_n][0] = sx, s->pend[s->pend_n][1] = sw;
  s->pend_n++;
}

/* The oldest queued forward's scales into sx, sw (pop: its backward), or
 * the last use's when none is queued (a backward after an untracked
 * forward). */
static void pend_take(fp8_state *s, float *sx, float *sw, int pop) {
  if (s->pend_head == s->pend_n) {
    *sx = s->used[R_X], *sw = s->used[R_W];
    return;
  }
  *sx = s->pend[s->pend_head][0], *sw = s->pend[s->pend_head][1];
  if (pop) s->pend_head++;
}

/* Carve n fp32-aligned regions of bytes[i] out of the workspace. */
static void carve(mt_fp8_linear *f, int n, const size_t *bytes, void **p) {
  size_t tot = 0, off[16];
  for (int i = 0; i < n; i++) off[i] = tot, tot += (bytes[i] + 255) / 256 * 256;
  if (tot > f->ws_bytes) {
    if (f->ws) f->be->ops->free(f->be, f->ws);
    f->ws = f->be->ops->alloc(f->be, tot, MT_MEM_WORKSPACE);
    f->ws_bytes = tot;
  }
  for (int i = 0; i < n; i++) p[i] = (char *)f->ws + off[i];
}

/* Scratch of one quantize-dequantize: codes, scales, amaxes, one scale. */
typedef struct {
  uint8_t *q;
  float *sinv, *amax, *scale;
} qscratch;

/* dst[rows, cols] (fp32) = dequantize(quantize(src)) with blocking b and
 * format fmt (dst NULL: the codes and scales stay in s only, for the
 * backend's FP8 GEMM); `given` (host; tensorwise only) the scale to use,
 * NULL for the current rule. Returns the tensor amax when given (delayed),
 * else 0. */
static float qdq(mt_fp8_linear *f, const qscratch *s, float *dst, const void *src, int64_t rows,
                 int64_t cols, mt_fp8_blocking b, int fmt, const float *given) {
  mt_backend *be = f->be;
  mt_fp8_desc d = {.fmt = fmt, .blocking = b, .rows = rows, .cols = cols,
                   .pow2 = f->o.recipe == MT_FP8_RECIPE_BLOCKWISE, .eps = 0.0f, .out_f32 = 1};
  be->ops->fp8_amax(be, &d, s->amax, src);
  if (b == MT_FP8_TENSOR) /* the whole tensor's amax over the shards */
    for (int g = 0; g < (given ? 3 : 2); g++) /* delayed: over the replicas too */
      if (f->red[g]) mt_allreduce(f->red[g], s->amax, 1, MT_F32, MT_OP_MAX);
  float amax = 0.0f;
  if (given) {
    be->ops->memcpy_h2d(be, s->scale, given, sizeof(float));
    be->ops->fp8_quantize(be, &d, s->q, s->sinv, src, NULL, s->scale);
    be->ops->memcpy_d2h(be, &amax, s->amax, sizeof(float));
  } else {
    be->ops->fp8_quantize(be, &d, s->q, s->sinv, src, s->amax, NULL);
  }
  if (dst) be->ops->fp8_dequantize(be, &d, dst, s->q, s->sinv);
  return amax;
}

/* dst[rows, cols] (fp32) = dequantize(s's per-tensor codes of format fmt). */
static void deq(mt_fp8_linear *f, const qscratch *s, float *dst, int64_t rows, int64_t cols,
                int fmt) {
  mt_fp8_desc d = {.fmt = fmt, .blocking = MT_FP8_TENSOR, .rows = rows, .cols = cols,
                   .out_f32 = 1};
  f->be->ops->fp8_dequantize(f->be, &d, dst, s->q, s->sinv);
}

/* The backend's FP8 GEMM (cuBLASLt's FP8 matmul on cuda) for the per-tensor
 * recipes (tensorwise, delayed): 1 when the backend has one (the operands
 * are then quantized into their own scratch and not dequantized). */
static int use_fp8_gemm(const mt_fp8_linear *f) {
  return f->be->ops->fp8_gemm &&
         (f->o.recipe == MT_FP8_RECIPE_TENSORWISE || f->o.recipe == MT_FP8_RECIPE_DELAYED);
}

/* C = op(A) op(B) (+ beta C) (+ bias) on the codes and scales of sa, sb
 * (mt_fp8_gemm_desc); 0 when the backend enqueued it, -1 when it has no
 * FP8 GEMM for the problem (the caller dequantizes). */
static int fp8_mm(mt_fp8_linear *f, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  const qscratch *sa, int64_t lda, int fa, const qscratch *sb, int64_t ldb,
                  int fb, float beta, void *c, int64_t ldc, mt_dtype ct, const void *bias) {
  mt_fp8_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = (int)m, .n = (int)n, .k = (int)k,
                        .alpha = 1.0f, .beta = beta, .a = sa->q, .lda = lda, .a_fmt = fa,
                        .a_sinv = sa->sinv, .b = sb->q, .ldb = ldb, .b_fmt = fb,
                        .b_sinv = sb->sinv, .c = c, .ldc = ldc, .c_type = ct, .bias = bias};
  return f->be->ops->fp8_gemm(f->be, &d);
}

/* Delayed: record this use's amax and compute the next scale. */
static void delayed_update(mt_fp8_linear *f, fp8_state *st, int role, float amax, int fmt) {
  const int L = f->o.history_len;
  float *h = st->meta[role] + 1;
  memmove(h + 1, h, (size_t)(L - 1) * sizeof(float));
  h[0] = amax;
  st->meta[role][0] = mt_fp8_scale_delayed(mt_fp8_history_amax(h, L, f->o.algo_max ? 0 : 1),
                                           st->meta[role][0], mt_fp8_max((mt_fp8_format)fmt),
                                           f->o.margin);
}

/* The blockings of the recipe: operand along its columns (rowwise) or rows
 * (columnwise), and the weight's. */
static mt_fp8_blocking blk_row(const mt_fp8_linear *f) {
  switch (f->o.recipe) {
  case MT_FP8_RECIPE_BLOCKWISE: return MT_FP8_BLOCK_1X128;
  case MT_FP8_RECIPE_MXFP8: return MT_FP8_MX32;
  default: return MT_FP8_TENSOR;
  }
}
static mt_fp8_blocking blk_col(const mt_fp8_linear *f) {
  switch (f->o.recipe) {
  case MT_FP8_RECIPE_BLOCKWISE: return MT_FP8_BLOCK_128X1;
  case MT_FP8_RECIPE_MXFP8: return MT_FP8_MX32_COL;
  default: return MT_FP8_TENSOR;
  }
}
static mt_fp8_blocking blk_w(const mt_fp8_linear *f, int colwise) {
  if (f->o.recipe == MT_FP8_RECIPE_BLOCKWISE) return MT_FP8_BLOCK_128X128;
  return colwise ? blk_col(f) : blk_row(f);
}

/* fp8_param_gather: dst[out, in] (fp32) = decode(codes of w) · scale_inv
 * when the optimizer quantized w (mt_fp8_linear_set_weight_codes); 1 if
 * done, 0 if w has no codes. */
static int wcode_dq(mt_fp8_linear *f, const qscratch *s, float *dst, const void *w, int64_t out,
                    int64_t in) {
  for (int i = 0; i < f->n_wcode; i++) {
    if (f->wcode[i].w != w) continue;
    mt_backend *be = f->be;
    mt_fp8_desc d = {.fmt = MT_FP8_E4M3, .blocking = blk_w(f, 0), .rows = out, .cols = in,
                     .out_f32 = 1};
    be->ops->memcpy_h2d(be, s->sinv, f->wcode[i].scale_inv,
                        (size_t)mt_fp8_n_scales(&d) * sizeof(float));
    be->ops->fp8_dequantize(be, &d, dst, f->wcode[i].q, s->sinv);
    return 1;
  }
  return 0;
}

/* The FP8 GEMM path's counterpart of wcode_dq: w's gathered codes copied
 * into s->q and its scale into s->sinv (one scale: tensorwise), as
 * fp8_quantize would have left them; 0 when w has none. */
static int wcode_q(mt_fp8_linear *f, const qscratch *s, const void *w, int64_t out, int64_t in) {
  for (int i = 0; i < f->n_wcode; i++) {
    if (f->wcode[i].w != w) continue;
    mt_backend *be = f->be;
    be->ops->memcpy_d2d(be, s->q, f->wcode[i].q, (size_t)(out * in));
    be->ops->memcpy_h2d(be, s->sinv, f->wcode[i].scale_inv, sizeof(float));
    return 1;
  }
  return 0;
}

void mt_fp8_linear_set_weight_codes(mt_fp8_linear *f, const mt_fp8_wcode *tab, int n) {
  MT_ASSERT(n == 0 || f->o.recipe == MT_FP8_RECIPE_TENSORWISE ||
            f->o.recipe == MT_FP8_RECIPE_BLOCKWISE);
  f->wcode = n > 0 ? tab : NULL, f->n_wcode = n > 0 ? n : 0;
}

static int64_t max3(int64_t a, int64_t b, int64_t c) {
  return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

/* One fp32 GEMM C32 = op(A) op(B) (+ bias32) on dequantized operands. */
static void gemm32(mt_backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                   float *c, int64_t ldc, const float *bias32) {
  mt_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = (int)m, .n = (int)n, .k = (int)k,
                    .alpha = 1.0f, .beta = beta, .a = a, .lda = lda, .b = b, .ldb = ldb,
                    .c = c, .ldc = ldc, .a_type = MT_F32, .b_type = MT_F32, .c_type = MT_F32,
                    .bias = bias32, .batch = 1};
  be->ops->gemm(be, &d);
}

void mt_fp8_linear_fwd(mt_fp8_linear *f, void *y, const void *x, const void *w, const void *bias,
                       int64_t M, int64_t out, int64_t in) {
  mt_backend *be = f->be;
  const int delayed = f->o.recipe == MT_FP8_RECIPE_DELAYED;
  fp8_state *st = delayed ? state_next(f) : NULL;
  f->next_key = -1;
  const int64_t nq = max3(M * in, out * in, 1);
  const int lt = use_fp8_gemm(f); /* codes of x and w both kept: two scratches */
  void *p[12];
  const size_t by[12] = {(size_t)(M * in) * 4, (size_t)(out * in) * 4, (size_t)(M * out) * 4,
                         (size_t)nq, (size_t)nq * 4, (size_t)nq * 4, 4, (size_t)(out + 1) * 4,
                         lt ? (size_t)nq : 0, 4, 4, 4};
  carve(f, 12, by, p);
  const qscratch s = {p[3], p[4], p[5], p[6]}, s2 = {p[8], p[9], p[10], p[11]};
  const qscratch *sw = lt ? &s2 : &s; /* w's scratch */
  float *xq = lt ? NULL : p[0], *wq = lt ? NULL : p[1], *c32 = p[2], *b32 = bias ? p[7] : NULL;
  if (delayed && f->pass == MT_FP8_PASS_RECOMPUTE) {
    /* replay the original forward: its scales, no history update (TE's
     * activation recompute restores the forward's fp8 meta and records no
     * second amax) */
    float sc[2];
    pend_take(st, &sc[0], &sc[1], 0);
    qdq(f, &s, xq, x, M, in, MT_FP8_TENSOR, MT_FP8_E4M3, &sc[0]);
    qdq(f, sw, wq, w, out, in, MT_FP8_TENSOR, MT_FP8_E4M3, &sc[1]);
  } else if (delayed) {
    st->used[R_X] = st->meta[R_X][0];
    delayed_update(f, st, R_X, qdq(f, &s, xq, x, M, in, MT_FP8_TENSOR, MT_FP8_E4M3, &st->used[R_X]),
                   MT_FP8_E4M3);
    st->used[R_W] = st->meta[R_W][0];
    delayed_update(f, st, R_W,
                   qdq(f, sw, wq, w, out, in, MT_FP8_TENSOR, MT_FP8_E4M3, &st->used[R_W]),
                   MT_FP8_E4M3);
    if (f->pass == MT_FP8_PASS_TRAIN) pend_push(st, st->used[R_X], st->used[R_W]);
  } else {
    qdq(f, &s, xq, x, M, in, blk_row(f), MT_FP8_E4M3, NULL);
    if (lt ? !wcode_q(f, sw, w, out, in) : !wcode_dq(f, &s, wq, w, out, in))
      qdq(f, sw, wq, w, out, in, blk_w(f, 0), MT_FP8_E4M3, NULL);
  }
  if (lt) { /* y = Q(x) Q(w)^T (+ bias) on the FP8 GEMM, rounded once to T */
    if (fp8_mm(f, 0, 1, M, out, in, &s, in, MT_FP8_E4M3, sw, in, MT_FP8_E4M3, 0.0f, y, out,
               be->dtype, bias) == 0)
      return;
    xq = p[0], wq = p[1]; /* no FP8 GEMM for this shape: dequantize */
    deq(f, &s, xq, M, in, MT_FP8_E4M3);
    deq(f, sw, wq, out, in, MT_FP8_E4M3);
  }
  if (b32) be->ops->cast(be, b32, MT_F32, bias, be->dtype, out);
  gemm32(be, 0, 1, M, out, in, xq, in, wq, in, 0.0f, c32, out, b32);
  be->ops->cast(be, y, be->dtype, c32, MT_F32, M * out);
}

void mt_fp8_linear_bwd(mt_fp8_linear *f, void *dx, float *dw, float *db, const void *dy,
                       const void *x, const void *w, int64_t M, int64_t out, int64_t in) {
  mt_backend *be = f->be;
  const int delayed = f->o.recipe == MT_FP8_RECIPE_DELAYED;
  const int gfmt = f->o.hybrid ? MT_FP8_E5M2 : MT_FP8_E4M3;
  fp8_state *st = delayed ? state_next(f) : NULL;
  f->next_key = -1;
  const int64_t nq = max3(M * in, out * in, M * out);
  const int lt = use_fp8_gemm(f); /* dy's codes kept apart from W's / x's */
  void *p[11];
  const size_t by[11] = {(size_t)(M * out) * 4, (size_t)(max3(M * in, out * in, 1)) * 4,
                         (size_t)(M * in) * 4, (size_t)nq, (size_t)nq * 4, (size_t)nq * 4, 4,
                         lt ? (size_t)(M * out) : 0, 4, 4, 4};
  carve(f, 11, by, p);
  const qscratch s = {p[3], p[4], p[5], p[6]}, s2 = {p[7], p[8], p[9], p[10]};
  const qscratch *sg = lt ? &s2 : &s; /* dy's scratch */
  float *gq = lt ? NULL : p[0], *oq = lt ? NULL : p[1], *c32 = p[2];
  if (db) be->ops->bias_grad(be, db, dy, M, out);
  float gscale = 1.0f, sx = 1.0f, sw = 1.0f;
  if (delayed) {
    pend_take(st, &sx, &sw, 1); /* the scales of this micro-batch's forward */
    gscale = st->used[R_G] = st->meta[R_G][0];
    delayed_update(f, st, R_G, qdq(f, sg, gq, dy, M, out, MT_FP8_TENSOR, gfmt, &gscale), gfmt);
  }
  int g_ready = delayed; /* sg holds dy's per-tensor codes (the FP8 GEMM's wgrad reuses them) */
  if (dx) { /* dgrad: dy rowwise along out, W along its rows (out) */
    if (!delayed) qdq(f, sg, gq, dy, M, out, blk_row(f), gfmt, NULL), g_ready = 1;
    if (delayed) qdq(f, &s, oq, w, out, in, MT_FP8_TENSOR, MT_FP8_E4M3, &sw);
    else if (lt ? !wcode_q(f, &s, w, out, in) : !wcode_dq(f, &s, oq, w, out, in))
      qdq(f, &s, oq, w, out, in, blk_w(f, 1), MT_FP8_E4M3, NULL);
    if (!lt || fp8_mm(f, 0, 0, M, in, out, sg, out, gfmt, &s, in, MT_FP8_E4M3, 0.0f, dx, in,
                      be->dtype, NULL) != 0) {
      if (lt) { /* no FP8 GEMM for this shape: dequantize */
        gq = p[0], oq = p[1];
        deq(f, sg, gq, M, out, gfmt);
        deq(f, &s, oq, out, in, MT_FP8_E4M3);
      }
      gemm32(be, 0, 0, M, in, out, gq, out, oq, in, 0.0f, c32, in, NULL);
      be->ops->cast(be, dx, be->dtype, c32, MT_F32, M * in);
      if (lt) gq = oq = NULL;
    }
  }
  if (!f->o.wgrad) { /* wgrad in T: dW += dy^T x */
    mt_gemm_desc d = {.trans_a = 1, .trans_b = 0, .m = (int)out, .n = (int)in, .k = (int)M,
                      .alpha = 1.0f, .beta = 1.0f, .a = dy, .lda = out, .b = x, .ldb = in,
                      .c = dw, .ldc = in, .a_type = be->dtype, .b_type = be->dtype,
                      .c_type = MT_F32, .batch = 1};
    be->ops->gemm(be, &d);
    return;
  }
  /* wgrad: both operands along the tokens (columnwise); per-tensor codes
   * are the same either way, so the FP8 GEMM reuses dy's from the dgrad */
  if (delayed) {
    if (!(lt && g_ready)) qdq(f, sg, gq, dy, M, out, MT_FP8_TENSOR, gfmt, &gscale);
    qdq(f, &s, oq, x, M, in, MT_FP8_TENSOR, MT_FP8_E4M3, &sx);
  } else {
    if (!(lt && g_ready)) qdq(f, sg, gq, dy, M, out, blk_col(f), gfmt, NULL);
    qdq(f, &s, oq, x, M, in, blk_col(f), MT_FP8_E4M3, NULL);
  }
  if (lt) {
    if (fp8_mm(f, 1, 0, out, in, M, sg, out, gfmt, &s, in, MT_FP8_E4M3, 1.0f, dw, in, MT_F32,
               NULL) == 0)
      return;
    gq = p[0], oq = p[1]; /* no FP8 GEMM for this shape: dequantize */
    deq(f, sg, gq, M, out, gfmt);
    deq(f, &s, oq, M, in, MT_FP8_E4M3);
  }
  gemm32(be, 1, 0, out, in, M, gq, out, oq, in, 1.0f, dw, in, NULL);
}
