/* tests/tools/fp8_linear_dev.c — model/fp8_linear.c on a backend's own
 * memory with bf16 storage (as training runs it), for the cpu-vs-cuda and
 * cuBLASLt-vs-dequantize checks of the FP8 linear layer
 * (tests/integration/test_cuda_emu_fp8.sh, docs/fp8.md "On the cuda backend").
 *
 * usage: fp8_linear_dev DEVICE RECIPE FORMAT M OUT IN STEPS OUTFILE [BIAS]
 *   DEVICE cpu|cuda, RECIPE tensorwise|delayed|blockwise|mxfp8,
 *   FORMAT e4m3|hybrid; BIAS 1 adds a bias to the forward.
 *   Each step s: x (bf16 [M, IN]) and dy (bf16 [M, OUT]) drawn from s, the
 *   weight (bf16 [OUT, IN]) from step 0's seed; one training forward and
 *   its backward (dw accumulates in fp32 over the steps; delayed: amax
 *   histories of length 4, algo max).
 *   stdout, per step: "step S codes HASH" — FNV-1a of the FP8 codes and
 *          scales of x, w and dy quantized by fp8_quantize with the recipe's
 *          row blocking (x, w e4m3; dy e4m3 or e5m2 by FORMAT), current
 *          scaling;
 *   OUTFILE, raw f32: per step y[M*OUT], dx[M*IN]; then dw[OUT*IN]; then
 *          (delayed) the scale and history of x, w, dy (mt_fp8_linear_meta,
 *          3 x 5 floats).
 * The cuda path (cuBLASLt's FP8 matmul or the dequantize path) is the
 * backend's choice: env MEGATRAIN_CUDA_FP8_GEMM=0 forces the dequantize
 * path (cuda/cuda_fp8_gemm.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/fp8.h"
#include "model/fp8_linear.h"

/* Uniform-ish values in [-amp, amp) from (seed, i): a fixed integer hash. */
static void fill(float *v, size_t n, uint32_t seed, float amp) {
  for (size_t i = 0; i < n; i++) {
    uint32_t h = seed * 2654435761u ^ (uint32_t)i * 2246822519u;
    h ^= h >> 15, h *= 2654435761u, h ^= h >> 13;
    v[i] = amp * ((float)(h >> 8) / 8388608.0f - 1.0f);
  }
}

static void *up_bf16(mt_backend *be, const float *h, size_t n) {
  float *t = be->ops->alloc(be, n * 4, MT_MEM_WORKSPACE);
  void *d = be->ops->alloc(be, n * 2, MT_MEM_WORKSPACE);
  be->ops->memcpy_h2d(be, t, h, n * 4);
  be->ops->cast(be, d, MT_BF16, t, MT_F32, (int64_t)n);
  be->ops->free(be, t);
  return d;
}

