/* cpu/cpu_bf16_ops.c — the bf16 storage ops of normalisation, activations,
 * rotary embedding, qk_layernorm, fused attention and dropout: widen the T
 * operands, run the fp32 op, round each T output once (cpu_bf16.h). */
#include "core/util.h"
#include "cpu_bf16.h"

/* ---- LayerNorm / RMSNorm ---- */

void cpu_bf16_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                            const void *w, const void *b, int64_t rows, int64_t h, float eps) {
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){rows * h, rows * h, h, b ? h : 0}, p);
  bf_widen(be, p[0], in, rows * h);
  bf_widen(be, p[2], w, h);
  bf_widen(be, p[3], b, h);
  cpu_layernorm_fwd(be, p[1], mean, rstd, p[0], p[2], p[3], rows, h, eps);
  bf_narrow(be, out, p[1], rows * h);
}

void cpu_bf16_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                            const void *in, const void *w, const float *mean, const float *rstd,
                            int64_t rows, int64_t h) {
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){rows * h, rows * h, rows * h, h}, p);
  bf_widen(be, p[0], din, rows * h); /* accumulated into: read, add in fp32, round once */
  bf_widen(be, p[1], dout, rows * h);
  bf_widen(be, p[2], in, rows * h);
  bf_widen(be, p[3], w, h);
  cpu_layernorm_bwd(be, p[0], dw, db, p[1], p[2], p[3], mean, rstd, rows, h);
  bf_narrow(be, din, p[0], rows * h);
}

void cpu_bf16_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                          int64_t rows, int64_t h, float eps) {
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){rows * h, rows * h, h}, p);
  bf_widen(be, p[0], in, rows * h);
  bf_widen(be, p[2], w, h);
  cpu_rmsnorm_fwd(be, p[1], rstd, p[0], p[2], rows, h, eps);
  bf_narrow(be, out, p[1], rows * h);
}

void cpu_bf16_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                          const void *w, const float *rstd, int64_t rows, int64_t h) {
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){rows * h, rows * h, rows * h, h}, p);
  bf_widen(be, p[0], din, rows * h); /* accumulated into */
  bf_widen(be, p[1], dout, rows * h);
  bf_widen(be, p[2], in, rows * h);
  bf_widen(be, p[3], w, h);
  cpu_rmsnorm_bwd(be, p[0], dw, p[1], p[2], p[3], rstd, rows, h);
  bf_narrow(be, din, p[0], rows * h);
}

/* ---- activations ---- */

void cpu_bf16_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f) {
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){rows * 2 * f, rows * f}, p);
  bf_widen(be, p[0], in, rows * 2 * f);
  cpu_swiglu_fwd(be, p[1], p[0], rows, f);
  bf_narrow(be, out, p[1], rows * f);
}

void cpu_bf16_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in,
                         int64_t rows, int64_t f) {
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){rows * 2 * f, rows * f, rows * 2 * f}, p);
  bf_widen(be, p[1], dout, rows * f);
  bf_widen(be, p[2], in, rows * 2 * f);
  cpu_swiglu_bwd(be, p[0], p[1], p[2], rows, f);
  bf_narrow(be, din, p[0], rows * 2 * f);
}

void cpu_bf16_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n) {
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){n, n}, p);
  bf_widen(be, p[0], in, n);
  cpu_gelu_fwd(be, p[1], p[0], n);
  bf_narrow(be, out, p[1], n);
}

void cpu_bf16_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n) {
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){n, n, n}, p);
  bf_widen(be, p[0], in, n);
  bf_widen(be, p[1], dout, n); /* din may alias dout: both read before the write */
  cpu_gelu_bwd(be, p[2], p[0], p[1], n);
  bf_narrow(be, din, p[2], n);
}

/* ---- rotary embedding (in place) ---- */

static void bf16_rope(mt_backend *be, const mt_rope_desc *d, void *x, int bwd) {
  const int64_t n = bf_qkv_elems((int64_t)d->s * d->b, d->np, d->ng, d->hn);
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n}, p);
  bf_widen(be, p[0], x, n);
  if (bwd)
    cpu_rope_bwd(be, d, p[0]);
  else
    cpu_rope_fwd(be, d, p[0]);
  bf_narrow(be, x, p[0], n);
}

void cpu_bf16_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv) {
  bf16_rope(be, d, qkv, 0);
}

void cpu_bf16_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv) {
  bf16_rope(be, d, dqkv, 1);
}

/* ---- qk_layernorm ---- */

void cpu_bf16_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                         float *rstd, const void *in, const void *wq, const void *bq,
                         const void *wk, const void *bk) {
  const int64_t n = bf_qkv_elems(d->rows, d->np, d->ng, d->hn), hn = d->hn;
  const int hb = !d->rms;
  float *p[6];
  bf_bufs(be, 6, (const int64_t[]){n, n, hn, hb && bq ? hn : 0, hn, hb && bk ? hn : 0}, p);
  bf_widen(be, p[0], in, n);
  bf_widen(be, p[2], wq, hn);
  if (p[3]) bf_widen(be, p[3], bq, hn);
  bf_widen(be, p[4], wk, hn);
  if (p[5]) bf_widen(be, p[5], bk, hn);
  cpu_qknorm_fwd(be, d, p[1], mean, rstd, p[0], p[2], p[3], p[4], p[5]);
  bf_narrow(be, out, p[1], n);
}

