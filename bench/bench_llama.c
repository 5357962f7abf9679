/* bench/bench_llama.c — CPU training throughput (tokens/s, achieved GFLOP/s)
 * of a Llama-style GPT shape, measured as bench/bench_gpt.c measures the
 * GPT-2 shape: one warm-up step, then `steps` timed iterations of one
 * micro-batch forward + backward, gradient-norm clipping at 1.0 and one
 * AdamW update each, wall clock: the mean and the best (fastest) step, the
 * latter less disturbed by other work on a shared machine. bench/bench_llama.sh runs it next to
 * PyTorch (bench/bench_llama_torch.py) on the same shape.
 *
 * usage: bench_llama [layers hidden heads seq micro_batch threads steps ffn vocab]
 *                    [KEY=VALUE ...]
 * default: 12 768 12 256 4 2 3 2048 50257 with position_embedding_type=rope
 * normalization=RMSNorm swiglu=1 num_query_groups=4 add_bias_linear=0
 * untie_embeddings_and_output_weights=1 (KEY=VALUE arguments override them;
 * keys as in tests/tools/gpt_options.h).
 *
 * FLOPs per micro-batch: Megatron-LM's num_floating_point_operations
 * (megatron/training/training.py), which counts GQA and gated MLPs:
 *   12 B s L h^2 [ (1 + ng/np + s/h) (np hn / h) + (ffn/h) g + V/(2 L h) ],
 * g = 3/2 with SwiGLU (three ffn-wide GEMMs instead of two), else 1.
 * Also prints where the time goes: wall time per backend op (the op table
 * wrapped, as bench_gpt.c does), the Llama ops (rmsnorm, swiglu, rope) on
 * their own lines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"
#include "trainer/optimizer.h"

/* ---- op-table profiler: each wrapped op adds its wall time to a slot ---- */
enum { P_GEMM, P_ATTN_F, P_ATTN_B, P_RMS_F, P_RMS_B, P_SWI_F, P_SWI_B, P_ROPE, P_LN, P_GELU,
       P_XENT, P_DROP, P_EMB, P_ADAM, P_N };
static const char *k_names[P_N] = {"gemm", "flash_attn_fwd", "flash_attn_bwd", "rmsnorm_fwd",
                                   "rmsnorm_bwd", "swiglu_fwd", "swiglu_bwd", "rope_fwd/bwd",
                                   "layernorm_fwd/bwd", "gelu_fwd/bwd", "cross_entropy",
                                   "dropout/residual", "embedding_bwd", "adamw"};
typedef struct {
  mt_backend_ops ops;       /* wrapped table */
  const mt_backend_ops *in; /* real table */
  double t[P_N];
  long calls[P_N];
} prof_t;
static prof_t *g_prof; /* bench-only: the profiler shims need to find their state */

#define SHIM(slot, name, params, args) \
  static void sh_##name params {          \
    double t0 = mt_now();                 \
    g_prof->in->name args;                \
    g_prof->t[slot] += mt_now() - t0;     \
    g_prof->calls[slot]++;                \
  }
SHIM(P_GEMM, gemm, (mt_backend * be, const mt_gemm_desc *d), (be, d))
SHIM(P_ATTN_F, flash_attn_fwd,
     (mt_backend * be, const mt_attn_desc *d, void *c, float *lse, const void *q, const void *kv),
     (be, d, c, lse, q, kv))
SHIM(P_ATTN_B, flash_attn_bwd,
     (mt_backend * be, const mt_attn_desc *d, void *dq, void *dkv, const void *dc, const void *c,
      const float *lse, const void *q, const void *kv),
     (be, d, dq, dkv, dc, c, lse, q, kv))
SHIM(P_RMS_F, rmsnorm_fwd,
     (mt_backend * be, void *o, float *r, const void *i, const void *w, int64_t rows, int64_t h,
      float eps),
     (be, o, r, i, w, rows, h, eps))
SHIM(P_RMS_B, rmsnorm_bwd,
     (mt_backend * be, void *di, float *dw, const void *d, const void *i, const void *w,
      const float *r, int64_t rows, int64_t h),
     (be, di, dw, d, i, w, r, rows, h))
SHIM(P_SWI_F, swiglu_fwd, (mt_backend * be, void *o, const void *i, int64_t rows, int64_t f),
     (be, o, i, rows, f))
SHIM(P_SWI_B, swiglu_bwd,
     (mt_backend * be, void *di, const void *d, const void *i, int64_t rows, int64_t f),
     (be, di, d, i, rows, f))
