/* bench/bench_ops.c — throughput of the CPU backend ops at the GPT-2 124M
 * shapes (h=768, 12 heads, seq 64, micro-batch 4 -> 256 rows, vocab 50304).
 * Prints ms per call and GFLOP/s (GEMM, attention) or GB/s (memory-bound
 * ops), then an estimate of one training micro-batch step from these.
 * Usage: build/bench/bench_ops [threads] [reps] [gemm|attn]   (threads 0 =
 * default; "gemm" stops after the GEMM section; "attn" runs only the fused vs
 * unfused attention table, s = 64 ... 2048). Env knobs of the backend:
 * MEGATRAIN_OPENBLAS_CORETYPE, MEGATRAIN_CPU_GEMM, MEGATRAIN_CPU_GEMM_SLABS
 * (cpu/cpu_backend.c; README "Environment variables"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "tests/tools/attn_unfused.h"

static mt_backend *g_be;
static int g_reps = 10;

static float *falloc(int64_t n, float v) {
  float *p = g_be->ops->alloc(g_be, (size_t)n * sizeof(float), MT_MEM_ACT);
  for (int64_t i = 0; i < n; i++) p[i] = v * (float)((i * 2654435761u) % 1000) / 1000.0f;
  return p;
}

typedef void (*bench_fn)(void *arg);

static double time_ms(bench_fn f, void *arg) {
  f(arg); /* warm-up */
  double best = 1e30;
  for (int r = 0; r < g_reps; r++) {
    double t0 = mt_now();
    f(arg);
    double t = (mt_now() - t0) * 1e3;
    if (t < best) best = t;
  }
  return best;
}

typedef struct {
  mt_gemm_desc d;
} gemm_arg;

static void run_gemm(void *a) { g_be->ops->gemm(g_be, &((gemm_arg *)a)->d); }

/* C[m,n] (+)= op(A) op(B) with contiguous operands; returns ms */
static double bench_gemm(const char *name, int ta, int tb, int m, int n, int k, float beta) {
  gemm_arg g = {{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 1.0f, .beta = beta,
                 .a_type = MT_F32, .b_type = MT_F32, .c_type = MT_F32, .batch = 1}};
  float *a = falloc((int64_t)m * k, 1), *b = falloc((int64_t)k * n, 1), *c = falloc((int64_t)m * n, 0);
  g.d.a = a, g.d.lda = ta ? m : k;
  g.d.b = b, g.d.ldb = tb ? k : n;
  g.d.c = c, g.d.ldc = n;
  double ms = time_ms(run_gemm, &g);
  printf("  %-34s %8.3f ms  %7.1f GFLOP/s\n", name, ms, 2.0 * m * n * k / ms * 1e-6);
  g_be->ops->free(g_be, a), g_be->ops->free(g_be, b), g_be->ops->free(g_be, c);
  return ms;
}

typedef struct {
  mt_attn_desc d;
  float *qkv, *ctx, *probs, *dqkv, *lse, *dctx;
} attn_arg;
/* unfused reference op (tests/tools/attn_unfused.h: the CPU attention before
 * issue 15, no longer in the op table; the table below); fused: run_flash_* */
static void run_attn_fwd(void *a) {
  attn_arg *x = a;
  mt_ref_attn_fwd(g_be, &x->d, x->ctx, x->probs, NULL, x->qkv);
}
static void run_attn_bwd(void *a) {
  attn_arg *x = a;
  mt_ref_attn_bwd(g_be, &x->d, x->dqkv, x->ctx, x->qkv, x->probs);
}
static void run_flash_fwd(void *a) {
  attn_arg *x = a;
  g_be->ops->flash_attn_fwd(g_be, &x->d, x->ctx, x->lse, x->qkv, NULL);
}
static void run_flash_bwd(void *a) {
  attn_arg *x = a;
  g_be->ops->flash_attn_bwd(g_be, &x->d, x->dqkv, NULL, x->dctx, x->ctx, x->lse, x->qkv, NULL);
}

/* Fused (flash_attn_fwd/bwd) vs unfused (the reference op) attention at the
 * 124M head shape (b 4, 12 heads, hn 64) for s = 64 ... 2048: ms per call,
 * best of g_reps (x20 at s = 64, x4 at 256, at most 3 from 1024: short calls
 * are easily preempted on a shared machine), without and with dropout. */
