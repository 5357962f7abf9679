/* tests/tools/cuda_parity.c — per-op parity of the CUDA backend against the
 * fp32 CPU backend (the reference semantics), forward and backward ops.
 *
 * usage: cuda_parity [fp32|bf16|all] [tiny|realistic|all]   (default: all tiny)
 *
 * Shapes: "tiny" — small shapes that cover every code path (edges, padding,
 * accumulate flags, one and several tiles); "realistic" (cuda_parity_real.h)
 * — the shapes of real models: aligned tensor-core GEMMs 4096x4096x1024,
 * LayerNorm/RMSNorm h 4096 over 4096 rows, multi-chunk embedding backward
 * over vocab 50304 with repeats, cross-entropy over 50304 columns (50257
 * valid) x 4096 tokens, fused attention s 1024-2048 with the unfused GPU
 * softmax (rows > 32) as a second reference, hidden dropout s 2048 x h 1024,
 * AdamW and sumsq_acc_f32 over 1e7 elements. The CPU reference then runs on
 * every core (OpenMP default) so a mode stays within about a minute.
 *
 * Self-test without a GPU: MEGATRAIN_PARITY_SELFTEST=1 runs the "device"
 * side on a second cpu backend (storage fp32 or bf16), skipping the
 * GPU-only checks: it exercises the tool's host code and times the CPU
 * reference (every comparison must pass).
 *
 * Output: each case prints "case NAME ..." (flushed) BEFORE it runs — with
 * CUDA_LAUNCH_BLOCKING=1 a device fault then names the case — then one line
 * per compared output and "PASS|FAIL case NAME worst rel err E (S s)".
 *
 * Every op runs on both backends with the same inputs; in bf16 mode the
 * host inputs are first rounded to bf16, so both sides see identical values
 * and only the GPU's bf16 storage of outputs/intermediates differs.
 * Error metric per output: max_i |gpu_i - cpu_i| / max_i |cpu_i|.
 * (The unfused attention left the op table with issue 15; its CPU-vs-GPU
 * group went with it: the fused group below compares the op the model runs.)
 * Tolerances (docs/cuda.md):
 *   fp32: 1e-5 for every op (cuBLAS vs OpenBLAS summation order, FMA
 *         contraction, expf vs cpu_expf), except LayerNorm's saved mean,
 *         1e-4 relative to max|mean| (a mean near 0 carries the summation
 *         error of values ~100x larger);
 *   fused attention (cuda_parity_flash.h): as attention, against the CPU
 *         backend's fused op;
 *   bf16: one rounding of the output to bf16 costs <= 2^-9 relative, so
 *         L1 = 2^-8 for ops that round once (elementwise, GEMM, LayerNorm
 *         forward, embeddings, cross-entropy backward), L2 = 2^-6 for
 *         chains with intermediate bf16 tensors (LayerNorm backward: din
 *         accumulates into a bf16 tensor), 2^-5 for attention (bf16 scores,
 *         probs, dS: three roundings feeding exp and two GEMMs); fp32 outputs computed from bf16-exact inputs in fp32 keep 1e-5
 *         (reductions to fp32 grads, AdamW state).
 * Dropout masks must be bitwise equal (the zero patterns are compared
 * exactly in both modes).
 * Exit 0 = all pass, 1 = a failure, 77 = no usable CUDA device (prints
 * "SKIP: no usable CUDA device (<error>)").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/rng.h"
#include "core/util.h"
#if MT_HAVE_CUDA
#include "tests/tools/cuda_ref/attn_unfused.h" /* cuda_attn_fwd: the unfused GPU reference */
#endif

typedef struct {
  mt_backend *c, *g;
  mt_dtype T;
  double l1, l2; /* tolerances for once-rounded / chained outputs */
  int fails, checks;
  uint64_t seed;
  const char *case_name; /* the case running (case_begin) */
  double case_worst;     /* its worst relative error */
  int case_fails0;       /* fails before it */
  double case_t0;
  int cases, case_failed;
} P;

/* Announce a case before it runs (flushed: a fault names it). */
static void case_begin(P *p, const char *name) {
  p->case_name = name;
  p->case_worst = 0.0;
  p->case_fails0 = p->fails;
  p->case_t0 = mt_now();
  printf("case %s ...\n", name);
  fflush(stdout);
}

/* Close it: synchronise (an asynchronous fault surfaces here, still under
 * its name), then one summary line. */
