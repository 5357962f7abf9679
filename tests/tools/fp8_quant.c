/* tests/tools/fp8_quant.c — the C side of the FP8 bit-exactness check
 * (tests/reference/fp8_reference.py drives it): quantizes what it reads on
 * stdin through a backend's fp8 ops and writes the raw results to stdout.
 *
 * usage: fp8_quant DEVICE quant FMT BLOCKING ROWS COLS POW2 EPS
 *          stdin  x[ROWS*COLS] f32
 *          stdout amax[ns] f32, scale_inv[ns] f32, q[ROWS*COLS] u8
 *        fp8_quant DEVICE delayed FMT LEN ALGO MARGIN ROWS COLS
 *          stdin  hist[LEN] f32, prev_scale f32, x[ROWS*COLS] f32
 *          stdout scale f32 (the update from the history: core/fp8.h),
 *                 amax f32 (of x), scale_inv f32, q[ROWS*COLS] u8 (x
 *                 quantized with that scale)
 *        fp8_quant DEVICE decode FMT
 *          stdout the 256 codes dequantized with scale_inv 1 (f32)
 * DEVICE cpu or cuda; FMT 0 e4m3, 1 e5m2; BLOCKING 0 tensor, 1 1x128,
 * 2 128x128, 3 mx32 (mt_fp8_blocking). Everything little-endian raw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/fp8.h"

static void rd(void *p, size_t bytes) {
  if (bytes && fread(p, 1, bytes, stdin) != bytes) {
    fprintf(stderr, "fp8_quant: short input\n");
    exit(1);
  }
}
static void wr(const void *p, size_t bytes) {
  if (bytes) fwrite(p, 1, bytes, stdout);
}

/* host buffer -> new device buffer */
static void *up(mt_backend *be, const void *h, size_t bytes) {
  void *d = be->ops->alloc(be, bytes ? bytes : 4, MT_MEM_WORKSPACE);
  if (h && bytes) be->ops->memcpy_h2d(be, d, h, bytes);
  return d;
}
static void down(mt_backend *be, void *h, const void *d, size_t bytes) {
  if (bytes) be->ops->memcpy_d2h(be, h, d, bytes);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: fp8_quant DEVICE quant|delayed|decode FMT ...\n");
    return 2;
  }
  mt_backend_options o = {.device = argv[1], .num_threads = 0, .dtype = MT_F32};
  mt_backends_process_init(&o);
  char err[256];
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) {
    fprintf(stderr, "fp8_quant: %s\n", err);
    return 77;
  }
  const char *mode = argv[2];
  mt_fp8_desc d = {.fmt = atoi(argv[3])};
  if (!strcmp(mode, "decode")) {
    uint8_t codes[256];
    float one = 1.0f, y[256];
    for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    d.blocking = MT_FP8_TENSOR, d.rows = 1, d.cols = 256;
    void *dq = up(be, codes, 256), *ds = up(be, &one, 4), *dy = up(be, NULL, sizeof y);
    be->ops->fp8_dequantize(be, &d, dy, dq, ds);
    down(be, y, dy, sizeof y);
    wr(y, sizeof y);
  } else if (!strcmp(mode, "quant") && argc == 9) {
    d.blocking = (mt_fp8_blocking)atoi(argv[4]);
    d.rows = atoll(argv[5]), d.cols = atoll(argv[6]), d.pow2 = atoi(argv[7]);
    d.eps = strtof(argv[8], NULL);
    const int64_t n = d.rows * d.cols, ns = mt_fp8_n_scales(&d);
    float *x = malloc((size_t)(n ? n : 1) * 4), *amax = malloc((size_t)(ns ? ns : 1) * 4);
    float *sinv = malloc((size_t)(ns ? ns : 1) * 4);
    uint8_t *q = malloc((size_t)(n ? n : 1));
    rd(x, (size_t)n * 4);
    void *dx = up(be, x, (size_t)n * 4), *da = up(be, NULL, (size_t)ns * 4);
    void *ds = up(be, NULL, (size_t)ns * 4), *dq = up(be, NULL, (size_t)n);
    be->ops->fp8_amax(be, &d, da, dx);
    be->ops->fp8_quantize(be, &d, dq, ds, dx, da, NULL);
    down(be, amax, da, (size_t)ns * 4), down(be, sinv, ds, (size_t)ns * 4);
    down(be, q, dq, (size_t)n);
    wr(amax, (size_t)ns * 4), wr(sinv, (size_t)ns * 4), wr(q, (size_t)n);
    free(x), free(amax), free(sinv), free(q);
  } else if (!strcmp(mode, "delayed") && argc == 9) {
    const int len = atoi(argv[4]), algo = atoi(argv[5]), margin = atoi(argv[6]);
    d.blocking = MT_FP8_TENSOR, d.rows = atoll(argv[7]), d.cols = atoll(argv[8]);
    const int64_t n = d.rows * d.cols;
    float *hist = malloc((size_t)len * 4), prev, *x = malloc((size_t)(n ? n : 1) * 4);
    uint8_t *q = malloc((size_t)(n ? n : 1));
    rd(hist, (size_t)len * 4), rd(&prev, 4), rd(x, (size_t)n * 4);
    float scale = mt_fp8_scale_delayed(mt_fp8_history_amax(hist, len, algo), prev,
                                       mt_fp8_max((mt_fp8_format)d.fmt), margin);
    float amax = 0, sinv = 0;
    void *dx = up(be, x, (size_t)n * 4), *da = up(be, NULL, 4), *ds = up(be, NULL, 4);
    void *dq = up(be, NULL, (size_t)n), *dsc = up(be, &scale, 4);
    be->ops->fp8_amax(be, &d, da, dx);
    be->ops->fp8_quantize(be, &d, dq, ds, dx, NULL, dsc);
    down(be, &amax, da, 4), down(be, &sinv, ds, 4), down(be, q, dq, (size_t)n);
    wr(&scale, 4), wr(&amax, 4), wr(&sinv, 4), wr(q, (size_t)n);
    free(hist), free(x), free(q);
  } else {
    fprintf(stderr, "fp8_quant: bad arguments for mode '%s'\n", mode);
    return 2;
  }
  fflush(stdout);
  mt_backend_destroy(be);
  return 0;
}
