/* tests/tools/flash_emu_vdim.h — the FFMA kernels with a value head width hv
 * != hn (mt_attn_desc.hv, multi-latent attention), included by
 * flash_emu_cases.h: against the equal-width op of width W = max(hn, hv) on
 * a zero-padded copy (q/k heads padded with zeros leave every score
 * unchanged, v heads and dctx padded with zeros leave P V's first hv
 * channels and D unchanged), run on the FFMA kernels too
 * (MEGATRAIN_CUDA_FLASH_SIMT=1's switch), which the cases of
 * flash_emu_cases.h check against the double reference. Extra terms are
 * fmaf(0, x, acc) = acc, so ctx, lse, dQ, dK, dV and the lse merge must be
 * BITWISE equal. The kv form ([sk, b, ng, hn + hv], the context-parallel
 * ring's) must equal the self form bitwise, its dK/dV accumulating into
 * zeros. */
#ifndef MT_FLASH_EMU_VDIM_H
#define MT_FLASH_EMU_VDIM_H

/* n elements of a (stride sa) against b (stride sb), w per row: bitwise. */
static void vdim_same(const char *what, const std::vector<float> &a, size_t sa,
                      const std::vector<float> &b, size_t sb, size_t rows, int w) {
  size_t bad = 0, at = 0;
  for (size_t r = 0; r < rows; r++)
    for (int e = 0; e < w; e++) {
      const float x = a[r * sa + e], y = b[r * sb + e];
      if (memcmp(&x, &y, 4) != 0 && !bad++) at = r * sa + e;
    }
  g_checks++;
  g_fails += bad != 0;
  printf("  %-4s %-34s %zu of %zu differ bitwise", bad ? "FAIL" : "ok", what, bad, rows * (size_t)w);
  if (bad) printf(" [first at %zu]", at);
  printf("\n");
}

/* One self-form forward + backward of d (cuda_flash_attn_fwd/_bwd) on
 * device copies of qkv and dctx: ctx [nctx] (prefilled 7), lse [nl] and
 * dqkv (prefilled NaN, so every element must be written). The caller frees
 * the five buffers. */
struct vdim_self {
  void *q, *dc, *ctx, *dqkv;
  float *lse;
};
static vdim_self vdim_run(mt_backend *be, const mt_attn_desc *d, const std::vector<float> &qkv,
                          const std::vector<float> &dctx, size_t nctx, size_t nl) {
  const mt_dtype T = be->dtype;
  vdim_self r;
  r.q = dput(qkv, T), r.dc = dput(dctx, T);
  r.ctx = dput(std::vector<float>(nctx, 7.0f), T);
  r.dqkv = dput(std::vector<float>(qkv.size(), NAN), T);
  r.lse = (float *)malloc(nl * 4);
  cuda_flash_attn_fwd(be, d, r.ctx, r.lse, r.q, NULL);
  cuda_flash_attn_bwd(be, d, r.dqkv, NULL, r.dc, r.ctx, r.lse, r.q, NULL);
  return r;
}

