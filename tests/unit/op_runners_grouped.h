/* tests/unit/op_runners_grouped.h — runner of the grouped GEMM op
 * (core/backend.h gemm_grouped), see op_harness.h.
 *
 * gemm_grouped: ne = {G groups, m, n, k}, ip = {ta, tb, bias, mode},
 * fp = {alpha, beta}. Group shapes (per-group m/n/k; 0-row groups included):
 *   mode 0: m_g = 0 for g % 3 == 1, else m + (5g mod 7); n, k shared (the
 *           experts' forward and input-gradient products);
 *   mode 1: m, n shared, k_g = 0 for g % 4 == 2, else k + (3g mod 5), and
 *           group g writes the C of group g mod ceil(G/2) (the weight
 *           gradient of one expert accumulated from several ranks' blocks:
 *           those groups must run in order);
 *   mode 2: m_g as mode 0, n_g = n + g mod 4, k_g = k + (3g mod 5);
 *   mode + 4: C in fp32 (weight gradients from T inputs).
 * Outputs: "c" the whole C buffer against a double loop over the groups in
 * order; "c_loop" the same buffer against the backend's own gemm called once
 * per group in order (bitwise on cpu: the op's contract). */
#ifndef MT_TESTS_OP_RUNNERS_GROUPED_H
#define MT_TESTS_OP_RUNNERS_GROUPED_H

#include "op_runners_dense.h"

static void gg_shape(const op_case *c, int g, int *m, int *n, int *k) {
  const int M = (int)c->ne[1], N = (int)c->ne[2], K = (int)c->ne[3], mode = c->ip[3] & 3;
  *m = M, *n = N, *k = K;
  if (mode != 1) *m = g % 3 == 1 ? 0 : M + (5 * g) % 7;
  if (mode == 1) *k = g % 4 == 2 ? 0 : K + (3 * g) % 5;
  if (mode == 2) *n = N + g % 4, *k = K + (3 * g) % 5;
}

static void ot_run_gemm_grouped(ot_run *r) {
  const op_case *cs = r->c;
  const int G = (int)cs->ne[0], ta = cs->ip[0], tb = cs->ip[1], mode = cs->ip[3] & 3;
  const int H = mode == 1 ? (G + 1) / 2 : G; /* distinct C regions */
  int *m = malloc(sizeof(int) * (size_t)G * 3), *n = m + G, *k = m + 2 * G;
  int mx_ac = 1, mx_bc = 1, mx_n = 1;
  for (int g = 0; g < G; g++) {
    gg_shape(cs, g, &m[g], &n[g], &k[g]);
    int ac = ta ? m[g] : k[g], bc = tb ? k[g] : n[g];
    mx_ac = ac > mx_ac ? ac : mx_ac, mx_bc = bc > mx_bc ? bc : mx_bc, mx_n = n[g] > mx_n ? n[g] : mx_n;
  }
  const int64_t lda = mx_ac + 3, ldb = mx_bc + 1, ldc = mx_n + 2;
  int64_t *oa = malloc(sizeof(int64_t) * (size_t)G * 3), *ob = oa + G, *oc = oa + 2 * G;
  int64_t na = 0, nb = 0, nc = 0;
  for (int g = 0; g < G; g++) {
    oa[g] = na, ob[g] = nb;
    na += (int64_t)(ta ? k[g] : m[g]) * lda + 5;
    nb += (int64_t)(tb ? n[g] : k[g]) * ldb + 7;
    if (g < H) oc[g] = nc, nc += (int64_t)m[g] * ldc + 1;
    else oc[g] = oc[g % H];
  }
  ot_t *A = ot_rnd(r, na, r->T, -1, 1), *B = ot_rnd(r, nb, r->T, -1, 1);
  const mt_dtype ct = cs->ip[3] & 4 ? MT_F32 : r->T;
  ot_t *C = ot_rnd(r, nc, ct, -1, 1), *C2 = ot_rnd(r, nc, ct, -1, 1);
  ot_t *bias = cs->ip[2] ? ot_rnd(r, (int64_t)G * (mx_n + 1), r->T, -1, 1) : NULL;
  if (cs->fp[1] == 0.0f)
    for (int g = 0; g < H; g++)
      for (int i = 0; i < m[g]; i++)
        for (int j = 0; j < n[g]; j++) C->h[oc[g] + (int64_t)i * ldc + j] = NAN;
  memcpy(C2->h, C->h, (size_t)nc * 4);
  ot_put(r, C);
  ot_put(r, C2);
  float *c0 = malloc((size_t)nc * 4 + 4);
  memcpy(c0, C->h, (size_t)nc * 4);
  const size_t es = mt_dtype_size(r->T);
  const void **pa = malloc(sizeof(void *) * (size_t)G * 4), **pb = pa + G, **pbias = pa + 3 * G;
  void **pc = (void **)(pa + 2 * G);
  for (int g = 0; g < G; g++) {
    pa[g] = (const char *)A->d + oa[g] * es;
    pb[g] = (const char *)B->d + ob[g] * es;
    pc[g] = (char *)C->d + oc[g] * mt_dtype_size(ct);
    pbias[g] = bias ? (const char *)bias->d + (int64_t)g * (mx_n + 1) * es : NULL;
  }
  mt_gemm_grouped_desc d = {.trans_a = ta, .trans_b = tb, .alpha = cs->fp[0], .beta = cs->fp[1],
                            .lda = lda, .ldb = ldb, .ldc = ldc, .a_type = r->T, .b_type = r->T,
                            .c_type = ct, .groups = G, .m = m, .n = n, .k = k, .a = pa, .b = pb,
                            .c = pc, .bias = bias ? pbias : NULL};
  r->be->ops->gemm_grouped(r->be, &d);
  /* the loop of gemm calls on C2 */
  for (int g = 0; g < G; g++) {
    mt_gemm_desc e = {.trans_a = ta, .trans_b = tb, .m = m[g], .n = n[g], .k = k[g],
                      .alpha = d.alpha, .beta = d.beta, .a = pa[g], .lda = lda, .b = pb[g],
                      .ldb = ldb, .c = (char *)C2->d + oc[g] * mt_dtype_size(ct), .ldc = ldc,
                      .a_type = r->T, .b_type = r->T, .c_type = ct, .bias = pbias[g], .batch = 1};
    r->be->ops->gemm(r->be, &e);
  }
  /* double reference, groups in order */
  double *want = ot_dbl(nc);
  for (int64_t i = 0; i < nc; i++) want[i] = c0[i];
  for (int g = 0; r->want_ref && g < G; g++)
    for (int i = 0; i < m[g]; i++)
      for (int j = 0; j < n[g]; j++) {
        double acc = 0;
        for (int l = 0; l < k[g]; l++) {
          double av = ta ? A->h[oa[g] + l * lda + i] : A->h[oa[g] + i * lda + l];
          double bv = tb ? B->h[ob[g] + j * ldb + l] : B->h[ob[g] + l * ldb + j];
          acc += av * bv;
        }
        int64_t ci = oc[g] + (int64_t)i * ldc + j;
        double v = d.alpha * acc + (d.beta != 0.0f ? d.beta * want[ci] : 0.0);
        if (bias) v += bias->h[(int64_t)g * (mx_n + 1) + j];
        want[ci] = v;
      }
  ot_output(r, "c", C, want, NULL);
  float *loop = ot_get(r, C2);
  double *wl = ot_dbl(nc);
  for (int64_t i = 0; i < nc; i++) wl[i] = loop[i];
  free(loop);
  ot_output(r, "c_loop", C, wl, NULL);
  free(c0);
  free(pa);
  free(oa);
  free(m);
}

#endif
