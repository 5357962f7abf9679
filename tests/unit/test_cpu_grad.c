/* tests/unit/test_cpu_grad.c — fp32 CPU backend backward ops.
 * Nonlinear ops (layernorm, gelu, cross-entropy): the backend's analytic
 * gradient of L = sum(out * R) against central finite differences of a
 * double-precision reference forward (rel 1e-3 of the largest entry).
 * Linear ops (embedding, position embedding, bias, dropout): the backward is
 * the adjoint of the forward, checked with <R, f(x)> = <f^T(R), x> in double.
 * Accumulating ops are called on non-zero outputs. */
#include "cpu_test_common.h"

#include <omp.h>

#define FD_EPS 1e-5

/* ---- LayerNorm ---- */
typedef struct {
  int64_t rows, h;
  double eps;
  const double *r; /* loss weights [rows, h] */
} ln_ctx;

/* L = sum(layernorm(x; w, b) * R) in double; p = [x (rows*h), w (h), b (h)] */
static double ln_loss(const ln_ctx *c, const double *p) {
  const double *x = p, *w = p + c->rows * c->h, *b = w + c->h;
  double L = 0;
  for (int64_t r = 0; r < c->rows; r++) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c->h; j++) m += x[r * c->h + j];
    m /= c->h;
    for (int64_t j = 0; j < c->h; j++) v += (x[r * c->h + j] - m) * (x[r * c->h + j] - m);
    double rs = 1.0 / sqrt(v / c->h + c->eps);
    for (int64_t j = 0; j < c->h; j++)
      L += ((x[r * c->h + j] - m) * rs * w[j] + b[j]) * c->r[r * c->h + j];
  }
  return L;
}

static void test_layernorm_bwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t rows = 37, h = 13; /* rows > one 32-row chunk */
  float eps = 1e-5f;
  float *x = tc_randf(be, rows * h, -2, 2), *w = tc_randf(be, h, 0.5, 1.5), *b = tc_randf(be, h, -1, 1);
  float *R = tc_randf(be, rows * h, -1, 1), *y = tc_allocf(be, rows * h);
  float *mu = tc_allocf(be, rows), *rs = tc_allocf(be, rows);
  float *dx = tc_randf(be, rows * h, -1, 1), *dw = tc_randf(be, h, -1, 1), *db = tc_randf(be, h, -1, 1);
  float *dx0 = malloc(rows * h * 4), *dw0 = malloc(h * 4), *db0 = malloc(h * 4);
  memcpy(dx0, dx, rows * h * 4);
  memcpy(dw0, dw, h * 4);
  memcpy(db0, db, h * 4);
  op->layernorm_fwd(be, y, mu, rs, x, w, b, rows, h, eps);
  op->layernorm_bwd(be, dx, dw, db, R, x, w, mu, rs, rows, h);
  /* finite differences of the double reference */
  int64_t np_ = rows * h + 2 * h;
  double *p = malloc(np_ * sizeof(double)), *fd = malloc(np_ * sizeof(double));
  for (int64_t i = 0; i < rows * h; i++) p[i] = x[i];
  for (int64_t j = 0; j < h; j++) {
    p[rows * h + j] = w[j];
    p[rows * h + h + j] = b[j];
  }
  double *rd = tc_todouble(R, rows * h);
  ln_ctx c = {rows, h, eps, rd};
  for (int64_t i = 0; i < np_; i++) {
    double s = p[i];
    p[i] = s + FD_EPS;
    double lp = ln_loss(&c, p);
    p[i] = s - FD_EPS;
    double lm = ln_loss(&c, p);
    p[i] = s;
    fd[i] = (lp - lm) / (2 * FD_EPS);
  }
  float *gx = malloc(rows * h * 4), *gw = malloc(h * 4), *gb = malloc(h * 4);
  for (int64_t i = 0; i < rows * h; i++) gx[i] = dx[i] - dx0[i];
  for (int64_t j = 0; j < h; j++) {
    gw[j] = dw[j] - dw0[j];
    gb[j] = db[j] - db0[j];
  }
  tc_check_grad("layernorm din", gx, fd, rows * h, 1e-3);
  tc_check_grad("layernorm dw", gw, fd + rows * h, h, 1e-3);
  tc_check_grad("layernorm db", gb, fd + rows * h + h, h, 1e-3);

  /* determinism: same bits for 1 thread and the default thread count */
  float *dxa = tc_allocf(be, rows * h), *dwa = tc_allocf(be, h), *dba = tc_allocf(be, h);
  float *dxb = tc_allocf(be, rows * h), *dwb = tc_allocf(be, h), *dbb = tc_allocf(be, h);
  int64_t big = 300;
  float *X = tc_randf(be, big * h, -2, 2), *G = tc_randf(be, big * h, -1, 1);
  float *M = tc_allocf(be, big), *S = tc_allocf(be, big), *Y = tc_allocf(be, big * h);
  float *DXa = tc_allocf(be, big * h), *DXb = tc_allocf(be, big * h);
  op->layernorm_fwd(be, Y, M, S, X, w, b, big, h, eps);
  memset(DXa, 0, big * h * 4);
  memset(DXb, 0, big * h * 4);
  memset(dwa, 0, h * 4), memset(dba, 0, h * 4), memset(dwb, 0, h * 4), memset(dbb, 0, h * 4);
  op->layernorm_bwd(be, DXa, dwa, dba, G, X, w, M, S, big, h);
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  op->layernorm_bwd(be, DXb, dwb, dbb, G, X, w, M, S, big, h);
  omp_set_num_threads(nt);
  assert_memory_equal(DXa, DXb, big * h * 4);
  assert_memory_equal(dwa, dwb, h * 4);
  assert_memory_equal(dba, dbb, h * 4);

  free(p), free(fd), free(rd), free(gx), free(gw), free(gb), free(dx0), free(dw0), free(db0);
  float *all[] = {x, w, b, R, y, mu, rs, dx, dw, db, dxa, dwa, dba, dxb, dwb, dbb, X, G, M, S, Y, DXa, DXb};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) op->free(be, all[i]);
  be->destroy(be);
}

