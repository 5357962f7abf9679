/* bench/bench_gpu.c — single-GPU training throughput of one GPT shape on the
 * CUDA backend with Megatron's convention: an iteration is a global batch of
 * `accum` micro-batches (gradient accumulation) and one AdamW step, and
 * throughput is the iteration's model FLOPs (today's Megatron formula,
 * model/gpt_flops.h MT_FLOPS_MEGATRON: causal attention at half) over the
 * iteration's time: tokens/s, TFLOP/s and MFU against a dense bf16 peak
 * (default 989 TFLOP/s, H100/H200 SXM; env MEGATRAIN_PEAK_TFLOPS overrides).
 *
 * usage: bench_gpu [layers hidden heads seq micro_batch steps accum precision]
 *                  [KEY=VALUE ...]
 *   default: GPT-2 124M (12, 768, 12), seq 1024, micro-batch 8, 5 steps
 *   (iterations), 8 micro-batches per iteration (global batch 64 sequences),
 *   precision bf16 or fp32 (another name exits 2: FP8 recipes are the FP8
 *   work's, issue 32). KEY=VALUE
 *   arguments (tests/tools/gpt_options.h, anywhere on the line) set the
 *   Llama-style fields, e.g. position_embedding_type=rope
 *   normalization=RMSNorm swiglu=1 num_query_groups=8 ffn_hidden_size=5632
 *   add_bias_linear=0 untie_embeddings_and_output_weights=1 (bench/bench_gpu.sh).
 * Drives model/ directly (no MPI/NCCL; one process, one GPU); dropout 0.1
 * as GPT-2. Exits 77 with "SKIP: ..." when no usable CUDA device exists.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"
#include "model/gpt_flops.h"
#include "optimizer/optimizer.h"

int main(int argc, char **argv) {
  int a[7] = {12, 768, 12, 1024, 8, 5, 8};
  const char *prec = "bf16";
  for (int i = 1, k = 0; i < argc; i++) {
    if (mt_gpt_is_option(argv[i])) continue;
    if (k < 7) a[k] = atoi(argv[i]);
    else if (k == 7) prec = argv[i];
    k++;
  }
  const int accum = a[6] > 0 ? a[6] : 1;
  if (strcmp(prec, "bf16") && strcmp(prec, "fp32")) {
    fprintf(stderr, "bench_gpu: precision %s: expected bf16 or fp32\n", prec);
    return 2;
  }
  const char *pk = getenv("MEGATRAIN_PEAK_TFLOPS");
  const double peak = pk && atof(pk) > 0 ? atof(pk) : 989.0;
  char err[512];
  mt_backend_options bo = {.device = "cuda", .dtype = strcmp(prec, "fp32") ? MT_BF16 : MT_F32};
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) {
    printf("SKIP: %s\n", err);
    return 77;
  }
  mt_gpt_config c = mt_tiny_gpt(a[0], a[1], a[2], 4 * a[1], a[3], 50257, a[4], 1234);
  c.model.max_position_embeddings = a[3] > 1024 ? a[3] : 1024;
  c.model.hidden_dropout = 0.1f;
  c.model.attention_dropout = 0.1f;
  for (int i = 1; i < argc; i++)
    if (mt_gpt_is_option(argv[i]) && mt_gpt_apply_option(&c, argv[i], err, sizeof err)) {
      fprintf(stderr, "bench_gpu: %s\n", err);
      mt_backend_destroy(be);
      return 2;
    }
  mt_gpt *m = mt_gpt_create(be, &c);
  mt_adamw opt;
  mt_adamw_init(&opt, be, mt_gpt_params(m), mt_gpt_param_buffer(m), mt_gpt_grad_buffer(m), 0.9f,
                0.95f, 1e-8f, 0.1f);
  const int s = c.model.seq_length, b = c.micro_batch_size, steps = a[5];
  int32_t *tok = mt_xmalloc((size_t)b * (s + 1) * sizeof(int32_t));
  int64_t *ids = mt_xmalloc((size_t)b * sizeof(int64_t));
  uint64_t x = 1;
  for (int i = 0; i < b * (s + 1); i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tok[i] = (int32_t)((x >> 33) % 50257);
  }
  /* the iteration's global batch: accum micro-batches of b sequences */
  const mt_flops_shape fs = mt_gpt_flops_shape(&c, (int64_t)b * accum);
  const double flops = mt_flops_per_iteration(&fs);
  printf("bench_gpu: layers %d hidden %d heads %d seq %d micro-batch %d %s, %lld parameters, "
         "%.1f GFLOP per iteration (FLOPs formula %s), %d micro-batch(es) per iteration\n",
         c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, s, b,
         mt_dtype_name(be->dtype), (long long)mt_gpt_num_parameters(m), flops / 1e9,
         mt_flops_formula_name(fs.formula), accum);
  double loss = 0, t0 = 0;
  for (int it = -1; it < steps; it++) { /* it = -1: warm-up (cuBLAS heuristics, allocations) */
    if (it == 0) {
      be->ops->synchronize(be);
      mt_mem_reset_peak(&be->mem);
      t0 = mt_now();
    }
    mt_gpt_zero_grad(m);
    for (int k = 0; k < accum; k++) {
      for (int j = 0; j < b; j++) ids[j] = (int64_t)(it + 1) * b * accum + (int64_t)k * b + j;
      loss = mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s * accum)) / (b * s);
    }
    double norm = sqrt(mt_grad_sumsq(&opt, 1));
    mt_adamw_step(&opt, 1e-4f, mt_clip_coefficient(norm, 1.0f));
    if (it == steps - 1) {
      be->ops->synchronize(be);
      const double dt = (mt_now() - t0) / steps; /* per iteration (global batch + step) */
      const double tf = flops / dt / 1e12;
      printf("RESULT layers=%d hidden=%d seq=%d mb=%d gbs=%d precision=%s | %.1f ms/iteration | "
             "tokens/s %.0f | %.1f TFLOP/s | MFU %.1f%% (peak %.0f, %s FLOPs) | loss %.4f | "
             "peak mem %.2f GiB\n",
             c.model.num_layers, c.model.hidden_size, s, b, b * accum, prec, 1e3 * dt,
             (double)b * accum * s / dt, tf, 100.0 * tf / peak, peak,
             mt_flops_formula_name(fs.formula), loss, be->mem.peak_total / 1073741824.0);
    }
  }
  mt_adamw_free(&opt);
  free(tok);
  free(ids);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
  return 0;
}