static void bench_attn_table(void) {
  const int B = 4, NP = 12, HN = 64, seqs[] = {64, 256, 1024, 2048};
  int64_t sid[4] = {0, 1, 2, 3};
  int reps = g_reps;
  printf("attention, fused vs unfused (b=%d np=%d hn=%d), ms per call:\n", B, NP, HN);
  printf("  %5s %5s %11s %11s %11s %11s %9s %9s\n", "s", "p", "unfused fwd", "unfused bwd",
         "fused fwd", "fused bwd", "fwd x", "fwd+bwd x");
  for (size_t k = 0; k < sizeof seqs / sizeof *seqs; k++) {
    const int S = seqs[k];
    const int64_t rows = (int64_t)S * B, h = (int64_t)NP * HN;
    attn_arg at = {.d = {.s = S, .b = B, .np = NP, .hn = HN, .head_offset = 0,
                         .n_heads_total = NP, .scale = 0.125f, .key = mt_rng_key(1, "a", 0, 0),
                         .sample_ids = sid}};
    at.qkv = falloc(rows * 3 * h, 1), at.ctx = falloc(rows * h, 1), at.dctx = falloc(rows * h, 1);
    at.dqkv = falloc(rows * 3 * h, 1), at.lse = falloc((int64_t)B * NP * S, 0);
    at.probs = falloc((int64_t)B * NP * S * S, 1);
    if (S >= 1024 && g_reps > 3) g_reps = 3;
    if (S <= 256) g_reps = reps * (S <= 64 ? 20 : 4); /* short calls: best of many */
    for (int pdrop = 0; pdrop < 2; pdrop++) {
      at.d.dropout_p = pdrop ? 0.1f : 0.0f;
      double uf = time_ms(run_attn_fwd, &at), ub = time_ms(run_attn_bwd, &at);
      double ff = time_ms(run_flash_fwd, &at), fb = time_ms(run_flash_bwd, &at);
      printf("  %5d %5.1f %11.3f %11.3f %11.3f %11.3f %9.2f %9.2f\n", S, (double)at.d.dropout_p,
             uf, ub, ff, fb, uf / ff, (uf + ub) / (ff + fb));
    }
    g_be->ops->free(g_be, at.qkv), g_be->ops->free(g_be, at.ctx), g_be->ops->free(g_be, at.dctx);
    g_be->ops->free(g_be, at.dqkv), g_be->ops->free(g_be, at.lse);
    g_be->ops->free(g_be, at.probs);
    g_reps = reps;
  }
}

