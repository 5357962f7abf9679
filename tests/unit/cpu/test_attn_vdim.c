/* tests/unit/cpu/test_attn_vdim.c — the fused attention of the cpu backend
 * with a value head width hv different from the q/k width hn
 * (mt_attn_desc.hv; multi-latent attention's v_head_dim next to
 * qk_head_dim + qk_pos_emb_head_dim):
 *
 *  - against the equal-width op on a zero-padded copy (width W = max(hn,
 *    hv): q/k heads padded to W with zeros, which leaves every score
 *    unchanged; v heads and dctx padded with zeros, which leaves P V's first
 *    hv channels unchanged): ctx, lse, dQ, dK, dV within 1e-6 relative, with
 *    GQA, dropout, one tile and several tiles, hv < hn and hv > hn;
 *  - the kv form (a separate [sk, b, ng, hn + hv] key/value block, as the
 *    context-parallel ring passes it) against the self form over the same
 *    keys: ctx, lse bitwise, dQ / dK / dV within 1e-6;
 *  - hv = hn given explicitly against hv = 0: bitwise (the equal-width path
 *    is unchanged). */
#include "tests/unit/cpu_test_common.h"

static const int64_t tv_ids[3] = {4, 9, 1};

static mt_attn_desc tv_desc(int s, int b, int np, int ng, int hn, int hv, float scale, float p) {
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .ng = ng, .hv = hv, .head_offset = 2,
                    .n_heads_total = np + 2, .scale = scale, .dropout_p = p,
                    .key = mt_rng_key(11, "attention_dropout", 1, 0), .sample_ids = tv_ids};
  return d;
}

/* |a - b| <= tol (|b| + max |b|) over n elements of strides sa, sb, rows of w. */
static void tv_close(const float *a, int64_t sa, const float *b, int64_t sb, int64_t rows, int w,
                     double tol, const char *what) {
  double mx = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int e = 0; e < w; e++) mx = fmax(mx, fabs((double)b[r * sb + e]));
  for (int64_t r = 0; r < rows; r++)
    for (int e = 0; e < w; e++) {
      const double x = a[r * sa + e], y = b[r * sb + e];
      if (!(fabs(x - y) <= tol * (fabs(y) + mx)))
        fail_msg("%s differs at row %lld ch %d: %.9g vs %.9g", what, (long long)r, e, x, y);
    }
}

