/* cpu/cpu_bf16.c — the CPU backend's op table for bf16 storage
 * (mt_cpu_backend_create with dtype MT_BF16): T = bf16 (raw uint16) wherever
 * core/backend.h says T, fp32 compute and accumulation, every T output
 * rounded once to nearest even with mt_f32_to_bf16 (core/dtype.h), bitwise
 * the conversion of cuda/. Most ops widen their T operands into the bf16
 * scratch and run the fp32 op (cpu_bf16.h); row copies (embedding, MoE
 * gather) move bf16 bits unchanged; elementwise add and the MoE combine are
 * written here directly. This file: the table, initialisation, GEMMs,
 * embeddings, cross-entropy, elementwise, MoE and AdamW; cpu_bf16_ops.c the
 * rest. fp32-only ops (axpy_f32, scale_f32, sum_f32, sumsq_f32,
 * sumsq_acc_f32) and the memory ops are the fp32 table's. */
#include "core/util.h"
#include "cpu_bf16.h"

/* ---- initialisation ---- */

/* The fp32 values rounded: a bf16 run starts from the fp32 run's weights. */
static void bf16_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols,
                             int64_t ld_global, int64_t row_offset, int64_t col_offset,
                             mt_rng_key_t key, float std) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){rows * cols}, p);
  cpu_init_normal(be, p[0], rows, cols, ld_global, row_offset, col_offset, key, std);
  bf_narrow(be, dst, p[0], rows * cols);
}

/* ---- GEMM ---- */

/* Elements from the first to one past the last of a strided batch of
 * row-major [r, c] matrices with leading dimension ld (0 when empty). */
static int64_t bf16_span(int batch, int64_t stride, int64_t r, int64_t c, int64_t ld) {
  if (r <= 0 || c <= 0) return 0;
  return (int64_t)(batch - 1) * stride + (r - 1) * ld + c;
}

/* The C rows of d between the fp32 copy f and the bf16 C (to_bf16: narrow,
 * else widen), touching only the [m, n] blocks (not the ld / stride gaps). */
static void bf16_c_rows(mt_backend *be, const mt_gemm_desc *d, float *f, int to_bf16) {
  uint16_t *c = (uint16_t *)d->c;
  const int contiguous = d->ldc == d->n && (d->batch == 1 || d->stride_c == (int64_t)d->m * d->n);
  const int64_t nrow = contiguous ? 1 : (int64_t)d->batch * d->m;
  const int64_t len = contiguous ? (int64_t)d->batch * d->m * d->n : d->n;
  for (int64_t r = 0; r < nrow; r++) {
    const int64_t off = contiguous ? 0 : (r / d->m) * d->stride_c + (r % d->m) * d->ldc;
    if (to_bf16)
      bf_narrow(be, c + off, f + off, len);
    else
      bf_widen(be, f + off, c + off, len);
  }
}

/* a, b (and the bias) bf16, c bf16 or fp32; or everything fp32 (as cuda/
 * accepts on a bf16 backend): the fp32 op. */
static void bf16_gemm(mt_backend *be, const mt_gemm_desc *d) {
  if (d->a_type == MT_F32 && d->b_type == MT_F32 && d->c_type == MT_F32) {
    cpu_gemm(be, d);
    return;
  }
  MT_ASSERT(d->a_type == MT_BF16 && d->b_type == MT_BF16);
  MT_ASSERT(d->c_type == MT_BF16 || d->c_type == MT_F32);
  MT_ASSERT(d->batch >= 1 && d->m >= 0 && d->n >= 0 && d->k >= 0);
  if (d->m == 0 || d->n == 0) return;
  const int64_t na = d->trans_a ? bf16_span(d->batch, d->stride_a, d->k, d->m, d->lda)
                                : bf16_span(d->batch, d->stride_a, d->m, d->k, d->lda);
  const int64_t nb = d->trans_b ? bf16_span(d->batch, d->stride_b, d->n, d->k, d->ldb)
                                : bf16_span(d->batch, d->stride_b, d->k, d->n, d->ldb);
  const int cb = d->c_type == MT_BF16;
  const int64_t nc = cb ? bf16_span(d->batch, d->stride_c, d->m, d->n, d->ldc) : 0;
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){na, nb, nc, d->bias ? d->n : 0}, p);
  bf_widen(be, p[0], d->a, na);
  bf_widen(be, p[1], d->b, nb);
  bf_widen(be, p[3], d->bias, d->bias ? d->n : 0);
  mt_gemm_desc f = *d;
  f.a = p[0];
  f.b = p[1];
  f.bias = d->bias ? p[3] : NULL;
  f.a_type = f.b_type = f.c_type = MT_F32;
  if (cb) {
    f.c = p[2];
    if (d->beta != 0.0f) bf16_c_rows(be, d, p[2], 0); /* C read: alpha AB + beta C, one rounding */
  }
  cpu_gemm(be, &f);
  if (cb) bf16_c_rows(be, d, p[2], 1);
}

/* Group by group in group order: exactly "gemm once per group" (the spec's
 * definition), groups naming the same C accumulating in that order. */