SHIM(P_ROPE, rope_fwd, (mt_backend * be, const mt_rope_desc *d, void *q), (be, d, q))
SHIM(P_ROPE, rope_bwd, (mt_backend * be, const mt_rope_desc *d, void *q), (be, d, q))
SHIM(P_LN, layernorm_fwd,
     (mt_backend * be, void *o, float *m, float *r, const void *i, const void *w, const void *b,
      int64_t rows, int64_t h, float eps),
     (be, o, m, r, i, w, b, rows, h, eps))
SHIM(P_LN, layernorm_bwd,
     (mt_backend * be, void *di, float *dw, float *db, const void *d, const void *i,
      const void *w, const float *m, const float *r, int64_t rows, int64_t h),
     (be, di, dw, db, d, i, w, m, r, rows, h))
SHIM(P_GELU, gelu_fwd, (mt_backend * be, void *o, const void *i, int64_t n), (be, o, i, n))
SHIM(P_GELU, gelu_bwd, (mt_backend * be, void *di, const void *i, const void *d, int64_t n),
     (be, di, i, d, n))
SHIM(P_XENT, xent_max,
     (mt_backend * be, float *mx, const void *l, int64_t n, int64_t vl, int64_t valid),
     (be, mx, l, n, vl, valid))
SHIM(P_XENT, xent_stats,
     (mt_backend * be, float *se, float *tl, const void *l, const float *mx, const int32_t *t,
      int64_t n, int64_t vl, int64_t valid, int64_t v0),
     (be, se, tl, l, mx, t, n, vl, valid, v0))
SHIM(P_XENT, xent_bwd,
     (mt_backend * be, void *l, const float *mx, const float *se, const int32_t *t, int64_t n,
      int64_t vl, int64_t valid, int64_t v0, float sc),
     (be, l, mx, se, t, n, vl, valid, v0, sc))
SHIM(P_DROP, dropout_add_fwd,
     (mt_backend * be, const mt_dropout_desc *d, void *o, const void *x, const void *r),
     (be, d, o, x, r))
SHIM(P_DROP, dropout_bwd, (mt_backend * be, const mt_dropout_desc *d, void *dx, const void *dy),
     (be, d, dx, dy))
SHIM(P_EMB, embedding_bwd,
     (mt_backend * be, float *dw, const int32_t *t, int64_t n, const void *d, int64_t v0,
      int64_t v1, int64_t h),
     (be, dw, t, n, d, v0, v1, h))
SHIM(P_ADAM, adamw,
     (mt_backend * be, const mt_adamw_hparams *hp, float *ms, float *m, float *v, const float *g,
      void *lp, int64_t n),
     (be, hp, ms, m, v, g, lp, n))

static void prof_install(prof_t *p, mt_backend *be) {
  p->in = be->ops;
  p->ops = *be->ops;
  p->ops.gemm = sh_gemm;
  p->ops.flash_attn_fwd = sh_flash_attn_fwd;
  p->ops.flash_attn_bwd = sh_flash_attn_bwd;
  p->ops.rmsnorm_fwd = sh_rmsnorm_fwd;
  p->ops.rmsnorm_bwd = sh_rmsnorm_bwd;
  p->ops.swiglu_fwd = sh_swiglu_fwd;
  p->ops.swiglu_bwd = sh_swiglu_bwd;
  p->ops.rope_fwd = sh_rope_fwd;
  p->ops.rope_bwd = sh_rope_bwd;
  p->ops.layernorm_fwd = sh_layernorm_fwd;
  p->ops.layernorm_bwd = sh_layernorm_bwd;
  p->ops.gelu_fwd = sh_gelu_fwd;
  p->ops.gelu_bwd = sh_gelu_bwd;
  p->ops.xent_max = sh_xent_max;
  p->ops.xent_stats = sh_xent_stats;
  p->ops.xent_bwd = sh_xent_bwd;
  p->ops.dropout_add_fwd = sh_dropout_add_fwd;
  p->ops.dropout_bwd = sh_dropout_bwd;
  p->ops.embedding_bwd = sh_embedding_bwd;
  p->ops.adamw = sh_adamw;
  be->ops = &p->ops;
  g_prof = p;
}

static double megatron_flops(const mt_gpt_config *c, int64_t b) {
  const double h = c->hidden_size, np = c->num_attention_heads, s = c->seq_length;
  const double ng = c->num_query_groups ? c->num_query_groups : np;
  const double hn = c->kv_channels ? c->kv_channels : h / np;
  const double g = c->swiglu ? 1.5 : 1.0, L = c->num_layers;
  const double terms = (1.0 + ng / np + s / h) * (np * hn / h) + (double)c->ffn_hidden_size / h * g +
                       (double)c->padded_vocab_size / (2.0 * L * h);
  return 12.0 * (double)b * s * L * h * h * terms;
}

