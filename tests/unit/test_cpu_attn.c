/* tests/unit/test_cpu_attn.c — fp32 CPU backend: causal attention forward
 * against a double-precision loop (with and without attention dropout),
 * attention backward against finite differences (with and without dropout:
 * the mask is a fixed function of the RNG key), dropout mask statistics,
 * mask regeneration in backward, shard = slice of the unsharded mask, the
 * block Philox generator against core/rng.h, and determinism. */
#include "cpu_test_common.h"

#include <omp.h>

#include "cpu/cpu_internal.h"

/* ctx (double) of the reference attention; qkv in double. */
static void ref_attn(const mt_attn_desc *d, const double *qkv, double *ctx, double *probs) {
  int s = d->s, b = d->b, np = d->np, hn = d->hn;
  double *sc = malloc((size_t)s * sizeof(double));
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int q = 0; q < s; q++) {
        const double *Q = qkv + (((int64_t)q * b + bi) * np + n) * 3 * hn;
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k <= q; k++) {
          const double *K = qkv + (((int64_t)k * b + bi) * np + n) * 3 * hn + hn;
          double dot = 0;
          for (int e = 0; e < hn; e++) dot += Q[e] * K[e];
          sc[k] = d->scale * dot;
          mx = fmax(mx, sc[k]);
        }
        for (int k = 0; k <= q; k++) sum += (sc[k] = exp(sc[k] - mx));
        double *out = ctx + (((int64_t)q * b + bi) * np + n) * hn;
        for (int e = 0; e < hn; e++) out[e] = 0;
        for (int k = 0; k < s; k++) {
          double p = k <= q ? sc[k] / sum : 0.0;
          if (probs) probs[(((int64_t)bi * np + n) * s + q) * s + k] = p;
          if (k > q) continue;
          if (d->dropout_p > 0) {
            uint64_t ctr = (((uint64_t)d->sample_ids[bi] * d->n_heads_total + d->head_offset + n) * s + q) * s + k;
            float u = mt_rng_uniform(d->key, ctr);
            p = u >= d->dropout_p ? p / (1.0 - (double)d->dropout_p) : 0.0;
          }
          const double *V = qkv + (((int64_t)k * b + bi) * np + n) * 3 * hn + 2 * hn;
          for (int e = 0; e < hn; e++) out[e] += p * V[e];
        }
      }
  free(sc);
}

static mt_attn_desc make_desc(int s, int b, int np, int hn, float p, const int64_t *sid) {
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .head_offset = 2, .n_heads_total = np + 5,
                    .scale = 1.0f / sqrtf((float)hn), .dropout_p = p,
                    .key = mt_rng_key(42, "attention_dropout", 1, 0), .sample_ids = sid};
  return d;
}

static void check_fwd(float p) {
  mt_backend *be = tc_backend();
  int64_t sid[2] = {3, 17};
  mt_attn_desc d = make_desc(13, 2, 3, 6, p, sid);
  int64_t nq = (int64_t)d.s * d.b * d.np * 3 * d.hn, nc = (int64_t)d.s * d.b * d.np * d.hn;
  int64_t npb = (int64_t)d.b * d.np * d.s * d.s;
  float *qkv = tc_randf(be, nq, -1.5, 1.5), *ctx = tc_allocf(be, nc), *probs = tc_allocf(be, npb);
  for (int64_t i = 0; i < npb; i++) probs[i] = NAN;
  be->ops->attn_fwd(be, &d, ctx, probs, qkv);
  double *qd = tc_todouble(qkv, nq), *wc = malloc(nc * 8), *wp = malloc(npb * 8);
  ref_attn(&d, qd, wc, wp);
  tc_check_close(p > 0 ? "attn ctx (dropout)" : "attn ctx", ctx, wc, nc, 1e-5, 1e-6);
  tc_check_close("attn probs", probs, wp, npb, 1e-5, 1e-7);
  free(qd), free(wc), free(wp);
  be->ops->free(be, qkv), be->ops->free(be, ctx), be->ops->free(be, probs);
  be->destroy(be);
}

static void test_attn_fwd(void **state) {
  (void)state;
  check_fwd(0.0f);
}

static void test_attn_fwd_dropout(void **state) {
  (void)state;
  check_fwd(0.3f);
}

static double attn_loss(const mt_attn_desc *d, const double *qkv, const double *R, double *ctx) {
  int64_t nc = (int64_t)d->s * d->b * d->np * d->hn;
  ref_attn(d, qkv, ctx, NULL);
  double L = 0;
  for (int64_t i = 0; i < nc; i++) L += ctx[i] * R[i];
  return L;
}

