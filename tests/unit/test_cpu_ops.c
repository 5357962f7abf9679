/* tests/unit/test_cpu_ops.c — fp32 CPU backend: op table completeness,
 * allocator counters, initialisation, GEMM and the forward ops against naive
 * double-precision loops (rel 1e-5). Backward ops: test_cpu_grad.c;
 * attention and dropout: test_cpu_attn.c. */
#include "cpu_test_common.h"

#include <omp.h>

static void test_ops_table_complete(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  assert_string_equal(be->name, "cpu");
  assert_int_equal(be->dtype, MT_F32);
  assert_non_null(be->destroy);
  typedef void (*fn)(void);
  const fn *tab = (const fn *)be->ops;
  for (size_t i = 0; i < MT_BACKEND_N_OPS; i++)
    if (!tab[i]) fail_msg("op table entry %zu is NULL", i);
  assert_true(MT_BACKEND_N_OPS >= 34);
  be->destroy(be);
}

static void test_bf16_rejected(void **state) {
  (void)state;
  mt_backend_options o = {.device = "cpu", .dtype = MT_BF16};
  char err[256] = "";
  assert_null(mt_backend_create(&o, err, sizeof err));
  assert_true(strlen(err) > 0);
}

static void test_allocator_counters(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  void *a = op->alloc(be, 100, MT_MEM_PARAM);
  void *b = op->alloc(be, 1000, MT_MEM_ACT);
  void *c = op->alloc(be, 333, MT_MEM_PARAM);
  assert_int_equal((uintptr_t)a % 64, 0);
  assert_int_equal((uintptr_t)b % 64, 0);
  assert_int_equal((uintptr_t)c % 64, 0);
  memset(a, 1, 100);
  memset(b, 2, 1000);
  memset(c, 3, 333);
  assert_int_equal(be->mem.live[MT_MEM_PARAM], 433);
  assert_int_equal(be->mem.live[MT_MEM_ACT], 1000);
  assert_int_equal(be->mem.live_total, 1433);
  assert_int_equal(be->mem.n_allocs, 3);
  op->free(be, a);
  assert_int_equal(be->mem.live[MT_MEM_PARAM], 333);
  assert_int_equal(be->mem.peak[MT_MEM_PARAM], 433);
  assert_int_equal(be->mem.peak_total, 1433);
  mt_mem_reset_peak(&be->mem);
  assert_int_equal(be->mem.peak[MT_MEM_PARAM], 333);
  op->free(be, b);
  op->free(be, c);
  op->free(be, NULL);
  assert_int_equal(be->mem.n_frees, 3);
  assert_int_equal(be->mem.live_total, 0);
  for (int k = 0; k < MT_MEM_NCAT; k++) assert_int_equal(be->mem.live[k], 0);
  /* op workspace is counted under MT_MEM_WORKSPACE and reused */
  int64_t rows = 100, h = 40;
  float *x = tc_randf(be, rows * h, -1, 1), *g = tc_randf(be, rows * h, -1, 1);
  float *w = tc_randf(be, h, -1, 1), *mu = tc_allocf(be, rows), *rs = tc_allocf(be, rows);
  float *dx = tc_allocf(be, rows * h), *dw = tc_allocf(be, h), *db = tc_allocf(be, h);
  op->layernorm_fwd(be, dx, mu, rs, x, w, w, rows, h, 1e-5f);
  op->layernorm_bwd(be, dx, dw, db, g, x, w, mu, rs, rows, h);
  size_t ws = be->mem.live[MT_MEM_WORKSPACE];
  assert_true(ws > 0);
  op->layernorm_bwd(be, dx, dw, db, g, x, w, mu, rs, rows, h);
  assert_int_equal(be->mem.live[MT_MEM_WORKSPACE], ws);
  float *ptrs[] = {x, g, w, mu, rs, dx, dw, db};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) op->free(be, ptrs[i]);
  assert_int_equal(be->mem.live[MT_MEM_ACT], 0);
  be->destroy(be);
}

