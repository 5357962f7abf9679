/* bench/bench_profile.h — op-table profiler shared by the CPU training
 * benches (bench_gpt.c, bench_llama.c): mt_bench_prof_install wraps the
 * backend's op table so that each listed op adds its wall time (seconds,
 * host clock; the CPU backend is synchronous) and one call to its slot;
 * ops not listed run unwrapped. One profiler at a time per process (the
 * shims find it through a bench-only static pointer). */
#ifndef MT_BENCH_PROFILE_H
#define MT_BENCH_PROFILE_H

#include "core/backend.h"
#include "core/util.h"

enum {
  MT_PROF_GEMM, MT_PROF_ATTN_F, MT_PROF_ATTN_B, MT_PROF_LN_F, MT_PROF_LN_B, MT_PROF_RMS_F,
  MT_PROF_RMS_B, MT_PROF_GELU_F, MT_PROF_GELU_B, MT_PROF_SWI_F, MT_PROF_SWI_B, MT_PROF_ROPE,
  MT_PROF_XENT, MT_PROF_DROP, MT_PROF_EMB, MT_PROF_BIASG, MT_PROF_ADAM, MT_PROF_GEMM_G, MT_PROF_N
};
static const char *const mt_prof_names[MT_PROF_N] = {
    "gemm",        "attention_fwd", "attention_bwd", "layernorm_fwd",   "layernorm_bwd",
    "rmsnorm_fwd", "rmsnorm_bwd",   "gelu_fwd",      "gelu_bwd",        "swiglu_fwd",
    "swiglu_bwd",  "rope_fwd/bwd",  "cross_entropy", "dropout/residual", "embedding_bwd",
    "bias_grad",   "adamw",         "gemm_grouped"};

typedef struct {
  mt_backend_ops ops;       /* wrapped table */
  const mt_backend_ops *in; /* real table */
  double t[MT_PROF_N];      /* seconds */
  long calls[MT_PROF_N];
} mt_bench_prof;
static mt_bench_prof *mt_bench_prof_cur; /* bench-only: the shims need to find their state */

#define MT_PROF_SHIM(slot, name, params, args) \
  static void mt_prof_##name params {          \
    double t0 = mt_now();                      \
    mt_bench_prof_cur->in->name args;          \
    mt_bench_prof_cur->t[slot] += mt_now() - t0; \
    mt_bench_prof_cur->calls[slot]++;          \
  }
MT_PROF_SHIM(MT_PROF_GEMM, gemm, (mt_backend * be, const mt_gemm_desc *d), (be, d))
MT_PROF_SHIM(MT_PROF_GEMM_G, gemm_grouped, (mt_backend * be, const mt_gemm_grouped_desc *d),
             (be, d))
MT_PROF_SHIM(MT_PROF_ATTN_F, flash_attn_fwd,
             (mt_backend * be, const mt_attn_desc *d, void *c, float *lse, const void *q,
              const void *kv),
             (be, d, c, lse, q, kv))
MT_PROF_SHIM(MT_PROF_ATTN_B, flash_attn_bwd,
             (mt_backend * be, const mt_attn_desc *d, void *dq, void *dkv, const void *dc,
              const void *c, const float *lse, const void *q, const void *kv),
             (be, d, dq, dkv, dc, c, lse, q, kv))
MT_PROF_SHIM(MT_PROF_LN_F, layernorm_fwd,
             (mt_backend * be, void *o, float *m, float *r, const void *i, const void *w,
              const void *b, int64_t rows, int64_t h, float eps),
             (be, o, m, r, i, w, b, rows, h, eps))
MT_PROF_SHIM(MT_PROF_LN_B, layernorm_bwd,
             (mt_backend * be, void *di, float *dw, float *db, const void *d, const void *i,
              const void *w, const float *m, const float *r, int64_t rows, int64_t h),
             (be, di, dw, db, d, i, w, m, r, rows, h))
MT_PROF_SHIM(MT_PROF_RMS_F, rmsnorm_fwd,
             (mt_backend * be, void *o, float *r, const void *i, const void *w, int64_t rows,
              int64_t h, float eps),
             (be, o, r, i, w, rows, h, eps))
MT_PROF_SHIM(MT_PROF_RMS_B, rmsnorm_bwd,
             (mt_backend * be, void *di, float *dw, const void *d, const void *i, const void *w,
              const float *r, int64_t rows, int64_t h),
             (be, di, dw, d, i, w, r, rows, h))
MT_PROF_SHIM(MT_PROF_GELU_F, gelu_fwd, (mt_backend * be, void *o, const void *i, int64_t n),
             (be, o, i, n))
MT_PROF_SHIM(MT_PROF_GELU_B, gelu_bwd,
             (mt_backend * be, void *di, const void *i, const void *d, int64_t n), (be, di, i, d, n))