static void check_bwd(float p) {
  mt_backend *be = tc_backend();
  int64_t sid[2] = {8, 1};
  mt_attn_desc d = make_desc(9, 2, 3, 5, p, sid);
  int64_t nq = (int64_t)d.s * d.b * d.np * 3 * d.hn, nc = (int64_t)d.s * d.b * d.np * d.hn;
  int64_t npb = (int64_t)d.b * d.np * d.s * d.s;
  float *qkv = tc_randf(be, nq, -1.5, 1.5), *ctx = tc_allocf(be, nc), *probs = tc_allocf(be, npb);
  float *R = tc_randf(be, nc, -1, 1), *dqkv = tc_allocf(be, nq);
  for (int64_t i = 0; i < nq; i++) dqkv[i] = NAN; /* overwrite semantics */
  be->ops->attn_fwd(be, &d, ctx, probs, qkv);
  be->ops->attn_bwd(be, &d, dqkv, R, qkv, probs);
  double *qd = tc_todouble(qkv, nq), *rd = tc_todouble(R, nc), *tmp = malloc(nc * 8);
  double *fd = malloc(nq * 8);
  const double eps = 1e-5;
  for (int64_t i = 0; i < nq; i++) {
    double s0 = qd[i];
    qd[i] = s0 + eps;
    double lp = attn_loss(&d, qd, rd, tmp);
    qd[i] = s0 - eps;
    double lm = attn_loss(&d, qd, rd, tmp);
    qd[i] = s0;
    fd[i] = (lp - lm) / (2 * eps);
  }
  tc_check_grad(p > 0 ? "attn dqkv (dropout)" : "attn dqkv", dqkv, fd, nq, 1e-3);

  /* determinism: repeat, and with one thread */
  float *dq2 = tc_allocf(be, nq), *ctx2 = tc_allocf(be, nc), *pr2 = tc_allocf(be, npb);
  be->ops->attn_bwd(be, &d, dq2, R, qkv, probs);
  assert_memory_equal(dq2, dqkv, nq * 4);
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  be->ops->attn_fwd(be, &d, ctx2, pr2, qkv);
  be->ops->attn_bwd(be, &d, dq2, R, qkv, probs);
  omp_set_num_threads(nt);
  assert_memory_equal(ctx2, ctx, nc * 4);
  assert_memory_equal(pr2, probs, npb * 4);
  assert_memory_equal(dq2, dqkv, nq * 4);
  free(qd), free(rd), free(tmp), free(fd);
  float *all[] = {qkv, ctx, probs, R, dqkv, dq2, ctx2, pr2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->ops->free(be, all[i]);
  be->destroy(be);
}

static void test_attn_bwd(void **state) {
  (void)state;
  check_bwd(0.0f);
}

static void test_attn_bwd_dropout(void **state) {
  (void)state;
  check_bwd(0.2f);
}

/* V = one-hot rows, so ctx[q, :] = dropout(P)[q, :]: the kept fraction over
 * the causal triangle must be ~1-p and kept values P/(1-p). */
static void test_attn_dropout_stats(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int64_t sid[2] = {0, 1};
  const int s = 64, b = 2, np = 4, hn = 64;
  const float p = 0.1f;
  mt_attn_desc d = make_desc(s, b, np, hn, p, sid);
  int64_t nq = (int64_t)s * b * np * 3 * hn, nc = (int64_t)s * b * np * hn;
  float *qkv = tc_randf(be, nq, -1, 1), *ctx = tc_allocf(be, nc), *probs = tc_allocf(be, (int64_t)b * np * s * s);
  for (int k = 0; k < s; k++)
    for (int bi = 0; bi < b; bi++)
      for (int n = 0; n < np; n++) {
        float *v = qkv + (((int64_t)k * b + bi) * np + n) * 3 * hn + 2 * hn;
        for (int e = 0; e < hn; e++) v[e] = e == k ? 1.0f : 0.0f;
      }
  be->ops->attn_fwd(be, &d, ctx, probs, qkv);
  int64_t kept = 0, total = 0;
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int q = 0; q < s; q++)
        for (int k = 0; k < s; k++) {
          float c = ctx[(((int64_t)q * b + bi) * np + n) * hn + k];
          float pr = probs[(((int64_t)bi * np + n) * s + q) * s + k];
          if (k > q) {
            assert_true(c == 0.0f && pr == 0.0f);
            continue;
          }
          total++;
          if (c != 0.0f) {
            kept++;
            assert_true(fabsf(c - pr / (1 - p)) <= 1e-6f * fabsf(c));
          }
        }
  double frac = (double)kept / total;
  if (fabs(frac - (1 - p)) > 0.015) fail_msg("attention keep fraction %.4f, want %.2f", frac, 1 - p);
  be->ops->free(be, qkv), be->ops->free(be, ctx), be->ops->free(be, probs);
  be->destroy(be);
}