static void test_memory_ops_fill_cast(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t n = 1000;
  float *a = tc_randf(be, n, -3, 3), *b = tc_allocf(be, n), *h = malloc(n * sizeof(float));
  op->memcpy_d2d(be, b, a, n * sizeof(float));
  op->memcpy_d2h(be, h, b, n * sizeof(float));
  assert_memory_equal(h, a, n * sizeof(float));
  op->memset0(be, b, n * sizeof(float));
  for (int64_t i = 0; i < n; i++) assert_true(b[i] == 0.0f);
  op->memcpy_h2d(be, b, h, n * sizeof(float));
  assert_memory_equal(b, a, n * sizeof(float));
  op->synchronize(be);
  op->fill(be, b, MT_F32, 2.5f, n);
  for (int64_t i = 0; i < n; i++) assert_true(b[i] == 2.5f);
  op->cast(be, b, MT_F32, a, MT_F32, n);
  assert_memory_equal(b, a, n * sizeof(float));
  /* bf16 round trip: relative error <= 2^-8 */
  uint16_t *hb = op->alloc(be, n * 2, MT_MEM_ACT);
  op->cast(be, hb, MT_BF16, a, MT_F32, n);
  op->cast(be, b, MT_F32, hb, MT_BF16, n);
  for (int64_t i = 0; i < n; i++) assert_true(fabsf(b[i] - a[i]) <= fabsf(a[i]) * (1.0f / 256));
  op->free(be, hb);
  op->free(be, a);
  op->free(be, b);
  free(h);
  be->destroy(be);
}

static void test_init_normal_shard(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  mt_rng_key_t key = mt_rng_key(1234, "decoder.layers.0.mlp.linear_fc1.weight", 0, 0);
  const int64_t R = 11, C = 13;
  float *full = tc_allocf(be, R * C);
  be->ops->init_normal(be, full, R, C, C, 0, 0, key, 0.02f);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < R * C; i++) {
    assert_true(full[i] == 0.02f * mt_rng_normal(key, (uint64_t)i));
    s += full[i];
    s2 += (double)full[i] * full[i];
  }
  double sd = sqrt(s2 / (R * C) - (s / (R * C)) * (s / (R * C)));
  assert_true(sd > 0.015 && sd < 0.025);
  /* a 2D shard with row and column offsets is bitwise the slice */
  const int64_t r0 = 3, c0 = 5, rs = 6, cs = 7;
  float *shard = tc_allocf(be, rs * cs);
  be->ops->init_normal(be, shard, rs, cs, C, r0, c0, key, 0.02f);
  for (int64_t r = 0; r < rs; r++)
    assert_memory_equal(shard + r * cs, full + (r0 + r) * C + c0, cs * sizeof(float));
  be->ops->free(be, full);
  be->ops->free(be, shard);
  be->destroy(be);
}

/* ---- GEMM ---- */
static void ref_gemm(const mt_gemm_desc *d, const float *a, const float *b, const float *c0,
                     double *out) {
  for (int bt = 0; bt < d->batch; bt++)
    for (int i = 0; i < d->m; i++)
      for (int j = 0; j < d->n; j++) {
        double acc = 0;
        for (int l = 0; l < d->k; l++) {
          double av = d->trans_a ? a[bt * d->stride_a + l * d->lda + i] : a[bt * d->stride_a + i * d->lda + l];
          double bv = d->trans_b ? b[bt * d->stride_b + j * d->ldb + l] : b[bt * d->stride_b + l * d->ldb + j];
          acc += av * bv;
        }
        int64_t ci = bt * d->stride_c + (int64_t)i * d->ldc + j;
        double r = d->alpha * acc + (d->beta != 0.0f ? d->beta * (double)c0[ci] : 0.0);
        if (d->bias) r += ((const float *)d->bias)[j];
        out[ci] = r;
      }
}

static void run_gemm_case(mt_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                          float beta, int use_bias, int batch) {
  mt_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                    .beta = beta, .a_type = MT_F32, .b_type = MT_F32, .c_type = MT_F32,
                    .batch = batch};
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  d.lda = ac + 3;
  d.ldb = bc + 1;
  d.ldc = n + 2;
  d.stride_a = ar * d.lda + 5;
  d.stride_b = br * d.ldb + 7;
  d.stride_c = m * d.ldc + 1;
  int64_t na = d.stride_a * batch, nb = d.stride_b * batch, nc = d.stride_c * batch;
  float *a = tc_randf(be, na, -1, 1), *b = tc_randf(be, nb, -1, 1), *c = tc_randf(be, nc, -1, 1);
  float *bias = use_bias ? tc_randf(be, n, -1, 1) : NULL;
  float *c0 = malloc(nc * sizeof(float));
  memcpy(c0, c, nc * sizeof(float));
  if (beta == 0.0f) /* beta == 0 must ignore C, even NaN */
    for (int bt = 0; bt < batch; bt++)
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) c[bt * d.stride_c + (int64_t)i * d.ldc + j] = NAN;
  d.a = a;
  d.b = b;
  d.c = c;
  d.bias = bias;
  double *want = tc_todouble(c0, nc); /* untouched padding keeps c0 */
  ref_gemm(&d, a, b, c0, want);
  be->ops->gemm(be, &d);
  /* padding between rows/batches must be untouched */
  for (int bt = 0; bt < batch; bt++)
    for (int i = 0; i < m; i++)
      for (int j = n; j < d.ldc && bt * d.stride_c + (int64_t)i * d.ldc + j < nc; j++)
        assert_true(c[bt * d.stride_c + (int64_t)i * d.ldc + j] == c0[bt * d.stride_c + (int64_t)i * d.ldc + j]);
  char what[128];
  snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%d n=%d k=%d beta=%g bias=%d batch=%d", ta, tb,
           m, n, k, beta, use_bias, batch);
  tc_check_close(what, c, want, nc, 1e-5, 1e-5);
  free(want);
  free(c0);
  be->ops->free(be, a);
  be->ops->free(be, b);
  be->ops->free(be, c);
  be->ops->free(be, bias);
}

