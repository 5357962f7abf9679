/* tests/tools/cuda_parity_flash.h — the fused-attention group of
 * cuda_parity.c (same translation unit; uses its P, tp, mk, cmp helpers):
 * flash_attn_fwd, attn_merge and flash_attn_bwd of the CUDA backend against
 * the CPU backend's fused op on identical calls, at shapes past one 64-row
 * tile and with head dims that take each CUDA kernel family (bf16: hn <= 128
 * tensor cores, padded when not a power of two; hn 160 the FFMA kernels):
 *   plain causal (kv NULL, GQA, dropout): ctx, lse, dqkv (overwrite);
 *   one context-parallel rank (cp 2, chunks {r, 3-r}) with another rank's
 *     K/V block: own block, kv block, attn_merge, then backward with the
 *     final ctx/lse: dQ accumulated into dqkv, dK/dV into dkv;
 *   and, on the GPU alone, fused ctx vs the unfused ctx (cuda_attn_fwd: no
 *     longer in the op table, the GPU reference, called directly).
 * Backward runs on both sides from the CPU's ctx and lse (isolates it). */
#ifndef MT_CUDA_PARITY_FLASH_H
#define MT_CUDA_PARITY_FLASH_H

/* Copy the CPU side of t into the GPU side (shared inputs). */
static void to_gpu(P *p, tp *t) { gpu_put(p, t->g, (const float *)t->c, t->n, t->gt); }

/* max |a - b| / max |a| of two GPU tensors of one dtype. */
static void cmp_gpu2(P *p, const char *name, const void *a, const void *b, int64_t n, double tol) {
  float *x = gpu_get(p, a, n, p->T), *y = gpu_get(p, b, n, p->T);
  double mx = 0, err = 0;
  for (int64_t i = 0; i < n; i++) {
    mx = fmax(mx, fabs(x[i]));
    double e = fabs((double)x[i] - y[i]);
    if (!(e <= err)) err = isnan(e) ? INFINITY : e;
  }
  double rel = err / (mx > 0 ? mx : 1.0);
  int ok = rel <= tol;
  note_err(p, rel);
  p->checks++;
  if (!ok) p->fails++;
  printf("  %-4s %-34s max rel err %.3e (tol %.1e)\n", ok ? "ok" : "FAIL", name, rel, tol);
  free(x), free(y);
}

