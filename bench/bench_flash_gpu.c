/* bench/bench_flash_gpu.c — fused (flash_attn_fwd/bwd, FlashAttention-2)
 * vs unfused (cuda_attn_fwd/bwd, out of the op table since issue 15, test
 * code in tests/tools/cuda_ref/ linked into this program: cuBLAS products
 * around the softmax kernels, [b, np, s, s] probabilities kept) causal
 * attention on the CUDA backend,
 * one GPU, at GPT-2 124M shapes (12 heads of 64) and a Llama-style GQA shape
 * (32 query heads in 8 groups, head dim 128).
 *
 * Per shape and variant: best-of-reps ms of the forward and of forward +
 * backward (the device synchronised around each timed call), TFLOP/s by the
 * FlashAttention-2 paper's count for causal attention (forward 2 b np s^2 hn
 * useful FLOPs, i.e. half of the full QK^T and PV squares; backward 2.5x the
 * forward), the bytes the op keeps for its backward (unfused: the probs
 * b np s^2 in T; fused: lse, 4 b np s) and the op's peak workspace (a fresh
 * backend per variant; unfused: pd/dS in T and dP in fp32, each b np s^2;
 * fused: D, 4 b np s), and max |ctx_fused - ctx_unfused| / max |ctx_unfused|.
 *
 * usage: build/bench/bench_flash_gpu [bf16|fp32] [reps]   (default bf16 10)
 * Exits 77 with "SKIP: ..." when no usable CUDA device exists. Printed, not
 * asserted (scripts/gpu-check-flash.sh runs it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/rng.h"
#include "core/util.h"
#if MT_HAVE_CUDA
#include "tests/tools/cuda_ref/attn_unfused.h"
#endif

typedef struct {
  const char *name;
  int b, np, ng, hn, s;
  float p;
} shape;

typedef struct {
  mt_backend *be;
  mt_attn_desc d;
  void *qkv, *ctx, *dctx, *dqkv, *probs;
  float *lse;
  int fused;
} run;

static void fwd(run *r) {
  if (r->fused) r->be->ops->flash_attn_fwd(r->be, &r->d, r->ctx, r->lse, r->qkv, NULL);
#if MT_HAVE_CUDA
  else cuda_attn_fwd(r->be, &r->d, r->ctx, r->probs, r->qkv);
#endif
}
static void bwd(run *r) {
  if (r->fused)
    r->be->ops->flash_attn_bwd(r->be, &r->d, r->dqkv, NULL, r->dctx, r->ctx, r->lse, r->qkv, NULL);
#if MT_HAVE_CUDA
  else cuda_attn_bwd(r->be, &r->d, r->dqkv, r->dctx, r->qkv, r->probs);
#endif
}

static double best_ms(run *r, int with_bwd, int reps) {
  double best = 1e30;
  for (int i = 0; i <= reps; i++) { /* i == 0: warm-up */
    r->be->ops->synchronize(r->be);
    double t0 = mt_now();
    fwd(r);
    if (with_bwd) bwd(r);
    r->be->ops->synchronize(r->be);
    double t = (mt_now() - t0) * 1e3;
    if (i > 0 && t < best) best = t;
  }
  return best;
}

/* Deterministic inputs in [-1, 1) (bf16 or fp32 storage). */
static void *dev_rand(mt_backend *be, int64_t n, float scale, uint64_t seed) {
  const size_t es = mt_dtype_size(be->dtype);
  void *h = mt_xmalloc((size_t)n * es);
  mt_rng_key_t k = {{(uint32_t)seed, 0x5bd1e995u}};
  for (int64_t i = 0; i < n; i++) {
    float v = scale * (2.0f * mt_rng_uniform(k, (uint64_t)i) - 1.0f);
    if (be->dtype == MT_BF16) {
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t *)h)[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    } else {
      ((float *)h)[i] = v;
    }
  }
  void *d = be->ops->alloc(be, (size_t)n * es, MT_MEM_ACT);
  be->ops->memcpy_h2d(be, d, h, (size_t)n * es);
  free(h);
  return d;
}

static float *ctx_host(mt_backend *be, const void *ctx, int64_t n) {
  float *o = mt_xmalloc((size_t)n * 4);
  if (be->dtype == MT_BF16) {
    uint16_t *b = mt_xmalloc((size_t)n * 2);
    be->ops->memcpy_d2h(be, b, ctx, (size_t)n * 2);
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)b[i] << 16;
      memcpy(&o[i], &u, 4);
    }
    free(b);
  } else {
    be->ops->memcpy_d2h(be, o, ctx, (size_t)n * 4);
  }
  return o;
}