void cpu_bf16_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq,
                         float *dbq, float *dwk, float *dbk, const void *dout, const void *in,
                         const void *wq, const void *wk, const float *mean, const float *rstd) {
  const int64_t n = bf_qkv_elems(d->rows, d->np, d->ng, d->hn), hn = d->hn;
  float *p[5];
  bf_bufs(be, 5, (const int64_t[]){n, n, n, hn, hn}, p);
  bf_widen(be, p[1], dout, n);
  bf_widen(be, p[2], in, n);
  bf_widen(be, p[3], wq, hn);
  bf_widen(be, p[4], wk, hn);
  cpu_qknorm_bwd(be, d, p[0], dwq, dbq, dwk, dbk, p[1], p[2], p[3], p[4], mean, rstd);
  bf_narrow(be, din, p[0], n);
}

/* ---- fused attention (fp32 inside; lse fp32) ---- */

/* Rows of the query block and of the key block of d. */
static int bf16_sq(const mt_attn_desc *d) { return d->sq > 0 ? d->sq : d->s; }
static int bf16_sk(const mt_attn_desc *d) { return d->sk > 0 ? d->sk : d->s; }
static int64_t bf16_kv_elems(const mt_attn_desc *d) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  return (int64_t)bf16_sk(d) * d->b * ng * 2 * d->hn;
}

void cpu_bf16_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                             const void *qkv, const void *kv) {
  const int64_t sq = bf16_sq(d), nq = bf_qkv_elems(sq * d->b, d->np, d->ng, d->hn);
  const int64_t nkv = kv ? bf16_kv_elems(d) : 0, nc = sq * d->b * d->np * d->hn;
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){nq, nkv, nc}, p);
  bf_widen(be, p[0], qkv, nq);
  bf_widen(be, p[1], kv, nkv);
  cpu_flash_attn_fwd(be, d, p[2], lse, p[0], kv ? p[1] : NULL);
  bf_narrow(be, ctx, p[2], nc);
}

void cpu_bf16_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                         const void *ctx_b, const float *lse_b) {
  const int64_t nc = (int64_t)bf16_sq(d) * d->b * d->np * d->hn;
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){nc, nc}, p);
  bf_widen(be, p[0], ctx, nc);
  bf_widen(be, p[1], ctx_b, nc);
  cpu_attn_merge(be, d, p[0], lse, p[1], lse_b);
  bf_narrow(be, ctx, p[0], nc);
}

void cpu_bf16_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                             const void *dctx, const void *ctx, const float *lse,
                             const void *qkv, const void *kv) {
  const int64_t sq = bf16_sq(d), nq = bf_qkv_elems(sq * d->b, d->np, d->ng, d->hn);
  const int64_t nkv = kv ? bf16_kv_elems(d) : 0, nc = sq * d->b * d->np * d->hn;
  float *p[6];
  bf_bufs(be, 6, (const int64_t[]){nq, nkv, nc, nc, nq, nkv}, p);
  /* dqkv: overwritten (kv NULL) or its q heads accumulated, k/v heads kept
   * (kv given): widened either way; dkv accumulated */
  if (kv) bf_widen(be, p[0], dqkv, nq);
  bf_widen(be, p[1], dkv, nkv);
  bf_widen(be, p[2], dctx, nc);
  bf_widen(be, p[3], ctx, nc);
  bf_widen(be, p[4], qkv, nq);
  bf_widen(be, p[5], kv, nkv);
  cpu_flash_attn_bwd(be, d, p[0], kv ? p[1] : NULL, p[2], p[3], lse, p[4], kv ? p[5] : NULL);
  bf_narrow(be, dqkv, p[0], nq);
  if (kv) bf_narrow(be, dkv, p[1], nkv);
}

/* ---- dropout (the mask is fp32's: same op, same descriptor) ---- */

void cpu_bf16_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                              const void *residual) {
  const int64_t n = (int64_t)d->s * d->b * d->h;
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){n, n, n}, p);
  bf_widen(be, p[0], x, n);
  bf_widen(be, p[1], residual, n); /* out may alias residual */
  cpu_dropout_add_fwd(be, d, p[2], p[0], p[1]);
  bf_narrow(be, out, p[2], n);
}

void cpu_bf16_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout) {
  const int64_t n = (int64_t)d->s * d->b * d->h;
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n}, p);
  bf_widen(be, p[0], dout, n);
  cpu_dropout_bwd(be, d, p[0], p[0]); /* dx may alias dout (spec) */
  bf_narrow(be, dx, p[0], n);
}
