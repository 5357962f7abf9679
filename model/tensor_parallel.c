/* model/tensor_parallel.c — see tensor_parallel.h. */
#include "model/tensor_parallel.h"

#include "core/util.h"
#include "model/fp8_linear.h"
#include "model/linear.h"
#include "parallel/mappings.h"

static int tp_on(const mt_tp_ctx *c) { return c->tp_size > 1; }

/* The plain or the FP8 linear layer (c->fp8 set and the layer in FP8). */
static void lin_fwd(mt_tp_ctx *c, void *y, const void *x, const void *w, const void *bias,
                    int64_t M, int64_t out, int64_t in) {
  if (c->fp8 && c->fp8_on) mt_fp8_linear_fwd(c->fp8, y, x, w, bias, M, out, in);
  else mt_linear_fwd(c->be, y, x, w, bias, M, out, in);
}
static void lin_bwd(mt_tp_ctx *c, void *dx, float *dw, float *db, const void *dy, const void *x,
                    const void *w, int64_t M, int64_t out, int64_t in) {
  if (c->fp8 && c->fp8_on) mt_fp8_linear_bwd(c->fp8, dx, dw, db, dy, x, w, M, out, in);
  else mt_linear_bwd(c->be, dx, dw, db, dy, x, w, M, out, in);
}
static int sp_on(const mt_tp_ctx *c) { return c->tp_size > 1 && c->sp; }

int64_t mt_tp_local_rows(const mt_tp_ctx *c) {
  return sp_on(c) ? c->s * c->b / c->tp_size : c->s * c->b;
}

const void *mt_column_parallel_linear_fwd(mt_tp_ctx *c, void *y, const void *x, const void *w,
                                          const void *bias, int64_t out_l, int64_t in) {
  const void *X = x;
  if (sp_on(c)) {
    mt_gather_from_sp_region_fwd(c->tp, x, c->gather_ws, mt_tp_local_rows(c) * in, c->be->dtype);
    X = c->gather_ws;
  }
  lin_fwd(c, y, X, w, bias, c->s * c->b, out_l, in);
  return X;
}

void mt_column_parallel_linear_bwd(mt_tp_ctx *c, void *dx, float *dw, float *db, const void *dy,
                                   const void *x, const void *w, int64_t out_l, int64_t in) {
  const int64_t rows = c->s * c->b;
  const void *X = x;
  if (sp_on(c)) {
    mt_gather_from_sp_region_fwd(c->tp, x, c->gather_ws, mt_tp_local_rows(c) * in, c->be->dtype);
    X = c->gather_ws;
  }
  /* under sp the full-size input gradient goes to grad_ws, then is reduce-scattered */
  void *dfull = dx ? (sp_on(c) ? c->grad_ws : dx) : NULL;
  lin_bwd(c, dfull, dw, db, dy, X, w, rows, out_l, in);
  if (!dx) return;
  if (sp_on(c)) mt_gather_from_sp_region_bwd(c->tp, dfull, dx, mt_tp_local_rows(c) * in, c->be->dtype);
  else if (tp_on(c)) mt_copy_to_tp_region_bwd(c->tp, dx, rows * in, c->be->dtype);
}

void mt_row_parallel_linear_fwd(mt_tp_ctx *c, void *y, const void *x, const void *w,
                                const void *bias, int64_t out, int64_t in_l) {
  const int64_t rows = c->s * c->b;
  const void *b_once = c->tp_rank == 0 ? bias : NULL;
  if (sp_on(c)) {
    lin_fwd(c, c->gather_ws, x, w, b_once, rows, out, in_l);
    mt_reduce_scatter_to_sp_region_fwd(c->tp, c->gather_ws, y, mt_tp_local_rows(c) * out,
                                       c->be->dtype);
  } else {
    lin_fwd(c, y, x, w, b_once, rows, out, in_l);
    if (tp_on(c)) mt_reduce_from_tp_region_fwd(c->tp, y, rows * out, c->be->dtype);
  }
}

void mt_row_parallel_linear_bwd(mt_tp_ctx *c, void *dx, float *dw, float *db, const void *dy,
                                const void *x, const void *w, int64_t out, int64_t in_l) {
  const void *dY = dy;
  if (sp_on(c)) {
    mt_reduce_scatter_to_sp_region_bwd(c->tp, dy, c->grad_ws, mt_tp_local_rows(c) * out,
                                       c->be->dtype);
    dY = c->grad_ws;
  }
  lin_bwd(c, dx, dw, db, dY, x, w, c->s * c->b, out, in_l);
}

void mt_vocab_parallel_embedding_fwd(mt_tp_ctx *c, void *out, const int32_t *tokens,
                                     const void *w, int64_t v_start, int64_t v_end, int64_t h) {
  const int64_t rows = c->s * c->b;
  mt_backend *be = c->be;
  if (sp_on(c)) {
    be->ops->embedding_fwd(be, c->gather_ws, tokens, rows, w, v_start, v_end, h);
    mt_reduce_scatter_to_sp_region_fwd(c->tp, c->gather_ws, out, mt_tp_local_rows(c) * h,
                                       be->dtype);
  } else {
    be->ops->embedding_fwd(be, out, tokens, rows, w, v_start, v_end, h);
    if (tp_on(c)) mt_reduce_from_tp_region_fwd(c->tp, out, rows * h, be->dtype);
  }
}

void mt_vocab_parallel_embedding_bwd(mt_tp_ctx *c, float *dw, const int32_t *tokens,
                                     const void *dout, int64_t v_start, int64_t v_end, int64_t h) {
  const void *d = dout;
  if (sp_on(c)) {
    mt_reduce_scatter_to_sp_region_bwd(c->tp, dout, c->grad_ws, mt_tp_local_rows(c) * h,
                                       c->be->dtype);
    d = c->grad_ws;
  }
  c->be->ops->embedding_bwd(c->be, dw, tokens, c->s * c->b, d, v_start, v_end, h);
}

double mt_vocab_parallel_cross_entropy_fwd(mt_tp_ctx *c, float *loss, float *row_max,
                                           float *stats, const void *logits,
                                           const int32_t *targets, int64_t vl, int64_t valid,
                                           int64_t v_start, const float *loss_mask) {
  mt_backend *be = c->be;
  const int64_t n = c->s * c->b;
  be->ops->xent_max(be, row_max, logits, n, vl, valid);
  if (tp_on(c)) mt_allreduce(c->tp, row_max, n, MT_F32, MT_OP_MAX);
  be->ops->xent_stats(be, stats, stats + n, logits, row_max, targets, n, vl, valid, v_start);
  if (tp_on(c)) mt_allreduce(c->tp, stats, 2 * n, MT_F32, MT_OP_SUM);
  be->ops->xent_loss(be, loss, row_max, stats, stats + n, n, loss_mask);
  return be->ops->sum_f32(be, loss, n);
}

void mt_vocab_parallel_cross_entropy_bwd(mt_tp_ctx *c, void *logits, const float *row_max,
                                         const float *stats, const int32_t *targets, int64_t vl,
                                         int64_t valid, int64_t v_start, float scale,
                                         const float *loss_mask) {
  c->be->ops->xent_bwd(c->be, logits, row_max, stats, targets, c->s * c->b, vl, valid, v_start,
                       scale, loss_mask);
}