static void test_gemm(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      run_gemm_case(be, ta, tb, 13, 7, 9, 1.0f, 0.0f, 0, 1);
      run_gemm_case(be, ta, tb, 5, 17, 33, 0.7f, 0.5f, 0, 3);
      run_gemm_case(be, ta, tb, 13, 7, 9, 1.0f, 0.0f, 1, 2);
      run_gemm_case(be, ta, tb, 9, 11, 3, -0.5f, 1.0f, 1, 1);
    }
  /* kernel edge cases: many small odd shapes */
  for (int it = 0; it < 40; it++)
    run_gemm_case(be, it & 1, (it >> 1) & 1, 1 + (int)tc_rand(0, 40), 1 + (int)tc_rand(0, 40),
                  1 + (int)tc_rand(0, 40), 1.0f, it % 3 == 0 ? 0.0f : 1.0f, it % 5 == 0, 1);
  /* above the threading threshold: slabs over columns and over rows */
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      run_gemm_case(be, ta, tb, 90, 171, 80, 1.0f, 0.0f, 1, 1);
      run_gemm_case(be, ta, tb, 173, 90, 81, 0.5f, 0.5f, 1, 2);
    }
  be->destroy(be);
}

static void test_bias_grad(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t rows = 37, n = 131;
  float *g = tc_randf(be, rows * n, -1, 1), *db = tc_randf(be, n, -1, 1);
  double *want = tc_todouble(db, n);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) want[j] += g[r * n + j];
  be->ops->bias_grad(be, db, g, rows, n);
  tc_check_close("bias_grad", db, want, n, 1e-5, 1e-5);
  free(want);
  be->ops->free(be, g);
  be->ops->free(be, db);
  be->destroy(be);
}

/* ---- LayerNorm / GELU forward ---- */
static void test_layernorm_fwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t rows = 19, h = 77;
  float eps = 1e-5f;
  float *x = tc_randf(be, rows * h, -2, 3), *w = tc_randf(be, h, 0.5, 1.5),
        *b = tc_randf(be, h, -0.5, 0.5);
  float *y = tc_allocf(be, rows * h), *mu = tc_allocf(be, rows), *rs = tc_allocf(be, rows);
  be->ops->layernorm_fwd(be, y, mu, rs, x, w, b, rows, h, eps);
  double *wy = malloc(rows * h * sizeof(double)), *wmu = malloc(rows * 8), *wrs = malloc(rows * 8);
  for (int64_t r = 0; r < rows; r++) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < h; j++) m += x[r * h + j];
    m /= h;
    for (int64_t j = 0; j < h; j++) v += (x[r * h + j] - m) * (x[r * h + j] - m);
    double rsd = 1.0 / sqrt(v / h + eps);
    wmu[r] = m;
    wrs[r] = rsd;
    for (int64_t j = 0; j < h; j++) wy[r * h + j] = (x[r * h + j] - m) * rsd * w[j] + b[j];
  }
  tc_check_close("layernorm out", y, wy, rows * h, 1e-5, 1e-5);
  tc_check_close("layernorm mean", mu, wmu, rows, 1e-5, 1e-6);
  tc_check_close("layernorm rstd", rs, wrs, rows, 1e-5, 0);
  free(wy);
  free(wmu);
  free(wrs);
  float *p[] = {x, w, b, y, mu, rs};
  for (int i = 0; i < 6; i++) be->ops->free(be, p[i]);
  be->destroy(be);
}