static void case_end(P *p) {
  p->g->ops->synchronize(p->g);
  const int ok = p->fails == p->case_fails0;
  p->cases++;
  if (!ok) p->case_failed++;
  printf("%s case %s: worst rel err %.3e (%.1f s)\n", ok ? "PASS" : "FAIL", p->case_name,
         p->case_worst, mt_now() - p->case_t0);
  fflush(stdout);
}

static void note_err(P *p, double rel) {
  if (!(rel <= p->case_worst)) p->case_worst = isnan(rel) ? INFINITY : rel;
}

/* A tensor on both backends: host values h (fp32), cpu copy c (fp32), gpu
 * copy g in dtype gt. */
typedef struct {
  int64_t n;
  mt_dtype gt;
  float *h;
  void *c, *g;
} tp;

static uint16_t h_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float h_bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float rnd(P *p) {
  p->seed = p->seed * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(p->seed >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static void gpu_put(P *p, void *dst, const float *h, int64_t n, mt_dtype gt) {
  if (gt == MT_BF16) {
    uint16_t *b = mt_xmalloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) b[i] = h_f2bf(h[i]);
    p->g->ops->memcpy_h2d(p->g, dst, b, (size_t)n * 2);
    free(b);
  } else {
    p->g->ops->memcpy_h2d(p->g, dst, h, (size_t)n * 4);
  }
}

static float *gpu_get(P *p, const void *src, int64_t n, mt_dtype gt) {
  float *o = mt_xmalloc((size_t)(n > 0 ? n : 1) * 4);
  if (gt == MT_BF16) {
    uint16_t *b = mt_xmalloc((size_t)(n > 0 ? n : 1) * 2);
    p->g->ops->memcpy_d2h(p->g, b, src, (size_t)n * 2);
    for (int64_t i = 0; i < n; i++) o[i] = h_bf2f(b[i]);
    free(b);
  } else {
    p->g->ops->memcpy_d2h(p->g, o, src, (size_t)n * 4);
  }
  return o;
}

/* Random tensor (values scale * U(-1,1), rounded to bf16 when gt is bf16). */
static tp mk(P *p, int64_t n, mt_dtype gt, float scale) {
  tp t = {n, gt, mt_xmalloc((size_t)n * 4), NULL, NULL};
  for (int64_t i = 0; i < n; i++) {
    float v = scale * rnd(p);
    t.h[i] = gt == MT_BF16 ? h_bf2f(h_f2bf(v)) : v;
  }
  t.c = p->c->ops->alloc(p->c, (size_t)n * 4, MT_MEM_WORKSPACE);
  memcpy(t.c, t.h, (size_t)n * 4);
  t.g = p->g->ops->alloc(p->g, (size_t)n * mt_dtype_size(gt), MT_MEM_WORKSPACE);
  gpu_put(p, t.g, t.h, n, gt);
  return t;
}

static void fr(P *p, tp *t) {
  free(t->h);
  p->c->ops->free(p->c, t->c);
  p->g->ops->free(p->g, t->g);
}

/* int32 array on both backends */
typedef struct {
  int32_t *c, *g;
} ip;
static ip mki(P *p, const int32_t *v, int64_t n) {
  ip r;
  r.c = p->c->ops->alloc(p->c, (size_t)n * 4, MT_MEM_WORKSPACE);
  memcpy(r.c, v, (size_t)n * 4);
  r.g = p->g->ops->alloc(p->g, (size_t)n * 4, MT_MEM_WORKSPACE);
  p->g->ops->memcpy_h2d(p->g, r.g, v, (size_t)n * 4);
  return r;
}
static void fri(P *p, ip *r) {
  p->c->ops->free(p->c, r->c);
  p->g->ops->free(p->g, r->g);
}

/* Compare t's cpu and gpu contents; mask != 0 also requires identical zero
 * patterns (dropout). */
static void cmp(P *p, const char *name, const tp *t, double tol, int mask) {
  float *g = gpu_get(p, t->g, t->n, t->gt);
  const float *c = (const float *)t->c;
  double mx = 0, err = 0;
  int64_t zdiff = 0;
  for (int64_t i = 0; i < t->n; i++) {
    mx = fmax(mx, fabs(c[i]));
    double e = fabs((double)g[i] - (double)c[i]);
    if (!(e <= err)) err = isnan(e) ? INFINITY : e;
    if ((c[i] == 0.0f) != (g[i] == 0.0f)) zdiff++;
  }
  double rel = err / (mx > 0 ? mx : 1.0);
  int ok = rel <= tol && (!mask || zdiff == 0);
  note_err(p, mask && zdiff ? INFINITY : rel);
  p->checks++;
  if (!ok) p->fails++;
  printf("  %-4s %-34s max rel err %.3e (tol %.1e)%s\n", ok ? "ok" : "FAIL", name, rel, tol,
         mask ? (zdiff ? " mask DIFFERS" : " mask identical") : "");
  free(g);
}

static void cmp_scalar(P *p, const char *name, double c, double g, double tol) {
  double rel = fabs(g - c) / (fabs(c) > 0 ? fabs(c) : 1.0);
  int ok = rel <= tol;
  note_err(p, rel);
  p->checks++;
  if (!ok) p->fails++;
  printf("  %-4s %-34s cpu %.10g gpu %.10g rel %.3e (tol %.1e)\n", ok ? "ok" : "FAIL", name, c, g,
         rel, tol);
}

/* ---- op groups ---- */

static void t_gemm(P *p) {
  const mt_dtype T = p->T;
  const int m = 33, n = 40, k = 24;
  for (int variant = 0; variant < 3; variant++) {
    const int ta = variant == 2, tb = variant == 1, batch = variant == 0 ? 2 : 1;
    const mt_dtype ct = variant == 2 ? MT_F32 : T;
    tp A = mk(p, (int64_t)m * k * batch, T, 1.0f), B = mk(p, (int64_t)k * n * batch, T, 1.0f);
    tp C = mk(p, (int64_t)m * n * batch, ct, 1.0f), bias = mk(p, n, T, 1.0f);
    mt_gemm_desc d = {0};
    d.trans_a = ta;
    d.trans_b = tb;
    d.m = m, d.n = n, d.k = k;
    d.alpha = 0.7f;
    d.beta = variant == 0 ? 0.0f : variant == 1 ? 0.5f : 1.0f;
    d.lda = ta ? m : k, d.stride_a = (int64_t)m * k;
    d.ldb = tb ? k : n, d.stride_b = (int64_t)k * n;
    d.ldc = n, d.stride_c = (int64_t)m * n;
    d.a_type = T, d.b_type = T, d.c_type = ct;
    d.batch = batch;
    mt_gemm_desc dc = d, dg = d;
    dc.a = A.c, dc.b = B.c, dc.c = C.c, dc.bias = variant == 2 ? NULL : bias.c;
    dc.a_type = dc.b_type = dc.c_type = MT_F32;
    dg.a = A.g, dg.b = B.g, dg.c = C.g, dg.bias = variant == 2 ? NULL : bias.g;
    p->c->ops->gemm(p->c, &dc);
    p->g->ops->gemm(p->g, &dg);
    static const char *nm[3] = {"gemm NN batch2 +bias beta0", "gemm NT +bias beta0.5",
                                "gemm TN fp32-out beta1 (wgrad)"};
    cmp(p, nm[variant], &C, ct == MT_F32 ? 1e-5 : p->l1, 0);
    fr(p, &A), fr(p, &B), fr(p, &C), fr(p, &bias);
  }
  /* bias_grad: fp32 accumulate */
  tp dout = mk(p, 70 * 50, T, 1.0f), db = mk(p, 50, MT_F32, 1.0f);
  p->c->ops->bias_grad(p->c, db.c, dout.c, 70, 50);
  p->g->ops->bias_grad(p->g, db.g, dout.g, 70, 50);
  cmp(p, "bias_grad (accumulate)", &db, 1e-5, 0);
  fr(p, &dout), fr(p, &db);
}

static void t_norm_act(P *p) {
  const mt_dtype T = p->T;
  const int64_t rows = 70, h = 96;
  tp x = mk(p, rows * h, T, 2.0f), w = mk(p, h, T, 1.0f), b = mk(p, h, T, 0.5f);
  tp out = mk(p, rows * h, T, 1.0f), mean = mk(p, rows, MT_F32, 1.0f), rstd = mk(p, rows, MT_F32, 1.0f);
  p->c->ops->layernorm_fwd(p->c, out.c, mean.c, rstd.c, x.c, w.c, b.c, rows, h, 1e-5f);
  p->g->ops->layernorm_fwd(p->g, out.g, mean.g, rstd.g, x.g, w.g, b.g, rows, h, 1e-5f);
  cmp(p, "layernorm_fwd out", &out, p->l1, 0);
  cmp(p, "layernorm_fwd mean (vs max|mean|)", &mean, 1e-4, 0);
  cmp(p, "layernorm_fwd rstd", &rstd, 1e-5, 0);
  tp dout = mk(p, rows * h, T, 1.0f), din = mk(p, rows * h, T, 1.0f);
  tp dw = mk(p, h, MT_F32, 1.0f), db = mk(p, h, MT_F32, 1.0f);
  /* both sides use the CPU's saved statistics so backward is isolated */
  p->g->ops->memcpy_h2d(p->g, mean.g, mean.c, (size_t)rows * 4);
  p->g->ops->memcpy_h2d(p->g, rstd.g, rstd.c, (size_t)rows * 4);
  p->c->ops->layernorm_bwd(p->c, din.c, dw.c, db.c, dout.c, x.c, w.c, mean.c, rstd.c, rows, h);
  p->g->ops->layernorm_bwd(p->g, din.g, dw.g, db.g, dout.g, x.g, w.g, mean.g, rstd.g, rows, h);
  cmp(p, "layernorm_bwd din (accumulate)", &din, p->l2, 0);
  cmp(p, "layernorm_bwd dw (accumulate)", &dw, 1e-5, 0);
  cmp(p, "layernorm_bwd db (accumulate)", &db, 1e-5, 0);
  fr(p, &x), fr(p, &w), fr(p, &b), fr(p, &out), fr(p, &mean), fr(p, &rstd);
  fr(p, &dout), fr(p, &din), fr(p, &dw), fr(p, &db);

  const int64_t n = 1000;
  tp gx = mk(p, n, T, 4.0f), gy = mk(p, n, T, 1.0f), gd = mk(p, n, T, 1.0f);
  p->c->ops->gelu_fwd(p->c, gy.c, gx.c, n);
  p->g->ops->gelu_fwd(p->g, gy.g, gx.g, n);
  cmp(p, "gelu_fwd", &gy, p->l1, 0);
  p->c->ops->gelu_bwd(p->c, gd.c, gx.c, gd.c, n); /* in place: din aliases dout */
  p->g->ops->gelu_bwd(p->g, gd.g, gx.g, gd.g, n);
  cmp(p, "gelu_bwd (din aliases dout)", &gd, p->l1, 0);
  fr(p, &gx), fr(p, &gy), fr(p, &gd);
}

static void t_dropout(P *p) {
  const mt_dtype T = p->T;
  int64_t ids[2] = {7, 2};
  mt_dropout_desc d = {.p = 0.3f, .key = mt_rng_key(99, "hidden_dropout", 1, 0), .s = 8, .b = 2,
                       .h = 24, .s_offset = 3, .s_full = 16, .h_offset = 8, .h_full = 48,
                       .sample_ids = ids};
  const int64_t n = 8 * 2 * 24;
  tp x = mk(p, n, T, 1.0f), res = mk(p, n, T, 1.0f), out = mk(p, n, T, 1.0f);
  p->c->ops->dropout_add_fwd(p->c, &d, out.c, x.c, res.c);
  p->g->ops->dropout_add_fwd(p->g, &d, out.g, x.g, res.g);
  cmp(p, "dropout_add_fwd", &out, p->l1, 0);
  /* mask: backward of a gradient of ones, in place */
  tp g = mk(p, n, T, 1.0f);
  for (int64_t i = 0; i < n; i++) g.h[i] = 1.0f;
  memcpy(g.c, g.h, (size_t)n * 4);
  gpu_put(p, g.g, g.h, n, T);
  p->c->ops->dropout_bwd(p->c, &d, g.c, g.c);
  p->g->ops->dropout_bwd(p->g, &d, g.g, g.g);
  cmp(p, "dropout_bwd (mask, in place)", &g, p->l1, 1);
  fr(p, &x), fr(p, &res), fr(p, &out), fr(p, &g);
}

static void t_embed_xent(P *p) {
  const mt_dtype T = p->T;
  const int64_t n = 40, h = 20, v0 = 5, v1 = 25;
  int32_t tok[40];
  for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 7 + (i % 3) * 11) % 30); /* repeats, some out of range */
  ip tk = mki(p, tok, n);
  tp w = mk(p, (v1 - v0) * h, T, 1.0f), out = mk(p, n * h, T, 1.0f);
  p->c->ops->embedding_fwd(p->c, out.c, tk.c, n, w.c, v0, v1, h);
  p->g->ops->embedding_fwd(p->g, out.g, tk.g, n, w.g, v0, v1, h);
  cmp(p, "embedding_fwd", &out, 0.0, 0);
  tp dout = mk(p, n * h, T, 1.0f), dw = mk(p, (v1 - v0) * h, MT_F32, 1.0f);
  p->c->ops->embedding_bwd(p->c, dw.c, tk.c, n, dout.c, v0, v1, h);
  p->g->ops->embedding_bwd(p->g, dw.g, tk.g, n, dout.g, v0, v1, h);
  cmp(p, "embedding_bwd (repeats, accumulate)", &dw, 1e-6, 0);
  fr(p, &w), fr(p, &out), fr(p, &dout), fr(p, &dw), fri(p, &tk);

  const int64_t s = 8, b = 3;
  tp x = mk(p, s * b * h, T, 1.0f), wpe = mk(p, 16 * h, T, 1.0f), dwpe = mk(p, 16 * h, MT_F32, 1.0f);
  p->c->ops->pos_embedding_fwd(p->c, x.c, wpe.c, s, b, h, 4);
  p->g->ops->pos_embedding_fwd(p->g, x.g, wpe.g, s, b, h, 4);
  cmp(p, "pos_embedding_fwd", &x, p->l1, 0);
  tp pd = mk(p, s * b * h, T, 1.0f);
  p->c->ops->pos_embedding_bwd(p->c, dwpe.c, pd.c, s, b, h, 4);
  p->g->ops->pos_embedding_bwd(p->g, dwpe.g, pd.g, s, b, h, 4);
  cmp(p, "pos_embedding_bwd (accumulate)", &dwpe, 1e-6, 0);
  fr(p, &x), fr(p, &wpe), fr(p, &dwpe), fr(p, &pd);

  const int64_t rows = 6, vl = 50, valid = 45, vs = 100;
  int32_t tg[6] = {100, 144, 120, 147 /* padding: excluded */, 20 /* other rank */, 131};
  ip tgt = mki(p, tg, rows);
  tp lg = mk(p, rows * vl, T, 4.0f), mx = mk(p, rows, MT_F32, 1.0f), se = mk(p, rows, MT_F32, 1.0f);
  tp tl = mk(p, rows, MT_F32, 1.0f), loss = mk(p, rows, MT_F32, 1.0f);
  p->c->ops->xent_max(p->c, mx.c, lg.c, rows, vl, valid);
  p->g->ops->xent_max(p->g, mx.g, lg.g, rows, vl, valid);
  cmp(p, "xent_max", &mx, 0.0, 0);
  p->c->ops->xent_stats(p->c, se.c, tl.c, lg.c, mx.c, tgt.c, rows, vl, valid, vs);
  p->g->ops->xent_stats(p->g, se.g, tl.g, lg.g, mx.g, tgt.g, rows, vl, valid, vs);
  cmp(p, "xent_stats sumexp", &se, 1e-5, 0);
  cmp(p, "xent_stats tgt_logit", &tl, 0.0, 0);
  p->c->ops->xent_loss(p->c, loss.c, mx.c, se.c, tl.c, rows, NULL);
  p->g->ops->xent_loss(p->g, loss.g, mx.g, se.g, tl.g, rows, NULL);
  cmp(p, "xent_loss", &loss, 1e-5, 0);
  p->c->ops->xent_bwd(p->c, lg.c, mx.c, se.c, tgt.c, rows, vl, valid, vs, 0.25f, NULL);
  p->g->ops->xent_bwd(p->g, lg.g, mx.g, se.g, tgt.g, rows, vl, valid, vs, 0.25f, NULL);
  cmp(p, "xent_bwd (in place, padding 0)", &lg, p->l1, 0);
  fr(p, &lg), fr(p, &mx), fr(p, &se), fr(p, &tl), fr(p, &loss), fri(p, &tgt);
}

