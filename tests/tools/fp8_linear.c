/* tests/tools/fp8_linear.c — the C side of the FP8 linear-layer check
 * (tests/reference/fp8_reference.py --linear drives it): one forward and one
 * backward of model/fp8_linear.c on the cpu backend (fp32 storage).
 *
 * usage: fp8_linear RECIPE FORMAT M OUT IN
 *   RECIPE tensorwise|delayed|blockwise|mxfp8, FORMAT e4m3|hybrid
 *   stdin  x[M*IN], w[OUT*IN], dy[M*OUT] (f32)
 *   stdout y[M*OUT], dx[M*IN], dw[OUT*IN] (f32; dw accumulated onto 0) */
#include <stdio.h>
#include <stdlib.h>

#include "backends/registry.h"
#include "model/fp8_linear.h"

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: fp8_linear RECIPE FORMAT M OUT IN\n");
    return 2;
  }
  mt_fp8_options o;
  if (mt_fp8_options_parse(&o, argv[2], argv[1], "most_recent", 1, 0, 1)) {
    fprintf(stderr, "fp8_linear: bad recipe or format\n");
    return 2;
  }
  const int64_t M = atoll(argv[3]), out = atoll(argv[4]), in = atoll(argv[5]);
  mt_backend_options bo = {.device = "cpu", .num_threads = 0, .dtype = MT_F32};
  mt_backends_process_init(&bo);
  char err[256];
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) {
    fprintf(stderr, "fp8_linear: %s\n", err);
    return 1;
  }
  const size_t nx = (size_t)(M * in), nw = (size_t)(out * in), ny = (size_t)(M * out);
  float *buf = calloc(2 * (nx + nw + ny), sizeof(float));
  float *x = buf, *w = x + nx, *dy = w + nw, *y = dy + ny, *dx = y + ny, *dw = dx + nx;
  if (fread(buf, sizeof(float), nx + nw + ny, stdin) != nx + nw + ny) {
    fprintf(stderr, "fp8_linear: short input\n");
    return 1;
  }
  mt_fp8_linear *f = mt_fp8_linear_create(be, &o, NULL, NULL);
  mt_fp8_linear_select(f, 0); /* the delayed state of this one linear */
  mt_fp8_linear_fwd(f, y, x, w, NULL, M, out, in);
  mt_fp8_linear_select(f, 0);
  mt_fp8_linear_bwd(f, dx, dw, NULL, dy, x, w, M, out, in);
  fwrite(y, sizeof(float), ny + nx + nw, stdout);
  mt_fp8_linear_destroy(f);
  mt_backend_destroy(be);
  free(buf);
  return 0;
}
