/* tests/unit/cpu/test_backend_props.c — cpu backend properties that are not
 * per-op numerics (those are the op-case table, test_ops.c): op table
 * completeness (every op but the optional fp8_gemm), bf16 storage (table, rounding, scratch), allocator counters and op workspace,
 * memory ops, initialisation statistics, attention-dropout keep statistics,
 * reductions' edge cases, and the block Philox generator against
 * core/rng.h. */
#include "tests/unit/cpu_test_common.h"

#include "cpu/cpu_internal.h"

/* The one op a backend may leave NULL (core/backend.h): fp8_gemm, the FP8
 * tensor-core GEMM (cuda only; without it the FP8 linear dequantizes and
 * runs `gemm`). The cpu backend must leave it NULL. */
static int optional_op(size_t i) {
  return i * sizeof(void (*)(void)) == offsetof(mt_backend_ops, fp8_gemm);
}

static void test_ops_table_complete(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  assert_string_equal(be->name, "cpu");
  assert_int_equal(be->dtype, MT_F32);
  assert_non_null(be->destroy);
  typedef void (*fn)(void);
  const fn *tab = (const fn *)be->ops;
  for (size_t i = 0; i < MT_BACKEND_N_OPS; i++)
    if (!tab[i] && !optional_op(i)) fail_msg("op table entry %zu is NULL", i);
  assert_null(be->ops->fp8_gemm);
  assert_true(MT_BACKEND_N_OPS >= 34);
  be->destroy(be);
}

/* bf16 storage (cpu_bf16_ops, cpu/cpu_backend.c): the table is complete and its own for the ops
 * on T, the conversion rounds to nearest even (ties to even, NaN quiet,
 * overflow to infinity), the widened copies live in the op scratch (counted
 * in be->mem.op_scratch, grown once, not allocated per call), and other
 * storage dtypes are refused with a message. */
