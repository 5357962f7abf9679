/* tests/unit/cpu/test_attn_fused_ref.c — the backend's fused attention
 * (flash_attn_fwd / flash_attn_bwd, FlashAttention-2) against the unfused
 * reference op (tests/tools/attn_unfused.h, the CPU attention before issue
 * 15): issue 15 asks for equality "within fp32 rounding (<= 1e-6 relative on
 * loss and gradients in an op test)".
 *
 * Per case, with a fixed random W [s, b, np, hn]: loss = sum(ctx o W)
 * (double), its gradient dqkv = d loss / d qkv (dctx = W); asserted:
 *   |loss_fused - loss_ref| <= 1e-6 |loss_ref| (plus 1e-6 sum |ctx o W| for
 *     cancellation), ||dqkv_fused - dqkv_ref|| <= 1e-6 ||dqkv_ref|| (2-norms),
 *   ||ctx_fused - ctx_ref|| <= 1e-6 ||ctx_ref||, lse elementwise within
 *   1e-6 (|lse| + 1),
 * with and without dropout (the mask of element (bi, head, q, k) is the
 * same counter in both ops), s not a multiple of any tile (13, 33, 100,
 * 257), s = 1, b·np large (8 x 12 pairs), GQA and MQA, hn 64 at s = 256,
 * the default thread count and 1 thread. */
#include <omp.h>

#include "tests/unit/cpu_test_common.h"
#include "tests/tools/attn_unfused.h"

static const int64_t fr_ids[8] = {5, 2, 11, 0, 7, 3, 9, 1};

static double dot(const float *a, const float *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* ||a - b|| / ||b|| (2-norms, double) */
static double rel(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void check(mt_backend *be, int s, int b, int np, int ng, int hn, float p) {
  const int npg = np / ng;
  const int64_t nq = (int64_t)s * b * ng * (npg + 2) * hn, nc = (int64_t)s * b * np * hn;
  const int64_t nl = (int64_t)b * np * s, npb = (int64_t)b * np * s * s;
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .ng = ng, .head_offset = 2,
                    .n_heads_total = np + 4, .scale = 1.0f / sqrtf((float)hn), .dropout_p = p,
                    .key = mt_rng_key(11, "attention_dropout", 3, 0), .sample_ids = fr_ids};
  float *qkv = tc_randf(be, nq, -2, 2), *w = tc_randf(be, nc, -1, 1);
  float *c0 = tc_allocf(be, nc), *c1 = tc_allocf(be, nc), *l0 = tc_allocf(be, nl);
  float *l1 = tc_allocf(be, nl), *pr = tc_allocf(be, npb);
  float *d0 = tc_allocf(be, nq), *d1 = tc_allocf(be, nq);
  for (int64_t i = 0; i < nq; i++) d1[i] = NAN; /* the fused backward overwrites dqkv */
  mt_ref_attn_fwd(be, &d, c0, pr, l0, qkv);
  mt_ref_attn_bwd(be, &d, d0, w, qkv, pr);
  be->ops->flash_attn_fwd(be, &d, c1, l1, qkv, NULL);
  be->ops->flash_attn_bwd(be, &d, d1, NULL, w, c1, l1, qkv, NULL);
  const double loss0 = dot(c0, w, nc), loss1 = dot(c1, w, nc);
  double mag = 0;
  for (int64_t i = 0; i < nc; i++) mag += fabs((double)c0[i] * w[i]);
  const double el = fabs(loss1 - loss0), ec = rel(c1, c0, nc), eg = rel(d1, d0, nq);
  double e_lse = 0;
  for (int64_t i = 0; i < nl; i++)
    e_lse = fmax(e_lse, fabs((double)l1[i] - l0[i]) / (fabs((double)l0[i]) + 1));
  print_message("s=%3d b=%d np=%2d ng=%2d hn=%2d p=%.2f: loss rel %.2e, ctx %.2e, lse %.2e, "
                "dqkv %.2e\n", s, b, np, ng, hn, (double)p, el / fmax(fabs(loss0), 1e-30), ec,
                e_lse, eg);
  if (!(el <= 1e-6 * (fabs(loss0) + mag)))
    fail_msg("loss: fused %.12g vs unfused %.12g", loss1, loss0);
  if (!(ec <= 1e-6)) fail_msg("ctx: relative difference %.3g", ec);
  if (!(e_lse <= 1e-6)) fail_msg("lse: relative difference %.3g", e_lse);
  if (!(eg <= 1e-6)) fail_msg("dqkv: relative difference %.3g", eg);
  float *bufs[] = {qkv, w, c0, c1, l0, l1, pr, d0, d1};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

static void test_fused_equals_unfused(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  const int nt = omp_get_max_threads();
  for (int pass = 0; pass < 2; pass++) {
    if (pass) omp_set_num_threads(1);
    for (int drop = 0; drop <= 1; drop++) {
      const float p = drop ? 0.1f : 0.0f;
      check(be, 13, 2, 3, 3, 6, p);    /* s below any tile */
      check(be, 1, 3, 4, 4, 8, p);     /* s = 1 */
      check(be, 33, 2, 4, 2, 16, p);   /* GQA */
      check(be, 100, 1, 6, 1, 32, p);  /* MQA, s not a tile multiple */
      check(be, 16, 8, 12, 12, 8, p);  /* b·np = 96 pairs */
      check(be, 257, 1, 2, 2, 64, p);  /* one row past a power of two */
      if (!pass) check(be, 256, 2, 4, 4, 64, p); /* the 124M head size */
    }
  }
  omp_set_num_threads(nt);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fused_equals_unfused)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