/* AdamW with a low-precision (T) param copy over n elements, on both
 * backends from the same inputs: fp32 master, m, v compared at 1e-6, the
 * param copy at the T tolerance. Returns the fp32 gradient it used (the
 * caller frees it with fr). */
static tp adamw_case(P *p, int64_t n, const mt_adamw_hparams *hp) {
  tp ms = mk(p, n, MT_F32, 1.0f), m = mk(p, n, MT_F32, 0.01f), v = mk(p, n, MT_F32, 0.0f);
  tp g = mk(p, n, MT_F32, 0.1f), pl = mk(p, n, p->T, 1.0f);
  for (int64_t i = 0; i < n; i++) ((float *)v.c)[i] = fabsf(((float *)v.c)[i]);
  p->g->ops->memcpy_h2d(p->g, v.g, v.c, (size_t)n * 4);
  p->c->ops->adamw(p->c, hp, ms.c, m.c, v.c, g.c, pl.c, n);
  p->g->ops->adamw(p->g, hp, ms.g, m.g, v.g, g.g, pl.g, n);
  cmp(p, "adamw master", &ms, 1e-6, 0);
  cmp(p, "adamw m", &m, 1e-6, 0);
  cmp(p, "adamw v", &v, 1e-6, 0);
  cmp(p, "adamw param_lowp", &pl, p->l1, 0);
  fr(p, &ms), fr(p, &m), fr(p, &v), fr(p, &pl);
  return g;
}