static void test_bf16_storage(void **state) {
  (void)state;
  mt_backend *f = tc_backend();
  mt_backend_options o = {.device = "cpu", .dtype = MT_BF16};
  char err[256] = "";
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  assert_non_null(be);
  assert_int_equal(be->dtype, MT_BF16);
  assert_string_equal(be->name, "cpu");
  typedef void (*fn)(void);
  const fn *tab = (const fn *)be->ops;
  for (size_t i = 0; i < MT_BACKEND_N_OPS; i++)
    if (!tab[i] && !optional_op(i)) fail_msg("bf16 op table entry %zu is NULL", i);
  assert_true(be->ops->gemm != f->ops->gemm && be->ops->layernorm_fwd != f->ops->layernorm_fwd);
  assert_true(be->ops->alloc == f->ops->alloc && be->ops->sumsq_f32 == f->ops->sumsq_f32);
  /* round to nearest even */
  const struct { uint32_t in; uint16_t out; } rt[] = {
      {0x3F800000u, 0x3F80}, /* 1 */
      {0x3F808000u, 0x3F80}, /* 1 + 2^-8: tie, to even (down) */
      {0x3F818000u, 0x3F82}, /* 1 + 3 * 2^-8: tie, to even (up) */
      {0x3F808001u, 0x3F81}, /* above the tie */
      {0x3F807FFFu, 0x3F80}, /* below the tie */
      {0x7F7FFFFFu, 0x7F80}, /* FLT_MAX rounds to infinity */
      {0xFF800000u, 0xFF80}, /* -inf */
      {0x7F800001u, 0x7FC0}, /* signalling NaN: quiet NaN */
      {0x80000000u, 0x8000}, /* -0 */
  };
  for (size_t i = 0; i < sizeof rt / sizeof *rt; i++) {
    float x;
    memcpy(&x, &rt[i].in, 4);
    if (mt_f32_to_bf16(x) != rt[i].out)
      fail_msg("mt_f32_to_bf16(0x%08X) = 0x%04X, expected 0x%04X", rt[i].in, mt_f32_to_bf16(x),
               rt[i].out);
    uint32_t back;
    float y = mt_bf16_to_f32(rt[i].out);
    memcpy(&back, &y, 4);
    assert_int_equal(back, (uint32_t)rt[i].out << 16);
  }
  /* op scratch: one gemm [64, 64] x 64 widens a, b and c */
  const int n = 64;
  uint16_t *a = be->ops->alloc(be, (size_t)n * n * 2, MT_MEM_ACT);
  uint16_t *c = be->ops->alloc(be, (size_t)n * n * 2, MT_MEM_ACT);
  be->ops->fill(be, a, MT_BF16, 0.5f, (int64_t)n * n);
  mt_gemm_desc d = {.m = n, .n = n, .k = n, .alpha = 1, .a = a, .lda = n, .b = a, .ldb = n,
                    .c = c, .ldc = n, .a_type = MT_BF16, .b_type = MT_BF16, .c_type = MT_BF16,
                    .batch = 1};
  be->ops->gemm(be, &d);
  for (int i = 0; i < n * n; i++) assert_int_equal(c[i], mt_f32_to_bf16(16.0f));
  assert_true(be->mem.op_scratch >= (size_t)2 * n * n * 4);
  assert_true(be->mem.live[MT_MEM_WORKSPACE] == be->mem.op_scratch);
  const int64_t na = be->mem.n_allocs;
  be->ops->gemm(be, &d);
  assert_int_equal(be->mem.n_allocs, na);
  be->ops->free(be, a);
  be->ops->free(be, c);
  mt_backend_destroy(be);
  mt_backend_destroy(f);
  o.dtype = MT_I32;
  assert_null(mt_backend_create(&o, err, sizeof err));
  assert_non_null(strstr(err, "int32"));
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
  for (int k = 0; k < MT_MEM_NCAT; k++)
    if (be->mem.live[k] != 0) fail_msg("category %d: %zu bytes live", k, be->mem.live[k]);
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

static void test_memory_ops(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  int64_t n = 1000;
  float *a = tc_randf(be, n, -3, 3), *b = tc_allocf(be, n), *h = malloc(n * sizeof(float));
  op->memcpy_d2d(be, b, a, n * sizeof(float));
  op->memcpy_d2h(be, h, b, n * sizeof(float));
  assert_memory_equal(h, a, n * sizeof(float));
  op->memset0(be, b, n * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    if (b[i] != 0.0f) fail_msg("memset0: element %lld of %lld is %.9g", (long long)i, (long long)n, (double)b[i]);
  op->memcpy_h2d(be, b, h, n * sizeof(float));
  assert_memory_equal(b, a, n * sizeof(float));
  op->synchronize(be);
  op->free(be, a);
  op->free(be, b);
  free(h);
  be->destroy(be);
}

/* Initial weights: std 0.02 over a full tensor (the per-element formula and
 * shards are op cases). */
static void test_init_normal_stats(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  mt_rng_key_t key = mt_rng_key(1234, "decoder.layers.0.mlp.linear_fc1.weight", 0, 0);
  const int64_t R = 11, C = 13;
  float *full = tc_allocf(be, R * C);
  be->ops->init_normal(be, full, R, C, C, 0, 0, key, 0.02f);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < R * C; i++) s += full[i], s2 += (double)full[i] * full[i];
  double sd = sqrt(s2 / (R * C) - (s / (R * C)) * (s / (R * C)));
  if (!(sd > 0.015 && sd < 0.025)) fail_msg("init_normal [%lld, %lld]: sd %.5f, want 0.02", (long long)R, (long long)C, sd);
  be->ops->free(be, full);
  be->destroy(be);
}

/* V = one-hot rows, so ctx[q, :] = dropout(P)[q, :] of the fused op, with
 * P = exp(scale q.k - lse) from its own lse: the kept fraction over the
 * causal triangle must be ~1-p and kept values P/(1-p). */
static void test_attn_dropout_stats(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t sid[2] = {0, 1};
  const int s = 64, b = 2, np = 4, hn = 64;
  const float p = 0.1f;
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .head_offset = 2, .n_heads_total = np + 5,
                    .scale = 1.0f / sqrtf((float)hn), .dropout_p = p,
                    .key = mt_rng_key(42, "attention_dropout", 1, 0), .sample_ids = sid};
  int64_t nq = (int64_t)s * b * np * 3 * hn, nc = (int64_t)s * b * np * hn;
  float *qkv = tc_randf(be, nq, -1, 1), *ctx = tc_allocf(be, nc), *lse = tc_allocf(be, (int64_t)b * np * s);
  for (int k = 0; k < s; k++)
    for (int bi = 0; bi < b; bi++)
      for (int n = 0; n < np; n++) {
        float *v = qkv + (((int64_t)k * b + bi) * np + n) * 3 * hn + 2 * hn;
        for (int e = 0; e < hn; e++) v[e] = e == k ? 1.0f : 0.0f;
      }
  be->ops->flash_attn_fwd(be, &d, ctx, lse, qkv, NULL);
  int64_t kept = 0, total = 0;
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int q = 0; q < s; q++)
        for (int k = 0; k < s; k++) {
          float c = ctx[(((int64_t)q * b + bi) * np + n) * hn + k];
          if (k > q) {
            if (c != 0.0f) fail_msg("masked (b %d, head %d, q %d, k %d): ctx %.9g, want 0", bi, n, q, k, (double)c);
            continue;
          }
          const float *qv = qkv + (((int64_t)q * b + bi) * np + n) * 3 * hn;
          const float *kv = qkv + (((int64_t)k * b + bi) * np + n) * 3 * hn + hn;
          double dotp = 0;
          for (int e = 0; e < hn; e++) dotp += (double)qv[e] * kv[e];
          double pr = exp(d.scale * dotp - lse[((int64_t)bi * np + n) * s + q]);
          total++;
          if (c != 0.0f) {
            kept++;
            if (!(fabs(c - pr / (1 - p)) <= 1e-5 * fabs(c)))
              fail_msg("kept (b %d, head %d, q %d, k %d): ctx %.9g, want P/(1-p) %.9g", bi, n, q, k, (double)c, pr / (1 - p));
          }
        }
  double frac = (double)kept / total;
  if (fabs(frac - (1 - p)) > 0.015) fail_msg("attention keep fraction %.4f, want %.2f", frac, 1 - p);
  be->ops->free(be, qkv), be->ops->free(be, ctx), be->ops->free(be, lse);
  be->destroy(be);
}