static double ref_gelu(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_gelu_fwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t n = 40001; /* > parallel threshold, odd */
  float *x = tc_randf(be, n, -8, 8), *y = tc_allocf(be, n);
  x[0] = 0.0f;
  x[1] = -30.0f;
  x[2] = 30.0f;
  x[3] = 1e-6f;
  be->ops->gelu_fwd(be, y, x, n);
  double *want = malloc(n * sizeof(double));
  for (int64_t i = 0; i < n; i++) want[i] = ref_gelu(x[i]);
  tc_check_close("gelu_fwd", y, want, n, 1e-5, 1e-7);
  free(want);
  be->ops->free(be, x);
  be->ops->free(be, y);
  be->destroy(be);
}

/* ---- embeddings ---- */
static void test_embedding_fwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t n = 23, h = 19, v_start = 10, v_end = 27;
  int32_t *tok = be->ops->alloc(be, n * sizeof(int32_t), MT_MEM_ACT);
  for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)(t * 7 % 37);
  float *w = tc_randf(be, (v_end - v_start) * h, -1, 1), *out = tc_randf(be, n * h, -1, 1);
  be->ops->embedding_fwd(be, out, tok, n, w, v_start, v_end, h);
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < h; j++) {
      float want = (tok[t] >= v_start && tok[t] < v_end) ? w[(tok[t] - v_start) * h + j] : 0.0f;
      assert_true(out[t * h + j] == want);
    }
  /* positions: x[si, bi, :] += wpe[s_offset + si, :] */
  int64_t s = 5, b = 3, s_off = 2;
  float *x = tc_randf(be, s * b * h, -1, 1), *wpe = tc_randf(be, (s + s_off) * h, -1, 1);
  float *x0 = malloc(s * b * h * sizeof(float));
  memcpy(x0, x, s * b * h * sizeof(float));
  be->ops->pos_embedding_fwd(be, x, wpe, s, b, h, s_off);
  for (int64_t si = 0; si < s; si++)
    for (int64_t bi = 0; bi < b; bi++)
      for (int64_t j = 0; j < h; j++) {
        int64_t i = (si * b + bi) * h + j;
        assert_true(x[i] == x0[i] + wpe[(s_off + si) * h + j]);
      }
  free(x0);
  be->ops->free(be, x);
  be->ops->free(be, wpe);
  be->ops->free(be, tok);
  be->ops->free(be, w);
  be->ops->free(be, out);
  be->destroy(be);
}

/* ---- cross-entropy forward pieces ---- */
static void test_xent_fwd(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t n = 9, vl = 45, valid = 37, v_start = 100;
  float *lg = tc_randf(be, n * vl, -5, 5);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = valid; j < vl; j++) lg[i * vl + j] = 1e3f; /* padding must be ignored */
  int32_t *tg = be->ops->alloc(be, n * sizeof(int32_t), MT_MEM_ACT);
  for (int64_t i = 0; i < n; i++) tg[i] = (int32_t)(v_start - 3 + i * 5); /* some outside */
  float *mx = tc_allocf(be, n), *se = tc_allocf(be, n), *tl = tc_allocf(be, n), *loss = tc_allocf(be, n);
  be->ops->xent_max(be, mx, lg, n, vl, valid);
  be->ops->xent_stats(be, se, tl, lg, mx, tg, n, vl, valid, v_start);
  be->ops->xent_loss(be, loss, mx, se, tl, n);
  double wmx[9], wse[9], wtl[9], wloss[9];
  for (int64_t i = 0; i < n; i++) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < valid; j++) m = fmax(m, lg[i * vl + j]);
    for (int64_t j = 0; j < valid; j++) s += exp(lg[i * vl + j] - m);
    int64_t t = tg[i] - v_start;
    wmx[i] = m;
    wse[i] = s;
    wtl[i] = (t >= 0 && t < valid) ? lg[i * vl + t] : 0.0;
    wloss[i] = log(s) + m - wtl[i];
  }
  tc_check_close("xent_max", mx, wmx, n, 0, 0);
  tc_check_close("xent sumexp", se, wse, n, 1e-5, 0);
  tc_check_close("xent tgt_logit", tl, wtl, n, 0, 0);
  tc_check_close("xent loss", loss, wloss, n, 1e-5, 1e-6);
  float *p[] = {lg, mx, se, tl, loss};
  for (int i = 0; i < 5; i++) be->ops->free(be, p[i]);
  be->ops->free(be, tg);
  be->destroy(be);
}