/* ---- GELU ---- */
static double ref_gelu(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_gelu_bwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t n = 30011;
  float *x = tc_randf(be, n, -6, 6), *g = tc_randf(be, n, -1, 1), *d = tc_allocf(be, n);
  be->ops->gelu_bwd(be, d, x, g, n);
  double *want = malloc(n * sizeof(double));
  for (int64_t i = 0; i < n; i++)
    want[i] = g[i] * (ref_gelu(x[i] + 1e-6) - ref_gelu(x[i] - 1e-6)) / 2e-6;
  /* per element: rel 1e-3 plus a small absolute floor */
  tc_check_close("gelu_bwd", d, want, n, 1e-3, 1e-6);
  /* din may alias dout */
  be->ops->gelu_bwd(be, g, x, g, n);
  assert_memory_equal(g, d, n * 4);
  free(want);
  be->ops->free(be, x), be->ops->free(be, g), be->ops->free(be, d);
  be->destroy(be);
}

/* ---- cross-entropy ---- */
static void test_xent_bwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t n = 7, vl = 29, valid = 23, v_start = 50;
  float scale = 0.125f;
  float *lg = tc_randf(be, n * vl, -4, 4);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = valid; j < vl; j++) lg[i * vl + j] = 7.0f;
  int32_t *tg = op->alloc(be, n * sizeof(int32_t), MT_MEM_ACT);
  for (int64_t i = 0; i < n; i++) tg[i] = (int32_t)(v_start - 6 + i * 5); /* 2 outside */
  double *p = tc_todouble(lg, n * vl), *fd = calloc(n * vl, sizeof(double));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < valid; j++) {
      double *row = p + i * vl;
      double lpm[2];
      for (int sgn = 0; sgn < 2; sgn++) {
        double s0 = row[j];
        row[j] = s0 + (sgn ? -FD_EPS : FD_EPS);
        double m = -INFINITY, se = 0;
        for (int64_t k = 0; k < valid; k++) m = fmax(m, row[k]);
        for (int64_t k = 0; k < valid; k++) se += exp(row[k] - m);
        int64_t t = tg[i] - v_start;
        lpm[sgn] = scale * (log(se) + m - ((t >= 0 && t < valid) ? row[t] : 0.0));
        row[j] = s0;
      }
      fd[i * vl + j] = (lpm[0] - lpm[1]) / (2 * FD_EPS); /* padding stays 0 */
    }
  float *mx = tc_allocf(be, n), *se = tc_allocf(be, n), *tl = tc_allocf(be, n);
  op->xent_max(be, mx, lg, n, vl, valid);
  op->xent_stats(be, se, tl, lg, mx, tg, n, vl, valid, v_start);
  op->xent_bwd(be, lg, mx, se, tg, n, vl, valid, v_start, scale);
  tc_check_grad("xent_bwd", lg, fd, n * vl, 1e-3);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = valid; j < vl; j++) assert_true(lg[i * vl + j] == 0.0f);
  free(p), free(fd);
  op->free(be, lg), op->free(be, tg), op->free(be, mx), op->free(be, se), op->free(be, tl);
  be->destroy(be);
}

/* ---- linear ops: adjoint tests ---- */
static double dotf(const float *a, const float *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

static void assert_rel(const char *what, double got, double want, double rtol) {
  if (!(fabs(got - want) <= rtol * fabs(want) + 1e-9))
    fail_msg("%s: %.12g vs %.12g", what, got, want);
}

static void test_embedding_bwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t n = 41, h = 21, v_start = 8, v_end = 25, nv = v_end - v_start;
  int32_t *tok = op->alloc(be, n * sizeof(int32_t), MT_MEM_ACT);
  for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)(tc_rand(0, 32)); /* repeats + outside */
  float *w = tc_randf(be, nv * h, -1, 1), *out = tc_allocf(be, n * h), *R = tc_randf(be, n * h, -1, 1);
  float *dw = tc_randf(be, nv * h, -1, 1), *dw0 = malloc(nv * h * 4);
  memcpy(dw0, dw, nv * h * 4);
  op->embedding_fwd(be, out, tok, n, w, v_start, v_end, h);
  op->embedding_bwd(be, dw, tok, n, R, v_start, v_end, h);
  for (int64_t i = 0; i < nv * h; i++) dw[i] -= dw0[i];
  assert_rel("embedding adjoint", dotf(dw, w, nv * h), dotf(R, out, n * h), 1e-5);
  /* and elementwise against a naive scatter */
  double *want = calloc(nv * h, sizeof(double));
  for (int64_t t = 0; t < n; t++)
    if (tok[t] >= v_start && tok[t] < v_end)
      for (int64_t j = 0; j < h; j++) want[(tok[t] - v_start) * h + j] += R[t * h + j];
  tc_check_close("embedding_bwd", dw, want, nv * h, 1e-5, 1e-6);
  free(want), free(dw0);
  op->free(be, tok), op->free(be, w), op->free(be, out), op->free(be, R), op->free(be, dw);
  be->destroy(be);
}

