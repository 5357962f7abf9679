/* bench/bench_gpt.c — training throughput of one GPT shape on the CPU
 * backend: tokens/s and achieved GFLOP/s (Megatron's FLOPs formula), plus a
 * profile of where the time goes (time per backend op, measured by wrapping
 * the op table).
 *
 * usage: bench_gpt [layers hidden heads seq micro_batch threads steps accum unfused]
 * default: the GPT-2 124M shape, seq 64, micro-batch 4, 2 threads, 5 steps,
 * 1 micro-batch per optimizer step (accum > 1: gradient accumulation, the
 * AdamW update amortised over accum micro-batches), the fused attention of
 * the op table; unfused = 1 runs the model through the unfused reference op
 * instead (tests/tools/attn_unfused.h: the [b, a, s, s] probabilities kept
 * from each layer's forward to its backward, as before issue 15). Prints the
 * mean and the best step (less disturbed by other work on a shared machine)
 * and the activation peak of the allocator (bench/bench_attn.sh).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/attn_unfused.h"
#include "tests/tools/tiny_gpt.h"
#include "model/gpt_flops.h"
#include "optimizer/optimizer.h"

#include "bench/bench_profile.h"

int main(int argc, char **argv) {
  int a[9] = {12, 768, 12, 64, 4, 2, 5, 1, 0};
  for (int i = 0; i < 9 && i + 1 < argc; i++) a[i] = atoi(argv[i + 1]);
  const int accum = a[7] > 0 ? a[7] : 1, unfused = a[8] != 0;
  char err[512];
  mt_backend_options bo = {.device = "cpu", .num_threads = a[5], .dtype = MT_F32};
  mt_backends_process_init(&bo);
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  mt_gpt_config c = mt_tiny_gpt(a[0], a[1], a[2], 4 * a[1], a[3], 50257, a[4], 1234);
  c.model.max_position_embeddings = a[3] > 1024 ? a[3] : 1024;
  mt_gpt *m = mt_gpt_create(be, &c);
  mt_adamw opt;
  mt_adamw_init(&opt, be, mt_gpt_params(m), mt_gpt_param_buffer(m), mt_gpt_grad_buffer(m), 0.9f,
                0.95f, 1e-8f, 0.1f);
  const int s = c.model.seq_length, b = c.micro_batch_size, steps = a[6];
  int32_t *tok = mt_xmalloc((size_t)b * (s + 1) * sizeof(int32_t));
  int64_t ids[256];
  for (int j = 0; j < b; j++) ids[j] = j;
  uint64_t x = 1;
  for (int i = 0; i < b * (s + 1); i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tok[i] = (int32_t)((x >> 33) % 50257);
  }
  const mt_flops_shape fs = mt_gpt_flops_shape(&c, b);
  double flops = mt_flops_per_iteration(&fs);
  printf("bench_gpt: layers %d hidden %d heads %d seq %d micro-batch %d threads %d, %lld "
         "parameters, %.1f GFLOP per micro-batch (Megatron formula), %d micro-batch(es) per "
         "AdamW step, attention %s\n",
         c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, s, b, a[5],
         (long long)mt_gpt_num_parameters(m), flops / 1e9, accum,
         unfused ? "UNFUSED (reference op, s x s probabilities kept)" : "fused (op table)");
  /* warm-up step (first-touch page faults), then profiled steps; the
   * unfused table goes on top of the profiler (its ops find their state
   * through be->ops) and times itself */
  mt_unfused_attn unf;
  if (unfused) mt_unfused_attn_install(&unf, be);
  mt_gpt_zero_grad(m);
  mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s));
  mt_adamw_step(&opt, 1e-4f, 1.0f);
  if (unfused) mt_unfused_attn_uninstall(&unf, be);
  mt_bench_prof prof;
  mt_bench_prof_install(&prof, be);
  if (unfused) mt_unfused_attn_install(&unf, be);
  mt_mem_reset_peak(&be->mem);
  double t0 = mt_now(), best = 1e30;
  double loss = 0;
  for (int it = 0; it < steps; it++) {
    double ts = mt_now();
    mt_gpt_zero_grad(m);
    for (int k = 0; k < accum; k++)
      loss = mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s * accum)) / (b * s);
    double norm = sqrt(mt_grad_sumsq(&opt, 1));
    mt_adamw_step(&opt, 1e-4f, mt_clip_coefficient(norm, 1.0f));
    best = mt_now() - ts < best ? mt_now() - ts : best;
  }
  double dt = (mt_now() - t0) / steps / accum; /* per micro-batch */
  best /= accum;
  if (unfused) { /* its own timers, in the profiler's attention slots */
    prof.t[MT_PROF_ATTN_F] += unf.t_fwd, prof.calls[MT_PROF_ATTN_F] += unf.n_fwd;
    prof.t[MT_PROF_ATTN_B] += unf.t_bwd, prof.calls[MT_PROF_ATTN_B] += unf.n_bwd;
    mt_unfused_attn_uninstall(&unf, be);
  }
  printf("time per micro-batch %.1f ms | tokens/s %.1f | best %.1f ms, tokens/s %.1f | achieved "
         "%.1f GFLOP/s | loss %.4f | activation peak %.1f MiB | OpenBLAS kernels: %s\n",
         1e3 * dt, b * s / dt, 1e3 * best, b * s / best, flops / dt / 1e9, loss,
         be->mem.peak[MT_MEM_ACT] / 1048576.0, openblas_get_corename());
  double tot = 0;
  for (int k = 0; k < MT_PROF_N; k++) tot += prof.t[k];
  const double n_mb = (double)steps * accum;
  printf("profile (ms per micro-batch, share of its time):\n");
  for (int k = 0; k < MT_PROF_N; k++)
    if (prof.calls[k])
      printf("  %-18s %8.2f ms  %5.1f%%  (%.0f calls)\n", mt_prof_names[k], 1e3 * prof.t[k] / n_mb,
             100.0 * prof.t[k] / n_mb / dt, prof.calls[k] / n_mb);
  printf("  %-18s %8.2f ms  %5.1f%%\n", "unwrapped ops/host", 1e3 * (dt - tot / n_mb),
         100.0 * (dt - tot / n_mb) / dt);
  mt_bench_prof_uninstall(&prof, be);
  mt_adamw_free(&opt);
  free(tok);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
  return 0;
}