static void bf16_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d) {
  MT_ASSERT(d->groups >= 0);
  for (int g = 0; g < d->groups; g++) {
    MT_ASSERT(d->m[g] >= 0 && d->n[g] >= 0 && d->k[g] >= 0);
    const mt_gemm_desc e = mt_gemm_grouped_member(d, g);
    bf16_gemm(be, &e);
  }
}

static void bf16_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){rows * n}, p);
  bf_widen(be, p[0], dout, rows * n);
  cpu_bias_grad(be, db, p[0], rows, n);
}

/* ---- embeddings ---- */

/* A row copy: the bf16 bits move unchanged. */
static void bf16_embedding_fwd(mt_backend *be, void *out_, const int32_t *tokens, int64_t n,
                               const void *w_, int64_t v_start, int64_t v_end, int64_t h) {
  uint16_t *out = (uint16_t *)out_;
  const uint16_t *w = (const uint16_t *)w_;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n; t++) {
    int64_t id = tokens[t];
    if (id >= v_start && id < v_end)
      memcpy(out + t * h, w + (id - v_start) * h, (size_t)h * 2);
    else
      memset(out + t * h, 0, (size_t)h * 2);
  }
}

static void bf16_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                               const void *dout, int64_t v_start, int64_t v_end, int64_t h) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n * h}, p);
  bf_widen(be, p[0], dout, n * h);
  cpu_embedding_bwd(be, dw, tokens, n, p[0], v_start, v_end, h);
}

static void bf16_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s,
                                   int64_t b, int64_t h, int64_t s_offset) {
  const int64_t n = s * b * h;
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){n, s * h}, p);
  bf_widen(be, p[0], x, n);
  bf_widen(be, p[1], (const uint16_t *)wpe + s_offset * h, s * h); /* the rows used */
  cpu_pos_embedding_fwd(be, p[0], p[1], s, b, h, 0);
  bf_narrow(be, x, p[0], n);
}

static void bf16_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s,
                                   int64_t b, int64_t h, int64_t s_offset) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){s * b * h}, p);
  bf_widen(be, p[0], dout, s * b * h);
  cpu_pos_embedding_bwd(be, dwpe, p[0], s, b, h, s_offset);
}

/* ---- cross-entropy: rows are independent, so the logits are widened a
 * block of rows at a time (the scratch stays ~16 MiB at any vocabulary) ---- */

static int64_t bf16_xent_rows(int64_t n, int64_t vl) {
  int64_t r = vl > 0 ? ((int64_t)1 << 22) / vl : n;
  return r < 1 ? 1 : r > n ? n : r;
}

static void bf16_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n,
                          int64_t vl, int64_t valid) {
  const int64_t R = bf16_xent_rows(n, vl);
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int64_t nr = n - r0 < R ? n - r0 : R;
    float *p[1];
    bf_bufs(be, 1, (const int64_t[]){nr * vl}, p);
    bf_widen(be, p[0], (const uint16_t *)logits + r0 * vl, nr * vl);
    cpu_xent_max(be, row_max + r0, p[0], nr, vl, valid);
  }
}

static void bf16_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                            const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                            int64_t valid, int64_t v_start) {
  const int64_t R = bf16_xent_rows(n, vl);
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int64_t nr = n - r0 < R ? n - r0 : R;
    float *p[1];
    bf_bufs(be, 1, (const int64_t[]){nr * vl}, p);
    bf_widen(be, p[0], (const uint16_t *)logits + r0 * vl, nr * vl);
    cpu_xent_stats(be, sumexp + r0, tgt_logit + r0, p[0], row_max + r0, targets + r0, nr, vl,
                   valid, v_start);
  }
}

static void bf16_xent_bwd(mt_backend *be, void *logits, const float *row_max,
                          const float *sumexp, const int32_t *targets, int64_t n, int64_t vl,
                          int64_t valid, int64_t v_start, float scale) {
  const int64_t R = bf16_xent_rows(n, vl);
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int64_t nr = n - r0 < R ? n - r0 : R;
    uint16_t *lg = (uint16_t *)logits + r0 * vl;
    float *p[1];
    bf_bufs(be, 1, (const int64_t[]){nr * vl}, p);
    bf_widen(be, p[0], lg, nr * vl);
    cpu_xent_bwd(be, p[0], row_max + r0, sumexp + r0, targets + r0, nr, vl, valid, v_start,
                 scale);
    bf_narrow(be, lg, p[0], nr * vl);
  }
}

/* ---- elementwise ---- */

static void bf16_add(mt_backend *be, void *out_, const void *a_, const void *b_, int64_t n) {
  uint16_t *out = (uint16_t *)out_;
  const uint16_t *a = (const uint16_t *)a_, *b = (const uint16_t *)b_;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++)
    out[i] = mt_f32_to_bf16(mt_bf16_to_f32(a[i]) + mt_bf16_to_f32(b[i]));
}

/* ---- mixture of experts (same loops as cpu_moe.c, on bf16 rows) ---- */