static void t_elementwise(P *p) {
  const mt_dtype T = p->T;
  const int64_t n = 5000;
  tp a = mk(p, n, T, 1.0f), b = mk(p, n, T, 1.0f);
  p->c->ops->add(p->c, a.c, a.c, b.c, n);
  p->g->ops->add(p->g, a.g, a.g, b.g, n);
  cmp(p, "add (out aliases a)", &a, p->l1, 0);
  tp x = mk(p, n, MT_F32, 1.0f), y = mk(p, n, MT_F32, 1.0f);
  p->c->ops->axpy_f32(p->c, y.c, 0.3f, x.c, n);
  p->g->ops->axpy_f32(p->g, y.g, 0.3f, x.g, n);
  cmp(p, "axpy_f32", &y, 1e-6, 0);
  p->c->ops->scale_f32(p->c, y.c, -1.7f, n);
  p->g->ops->scale_f32(p->g, y.g, -1.7f, n);
  cmp(p, "scale_f32", &y, 1e-6, 0);
  cmp_scalar(p, "sumsq_f32", p->c->ops->sumsq_f32(p->c, y.c, n),
             p->g->ops->sumsq_f32(p->g, y.g, n), 1e-10);
  cmp_scalar(p, "sum_f32", p->c->ops->sum_f32(p->c, y.c, n), p->g->ops->sum_f32(p->g, y.g, n),
             1e-10);
  tp big = mk(p, 3000001, MT_F32, 1.0f);
  cmp_scalar(p, "sumsq_f32 (3e6 elements)", p->c->ops->sumsq_f32(p->c, big.c, big.n),
             p->g->ops->sumsq_f32(p->g, big.g, big.n), 1e-10);
  double s1 = p->g->ops->sum_f32(p->g, big.g, big.n), s2 = p->g->ops->sum_f32(p->g, big.g, big.n);
  p->checks++;
  if (s1 != s2) p->fails++;
  printf("  %-4s sum_f32 repeatable bitwise\n", s1 == s2 ? "ok" : "FAIL");
  fr(p, &a), fr(p, &b), fr(p, &x), fr(p, &y), fr(p, &big);

  /* AdamW with a low-precision param copy */
  const mt_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                               .weight_decay = 0.1f, .step = 3, .grad_scale = 0.8f};
  tp g = adamw_case(p, n, &hp);
  fr(p, &g);

  /* init / fill / cast */
  tp in = mk(p, 7 * 9, T, 1.0f);
  mt_rng_key_t key = mt_rng_key(1234, "decoder.layers.0.mlp.linear_fc1.weight", 0, 0);
  p->c->ops->init_normal(p->c, in.c, 7, 9, 20, 3, 5, key, 0.02f);
  p->g->ops->init_normal(p->g, in.g, 7, 9, 20, 3, 5, key, 0.02f);
  cmp(p, "init_normal (shard)", &in, p->l1, 0);
  p->c->ops->fill(p->c, in.c, MT_F32, 3.3f, in.n);
  p->g->ops->fill(p->g, in.g, T, 3.3f, in.n);
  cmp(p, "fill", &in, p->l1, 0);
  fr(p, &in);
  if (T == MT_BF16) { /* cast fp32 -> bf16 -> fp32 on the GPU vs host RNE */
    tp f = mk(p, 4096, MT_F32, 100.0f), bfl = mk(p, 4096, MT_BF16, 1.0f);
    for (int64_t i = 0; i < f.n; i++) f.h[i] = 100.0f * rnd(p); /* not bf16-exact */
    p->g->ops->memcpy_h2d(p->g, f.g, f.h, (size_t)f.n * 4);
    p->g->ops->cast(p->g, bfl.g, MT_BF16, f.g, MT_F32, f.n);
    p->g->ops->cast(p->g, f.g, MT_F32, bfl.g, MT_BF16, f.n);
    for (int64_t i = 0; i < f.n; i++) ((float *)f.c)[i] = h_bf2f(h_f2bf(f.h[i]));
    cmp(p, "cast f32->bf16->f32 (RNE, bitwise)", &f, 0.0, 0);
    fr(p, &f), fr(p, &bfl);
  }
}