static void t_flash(P *p, int s, int b, int np, int ng, int hn, float drop) {
  if (!p->c->ops->flash_attn_fwd || !p->g->ops->flash_attn_fwd) {
    printf("  skip flash s%d hn%d: a backend has no fused attention\n", s, hn);
    return;
  }
  const mt_dtype T = p->T;
  const double tol = T == MT_BF16 ? 2 * p->l2 : p->l2;
  const int npg = np / ng;
  int64_t ids[4] = {5, 9, 2, 7};
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .ng = ng, .head_offset = np,
                    .n_heads_total = 2 * np, .scale = 1.0f / sqrtf((float)hn), .dropout_p = drop,
                    .key = mt_rng_key(4321, "attention_dropout", 1, 0), .sample_ids = ids};
  const int64_t nq = (int64_t)s * b * ng * (npg + 2) * hn, nc = (int64_t)s * b * np * hn;
  const int64_t nl = (int64_t)b * np * s, nkv = (int64_t)s * b * ng * 2 * hn;
  char nm[96];
  tp qkv = mk(p, nq, T, 1.5f), ctx = mk(p, nc, T, 1.0f), lse = mk(p, nl, MT_F32, 1.0f);
  tp dctx = mk(p, nc, T, 1.0f), dqkv = mk(p, nq, T, 1.0f);
  /* plain causal */
  p->c->ops->flash_attn_fwd(p->c, &d, ctx.c, lse.c, qkv.c, NULL);
  p->g->ops->flash_attn_fwd(p->g, &d, ctx.g, lse.g, qkv.g, NULL);
  snprintf(nm, sizeof nm, "flash fwd ctx s%d np%d ng%d hn%d p%.1f", s, np, ng, hn, drop);
  cmp(p, nm, &ctx, tol, 0);
  cmp(p, "flash fwd lse", &lse, tol, 0);
  if (!strcmp(p->g->name, "cuda")) {
    void *pr = p->g->ops->alloc(p->g, (size_t)(nl * s) * mt_dtype_size(T), MT_MEM_WORKSPACE);
    void *c2 = p->g->ops->alloc(p->g, (size_t)nc * mt_dtype_size(T), MT_MEM_WORKSPACE);
#if MT_HAVE_CUDA
    cuda_attn_fwd(p->g, &d, c2, pr, qkv.g);
#endif
    cmp_gpu2(p, "flash fwd ctx vs unfused (GPU)", c2, ctx.g, nc, tol);
    p->g->ops->free(p->g, pr), p->g->ops->free(p->g, c2);
  }
  to_gpu(p, &ctx), to_gpu(p, &lse);
  p->c->ops->flash_attn_bwd(p->c, &d, dqkv.c, NULL, dctx.c, ctx.c, lse.c, qkv.c, NULL);
  p->g->ops->flash_attn_bwd(p->g, &d, dqkv.g, NULL, dctx.g, ctx.g, lse.g, qkv.g, NULL);
  cmp(p, "flash bwd dqkv (overwrite)", &dqkv, tol, 0);
  /* one CP rank of cp 2 with the other rank's K/V block */
  const int c = s / 2;
  for (int r = 0; c > 0 && r < 2; r++) {
    const int r2 = 1 - r;
    mt_attn_desc e = d;
    e.sq = e.sk = s, e.s_full = 2 * s;
    e.q_pos[0] = e.k_pos[0] = r * c, e.q_pos[1] = e.k_pos[1] = (3 - r) * c;
    e.q_split = e.k_split = c;
    mt_attn_desc f = e;
    f.k_pos[0] = r2 * c, f.k_pos[1] = (3 - r2) * c;
    tp kv = mk(p, nkv, T, 1.5f), cb = mk(p, nc, T, 1.0f), lb = mk(p, nl, MT_F32, 1.0f);
    tp dkv = mk(p, nkv, T, 1.0f);
    p->c->ops->flash_attn_fwd(p->c, &e, ctx.c, lse.c, qkv.c, NULL);
    p->g->ops->flash_attn_fwd(p->g, &e, ctx.g, lse.g, qkv.g, NULL);
    p->c->ops->flash_attn_fwd(p->c, &f, cb.c, lb.c, qkv.c, kv.c);
    p->g->ops->flash_attn_fwd(p->g, &f, cb.g, lb.g, qkv.g, kv.g);
    snprintf(nm, sizeof nm, "cp2 rank %d: kv-block ctx", r);
    cmp(p, nm, &cb, tol, 0);
    p->c->ops->attn_merge(p->c, &e, ctx.c, lse.c, cb.c, lb.c);
    p->g->ops->attn_merge(p->g, &e, ctx.g, lse.g, cb.g, lb.g);
    snprintf(nm, sizeof nm, "cp2 rank %d: merged ctx", r);
    cmp(p, nm, &ctx, tol, 0);
    snprintf(nm, sizeof nm, "cp2 rank %d: merged lse", r);
    cmp(p, nm, &lse, tol, 0);
    to_gpu(p, &ctx), to_gpu(p, &lse);
    p->c->ops->flash_attn_bwd(p->c, &e, dqkv.c, NULL, dctx.c, ctx.c, lse.c, qkv.c, NULL);
    p->g->ops->flash_attn_bwd(p->g, &e, dqkv.g, NULL, dctx.g, ctx.g, lse.g, qkv.g, NULL);
    p->c->ops->flash_attn_bwd(p->c, &f, dqkv.c, dkv.c, dctx.c, ctx.c, lse.c, qkv.c, kv.c);
    p->g->ops->flash_attn_bwd(p->g, &f, dqkv.g, dkv.g, dctx.g, ctx.g, lse.g, qkv.g, kv.g);
    snprintf(nm, sizeof nm, "cp2 rank %d: dqkv (own + ring dQ)", r);
    cmp(p, nm, &dqkv, tol, 0);
    snprintf(nm, sizeof nm, "cp2 rank %d: dkv (accumulate)", r);
    cmp(p, nm, &dkv, tol, 0);
    fr(p, &kv), fr(p, &cb), fr(p, &lb), fr(p, &dkv);
  }
  fr(p, &qkv), fr(p, &ctx), fr(p, &lse), fr(p, &dctx), fr(p, &dqkv);
}

/* The shapes: multi-tile GQA with dropout at hn 64; hn 128 MHA; hn 80
 * (padded to 128 on tensor cores); hn 160 (FFMA kernels in bf16 too). */
static void t_flash_all(P *p) {
  t_flash(p, 200, 2, 4, 2, 64, 0.1f);
  t_flash(p, 130, 1, 4, 4, 128, 0.0f);
  t_flash(p, 96, 1, 2, 1, 80, 0.2f);
  t_flash(p, 40, 1, 1, 1, 160, 0.1f);
}

#endif
