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
 * (megatron/training/training.py), which counts GQA and gated MLPs, as
 * model/gpt_flops.h computes it for the trainer and the planner.
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
#include "model/gpt_flops.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"
#include "optimizer/optimizer.h"

#include "bench/bench_profile.h"

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
  c.model.max_position_embeddings = c.model.seq_length;
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
  mt_gpt *m = mt_gpt_create(be, &c);
  mt_adamw opt;
  mt_adamw_init(&opt, be, mt_gpt_params(m), mt_gpt_param_buffer(m), mt_gpt_grad_buffer(m), 0.9f,
                0.95f, 1e-8f, 0.1f);
  const int s = c.model.seq_length, b = c.micro_batch_size, steps = a[6] > 0 ? a[6] : 1;
  int32_t *tok = mt_xmalloc((size_t)b * (s + 1) * sizeof(int32_t));
  int64_t ids[256];
  for (int j = 0; j < b && j < 256; j++) ids[j] = j;
  uint64_t x = 1;
  for (int i = 0; i < b * (s + 1); i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tok[i] = (int32_t)((x >> 33) % (uint64_t)c.model.vocab_size);
  }
  const mt_flops_shape fs = mt_gpt_flops_shape(&c, b);
  const double flops = mt_flops_per_iteration(&fs);
  const mt_model_config *r = &mt_gpt_get_config(m)->model; /* derived sizes resolved */
  printf("bench_llama: layers %d hidden %d heads %d groups %d kv_channels %d ffn %d swiglu %d "
         "pos %s norm %s bias %d seq %d micro-batch %d threads %d: %lld parameters, %.1f GFLOP "
         "per micro-batch (Megatron formula)\n",
         r->num_layers, r->hidden_size, r->num_attention_heads, r->num_query_groups,
         r->kv_channels, r->ffn_hidden_size, r->swiglu, r->position_embedding_type,
         r->normalization, r->add_bias_linear, s, b, a[5], (long long)mt_gpt_num_parameters(m),
         flops / 1e9);
  /* warm-up step (first-touch page faults), then timed steps */
  mt_gpt_zero_grad(m);
  mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s));
  mt_adamw_step(&opt, 1e-4f, 1.0f);
  mt_bench_prof prof;
  mt_bench_prof_install(&prof, be);
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
  for (int k = 0; k < MT_PROF_N; k++) tot += prof.t[k] / steps;
  printf("profile (ms per step, share of its time):");
  for (int k = 0; k < MT_PROF_N; k++)
    if (prof.calls[k])
      printf(" %s %.1f (%.1f%%) |", mt_prof_names[k], 1e3 * prof.t[k] / steps,
             100.0 * prof.t[k] / steps / dt);
  printf(" rest %.1f (%.1f%%)\n", 1e3 * (dt - tot), 100.0 * (dt - tot) / dt);
  mt_bench_prof_uninstall(&prof, be);
  mt_adamw_free(&opt);
  free(tok);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
  return 0;
}