/* ---- hidden dropout ---- */
static void test_dropout_mask(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const mt_backend_ops *op = be->ops;
  const int S = 64, B = 4, H = 256;
  int64_t sid[4] = {10, 11, 2, 7};
  mt_dropout_desc full = {.p = 0.3f, .key = mt_rng_key(9, "hidden_dropout.mlp", 5, 0), .s = S,
                          .b = B, .h = H, .s_offset = 0, .s_full = S, .h_offset = 0, .h_full = H,
                          .sample_ids = sid};
  int64_t n = (int64_t)S * B * H;
  float *ones = tc_allocf(be, n), *zero = tc_allocf(be, n), *y = tc_allocf(be, n), *dx = tc_allocf(be, n);
  for (int64_t i = 0; i < n; i++) ones[i] = 1.0f, zero[i] = 0.0f;
  op->dropout_add_fwd(be, &full, y, ones, zero);
  /* keep fraction and values match the documented counter */
  int64_t kept = 0;
  const float inv = 1.0f / (1.0f - full.p);
  for (int si = 0; si < S; si++)
    for (int bi = 0; bi < B; bi++)
      for (int hi = 0; hi < H; hi++) {
        int64_t i = ((int64_t)si * B + bi) * H + hi;
        uint64_t ctr = ((uint64_t)sid[bi] * S + si) * H + hi;
        float want = mt_rng_uniform(full.key, ctr) >= full.p ? inv : 0.0f;
        assert_true(y[i] == want);
        kept += y[i] != 0.0f;
      }
  double frac = (double)kept / n;
  if (fabs(frac - 0.7) > 0.01) fail_msg("keep fraction %.4f, want 0.7", frac);
  /* backward regenerates exactly the forward mask (also in place) */
  op->dropout_bwd(be, &full, dx, ones);
  assert_memory_equal(dx, y, n * 4);
  memcpy(dx, ones, n * 4);
  op->dropout_bwd(be, &full, dx, dx);
  assert_memory_equal(dx, y, n * 4);
  /* out may alias residual */
  float *res = tc_randf(be, n, -1, 1), *res0 = malloc(n * 4);
  memcpy(res0, res, n * 4);
  op->dropout_add_fwd(be, &full, res, ones, res);
  for (int64_t i = 0; i < n; i++) assert_true(res[i] == res0[i] + y[i]);
  /* p = 0 is identity */
  mt_dropout_desc id = full;
  id.p = 0.0f;
  op->dropout_add_fwd(be, &id, dx, ones, zero);
  assert_memory_equal(dx, ones, n * 4);
  /* a (sequence, hidden) shard equals the slice of the unsharded mask */
  const int s_off = 16, s_sh = 24, h_off = 96, h_sh = 80;
  mt_dropout_desc sh = full;
  sh.s = s_sh, sh.h = h_sh, sh.s_offset = s_off, sh.h_offset = h_off;
  float *ys = tc_allocf(be, (int64_t)s_sh * B * h_sh);
  op->dropout_add_fwd(be, &sh, ys, ones, zero);
  for (int si = 0; si < s_sh; si++)
    for (int bi = 0; bi < B; bi++)
      assert_memory_equal(ys + ((int64_t)si * B + bi) * h_sh,
                          y + ((int64_t)(s_off + si) * B + bi) * H + h_off, h_sh * 4);
  free(res0);
  float *all[] = {ones, zero, y, dx, res, ys};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) op->free(be, all[i]);
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
      for (int64_t j = 0; j < lens[l]; j++)
        assert_true(out[j] == mt_rng_uniform(key, starts[a] + (uint64_t)j));
      for (int64_t j = lens[l]; j < 300; j++) assert_true(out[j] == -1.0f);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attn_fwd),         cmocka_unit_test(test_attn_fwd_dropout),
      cmocka_unit_test(test_attn_bwd),         cmocka_unit_test(test_attn_bwd_dropout),
      cmocka_unit_test(test_attn_dropout_stats), cmocka_unit_test(test_dropout_mask),
      cmocka_unit_test(test_rng_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