static void bf16_moe_gather_rows(mt_backend *be, void *dst_, const void *src_, const int32_t *idx,
                                 int64_t n, int64_t h) {
  uint16_t *dst = (uint16_t *)dst_;
  const uint16_t *src = (const uint16_t *)src_;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * h, src + (int64_t)idx[i] * h, (size_t)h * 2);
}

static void bf16_moe_combine_fwd(mt_backend *be, void *y, const void *src_, const int32_t *slot,
                                 const float *w, int64_t n_tok, int k, int64_t h) {
  const uint16_t *src = (const uint16_t *)src_;
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n_tok * h}, p);
  float *acc = p[0];
#pragma omp parallel for schedule(static) if (n_tok * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n_tok; t++) {
    float *yt = acc + t * h;
    for (int64_t c = 0; c < h; c++) yt[c] = 0.0f;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) continue;
      const float a = w ? w[t * k + j] : 1.0f;
      const uint16_t *s = src + (int64_t)r * h;
      for (int64_t c = 0; c < h; c++) yt[c] += a * mt_bf16_to_f32(s[c]);
    }
  }
  bf_narrow(be, y, acc, n_tok * h);
}

static void bf16_moe_combine_bwd(mt_backend *be, void *dsrc_, float *dw, const void *dy_,
                                 const void *src_, const int32_t *slot, const float *w,
                                 int64_t n_tok, int k, int64_t h) {
  uint16_t *dsrc = (uint16_t *)dsrc_;
  const uint16_t *dy = (const uint16_t *)dy_, *src = (const uint16_t *)src_;
#pragma omp parallel for schedule(static) if (n_tok * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n_tok; t++) {
    const uint16_t *g = dy + t * h;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) {
        dw[t * k + j] = 0.0f;
        continue;
      }
      const float a = w[t * k + j];
      const uint16_t *s = src + (int64_t)r * h;
      uint16_t *d = dsrc + (int64_t)r * h;
      double dot = 0.0;
      for (int64_t c = 0; c < h; c++) {
        const float gc = mt_bf16_to_f32(g[c]);
        d[c] = mt_f32_to_bf16(a * gc);
        dot += (double)gc * mt_bf16_to_f32(s[c]);
      }
      dw[t * k + j] = (float)dot;
    }
  }
}

/* ---- optimizer: the fp32 update, then the bf16 parameter = master rounded ---- */

static void bf16_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m,
                       float *v, const float *grad, void *param_lowp, int64_t n) {
  cpu_adamw(be, hp, master, m, v, grad, NULL, n);
  if (param_lowp) bf_narrow(be, param_lowp, master, n);
}

const mt_backend_ops cpu_bf16_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .memset0 = cpu_memset0,
    .synchronize = cpu_synchronize,
    .init_normal = bf16_init_normal,
    .fill = cpu_fill,
    .cast = cpu_cast,
    .gemm = bf16_gemm,
    .gemm_grouped = bf16_gemm_grouped,
    .bias_grad = bf16_bias_grad,
    .layernorm_fwd = cpu_bf16_layernorm_fwd,
    .layernorm_bwd = cpu_bf16_layernorm_bwd,
    .rmsnorm_fwd = cpu_bf16_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_bf16_rmsnorm_bwd,
    .swiglu_fwd = cpu_bf16_swiglu_fwd,
    .swiglu_bwd = cpu_bf16_swiglu_bwd,
    .rope_fwd = cpu_bf16_rope_fwd,
    .rope_bwd = cpu_bf16_rope_bwd,
    .qknorm_fwd = cpu_bf16_qknorm_fwd,
    .qknorm_bwd = cpu_bf16_qknorm_bwd,
    .gelu_fwd = cpu_bf16_gelu_fwd,
    .gelu_bwd = cpu_bf16_gelu_bwd,
    .flash_attn_fwd = cpu_bf16_flash_attn_fwd,
    .attn_merge = cpu_bf16_attn_merge,
    .flash_attn_bwd = cpu_bf16_flash_attn_bwd,
    .dropout_add_fwd = cpu_bf16_dropout_add_fwd,
    .dropout_bwd = cpu_bf16_dropout_bwd,
    .embedding_fwd = bf16_embedding_fwd,
    .embedding_bwd = bf16_embedding_bwd,
    .pos_embedding_fwd = bf16_pos_embedding_fwd,
    .pos_embedding_bwd = bf16_pos_embedding_bwd,
    .xent_max = bf16_xent_max,
    .xent_stats = bf16_xent_stats,
    .xent_loss = cpu_xent_loss,
    .xent_bwd = bf16_xent_bwd,
    .add = bf16_add,
    .axpy_f32 = cpu_axpy_f32,
    .scale_f32 = cpu_scale_f32,
    .sumsq_f32 = cpu_sumsq_f32,
    .sumsq_acc_f32 = cpu_sumsq_acc_f32,
    .sum_f32 = cpu_sum_f32,
    .adamw = bf16_adamw,
    .moe_gather_rows = bf16_moe_gather_rows,
    .moe_combine_fwd = bf16_moe_combine_fwd,
    .moe_combine_bwd = bf16_moe_combine_bwd,
};