static void t_moe(P *p) {
  const mt_dtype T = p->T;
  const int64_t h = 12, rows = 10;
  const int32_t idx[7] = {3, 0, 9, 3, 5, 1, 8};
  ip ix = mki(p, idx, 7);
  tp src = mk(p, rows * h, T, 1.0f), dst = mk(p, 7 * h, T, 1.0f);
  p->c->ops->moe_gather_rows(p->c, dst.c, src.c, ix.c, 7, h);
  p->g->ops->moe_gather_rows(p->g, dst.g, src.g, ix.g, 7, h);
  cmp(p, "moe_gather_rows", &dst, 0.0, 0);
  const int k = 2, nt = 5;
  const int32_t slot[10] = {0, 4, -1, 2, 7, 1, -1, -1, 9, 3};
  ip sl = mki(p, slot, nt * k);
  tp w = mk(p, nt * k, MT_F32, 1.0f), y = mk(p, nt * h, T, 1.0f);
  p->c->ops->moe_combine_fwd(p->c, y.c, src.c, sl.c, w.c, nt, k, h);
  p->g->ops->moe_combine_fwd(p->g, y.g, src.g, sl.g, w.g, nt, k, h);
  cmp(p, "moe_combine_fwd (weights)", &y, p->l1, 0);
  p->c->ops->moe_combine_fwd(p->c, y.c, src.c, sl.c, NULL, nt, k, h);
  p->g->ops->moe_combine_fwd(p->g, y.g, src.g, sl.g, NULL, nt, k, h);
  cmp(p, "moe_combine_fwd (w NULL)", &y, p->l1, 0);
  tp dy = mk(p, nt * h, T, 1.0f), dsrc = mk(p, rows * h, T, 1.0f), dw = mk(p, nt * k, MT_F32, 1.0f);
  p->c->ops->moe_combine_bwd(p->c, dsrc.c, dw.c, dy.c, src.c, sl.c, w.c, nt, k, h);
  p->g->ops->moe_combine_bwd(p->g, dsrc.g, dw.g, dy.g, src.g, sl.g, w.g, nt, k, h);
  cmp(p, "moe_combine_bwd dsrc", &dsrc, p->l1, 0);
  cmp(p, "moe_combine_bwd dw", &dw, 1e-5, 0);
  fr(p, &src), fr(p, &dst), fr(p, &w), fr(p, &y), fr(p, &dy), fr(p, &dsrc), fr(p, &dw);
  fri(p, &ix), fri(p, &sl);
}

