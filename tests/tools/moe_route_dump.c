/* tests/tools/moe_route_dump.c — runs the router (model/moe_router.h:
 * mt_moe_route, then mt_moe_route_backward over the tokens in `splits`
 * consecutive pieces) on given inputs and prints the result as JSON, for the
 * PyTorch reference tests/reference/moe_router_reference.py
 * (tests/reference/test_moe_router.py, tests/integration/test_moe_router_pytorch.sh).
 *
 * usage: moe_route_dump INPUT   (INPUT "-" = stdin)
 * INPUT is whitespace-separated text:
 *   N E k seq_b score_sigmoid pre_softmax scaling_factor num_groups group_topk
 *   lb_type(0 aux, 1 seq, 2 global, 3 none) capacity_factor drop_position
 *   round_bf16 lb_scale z_scale splits has_bias has_global
 *   logits [N·E] (fp32), bias [E] if has_bias, global tokens per expert [E]
 *   if has_global, dgate [N·k]
 * The dgate of dropped slots is zeroed before the backward (the layer's
 * convention) and printed as used. Exit 2 on malformed input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/moe_router.h"

static double num(FILE *f, const char *what) {
  double v;
  if (fscanf(f, "%lf", &v) != 1) {
    fprintf(stderr, "moe_route_dump: cannot read %s\n", what);
    exit(2);
  }
  return v;
}

static void print_f(const char *key, const float *a, int64_t n, int last) {
  printf("\"%s\": [", key);
  for (int64_t i = 0; i < n; i++) printf("%s%.9g", i ? ", " : "", (double)a[i]);
  printf("]%s\n", last ? "" : ",");
}

static void print_i(const char *key, const int64_t *a, int64_t n) {
  printf("\"%s\": [", key);
  for (int64_t i = 0; i < n; i++) printf("%s%lld", i ? ", " : "", (long long)a[i]);
  printf("],\n");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: moe_route_dump INPUT (- for stdin)\n");
    return 2;
  }
  FILE *f = strcmp(argv[1], "-") ? fopen(argv[1], "r") : stdin;
  if (!f) {
    fprintf(stderr, "moe_route_dump: cannot open %s\n", argv[1]);
    return 2;
  }
  const int64_t N = (int64_t)num(f, "N");
  mt_moe_route_opts o = {0};
  o.E = (int)num(f, "E");
  o.k = (int)num(f, "k");
  o.seq_b = (int)num(f, "seq_b");
  o.score_sigmoid = (int)num(f, "score_sigmoid");
  o.pre_softmax = (int)num(f, "pre_softmax");
  o.topk_scaling_factor = (float)num(f, "scaling_factor");
  o.num_groups = (int)num(f, "num_groups");
  o.group_topk = (int)num(f, "group_topk");
  o.lb_type = (int)num(f, "lb_type");
  o.capacity_factor = (float)num(f, "capacity_factor");
  o.drop_position = (int)num(f, "drop_position");
  o.round_bf16 = (int)num(f, "round_bf16");
  const double lb_scale = num(f, "lb_scale"), z_scale = num(f, "z_scale");
  const int splits = (int)num(f, "splits"), has_bias = (int)num(f, "has_bias"),
            has_global = (int)num(f, "has_global");
  const int E = o.E, k = o.k;
  if (N < 1 || E < 1 || k < 1 || k > E || splits < 1 || N % splits) {
    fprintf(stderr, "moe_route_dump: bad sizes N %lld E %d k %d splits %d\n", (long long)N, E, k,
            splits);
    return 2;
  }
  float *logits = mt_xmalloc(sizeof(float) * (size_t)(N * E));
  for (int64_t i = 0; i < N * E; i++) logits[i] = (float)num(f, "logits");
  float *bias = NULL;
  int64_t *global = NULL;
  if (has_bias) {
    bias = mt_xmalloc(sizeof(float) * (size_t)E);
    for (int e = 0; e < E; e++) bias[e] = (float)num(f, "bias");
  }
  if (has_global) {
    global = mt_xmalloc(sizeof(int64_t) * (size_t)E);
    for (int e = 0; e < E; e++) global[e] = (int64_t)num(f, "global tokens per expert");
  }
  float *dgate = mt_xmalloc(sizeof(float) * (size_t)(N * k));
  for (int64_t i = 0; i < N * k; i++) dgate[i] = (float)num(f, "dgate");
  if (f != stdin) fclose(f);

  mt_moe_routing r;
  mt_moe_routing_init(&r, N, E, k);
  mt_moe_route(&o, logits, bias, global, N, &r);
  for (int64_t i = 0; i < N * k; i++)
    if (!r.kept[i]) dgate[i] = 0.0f;
  float *dl = mt_xmalloc(sizeof(float) * (size_t)(N * E));
  const int64_t piece = N / splits;
  for (int p = 0; p < splits; p++)
    mt_moe_route_backward(&o, &r, p * piece, piece, dgate + p * piece * k, lb_scale, z_scale,
                          dl + p * piece * E);

  int64_t *ex = mt_xmalloc(sizeof(int64_t) * (size_t)(N * k));
  int64_t *kept = mt_xmalloc(sizeof(int64_t) * (size_t)(N * k));
  for (int64_t i = 0; i < N * k; i++) {
    ex[i] = r.expert[i];
    kept[i] = r.kept[i];
  }
  printf("{\n");
  print_i("expert", ex, N * k);
  print_i("kept", kept, N * k);
  print_i("routed", r.routed, E);
  print_i("aux_routed", r.aux_routed, E);
  print_i("kept_count", r.kept_count, E);
  printf("\"capacity\": %lld, \"dropped\": %lld, \"lb_loss\": %.17g, \"z_loss\": %.17g,\n",
         (long long)r.capacity, (long long)r.dropped, r.lb_loss, r.z_loss);
  print_f("gate", r.gate, N * k, 0);
  print_f("dgate", dgate, N * k, 0);
  print_f("dlogits", dl, N * E, 1);
  printf("}\n");
  mt_moe_routing_free(&r);
  free(logits);
  free(bias);
  free(global);
  free(dgate);
  free(dl);
  free(ex);
  free(kept);
  return 0;
}
