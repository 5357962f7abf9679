/* tests/tools/moe_dump.c — runs one MoE block (model/moe_layer.h, one process,
 * fp32) forward and backward on fixed random inputs and dumps inputs,
 * weights, routing, output and every gradient for the PyTorch reference
 * (tests/reference/moe_reference.py).
 *
 * usage: moe_dump OUTDIR N h F E k capacity_factor policy(probs|position)
 *                 pre_softmax lb_coeff z_coeff aux_scale [logits_scale]
 * Writes OUTDIR/meta.json and OUTDIR/<name>.bin (raw fp32 / int32).
 * logits_scale multiplies the router weights (large values sharpen routing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/support/probes.h"
#include "backends/registry.h"
#include "core/rng.h"
#include "core/util.h"
#include "model/moe_layer.h"
#include "tests/tools/tool_util.h"

static void write_raw(const char *dir, const char *name, const void *p, size_t bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) mt_fatal("cannot write %s", path);
  fclose(f);
}

static float *randn(int64_t n, const char *name, float std) {
  float *a = mt_xmalloc(sizeof(float) * (size_t)n);
  mt_rng_key_t key = mt_rng_key(7, name, 0, 0);
  for (int64_t i = 0; i < n; i++) a[i] = std * mt_rng_normal(key, (uint64_t)i);
  return a;
}

static void *up(mt_backend *be, const float *h, int64_t n, mt_mem_cat cat) {
  void *d = be->ops->alloc(be, sizeof(float) * (size_t)n, cat);
  be->ops->memcpy_h2d(be, d, h, sizeof(float) * (size_t)n);
  return d;
}

static void dump_dev(mt_backend *be, const char *dir, const char *name, const void *d, int64_t n) {
  float *h = mt_xmalloc(sizeof(float) * (size_t)n);
  be->ops->memcpy_d2h(be, h, d, sizeof(float) * (size_t)n);
  write_raw(dir, name, h, sizeof(float) * (size_t)n);
  free(h);
}

int main(int argc, char **argv) {
  if (argc < 13) {
    fprintf(stderr, "usage: moe_dump OUTDIR N h F E k cf policy pre_softmax lb z aux_scale "
                    "[logits_scale]\n");
    return 2;
  }
  const char *dir = argv[1];
  const int N = atoi(argv[2]), h = atoi(argv[3]), F = atoi(argv[4]), E = atoi(argv[5]),
            k = atoi(argv[6]);
  const float cf = (float)atof(argv[7]);
  const int pos = !strcmp(argv[8], "position"), pre = atoi(argv[9]);
  const float lb = (float)atof(argv[10]), z = (float)atof(argv[11]),
              aux_scale = (float)atof(argv[12]);
  const float lscale = argc > 13 ? (float)atof(argv[13]) : 1.0f;
  mkdir(dir, 0755);
  mt_backend *be = mt_tool_cpu_backend();
  mt_moe_config c = {.E = E, .k = k, .h = h, .F = F, .lb_coeff = lb, .z_coeff = z,
                     .n_loc = N, .n_full = N, .t0 = 0, .ep_size = 1, .n_moe_layers = 1};
  c.route.capacity_factor = cf;
  c.route.drop_position = pos;
  c.route.pre_softmax = pre;
  mt_moe *m = mt_moe_create(be, &c);
  mt_moe_acts *a = mt_moe_acts_create(m);
  float *x = randn((int64_t)N * h, "x", 1.0f), *dy = randn((int64_t)N * h, "dy", 1.0f);
  float *wr = randn((int64_t)E * h, "router", 0.5f * lscale);
  write_raw(dir, "x", x, sizeof(float) * (size_t)N * h);
  write_raw(dir, "dy", dy, sizeof(float) * (size_t)N * h);
  write_raw(dir, "router", wr, sizeof(float) * (size_t)E * h);
  const void **wp = mt_xcalloc((size_t)4 * E, sizeof(void *));
  float **gp = mt_xcalloc((size_t)4 * E, sizeof(float *));
  const int64_t sz[4] = {(int64_t)F * h, F, (int64_t)h * F, h};
  const char *nm[4] = {"fc1_w", "fc1_b", "fc2_w", "fc2_b"};
  for (int e = 0; e < E; e++)
    for (int j = 0; j < 4; j++) {
      char name[64];
      snprintf(name, sizeof name, "e%d_%s", e, nm[j]);
      float *hw = randn(sz[j], name, 0.3f);
      write_raw(dir, name, hw, sizeof(float) * (size_t)sz[j]);
      wp[j * E + e] = up(be, hw, sz[j], MT_MEM_PARAM);
      gp[j * E + e] = be->ops->alloc(be, sizeof(float) * (size_t)sz[j], MT_MEM_GRAD);
      be->ops->memset0(be, gp[j * E + e], sizeof(float) * (size_t)sz[j]);
      free(hw);
    }
  void *dx_ = up(be, x, (int64_t)N * h, MT_MEM_ACT), *ddy = up(be, dy, (int64_t)N * h, MT_MEM_ACT);
  void *dwr = up(be, wr, (int64_t)E * h, MT_MEM_PARAM);
  float *gwr = be->ops->alloc(be, sizeof(float) * (size_t)E * h, MT_MEM_GRAD);
  be->ops->memset0(be, gwr, sizeof(float) * (size_t)E * h);
  void *out = be->ops->alloc(be, sizeof(float) * (size_t)N * h, MT_MEM_ACT);
  void *dxo = be->ops->alloc(be, sizeof(float) * (size_t)N * h, MT_MEM_ACT);
  mt_moe_weights w = {dwr, wp, wp + E, wp + 2 * E, wp + 3 * E, NULL, NULL, NULL, {0, 0}};
  mt_moe_grads g = {gwr, gp, gp + E, gp + 2 * E, gp + 3 * E};
  mt_moe_forward(m, a, &w, out, dx_, 0, NULL);
  mt_moe_backward(m, a, &w, &g, dxo, ddy, dx_, aux_scale, NULL);
  dump_dev(be, dir, "out", out, (int64_t)N * h);
  dump_dev(be, dir, "dx", dxo, (int64_t)N * h);
  dump_dev(be, dir, "grad_router", gwr, (int64_t)E * h);
  for (int e = 0; e < E; e++)
    for (int j = 0; j < 4; j++) {
      char name[64];
      snprintf(name, sizeof name, "grad_e%d_%s", e, nm[j]);
      dump_dev(be, dir, name, gp[j * E + e], sz[j]);
    }
  const mt_moe_routing *r = mt_moe_acts_routing(a);
  int32_t *kept = mt_xmalloc(sizeof(int32_t) * (size_t)N * k);
  for (int i = 0; i < N * k; i++) kept[i] = r->kept[i];
  write_raw(dir, "expert", r->expert, sizeof(int) * (size_t)N * k);
  write_raw(dir, "kept", kept, sizeof(int32_t) * (size_t)N * k);
  char path[1024];
  snprintf(path, sizeof path, "%s/meta.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) mt_fatal("cannot write %s", path);
  fprintf(f,
          "{\"N\": %d, \"h\": %d, \"F\": %d, \"E\": %d, \"k\": %d, \"capacity_factor\": %.9g, "
          "\"policy\": \"%s\", \"pre_softmax\": %d, \"lb_coeff\": %.9g, \"z_coeff\": %.9g, "
          "\"aux_scale\": %.9g, \"capacity\": %lld, \"dropped\": %lld, \"lb_loss\": %.17g, "
          "\"z_loss\": %.17g}\n",
          N, h, F, E, k, (double)cf, pos ? "position" : "probs", pre, (double)lb, (double)z,
          (double)aux_scale, (long long)r->capacity, (long long)r->dropped, r->lb_loss, r->z_loss);
  fclose(f);
  printf("moe_dump: N=%d E=%d k=%d capacity %lld dropped %lld lb %.6f z %.6f\n", N, E, k,
         (long long)r->capacity, (long long)r->dropped, r->lb_loss, r->z_loss);
  return 0; /* process exit releases the buffers */
}