/* Reductions: empty input, and a short one summed exactly in order. */
static void test_reduction_edges(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  float *a = tc_randf(be, 5, -1, 1);
  assert_true(be->ops->sum_f32(be, a, 0) == 0.0);
  assert_true(be->ops->sumsq_f32(be, a, 0) == 0.0);
  double want = (double)a[0] * a[0] + (double)a[1] * a[1] + (double)a[2] * a[2] +
                (double)a[3] * a[3] + (double)a[4] * a[4];
  double got = be->ops->sumsq_f32(be, a, 5);
  if (got != want) fail_msg("sumsq_f32 n=5: %.17g want %.17g", got, want);
  be->ops->free(be, a);
  be->destroy(be);
}

static void test_rng_range(void **state) {
  (void)state;
  mt_rng_key_t key = mt_rng_key(1, "x", 2, 3);
  float out[300];
  uint64_t starts[] = {0, 1, 2, 3, 5, 63, 64, 1000001, (1ull << 32) - 7, (1ull << 40) + 3};
  int64_t lens[] = {1, 2, 3, 4, 5, 17, 64, 65, 131, 300};
  for (size_t a = 0; a < sizeof starts / sizeof *starts; a++)
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
      for (int j = 0; j < 300; j++) out[j] = -1.0f;
      cpu_rng_uniform_range(key, starts[a], lens[l], out);
      for (int64_t j = 0; j < 300; j++) {
        float want = j < lens[l] ? mt_rng_uniform(key, starts[a] + (uint64_t)j) : -1.0f;
        if (out[j] != want)
          fail_msg("cpu_rng_uniform_range start %llu len %lld: out[%lld] = %.9g, want %.9g",
                   (unsigned long long)starts[a], (long long)lens[l], (long long)j, (double)out[j], (double)want);
      }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_table_complete), cmocka_unit_test(test_bf16_storage),
      cmocka_unit_test(test_allocator_counters), cmocka_unit_test(test_memory_ops),
      cmocka_unit_test(test_init_normal_stats),  cmocka_unit_test(test_attn_dropout_stats),
      cmocka_unit_test(test_reduction_edges),    cmocka_unit_test(test_rng_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