/* One variant on a fresh backend; returns ctx on the host (caller frees). */
static float *bench_variant(const shape *sh, mt_dtype T, int fused, int reps, char *err,
                            size_t errlen, int *skip) {
  mt_backend_options o = {.device = "cuda", .dtype = T};
  mt_backend *be = mt_backend_create(&o, err, errlen);
  if (!be) {
    *skip = 1;
    return NULL;
  }
  const int npg = sh->np / sh->ng;
  const int64_t s = sh->s, nq = s * sh->b * sh->ng * (npg + 2) * sh->hn;
  const int64_t nc = s * sh->b * sh->np * sh->hn, bnp = (int64_t)sh->b * sh->np;
  const size_t es = mt_dtype_size(T);
  static int64_t ids[64];
  for (int i = 0; i < 64; i++) ids[i] = i;
  run r = {.be = be, .fused = fused};
  r.d = (mt_attn_desc){.s = sh->s, .b = sh->b, .np = sh->np, .hn = sh->hn, .ng = sh->ng,
                       .head_offset = 0, .n_heads_total = sh->np,
                       .scale = 1.0f / sqrtf((float)sh->hn), .dropout_p = sh->p,
                       .key = mt_rng_key(1, "attention_dropout", 0, 0), .sample_ids = ids};
  r.qkv = dev_rand(be, nq, 1.0f, 1);
  r.dctx = dev_rand(be, nc, 1.0f, 2);
  r.ctx = be->ops->alloc(be, (size_t)nc * es, MT_MEM_ACT);
  r.dqkv = be->ops->alloc(be, (size_t)nq * es, MT_MEM_ACT);
  size_t kept;
  if (fused) {
    r.lse = be->ops->alloc(be, (size_t)bnp * s * 4, MT_MEM_ACT);
    kept = (size_t)bnp * s * 4;
  } else {
    r.probs = be->ops->alloc(be, (size_t)(bnp * s * s) * es, MT_MEM_ACT);
    kept = (size_t)(bnp * s * s) * es;
  }
  const double f = best_ms(&r, 0, reps), fb = best_ms(&r, 1, reps);
  const double flop_f = 2.0 * bnp * (double)s * s * sh->hn, flop_fb = 3.5 * flop_f;
  printf("  %-8s fwd %9.3f ms %7.1f TFLOP/s | fwd+bwd %9.3f ms %7.1f TFLOP/s | kept %9.1f MiB"
         " | workspace %9.1f MiB\n",
         fused ? "fused" : "unfused", f, flop_f / f * 1e-9, fb, flop_fb / fb * 1e-9,
         kept / 1048576.0, be->mem.peak[MT_MEM_WORKSPACE] / 1048576.0);
  fwd(&r);
  float *out = ctx_host(be, r.ctx, nc);
  void *bufs[] = {r.qkv, r.dctx, r.ctx, r.dqkv, r.probs, r.lse};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
  mt_backend_destroy(be);
  return out;
}

int main(int argc, char **argv) {
  const mt_dtype T = argc > 1 && !strcmp(argv[1], "fp32") ? MT_F32 : MT_BF16;
  const int reps = argc > 2 ? atoi(argv[2]) : 10;
  static const shape shapes[] = {
      {"GPT-2 124M", 8, 12, 12, 64, 1024, 0.0f}, {"GPT-2 124M", 8, 12, 12, 64, 1024, 0.1f},
      {"GPT-2 124M", 8, 12, 12, 64, 2048, 0.0f}, {"GPT-2 124M", 4, 12, 12, 64, 4096, 0.0f},
      {"GQA 32/8", 4, 32, 8, 128, 2048, 0.0f},   {"GQA 32/8", 2, 32, 8, 128, 4096, 0.1f},
  };
  printf("fused vs unfused causal attention, CUDA backend, %s storage, best of %d\n",
         mt_dtype_name(T), reps);
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    const shape *sh = &shapes[i];
    char err[512] = "";
    int skip = 0;
    printf("%s: b %d, %d heads (%d groups) of %d, s %d, dropout %.1f\n", sh->name, sh->b, sh->np,
           sh->ng, sh->hn, sh->s, sh->p);
    float *cu = bench_variant(sh, T, 0, reps, err, sizeof err, &skip);
    if (skip) {
      printf("SKIP: no usable CUDA device (%s)\n", err);
      return 77;
    }
    float *cf = bench_variant(sh, T, 1, reps, err, sizeof err, &skip);
    const int64_t nc = (int64_t)sh->s * sh->b * sh->np * sh->hn;
    double mx = 0, e = 0;
    for (int64_t k = 0; k < nc; k++) {
      mx = fmax(mx, fabs(cu[k]));
      e = fmax(e, fabs((double)cf[k] - cu[k]));
    }
    printf("  max |ctx fused - ctx unfused| / max |ctx unfused| = %.3e\n", e / (mx > 0 ? mx : 1));
    free(cu), free(cf);
  }
  return 0;
}