typedef struct {
  float *x, *y, *g, *w, *b, *mu, *rs, *dw, *db;
  int64_t rows, h, n;
  int32_t *tgt;
  mt_dropout_desc dd;
} ew_arg;
static void run_ln_fwd(void *a) {
  ew_arg *e = a;
  g_be->ops->layernorm_fwd(g_be, e->y, e->mu, e->rs, e->x, e->w, e->b, e->rows, e->h, 1e-5f);
}
static void run_ln_bwd(void *a) {
  ew_arg *e = a;
  g_be->ops->layernorm_bwd(g_be, e->y, e->dw, e->db, e->g, e->x, e->w, e->mu, e->rs, e->rows, e->h);
}
static void run_gelu_fwd(void *a) {
  ew_arg *e = a;
  g_be->ops->gelu_fwd(g_be, e->y, e->x, e->n);
}
static void run_gelu_bwd(void *a) {
  ew_arg *e = a;
  g_be->ops->gelu_bwd(g_be, e->y, e->x, e->g, e->n);
}
static void run_drop_fwd(void *a) {
  ew_arg *e = a;
  g_be->ops->dropout_add_fwd(g_be, &e->dd, e->y, e->x, e->g);
}
static void run_drop_bwd(void *a) {
  ew_arg *e = a;
  g_be->ops->dropout_bwd(g_be, &e->dd, e->y, e->g);
}
static void run_xent(void *a) {
  ew_arg *e = a; /* x = logits [rows, n]; forward pieces + backward */
  g_be->ops->xent_max(g_be, e->mu, e->x, e->rows, e->n, e->n - 47);
  g_be->ops->xent_stats(g_be, e->rs, e->dw, e->x, e->mu, e->tgt, e->rows, e->n, e->n - 47, 0);
  g_be->ops->xent_bwd(g_be, e->y, e->mu, e->rs, e->tgt, e->rows, e->n, e->n - 47, 0, 1.0f, NULL);
}
static void run_bias_grad(void *a) {
  ew_arg *e = a;
  g_be->ops->bias_grad(g_be, e->db, e->g, e->rows, e->h);
}
static void run_adamw(void *a) {
  ew_arg *e = a;
  mt_adamw_hparams hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                         .weight_decay = 0.1f, .step = 3, .grad_scale = 1.0f};
  g_be->ops->adamw(g_be, &hp, e->x, e->y, e->b, e->g, NULL, e->n);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int threads = argc > 1 ? atoi(argv[1]) : 0;
  g_reps = argc > 2 ? atoi(argv[2]) : 10;
  mt_backend_options o = {.device = "cpu", .num_threads = threads, .dtype = MT_F32};
  char err[256];
  mt_backends_process_init(&o);
  g_be = mt_backend_create(&o, err, sizeof err);
  if (!g_be) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  const int S = 64, B = 4, H = 768, NP = 12, HN = 64, F = 3072, V = 50304, L = 12;
  const int R = S * B;
  printf("cpu backend bench: rows=%d h=%d heads=%d seq=%d vocab=%d threads=%d reps=%d (best of)\n",
         R, H, NP, S, V, threads, g_reps);
  if (argc > 3 && !strcmp(argv[3], "attn")) {
    bench_attn_table();
    g_be->destroy(g_be);
    return 0;
  }
  printf("GEMM (Megatron weights [out, in]; fwd y = x W^T, bwd dx = dy W, dW += dy^T x):\n");
  double layer = 0, head = 0;
  layer += bench_gemm("qkv fwd  [256x768]x[768x2304]^T", 0, 1, R, 3 * H, H, 0);
  layer += bench_gemm("qkv dx   [256x2304]x[2304x768]", 0, 0, R, H, 3 * H, 0);
  layer += bench_gemm("qkv dW   [2304x256]x[256x768]", 1, 0, 3 * H, H, R, 1);
  layer += bench_gemm("proj fwd [256x768]x[768x768]^T", 0, 1, R, H, H, 0);
  layer += bench_gemm("proj dx", 0, 0, R, H, H, 0);
  layer += bench_gemm("proj dW", 1, 0, H, H, R, 1);
  layer += bench_gemm("fc1 fwd  [256x768]x[768x3072]^T", 0, 1, R, F, H, 0);
  layer += bench_gemm("fc1 dx   [256x3072]x[3072x768]", 0, 0, R, H, F, 0);
  layer += bench_gemm("fc1 dW   [3072x256]x[256x768]", 1, 0, F, H, R, 1);
  layer += bench_gemm("fc2 fwd  [256x3072]x[3072x768]^T", 0, 1, R, H, F, 0);
  layer += bench_gemm("fc2 dx   [256x768]x[768x3072]", 0, 0, R, F, H, 0);
  layer += bench_gemm("fc2 dW   [768x256]x[256x3072]", 1, 0, H, F, R, 1);
  head += bench_gemm("logits   [256x768]x[768x50304]^T", 0, 1, R, V, H, 0);
  head += bench_gemm("logits dx [256x50304]x[50304x768]", 0, 0, R, H, V, 0);
  head += bench_gemm("wte dW   [50304x256]x[256x768]", 1, 0, V, H, R, 1);
  bench_gemm("(cmp) fc1 fwd as NN [768x3072]", 0, 0, R, F, H, 0);
  bench_gemm("(cmp) logits fwd as NN", 0, 0, R, V, H, 0);
  double gemm_flops = (2.0 * R * H * (3 * H + H + F + F) * 3) * L + 2.0 * R * H * V * 3;
  printf("  => GEMM per micro-batch step: %.1f ms, %.1f GFLOP/s average\n", layer * L + head,
         gemm_flops / ((layer * L + head) * 1e6));

  if (argc > 3 && !strcmp(argv[3], "gemm")) {
    g_be->destroy(g_be);
    return 0;
  }
  printf("attention (s=%d b=%d np=%d hn=%d):\n", S, B, NP, HN);
  int64_t sid[4] = {0, 1, 2, 3};
  attn_arg at = {.d = {.s = S, .b = B, .np = NP, .hn = HN, .head_offset = 0, .n_heads_total = NP,
                       .scale = 0.125f, .dropout_p = 0.0f, .key = mt_rng_key(1, "a", 0, 0),
                       .sample_ids = sid}};
  at.qkv = falloc((int64_t)R * 3 * H, 1), at.ctx = falloc((int64_t)R * H, 1);
  at.lse = falloc((int64_t)B * NP * S, 0), at.dqkv = falloc((int64_t)R * 3 * H, 1);
  at.dctx = falloc((int64_t)R * H, 1);
  run_flash_fwd(&at); /* a valid (ctx, lse) pair for the backward */
  double attn_flops = 2.0 * B * NP * S * S * HN * 2; /* fwd: QK^T and PV, full squares (the
                                                        fused op skips the masked half) */
  double other = 0, t;
  for (int pdrop = 0; pdrop < 2; pdrop++) {
    at.d.dropout_p = pdrop ? 0.1f : 0.0f;
    t = time_ms(run_flash_fwd, &at);
    printf("  flash_attn_fwd%-10s %8.3f ms  %7.1f GFLOP/s\n", pdrop ? " (p=0.1)" : "", t, attn_flops / t * 1e-6);
    if (pdrop) other += t * L;
    t = time_ms(run_flash_bwd, &at);
    printf("  flash_attn_bwd%-10s %8.3f ms  %7.1f GFLOP/s\n", pdrop ? " (p=0.1)" : "", t, 2 * attn_flops / t * 1e-6);
    if (pdrop) other += t * L;
  }
  bench_attn_table();

  printf("elementwise:\n");
  ew_arg e = {.rows = R, .h = H};
  int64_t big = (int64_t)R * V;
  e.x = falloc(big, 1), e.y = falloc(big, 1), e.g = falloc(big, 1);
  e.w = falloc(H, 1), e.b = falloc(H, 1), e.mu = falloc(R, 0), e.rs = falloc(R, 0);
  e.dw = falloc(H, 0), e.db = falloc(H, 0);
  e.tgt = g_be->ops->alloc(g_be, R * sizeof(int32_t), MT_MEM_ACT);
  for (int i = 0; i < R; i++) e.tgt[i] = i * 97 % V;
  double mb = (double)R * H * 4 / 1e6; /* MB of one [256, 768] tensor */
