/* tests/tools/fp8_experts.c — the C side of the FP8 experts check
 * (tests/reference/fp8_reference.py --experts drives it): one forward and
 * one backward of model/moe_experts.c's GELU experts in FP8 on the cpu
 * backend (fp32 storage), the rows in (source peer, local expert) blocks.
 *
 * usage: fp8_experts RECIPE FORMAT E_LOC PEERS H F COUNT...
 *   (PEERS · E_LOC counts: rows of block (peer p, expert le) at p·E_LOC + le)
 *   stdin  x[R*H], w1[E_LOC*F*H], w2[E_LOC*H*F], dy[R*H] (f32), R = Σ counts
 *   stdout fc1[R*F], act[R*F], y[R*H], dx[R*H], dw1[E_LOC*F*H],
 *          dw2[E_LOC*H*F] (f32; weight gradients accumulated onto 0) */
#include <stdio.h>
#include <stdlib.h>

#include "backends/registry.h"
#include "model/fp8_linear.h"
#include "model/moe_experts.h"

int main(int argc, char **argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: fp8_experts RECIPE FORMAT E_LOC PEERS H F COUNT...\n");
    return 2;
  }
  mt_fp8_options o;
  if (mt_fp8_options_parse(&o, argv[2], argv[1], "most_recent", 1, 0, 1)) {
    fprintf(stderr, "fp8_experts: bad recipe or format\n");
    return 2;
  }
  const int El = atoi(argv[3]), P = atoi(argv[4]);
  const int64_t H = atoll(argv[5]), F = atoll(argv[6]);
  if (El < 1 || P < 1 || argc != 7 + El * P) {
    fprintf(stderr, "fp8_experts: expected %d counts\n", El * P);
    return 2;
  }
  int64_t *counts = calloc((size_t)(El * P), sizeof(int64_t)), R = 0;
  for (int i = 0; i < El * P; i++) R += counts[i] = atoll(argv[7 + i]);
  mt_backend_options bo = {.device = "cpu", .num_threads = 0, .dtype = MT_F32};
  mt_backends_process_init(&bo);
  char err[256];
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  if (!be) {
    fprintf(stderr, "fp8_experts: %s\n", err);
    return 1;
  }
  const size_t nx = (size_t)(R * H), nw = (size_t)(El * F * H), nf = (size_t)(R * F);
  float *in = calloc(2 * nx + 2 * nw, sizeof(float)), *x = in, *w1 = x + nx, *w2 = w1 + nw,
        *dy = w2 + nw;
  float *out = calloc(2 * nf + 2 * nx + 2 * nw, sizeof(float)), *fc1 = out, *act = fc1 + nf,
        *y = act + nf, *dx = y + nx, *dw1 = dx + nx, *dw2 = dw1 + nw;
  if (fread(in, sizeof(float), 2 * nx + 2 * nw, stdin) != 2 * nx + 2 * nw) {
    fprintf(stderr, "fp8_experts: short input\n");
    return 1;
  }
  mt_moe_experts_config xc = {.E_loc = El, .ep_size = P, .h = H, .F = F, .r_max = R};
  mt_moe_experts *ex = mt_moe_experts_create(be, &xc);
  mt_moe_experts_acts a;
  mt_moe_experts_acts_init(ex, &a);
  const void **wp = calloc((size_t)(4 * El), sizeof(void *));
  float **gp = calloc((size_t)(4 * El), sizeof(float *));
  for (int le = 0; le < El; le++) {
    wp[le] = w1 + (size_t)le * F * H, wp[2 * El + le] = w2 + (size_t)le * H * F;
    gp[le] = dw1 + (size_t)le * F * H, gp[2 * El + le] = dw2 + (size_t)le * H * F;
  }
  mt_fp8_linear *f = mt_fp8_linear_create(be, &o, NULL, NULL);
  mt_moe_expert_weights w = {wp, wp + El, wp + 2 * El, wp + 3 * El, f, {0, El}};
  mt_moe_expert_grads g = {gp, gp + El, gp + 2 * El, gp + 3 * El};
  mt_moe_experts_forward(ex, &a, &w, y, x, counts, R);
  mt_moe_experts_backward(ex, &a, &w, &g, dx, dy, x, counts, R);
  be->ops->memcpy_d2h(be, fc1, a.fc1, nf * sizeof(float));
  be->ops->memcpy_d2h(be, act, a.act, nf * sizeof(float));
  fwrite(out, sizeof(float), 2 * nf + 2 * nx + 2 * nw, stdout);
  mt_fp8_linear_destroy(f);
  mt_moe_experts_acts_free(ex, &a);
  mt_moe_experts_destroy(ex);
  mt_backend_destroy(be);
  free(wp);
  free(gp);
  free(in);
  free(out);
  free(counts);
  return 0;
}