/* ---- elementwise, reductions, AdamW ---- */
static void test_elementwise_reductions(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t n = 100003;
  float *a = tc_randf(be, n, -1, 1), *b = tc_randf(be, n, -1, 1), *o = tc_allocf(be, n);
  be->ops->add(be, o, a, b, n);
  for (int64_t i = 0; i < n; i++) assert_true(o[i] == a[i] + b[i]);
  be->ops->axpy_f32(be, o, 0.25f, a, n);
  for (int64_t i = 0; i < n; i++) assert_true(o[i] == (a[i] + b[i]) + 0.25f * a[i]);
  be->ops->add(be, o, a, b, n);
  be->ops->scale_f32(be, o, -3.0f, n);
  for (int64_t i = 0; i < n; i++) assert_true(o[i] == (a[i] + b[i]) * -3.0f);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) {
    s += a[i];
    s2 += (double)a[i] * a[i];
  }
  double gs = be->ops->sum_f32(be, a, n), gs2 = be->ops->sumsq_f32(be, a, n);
  assert_true(fabs(gs - s) <= 1e-9 * fabs(s2) + 1e-12);
  assert_true(fabs(gs2 - s2) <= 1e-12 * s2);
  /* independent of the thread count */
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  double gs1 = be->ops->sum_f32(be, a, n), gs21 = be->ops->sumsq_f32(be, a, n);
  omp_set_num_threads(nt);
  assert_memory_equal(&gs, &gs1, sizeof gs);
  assert_memory_equal(&gs2, &gs21, sizeof gs2);
  assert_true(be->ops->sum_f32(be, a, 0) == 0.0);
  assert_true(be->ops->sumsq_f32(be, a, 5) == (double)a[0] * a[0] + (double)a[1] * a[1] +
                                                 (double)a[2] * a[2] + (double)a[3] * a[3] +
                                                 (double)a[4] * a[4]);
  be->ops->free(be, a);
  be->ops->free(be, b);
  be->ops->free(be, o);
  be->destroy(be);
}

static void test_adamw(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t n = 50001;
  float *w = tc_randf(be, n, -1, 1), *m = tc_randf(be, n, -0.1, 0.1), *v = tc_randf(be, n, 0, 0.01),
        *g = tc_randf(be, n, -1, 1), *pl = tc_allocf(be, n);
  double *ww = tc_todouble(w, n), *wm = tc_todouble(m, n), *wv = tc_todouble(v, n);
  mt_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                         .weight_decay = 0.1f, .step = 7, .grad_scale = 0.5f};
  for (int64_t i = 0; i < n; i++) {
    double gg = (double)g[i] * hp.grad_scale;
    wm[i] = hp.beta1 * wm[i] + (1 - (double)hp.beta1) * gg;
    wv[i] = hp.beta2 * wv[i] + (1 - (double)hp.beta2) * gg * gg;
    double mh = wm[i] / (1 - pow(hp.beta1, hp.step)), vh = wv[i] / (1 - pow(hp.beta2, hp.step));
    ww[i] -= hp.lr * (mh / (sqrt(vh) + hp.eps) + hp.weight_decay * ww[i]);
  }
  be->ops->adamw(be, &hp, w, m, v, g, pl, n);
  tc_check_close("adamw m", m, wm, n, 1e-5, 1e-8);
  tc_check_close("adamw v", v, wv, n, 1e-5, 1e-10);
  tc_check_close("adamw master", w, ww, n, 1e-5, 1e-7);
  assert_memory_equal(pl, w, n * sizeof(float));
  be->ops->adamw(be, &hp, w, m, v, g, NULL, n); /* no low-precision copy */
  free(ww);
  free(wm);
  free(wv);
  float *p[] = {w, m, v, g, pl};
  for (int i = 0; i < 5; i++) be->ops->free(be, p[i]);
  be->destroy(be);
}

/* MEGATRAIN_OPENBLAS_CORETYPE=auto re-selects OpenBLAS kernels in the
 * process-wide set-up (mt_backends_process_init, run by tc_backend; SkylakeX
 * on AVX-512 CPUs); GEMM results must stay correct. Runs last: it
 * changes process-wide OpenBLAS state. */
static void test_gemm_after_coretype_switch(void **state) {
  setenv("MEGATRAIN_OPENBLAS_CORETYPE", "auto", 1);
  test_gemm(state);
  unsetenv("MEGATRAIN_OPENBLAS_CORETYPE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_table_complete),
      cmocka_unit_test(test_bf16_rejected),
      cmocka_unit_test(test_allocator_counters),
      cmocka_unit_test(test_memory_ops_fill_cast),
      cmocka_unit_test(test_init_normal_shard),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_bias_grad),
      cmocka_unit_test(test_layernorm_fwd),
      cmocka_unit_test(test_gelu_fwd),
      cmocka_unit_test(test_embedding_fwd),
      cmocka_unit_test(test_xent_fwd),
      cmocka_unit_test(test_elementwise_reductions),
      cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_gemm_after_coretype_switch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