#define EW(label, fn, nbytes_mb, per_step)                                                     \
  do {                                                                                         \
    t = time_ms(fn, &e);                                                                       \
    other += t * (per_step);                                                                   \
    printf("  %-26s %8.3f ms  %7.1f GB/s\n", label, t, (nbytes_mb) / t);                      \
  } while (0)
  EW("layernorm_fwd [256x768]", run_ln_fwd, 2 * mb, 2 * L + 1);
  EW("layernorm_bwd [256x768]", run_ln_bwd, 4 * mb, 2 * L + 1);
  e.n = (int64_t)R * F;
  EW("gelu_fwd [256x3072]", run_gelu_fwd, 8 * mb, L);
  EW("gelu_bwd [256x3072]", run_gelu_bwd, 12 * mb, L);
  e.dd = (mt_dropout_desc){.p = 0.1f, .key = mt_rng_key(1, "h", 0, 0), .s = S, .b = B, .h = H,
                           .s_offset = 0, .s_full = S, .h_offset = 0, .h_full = H, .sample_ids = sid};
  EW("dropout_add_fwd [256x768]", run_drop_fwd, 3 * mb, 2 * L + 1);
  EW("dropout_bwd [256x768]", run_drop_bwd, 2 * mb, 2 * L + 1);
  EW("bias_grad [256x768]", run_bias_grad, mb, 4 * L);
  e.n = V;
  EW("xent max+stats+bwd [256x50304]", run_xent, 4.0 * R * V * 4 / 1e6, 1);
  e.n = 10 * 1000 * 1000;
  g_be->ops->free(g_be, e.b);
  e.b = falloc(e.n, 0.01f); /* v >= 0 */
  double ta = time_ms(run_adamw, &e);
  printf("  %-26s %8.3f ms  %7.1f GB/s  (124M params: ~%.0f ms per optimizer step)\n",
         "adamw 10M", ta, 7.0 * 4 * e.n / 1e6 / ta, ta * 12.4);
  double step = layer * L + head + other;
  printf("estimate per micro-batch (%d tokens, dropout 0.1, excl. optimizer): %.1f ms -> %.0f tokens/s\n",
         R, step, R / step * 1e3);
  g_be->destroy(g_be);
  return 0;
}
