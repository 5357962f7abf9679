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
 *   precision bf16, fp32, or an FP8 recipe (tensorwise, delayed, blockwise,
 *   mxfp8: bf16 storage with the linear layers in FP8, format hybrid, as
 *   Megatron-Bridge's FP8 recipes; model/fp8_linear.h). An FP8 recipe runs
 *   only where the config rules accept training.fp8_format on device cuda
 *   (config/config_rules_fp8.c): otherwise bench_gpu prints the rule's
 *   message and exits 3 (bench_gpu.sh: "n/a"). Another name exits 2. KEY=VALUE
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
#include "config/config.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"
#include "model/gpt_flops.h"
#include "optimizer/optimizer.h"

/* 0 when the config rules accept FP8 linears (format hybrid, `recipe`) on
 * device cuda for this shape, else 1 with their message in err. */
static int fp8_accepted(const int *a, const char *recipe, char *err, size_t n) {
  char json[1024];
  snprintf(json, sizeof json,
           "{\"device\":\"cuda\",\"model\":{\"num_layers\":%d,\"hidden_size\":%d,"
           "\"num_attention_heads\":%d,\"seq_length\":%d,\"max_position_embeddings\":%d,"
           "\"vocab_size\":50257},\"training\":{\"micro_batch_size\":%d,\"train_iters\":1,"
           "\"lr\":1e-4,\"precision\":\"bf16\",\"fp8_format\":\"hybrid\","
           "\"fp8_recipe\":\"%s\"},\"data\":{\"data_path\":\"x\"}}",
           a[0], a[1], a[2], a[3], a[3] > 1024 ? a[3] : 1024, a[4], recipe);
  mt_config cfg;
  if (mt_config_load_string(&cfg, json, "bench_gpu", NULL, 0, 1, err, n)) return 1;
  mt_config_free(&cfg);
  return 0;
}

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
  mt_fp8_options fp8o;
  const int fp8 = mt_fp8_options_parse(&fp8o, "hybrid", prec, "most_recent", 1, 0, 1) == 0;
  if (strcmp(prec, "bf16") && strcmp(prec, "fp32") && !fp8) {
    fprintf(stderr, "bench_gpu: precision %s: expected bf16, fp32 or an FP8 recipe (tensorwise, "
            "delayed, blockwise, mxfp8)\n", prec);
    return 2;
  }
  char err[512];
  if (fp8 && fp8_accepted(a, prec, err, sizeof err)) {
    printf("bench_gpu: FP8 (%s) not run: the config rules refuse it on device cuda: %s\n", prec,
           err);
    return 3;
  }
  const char *pk = getenv("MEGATRAIN_PEAK_TFLOPS");
  const double peak = pk && atof(pk) > 0 ? atof(pk) : 989.0;
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
  c.fp8 = fp8; /* every layer's linears (no first/last layers kept in bf16) */
  if (fp8) c.fp8_options = fp8o;
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
  printf("bench_gpu: layers %d hidden %d heads %d seq %d micro-batch %d %s%s%s, %lld parameters, "
         "%.1f GFLOP per iteration (FLOPs formula %s), %d micro-batch(es) per iteration\n",
         c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, s, b,
         mt_dtype_name(be->dtype), fp8 ? " + FP8 linears hybrid " : "", fp8 ? prec : "",
         (long long)mt_gpt_num_parameters(m), flops / 1e9,
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