static void check_padded(mt_backend *be, int s, int b, int np, int ng, int hn, int hv, float p) {
  const int npg = np / ng, W = hn > hv ? hn : hv;
  const int64_t rows = (int64_t)s * b, gw = (int64_t)(npg + 1) * hn + hv, gp = (int64_t)(npg + 2) * W;
  const int64_t nq = rows * ng * gw, np_ = rows * ng * gp, nl = (int64_t)b * np * s;
  float *qkv = tc_randf(be, nq, -2, 2), *dctx = tc_randf(be, rows * np * hv, -1, 1);
  float *qp = tc_allocf(be, np_), *dcp = tc_allocf(be, rows * np * W);
  float *c0 = tc_allocf(be, rows * np * hv), *c1 = tc_allocf(be, rows * np * W);
  float *l0 = tc_allocf(be, nl), *l1 = tc_allocf(be, nl);
  float *d0 = tc_allocf(be, nq), *d1 = tc_allocf(be, np_);
  memset(qp, 0, (size_t)np_ * 4);
  memset(dcp, 0, (size_t)(rows * np * W) * 4);
  for (int64_t r = 0; r < rows; r++) {
    for (int g = 0; g < ng; g++) {
      const float *src = qkv + (r * ng + g) * gw;
      float *dst = qp + (r * ng + g) * gp;
      for (int j = 0; j <= npg; j++) memcpy(dst + (int64_t)j * W, src + (int64_t)j * hn, (size_t)hn * 4);
      memcpy(dst + (int64_t)(npg + 1) * W, src + (int64_t)(npg + 1) * hn, (size_t)hv * 4);
    }
    for (int n = 0; n < np; n++)
      memcpy(dcp + (r * np + n) * W, dctx + (r * np + n) * hv, (size_t)hv * 4);
  }
  const float scale = 1.0f / sqrtf((float)hn);
  mt_attn_desc dm = tv_desc(s, b, np, ng, hn, hv, scale, p);
  mt_attn_desc de = tv_desc(s, b, np, ng, W, 0, scale, p);
  be->ops->flash_attn_fwd(be, &dm, c0, l0, qkv, NULL);
  be->ops->flash_attn_bwd(be, &dm, d0, NULL, dctx, c0, l0, qkv, NULL);
  be->ops->flash_attn_fwd(be, &de, c1, l1, qp, NULL);
  be->ops->flash_attn_bwd(be, &de, d1, NULL, dcp, c1, l1, qp, NULL);
  tv_close(c0, hv, c1, W, rows * np, hv, 1e-6, "ctx (hv vs padded)");
  tv_close(l0, 1, l1, 1, nl, 1, 1e-6, "lse (hv vs padded)");
  for (int g = 0; g < ng; g++)
    for (int j = 0; j <= npg + 1; j++) {
      const int w = j <= npg ? hn : hv;
      tv_close(d0 + g * gw + (int64_t)j * hn, ng * gw, d1 + g * gp + (int64_t)j * W, ng * gp, rows,
               w, 1e-6, j < npg ? "dQ (hv vs padded)" : j == npg ? "dK (hv vs padded)"
                                                                : "dV (hv vs padded)");
    }
  print_message("fused hv=%d hn=%d s=%d b=%d np=%d ng=%d p=%.2f: ctx, lse, dQ, dK, dV within 1e-6 "
                "of the zero-padded equal-width op\n", hv, hn, s, b, np, ng, (double)p);

  /* kv form over the same keys: q block = qkv, kv block = the k/v heads */
  const int64_t nkv = rows * ng * (hn + hv);
  float *kv = tc_allocf(be, nkv), *dkv = tc_allocf(be, nkv), *dq = tc_allocf(be, nq);
  float *c2 = tc_allocf(be, rows * np * hv), *l2 = tc_allocf(be, nl);
  for (int64_t r = 0; r < rows; r++)
    for (int g = 0; g < ng; g++)
      memcpy(kv + (r * ng + g) * (hn + hv), qkv + (r * ng + g) * gw + (int64_t)npg * hn,
             (size_t)(hn + hv) * 4);
  memset(dkv, 0, (size_t)nkv * 4);
  memset(dq, 0, (size_t)nq * 4);
  be->ops->flash_attn_fwd(be, &dm, c2, l2, qkv, kv);
  be->ops->flash_attn_bwd(be, &dm, dq, dkv, dctx, c2, l2, qkv, kv);
  tv_close(c2, hv, c0, hv, rows * np, hv, 0, "ctx (kv form vs self)");
  tv_close(l2, 1, l0, 1, nl, 1, 0, "lse (kv form vs self)");
  for (int g = 0; g < ng; g++) {
    for (int j = 0; j < npg; j++)
      tv_close(dq + g * gw + (int64_t)j * hn, ng * gw, d0 + g * gw + (int64_t)j * hn, ng * gw, rows,
               hn, 1e-6, "dQ (kv form vs self)");
    tv_close(dkv + g * (hn + hv), ng * (hn + hv), d0 + g * gw + (int64_t)npg * hn, ng * gw, rows,
             hn + hv, 1e-6, "dK, dV (kv form vs self)");
  }
  float *bufs[] = {qkv, dctx, qp, dcp, c0, c1, l0, l1, d0, d1, kv, dkv, dq, c2, l2};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

static void test_vdim_equals_padded(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  check_padded(be, 11, 2, 4, 4, 12, 8, 0.0f);  /* one tile, hv < hn */
  check_padded(be, 11, 2, 4, 2, 6, 10, 0.2f);  /* GQA, dropout, hv > hn */
  check_padded(be, 100, 2, 4, 4, 24, 16, 0.1f); /* several tiles (MLA-like widths) */
  check_padded(be, 70, 1, 6, 3, 5, 9, 0.0f);
  mt_backend_destroy(be);
}

/* hv = hn given explicitly against hv = 0: bitwise. */
static void test_vdim_equal_bitwise(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const int s = 90, b = 2, np = 4, hn = 16;
  const int64_t nq = (int64_t)s * b * np * 3 * hn, nc = (int64_t)s * b * np * hn, nl = (int64_t)b * np * s;
  float *qkv = tc_randf(be, nq, -2, 2), *dctx = tc_randf(be, nc, -1, 1);
  float *c[2], *l[2], *dd[2];
  for (int k = 0; k < 2; k++) {
    c[k] = tc_allocf(be, nc), l[k] = tc_allocf(be, nl), dd[k] = tc_allocf(be, nq);
    mt_attn_desc d = tv_desc(s, b, np, np, hn, k ? hn : 0, 0.25f, 0.1f);
    be->ops->flash_attn_fwd(be, &d, c[k], l[k], qkv, NULL);
    be->ops->flash_attn_bwd(be, &d, dd[k], NULL, dctx, c[k], l[k], qkv, NULL);
  }
  assert_memory_equal(c[0], c[1], (size_t)nc * 4);
  assert_memory_equal(l[0], l[1], (size_t)nl * 4);
  assert_memory_equal(dd[0], dd[1], (size_t)nq * 4);
  float *bufs[] = {qkv, dctx, c[0], c[1], l[0], l[1], dd[0], dd[1]};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vdim_equals_padded),
      cmocka_unit_test(test_vdim_equal_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