#include "cuda_parity_flash.h"
#include "cuda_parity_real.h"

static void t_allocator(P *p) {
  mt_backend *g = p->g;
  size_t before = g->mem.live[MT_MEM_COMM];
  void *a = g->ops->alloc(g, 12345, MT_MEM_COMM);
  int ok = g->mem.live[MT_MEM_COMM] == before + 12345;
  g->ops->free(g, a);
  ok = ok && g->mem.live[MT_MEM_COMM] == before;
  void *z = g->ops->alloc(g, 64, MT_MEM_COMM);
  g->ops->memset0(g, z, 64);
  unsigned char hb[64];
  g->ops->memcpy_d2h(g, hb, z, 64);
  for (int i = 0; i < 64; i++) ok = ok && hb[i] == 0;
  g->ops->free(g, z);
  p->checks++;
  if (!ok) p->fails++;
  printf("  %-4s allocator counters, memset0, memcpy\n", ok ? "ok" : "FAIL");
#if MT_HAVE_CUDA
  if (strcmp(g->name, "cuda")) return; /* self-test on cpu */
  /* ZeRO-like churn: 8 live buffers, 20000 alloc/free pairs of 1 MiB. The
   * stream-ordered pool must not synchronise (fast) and the pointer map
   * must stay at constant capacity (it follows the live entries). */
  void *live[8];
  const double t0 = mt_now();
  for (int i = 0; i < 8; i++) live[i] = g->ops->alloc(g, 1 << 20, MT_MEM_COMM);
  const size_t cap0 = cuda_impl_of(g)->rec_cap;
  for (int i = 0; i < 20000; i++) {
    g->ops->free(g, live[i & 7]);
    live[i & 7] = g->ops->alloc(g, 1 << 20, MT_MEM_COMM);
    g->ops->memset0(g, live[i & 7], 256);
  }
  const size_t cap1 = cuda_impl_of(g)->rec_cap;
  for (int i = 0; i < 8; i++) g->ops->free(g, live[i]);
  g->ops->synchronize(g);
  const double dt = mt_now() - t0;
  ok = cap1 == cap0 && cap1 <= 256 && g->mem.live[MT_MEM_COMM] == before;
  p->checks++;
  if (!ok) p->fails++;
  printf("  %-4s allocator churn: 20000 alloc/free, map capacity %zu -> %zu, %.3f s (%s pool)\n",
         ok ? "ok" : "FAIL", cap0, cap1, dt, cuda_impl_of(g)->pool ? "stream-ordered" : "NO");
#endif
}