static void down_f32(mt_backend *be, float *h, const void *d, mt_dtype t, size_t n) {
  if (t == MT_F32) {
    be->ops->memcpy_d2h(be, h, d, n * 4);
    return;
  }
  float *tmp = be->ops->alloc(be, n * 4, MT_MEM_WORKSPACE);
  be->ops->cast(be, tmp, MT_F32, d, t, (int64_t)n);
  be->ops->memcpy_d2h(be, h, tmp, n * 4);
  be->ops->free(be, tmp);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* FNV-1a of codes and scales of src [rows, cols] (bf16) quantized with
 * blocking b, format fmt, current scaling (pow2: blockwise). */
static uint64_t hash_q(mt_backend *be, uint64_t h, const void *src, int64_t rows, int64_t cols,
                       mt_fp8_blocking b, int fmt, int pow2) {
  mt_fp8_desc d = {.fmt = fmt, .blocking = b, .rows = rows, .cols = cols, .pow2 = pow2};
  const int64_t ns = mt_fp8_n_scales(&d), n = rows * cols;
  float *amax = be->ops->alloc(be, (size_t)ns * 4, MT_MEM_WORKSPACE);
  float *sinv = be->ops->alloc(be, (size_t)ns * 4, MT_MEM_WORKSPACE);
  uint8_t *q = be->ops->alloc(be, (size_t)n, MT_MEM_WORKSPACE);
  be->ops->fp8_amax(be, &d, amax, src);
  be->ops->fp8_quantize(be, &d, q, sinv, src, amax, NULL);
  uint8_t *hq = malloc((size_t)n);
  float *hs = malloc((size_t)ns * 4);
  be->ops->memcpy_d2h(be, hq, q, (size_t)n);
  be->ops->memcpy_d2h(be, hs, sinv, (size_t)ns * 4);
  h = fnv(fnv(h, hq, (size_t)n), hs, (size_t)ns * 4);
  free(hq), free(hs);
  be->ops->free(be, q), be->ops->free(be, sinv), be->ops->free(be, amax);
  return h;
}

int main(int argc, char **argv) {
  if (argc != 9 && argc != 10) {
    fprintf(stderr, "usage: fp8_linear_dev DEVICE RECIPE FORMAT M OUT IN STEPS OUTFILE [BIAS]\n");
    return 2;
  }
  mt_fp8_options o;
  if (mt_fp8_options_parse(&o, argv[3], argv[2], "max", 1, 0, 4)) {
    fprintf(stderr, "fp8_linear_dev: bad recipe or format\n");
    return 2;
  }
  const int64_t M = atoll(argv[4]), out = atoll(argv[5]), in = atoll(argv[6]);
  const int steps = atoi(argv[7]), with_bias = argc == 10 && atoi(argv[9]);
  if (M < 1 || out < 1 || in < 1 || steps < 1) {
    fprintf(stderr, "fp8_linear_dev: M, OUT, IN, STEPS must be >= 1\n");
    return 2;
  }
  mt_backend_options bo = {.device = argv[1], .num_threads = 1, .dtype = MT_BF16};
  mt_backends_process_init(&bo);
  char err[256];
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) {
    fprintf(stderr, "fp8_linear_dev: %s\n", err);
    return 77;
  }
  FILE *fo = fopen(argv[8], "wb");
  if (!fo) {
    fprintf(stderr, "fp8_linear_dev: cannot write %s\n", argv[8]);
    return 1;
  }
  const size_t nx = (size_t)(M * in), nw = (size_t)(out * in), ny = (size_t)(M * out);
  float *h = malloc((nx + nw + ny + (size_t)out) * sizeof(float));
  fill(h, nw, 7, 0.08f);
  void *w = up_bf16(be, h, nw);
  fill(h, (size_t)out, 11, 0.5f);
  void *bias = with_bias ? up_bf16(be, h, (size_t)out) : NULL;
  float *dw = be->ops->alloc(be, nw * 4, MT_MEM_WORKSPACE);
  be->ops->fill(be, dw, MT_F32, 0.0f, (int64_t)nw);
  void *y = be->ops->alloc(be, ny * 2, MT_MEM_WORKSPACE);
  void *dx = be->ops->alloc(be, nx * 2, MT_MEM_WORKSPACE);
  mt_fp8_linear *f = mt_fp8_linear_create(be, &o, NULL, NULL);
  mt_fp8_linear_set_pass(f, MT_FP8_PASS_TRAIN);
  const mt_fp8_blocking brow = o.recipe == MT_FP8_RECIPE_BLOCKWISE ? MT_FP8_BLOCK_1X128
                               : o.recipe == MT_FP8_RECIPE_MXFP8   ? MT_FP8_MX32
                                                                   : MT_FP8_TENSOR;
  const int pow2 = o.recipe == MT_FP8_RECIPE_BLOCKWISE;
  for (int s = 0; s < steps; s++) {
    fill(h, nx, 100 + (uint32_t)s, 2.0f + (float)s);
    void *x = up_bf16(be, h, nx);
    fill(h, ny, 200 + (uint32_t)s, 1e-3f);
    void *dy = up_bf16(be, h, ny);
    uint64_t hh = 1469598103934665603ull;
    hh = hash_q(be, hh, x, M, in, brow, MT_FP8_E4M3, pow2);
    hh = hash_q(be, hh, w, out, in, brow, MT_FP8_E4M3, pow2);
    hh = hash_q(be, hh, dy, M, out, brow, o.hybrid ? MT_FP8_E5M2 : MT_FP8_E4M3, pow2);
    printf("step %d codes %016llx\n", s, (unsigned long long)hh);
    mt_fp8_linear_select(f, 0); /* the delayed state under key 0 */
    mt_fp8_linear_fwd(f, y, x, w, bias, M, out, in);
    mt_fp8_linear_select(f, 0);
    mt_fp8_linear_bwd(f, dx, dw, NULL, dy, x, w, M, out, in);
    down_f32(be, h, y, MT_BF16, ny);
    fwrite(h, 4, ny, fo);
    down_f32(be, h, dx, MT_BF16, nx);
    fwrite(h, 4, nx, fo);
    be->ops->free(be, x), be->ops->free(be, dy);
  }
  down_f32(be, h, dw, MT_F32, nw);
  fwrite(h, 4, nw, fo);
  if (o.recipe == MT_FP8_RECIPE_DELAYED)
    for (int r = 0; r < 3; r++)
      fwrite(mt_fp8_linear_meta(f, 0, r), 4, (size_t)mt_fp8_linear_meta_len(f), fo);
  fclose(fo);
  mt_fp8_linear_destroy(f);
  be->ops->free(be, y), be->ops->free(be, dx), be->ops->free(be, dw), be->ops->free(be, w);
  if (bias) be->ops->free(be, bias);
  mt_backend_destroy(be);
  free(h);
  return 0;
}