static void vdim_case(mt_backend *be, int S, int b, int np, int ng, int hn, int hv, float p) {
  const mt_dtype T = be->dtype;
  const int npg = np / ng, W = hn > hv ? hn : hv;
  const size_t rows = (size_t)S * b, gw = (size_t)(npg + 1) * hn + hv, gp = (size_t)(npg + 2) * W;
  const size_t nq = rows * ng * gw, npd = rows * ng * gp, nl = (size_t)b * np * S;
  std::vector<float> qkv(nq), dctx(rows * np * hv), qp(npd, 0.0f), dcp(rows * np * W, 0.0f);
  for (float &x : qkv) x = round_t(1.5f * urand(), T);
  for (float &x : dctx) x = round_t(urand(), T);
  for (size_t r = 0; r < rows; r++) {
    for (int g = 0; g < ng; g++)
      for (int j = 0; j <= npg + 1; j++)
        for (int e = 0; e < (j <= npg ? hn : hv); e++)
          qp[(r * ng + g) * gp + (size_t)j * W + e] = qkv[(r * ng + g) * gw + (size_t)j * hn + e];
    for (int n = 0; n < np; n++)
      for (int e = 0; e < hv; e++) dcp[(r * np + n) * W + e] = dctx[(r * np + n) * hv + e];
  }
  int64_t ids[8];
  for (int i = 0; i < 8; i++) ids[i] = 2 + 3 * i;
  mt_attn_desc dm;
  memset(&dm, 0, sizeof dm);
  dm.s = S, dm.b = b, dm.np = np, dm.ng = ng, dm.hn = hn, dm.hv = hv;
  dm.head_offset = 1, dm.n_heads_total = np + 1;
  dm.scale = 1.0f / sqrtf((float)hn), dm.dropout_p = p, dm.sample_ids = ids;
  dm.key = mt_rng_key(5, "attention_dropout", 1, 0);
  mt_attn_desc de = dm;
  de.hn = W, de.hv = 0;
  cuda_impl *im = cuda_impl_of(be);
  const int simt0 = im->flash_simt;
  /* hv form */
  const vdim_self r0 = vdim_run(be, &dm, qkv, dctx, rows * np * hv, nl);
  void *q = r0.q, *dc = r0.dc, *c0 = r0.ctx, *d0 = r0.dqkv;
  float *l0 = r0.lse;
  /* padded equal-width form on the FFMA kernels */
  im->flash_simt = 1;
  const vdim_self r1 = vdim_run(be, &de, qp, dcp, rows * np * W, nl);
  void *qpd = r1.q, *dcpd = r1.dc, *c1 = r1.ctx, *d1 = r1.dqkv;
  float *l1 = r1.lse;
  im->flash_simt = simt0;
  /* kv form over the same keys */
  std::vector<float> kvh(rows * ng * (hn + hv));
  for (size_t r = 0; r < rows; r++)
    for (int g = 0; g < ng; g++)
      for (int e = 0; e < hn + hv; e++)
        kvh[(r * ng + g) * (hn + hv) + e] = qkv[(r * ng + g) * gw + (size_t)npg * hn + e];
  void *kv = dput(kvh, T), *dkv = dput(std::vector<float>(kvh.size(), 0.0f), T);
  void *dq2 = dput(std::vector<float>(nq, 0.0f), T);
  void *c2 = dput(std::vector<float>(rows * np * hv, 7.0f), T);
  float *l2 = (float *)malloc(nl * 4);
  cuda_flash_attn_fwd(be, &dm, c2, l2, q, kv);
  cuda_flash_attn_bwd(be, &dm, dq2, dkv, dc, c2, l2, q, kv);

  printf(" hv %d, hn %d (s %d b %d np %d ng %d p %.1f) vs zero-padded width %d\n", hv, hn, S, b,
         np, ng, p, W);
  const std::vector<float> h0 = dget(c0, rows * np * hv, T), h1 = dget(c1, rows * np * W, T);
  vdim_same("ctx", h0, hv, h1, W, rows * np, hv);
  vdim_same("lse", std::vector<float>(l0, l0 + nl), 1, std::vector<float>(l1, l1 + nl), 1, nl, 1);
  const std::vector<float> g0 = dget(d0, nq, T), g1 = dget(d1, npd, T);
  for (int j = 0; j <= npg + 1; j++) {
    const std::vector<float> a(g0.begin() + (size_t)j * hn, g0.end());
    const std::vector<float> c(g1.begin() + (size_t)j * W, g1.end());
    vdim_same(j < npg ? "dQ" : j == npg ? "dK" : "dV", a, gw, c, gp, rows * ng,
              j <= npg ? hn : hv);
  }
  vdim_same("ctx (kv form vs self)", dget(c2, rows * np * hv, T), hv, h0, hv, rows * np, hv);
  vdim_same("lse (kv form vs self)", std::vector<float>(l2, l2 + nl), 1,
            std::vector<float>(l0, l0 + nl), 1, nl, 1);
  const std::vector<float> q2 = dget(dq2, nq, T), k2 = dget(dkv, kvh.size(), T);
  vdim_same("dQ (kv form vs self)", q2, gw, g0, gw, rows * ng, npg * hn);
  vdim_same("dK, dV (kv form vs self)", k2, hn + hv,
            std::vector<float>(g0.begin() + (size_t)npg * hn, g0.end()), gw, rows * ng, hn + hv);
  /* lse merge of two partial results: hv rows against the padded rows */
  cuda_attn_merge(be, &dm, c0, l0, c2, l2);
  void *c1b = dput(h1, T);
  float *l1b = (float *)malloc(nl * 4);
  memcpy(l1b, l1, nl * 4);
  cuda_attn_merge(be, &de, c1, l1, c1b, l1b);
  vdim_same("ctx after attn_merge", dget(c0, rows * np * hv, T), hv, dget(c1, rows * np * W, T), W,
            rows * np, hv);
  vdim_same("lse after attn_merge", std::vector<float>(l0, l0 + nl), 1,
            std::vector<float>(l1, l1 + nl), 1, nl, 1);
  void *bufs[] = {q, dc, c0, d0, l0, qpd, dcpd, c1, d1, l1, kv, dkv, dq2, c2, l2, c1b, l1b};
  for (void *x : bufs) free(x);
}

static void vdim_cases(mt_backend *be) {
  vdim_case(be, 11, 2, 4, 4, 12, 8, 0.0f);   /* one tile, hv < hn */
  vdim_case(be, 11, 2, 4, 2, 6, 10, 0.2f);   /* GQA, dropout, hv > hn */
  vdim_case(be, 70, 1, 2, 1, 24, 16, 0.1f);  /* several tiles, MQA, MLA-like widths */
  vdim_case(be, 37, 1, 2, 2, 48, 32, 0.0f);  /* hn 48 / hv 32 (DeepSeek's 3:2) */
}

#endif