static int run_mode(mt_dtype T, int tiny, int real) {
  char err[512] = "";
  /* tiny: one CPU thread (as before); realistic: every core */
  mt_backend_options oc = {.device = "cpu", .num_threads = real ? 0 : 1, .dtype = MT_F32};
  const char *st = getenv("MEGATRAIN_PARITY_SELFTEST");
  const int selftest = st && !strcmp(st, "1");
  mt_backend_options og = {.device = selftest ? "cpu" : "cuda", .dtype = T};
  if (selftest) mt_backends_process_init(&oc);
  P p = {0};
  p.T = T;
  p.seed = 42;
  p.l1 = T == MT_BF16 ? 1.0 / 256 : 1e-5;
  p.l2 = T == MT_BF16 ? 1.0 / 64 : 1e-5;
  p.g = mt_backend_create(&og, err, sizeof err);
  if (!p.g) {
    printf("SKIP: no usable CUDA device (%s)\n", err);
    return 77;
  }
  if (!selftest) mt_backends_process_init(&oc);
  p.c = mt_backend_create(&oc, err, sizeof err);
  if (!p.c) mt_fatal("%s", err);
  printf("== CUDA vs CPU, storage %s, %s shapes\n", mt_dtype_name(T),
         tiny && real ? "tiny and realistic" : real ? "realistic" : "tiny");
  fflush(stdout);
  if (tiny) {
    static const struct {
      const char *name;
      void (*fn)(P *);
    } groups[] = {{"allocator", t_allocator}, {"gemm", t_gemm},       {"norm_act", t_norm_act},
                  {"flash", t_flash_all},     {"dropout", t_dropout}, {"embed_xent", t_embed_xent},
                  {"elementwise", t_elementwise}, {"moe", t_moe}};
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++) {
      case_begin(&p, groups[i].name);
      groups[i].fn(&p);
      case_end(&p);
    }
  }
  if (real) t_realistic(&p);
  p.g->ops->synchronize(p.g);
  printf("== %s: %d cases (%d failed), %d checks, %d failed\n", mt_dtype_name(T), p.cases,
         p.case_failed, p.checks, p.fails);
  fflush(stdout);
  mt_backend_destroy(p.c);
  mt_backend_destroy(p.g);
  return p.fails ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all", *shapes = argc > 2 ? argv[2] : "tiny";
  const int fp32 = !strcmp(mode, "fp32") || !strcmp(mode, "all");
  const int bf16 = !strcmp(mode, "bf16") || !strcmp(mode, "all");
  const int tiny = !strcmp(shapes, "tiny") || !strcmp(shapes, "all");
  const int real = !strcmp(shapes, "realistic") || !strcmp(shapes, "all");
  if ((!fp32 && !bf16) || (!tiny && !real) || argc > 3) {
    fprintf(stderr,
            "usage: cuda_parity [fp32|bf16|all] [tiny|realistic|all] (got mode '%s', shapes "
            "'%s'%s)\n",
            mode, shapes, argc > 3 ? ", extra arguments" : "");
    return 2;
  }
  int rc = 0;
  if (fp32) {
    int r = run_mode(MT_F32, tiny, real);
    if (r == 77) return 77;
    rc |= r;
  }
  if (bf16) {
    int r = run_mode(MT_BF16, tiny, real);
    if (r == 77) return 77;
    rc |= r;
  }
  return rc ? 1 : 0;
}