int main(int argc, char **argv) {
  int a[9] = {12, 768, 12, 256, 4, 2, 3, 2048, 50257};
  for (int i = 1, k = 0; i < argc; i++)
    if (!mt_gpt_is_option(argv[i]) && k < 9) a[k++] = atoi(argv[i]);
  char err[512];
  mt_backend_options bo = {.device = "cpu", .num_threads = a[5], .dtype = MT_F32};
  mt_backends_process_init(&bo);
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  mt_gpt_config c = mt_tiny_gpt(a[0], a[1], a[2], a[7], a[3], a[8], a[4], 1234);
  c.max_position_embeddings = c.seq_length;
  static const char *const llama[] = {"position_embedding_type=rope", "normalization=RMSNorm",
                                      "swiglu=1", "num_query_groups=4", "add_bias_linear=0",
                                      "untie_embeddings_and_output_weights=1"};
  for (size_t i = 0; i < sizeof llama / sizeof *llama; i++)
    if (mt_gpt_apply_option(&c, llama[i], err, sizeof err)) mt_fatal("%s", err);
  for (int i = 1; i < argc; i++)
    if (mt_gpt_is_option(argv[i]) && mt_gpt_apply_option(&c, argv[i], err, sizeof err)) {
      fprintf(stderr, "bench_llama: %s\n", err);
      return 2;
    }
  mt_gpt_option_defaults(&c);
  mt_gpt *m = mt_gpt_create(be, &c);
  mt_adamw opt;
  mt_adamw_init(&opt, be, mt_gpt_params(m), mt_gpt_param_buffer(m), mt_gpt_grad_buffer(m), 0.9f,
                0.95f, 1e-8f, 0.1f);
  const int s = c.seq_length, b = c.micro_batch_size, steps = a[6] > 0 ? a[6] : 1;
  int32_t *tok = mt_xmalloc((size_t)b * (s + 1) * sizeof(int32_t));
  int64_t ids[256];
  for (int j = 0; j < b && j < 256; j++) ids[j] = j;
  uint64_t x = 1;
  for (int i = 0; i < b * (s + 1); i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tok[i] = (int32_t)((x >> 33) % (uint64_t)c.vocab_size);
  }
  const double flops = megatron_flops(&c, b);
  printf("bench_llama: layers %d hidden %d heads %d groups %d kv_channels %d ffn %d swiglu %d "
         "pos %d norm %d bias %d seq %d micro-batch %d threads %d: %lld parameters, %.1f GFLOP "
         "per micro-batch (Megatron formula)\n",
         c.num_layers, c.hidden_size, c.num_attention_heads,
         c.num_query_groups ? c.num_query_groups : c.num_attention_heads,
         c.kv_channels ? c.kv_channels : c.hidden_size / c.num_attention_heads, c.ffn_hidden_size,
         c.swiglu, c.position_embedding, c.normalization, !c.disable_bias_linear, s, b, a[5],
         (long long)mt_gpt_num_parameters(m), flops / 1e9);
  /* warm-up step (first-touch page faults), then timed steps */
  mt_gpt_zero_grad(m);
  mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s));
  mt_adamw_step(&opt, 1e-4f, 1.0f);
  prof_t prof;
  memset(&prof, 0, sizeof prof);
  prof_install(&prof, be);
  double t0 = mt_now(), loss = 0, best = 1e30;
  for (int it = 0; it < steps; it++) {
    const double ts = mt_now();
    mt_gpt_zero_grad(m);
    loss = mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s)) / (b * s);
    double norm = sqrt(mt_grad_sumsq(&opt, 1));
    mt_adamw_step(&opt, 1e-4f, mt_clip_coefficient(norm, 1.0f));
    if (mt_now() - ts < best) best = mt_now() - ts;
  }
  const double dt = (mt_now() - t0) / steps;
  printf("megatrain: time per step %.1f ms | tokens/s %.1f | best step %.1f ms, tokens/s %.1f | "
         "achieved %.1f GFLOP/s (best step) | loss %.4f | OpenBLAS kernels: %s\n",
         1e3 * dt, b * s / dt, 1e3 * best, b * s / best, flops / best / 1e9, loss,
         openblas_get_corename());
  double tot = 0;
  for (int k = 0; k < P_N; k++) tot += prof.t[k] / steps;
  printf("profile (ms per step, share of its time):");
  for (int k = 0; k < P_N; k++)
    if (prof.calls[k])
      printf(" %s %.1f (%.1f%%) |", k_names[k], 1e3 * prof.t[k] / steps,
             100.0 * prof.t[k] / steps / dt);
  printf(" rest %.1f (%.1f%%)\n", 1e3 * (dt - tot), 100.0 * (dt - tot) / dt);
  be->ops = prof.in;
  mt_adamw_free(&opt);
  free(tok);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
  return 0;
}