static void test_pos_embedding_bwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t s = 6, b = 3, h = 17, s_off = 4, s_full = 12;
  float *wpe = tc_randf(be, s_full * h, -1, 1), *x = tc_allocf(be, s * b * h);
  float *R = tc_randf(be, s * b * h, -1, 1), *dwpe = tc_randf(be, s_full * h, -1, 1);
  float *d0 = malloc(s_full * h * 4);
  memcpy(d0, dwpe, s_full * h * 4);
  memset(x, 0, s * b * h * 4);
  op->pos_embedding_fwd(be, x, wpe, s, b, h, s_off);
  op->pos_embedding_bwd(be, dwpe, R, s, b, h, s_off);
  for (int64_t i = 0; i < s_full * h; i++) {
    dwpe[i] -= d0[i];
    int64_t row = i / h;
    if (row < s_off || row >= s_off + s) assert_true(dwpe[i] == 0.0f); /* outside the shard */
  }
  assert_rel("pos_embedding adjoint", dotf(dwpe, wpe, s_full * h), dotf(R, x, s * b * h), 1e-5);
  free(d0);
  op->free(be, wpe), op->free(be, x), op->free(be, R), op->free(be, dwpe);
  be->destroy(be);
}

static void test_bias_grad_adjoint(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t rows = 300, n = 77; /* parallel path */
  float *bias = tc_randf(be, n, -1, 1), *a = tc_randf(be, rows * 5, -1, 1), *w = tc_allocf(be, 5 * n);
  float *y = tc_allocf(be, rows * n), *R = tc_randf(be, rows * n, -1, 1), *db = tc_allocf(be, n);
  memset(w, 0, 5 * n * 4);
  /* y = a @ 0 + bias: the gemm bias broadcast, whose adjoint is bias_grad */
  mt_gemm_desc d = {.m = (int)rows, .n = (int)n, .k = 5, .alpha = 1, .beta = 0, .a = a, .lda = 5,
                    .b = w, .ldb = n, .c = y, .ldc = n, .a_type = MT_F32, .b_type = MT_F32,
                    .c_type = MT_F32, .bias = bias, .batch = 1};
  op->gemm(be, &d);
  memset(db, 0, n * 4);
  op->bias_grad(be, db, R, rows, n);
  assert_rel("bias adjoint", dotf(db, bias, n), dotf(R, y, rows * n), 1e-5);
  float *db1 = tc_allocf(be, n);
  memset(db1, 0, n * 4);
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  op->bias_grad(be, db1, R, rows, n);
  omp_set_num_threads(nt);
  assert_memory_equal(db, db1, n * 4);
  float *all[] = {bias, a, w, y, R, db, db1};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) op->free(be, all[i]);
  be->destroy(be);
}

static void test_dropout_adjoint(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t s = 9, b = 2, h = 37;
  int64_t sid[2] = {5, 11};
  mt_dropout_desc d = {.p = 0.25f, .key = mt_rng_key(7, "hidden_dropout.attn", 3, 0), .s = (int)s,
                       .b = (int)b, .h = (int)h, .s_offset = 2, .s_full = 16, .h_offset = 3,
                       .h_full = 50, .sample_ids = sid};
  float *x = tc_randf(be, s * b * h, -1, 1), *zero = tc_allocf(be, s * b * h), *y = tc_allocf(be, s * b * h);
  float *R = tc_randf(be, s * b * h, -1, 1), *dx = tc_allocf(be, s * b * h);
  memset(zero, 0, s * b * h * 4);
  op->dropout_add_fwd(be, &d, y, x, zero);
  op->dropout_bwd(be, &d, dx, R);
  assert_rel("dropout adjoint", dotf(dx, x, s * b * h), dotf(R, y, s * b * h), 1e-5);
  float *all[] = {x, zero, y, R, dx};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) op->free(be, all[i]);
  be->destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layernorm_bwd),   cmocka_unit_test(test_gelu_bwd),
      cmocka_unit_test(test_xent_bwd),        cmocka_unit_test(test_embedding_bwd),
      cmocka_unit_test(test_pos_embedding_bwd), cmocka_unit_test(test_bias_grad_adjoint),
      cmocka_unit_test(test_dropout_adjoint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