MT_PROF_SHIM(MT_PROF_SWI_F, swiglu_fwd, (mt_backend * be, void *o, const void *i, int64_t rows,
                                         int64_t f),
             (be, o, i, rows, f))
MT_PROF_SHIM(MT_PROF_SWI_B, swiglu_bwd,
             (mt_backend * be, void *di, const void *d, const void *i, int64_t rows, int64_t f),
             (be, di, d, i, rows, f))
MT_PROF_SHIM(MT_PROF_ROPE, rope_fwd, (mt_backend * be, const mt_rope_desc *d, void *q), (be, d, q))
MT_PROF_SHIM(MT_PROF_ROPE, rope_bwd, (mt_backend * be, const mt_rope_desc *d, void *q), (be, d, q))
MT_PROF_SHIM(MT_PROF_XENT, xent_max,
             (mt_backend * be, float *mx, const void *l, int64_t n, int64_t vl, int64_t valid),
             (be, mx, l, n, vl, valid))
MT_PROF_SHIM(MT_PROF_XENT, xent_stats,
             (mt_backend * be, float *se, float *tl, const void *l, const float *mx,
              const int32_t *t, int64_t n, int64_t vl, int64_t valid, int64_t v0),
             (be, se, tl, l, mx, t, n, vl, valid, v0))
MT_PROF_SHIM(MT_PROF_XENT, xent_bwd,
             (mt_backend * be, void *l, const float *mx, const float *se, const int32_t *t,
              int64_t n, int64_t vl, int64_t valid, int64_t v0, float sc, const float *w),
             (be, l, mx, se, t, n, vl, valid, v0, sc, w))
MT_PROF_SHIM(MT_PROF_DROP, dropout_add_fwd,
             (mt_backend * be, const mt_dropout_desc *d, void *o, const void *x, const void *r),
             (be, d, o, x, r))
MT_PROF_SHIM(MT_PROF_DROP, dropout_bwd,
             (mt_backend * be, const mt_dropout_desc *d, void *dx, const void *dy), (be, d, dx, dy))
MT_PROF_SHIM(MT_PROF_EMB, embedding_bwd,
             (mt_backend * be, float *dw, const int32_t *t, int64_t n, const void *d, int64_t v0,
              int64_t v1, int64_t h),
             (be, dw, t, n, d, v0, v1, h))
MT_PROF_SHIM(MT_PROF_BIASG, bias_grad,
             (mt_backend * be, float *db, const void *d, int64_t rows, int64_t n),
             (be, db, d, rows, n))
MT_PROF_SHIM(MT_PROF_ADAM, adamw,
             (mt_backend * be, const mt_adamw_hparams *hp, float *ms, float *m, float *v,
              const float *g, void *lp, int64_t n),
             (be, hp, ms, m, v, g, lp, n))
#undef MT_PROF_SHIM

/* Zero p and put its wrapped table in place of be's. */
static inline void mt_bench_prof_install(mt_bench_prof *p, mt_backend *be) {
  *p = (mt_bench_prof){0};
  p->in = be->ops;
  p->ops = *be->ops;
  p->ops.gemm = mt_prof_gemm;
  p->ops.gemm_grouped = mt_prof_gemm_grouped;
  p->ops.flash_attn_fwd = mt_prof_flash_attn_fwd;
  p->ops.flash_attn_bwd = mt_prof_flash_attn_bwd;
  p->ops.layernorm_fwd = mt_prof_layernorm_fwd;
  p->ops.layernorm_bwd = mt_prof_layernorm_bwd;
  p->ops.rmsnorm_fwd = mt_prof_rmsnorm_fwd;
  p->ops.rmsnorm_bwd = mt_prof_rmsnorm_bwd;
  p->ops.gelu_fwd = mt_prof_gelu_fwd;
  p->ops.gelu_bwd = mt_prof_gelu_bwd;
  p->ops.swiglu_fwd = mt_prof_swiglu_fwd;
  p->ops.swiglu_bwd = mt_prof_swiglu_bwd;
  p->ops.rope_fwd = mt_prof_rope_fwd;
  p->ops.rope_bwd = mt_prof_rope_bwd;
  p->ops.xent_max = mt_prof_xent_max;
  p->ops.xent_stats = mt_prof_xent_stats;
  p->ops.xent_bwd = mt_prof_xent_bwd;
  p->ops.dropout_add_fwd = mt_prof_dropout_add_fwd;
  p->ops.dropout_bwd = mt_prof_dropout_bwd;
  p->ops.embedding_bwd = mt_prof_embedding_bwd;
  p->ops.bias_grad = mt_prof_bias_grad;
  p->ops.adamw = mt_prof_adamw;
  be->ops = &p->ops;
  mt_bench_prof_cur = p;
}

/* Give be its real table back. */
static inline void mt_bench_prof_uninstall(mt_bench_prof *p, mt_backend *be) {
  be->ops = p->in;
  mt_bench_prof_cur = NULL;
}

#endif
