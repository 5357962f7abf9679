/* tests/tools/cuda_parity_real.h — the "realistic" shapes of cuda_parity.c
 * (same translation unit; uses its P, tp, mk, cmp, case_begin/case_end and
 * the flash group's t_flash): the shapes of GPT models from 124M to 1.3B
 * parameters, where the kernels take paths the tiny shapes never reach —
 * tensor-core GEMM tiles, many row chunks in the column reductions, rows
 * longer than a warp in the softmax kernels, several 256-token chunks with
 * repeats in the embedding backward, 50304-column cross-entropy rows, and
 * element counts that fill every block of the grid-stride kernels, MoE
 * combine at a 1.3B width, SwiGLU and RoPE at Llama-style sizes.
 * Tolerances are the tiny shapes' (docs/cuda.md); the CPU reference runs on
 * every core. Each case is announced before it runs (case_begin). */
#ifndef MT_CUDA_PARITY_REAL_H
#define MT_CUDA_PARITY_REAL_H

/* Aligned GEMMs (multiples of 128): forward NN with bias, the data-gradient
 * NT and the weight-gradient TN into fp32 with beta 1 (accumulate). */
static void r_gemm(P *p, int variant, int m, int n, int k) {
  const mt_dtype T = p->T;
  const int ta = variant == 2, tb = variant == 1;
  const mt_dtype ct = variant == 2 ? MT_F32 : T;
  tp A = mk(p, (int64_t)m * k, T, 1.0f), B = mk(p, (int64_t)k * n, T, 1.0f);
  tp C = mk(p, (int64_t)m * n, ct, 1.0f), bias = mk(p, n, T, 1.0f);
  mt_gemm_desc d = {0};
  d.trans_a = ta, d.trans_b = tb;
  d.m = m, d.n = n, d.k = k;
  d.alpha = 1.0f;
  d.beta = variant == 2 ? 1.0f : 0.0f;
  d.lda = ta ? m : k, d.ldb = tb ? k : n, d.ldc = n;
  d.stride_a = (int64_t)m * k, d.stride_b = (int64_t)k * n, d.stride_c = (int64_t)m * n;
  d.a_type = T, d.b_type = T, d.c_type = ct;
  d.batch = 1;
  mt_gemm_desc dc = d, dg = d;
  dc.a = A.c, dc.b = B.c, dc.c = C.c, dc.bias = variant == 0 ? bias.c : NULL;
  dc.a_type = dc.b_type = dc.c_type = MT_F32;
  dg.a = A.g, dg.b = B.g, dg.c = C.g, dg.bias = variant == 0 ? bias.g : NULL;
  p->c->ops->gemm(p->c, &dc);
  p->g->ops->gemm(p->g, &dg);
  cmp(p, "C", &C, ct == MT_F32 ? 1e-5 : p->l1, 0);
  fr(p, &A), fr(p, &B), fr(p, &C), fr(p, &bias);
}

/* LayerNorm (or RMSNorm) forward and backward at [rows, h], plus bias_grad
 * over the same rows: many MT_COL_CHUNK row chunks, h/64 column blocks. */
static void r_norm(P *p, int64_t rows, int64_t h, int rms) {
  const mt_dtype T = p->T;
  tp x = mk(p, rows * h, T, 2.0f), w = mk(p, h, T, 1.0f), b = mk(p, h, T, 0.5f);
  tp out = mk(p, rows * h, T, 1.0f), mean = mk(p, rows, MT_F32, 1.0f), rstd = mk(p, rows, MT_F32, 1.0f);
  tp dout = mk(p, rows * h, T, 1.0f), din = mk(p, rows * h, T, 1.0f);
  tp dw = mk(p, h, MT_F32, 1.0f), db = mk(p, h, MT_F32, 1.0f);
  if (rms) {
    p->c->ops->rmsnorm_fwd(p->c, out.c, rstd.c, x.c, w.c, rows, h, 1e-5f);
    p->g->ops->rmsnorm_fwd(p->g, out.g, rstd.g, x.g, w.g, rows, h, 1e-5f);
    cmp(p, "rmsnorm_fwd out", &out, p->l1, 0);
    cmp(p, "rmsnorm_fwd rstd", &rstd, 1e-5, 0);
    p->g->ops->memcpy_h2d(p->g, rstd.g, rstd.c, (size_t)rows * 4);
    p->c->ops->rmsnorm_bwd(p->c, din.c, dw.c, dout.c, x.c, w.c, rstd.c, rows, h);
    p->g->ops->rmsnorm_bwd(p->g, din.g, dw.g, dout.g, x.g, w.g, rstd.g, rows, h);
    cmp(p, "rmsnorm_bwd din (accumulate)", &din, p->l2, 0);
    cmp(p, "rmsnorm_bwd dw (accumulate)", &dw, 1e-5, 0);
  } else {
    p->c->ops->layernorm_fwd(p->c, out.c, mean.c, rstd.c, x.c, w.c, b.c, rows, h, 1e-5f);
    p->g->ops->layernorm_fwd(p->g, out.g, mean.g, rstd.g, x.g, w.g, b.g, rows, h, 1e-5f);
    cmp(p, "layernorm_fwd out", &out, p->l1, 0);
    cmp(p, "layernorm_fwd mean (vs max|mean|)", &mean, 1e-4, 0);
    cmp(p, "layernorm_fwd rstd", &rstd, 1e-5, 0);
    p->g->ops->memcpy_h2d(p->g, mean.g, mean.c, (size_t)rows * 4);
    p->g->ops->memcpy_h2d(p->g, rstd.g, rstd.c, (size_t)rows * 4);
    p->c->ops->layernorm_bwd(p->c, din.c, dw.c, db.c, dout.c, x.c, w.c, mean.c, rstd.c, rows, h);
    p->g->ops->layernorm_bwd(p->g, din.g, dw.g, db.g, dout.g, x.g, w.g, mean.g, rstd.g, rows, h);
    cmp(p, "layernorm_bwd din (accumulate)", &din, p->l2, 0);
    cmp(p, "layernorm_bwd dw (accumulate)", &dw, 1e-5, 0);
    cmp(p, "layernorm_bwd db (accumulate)", &db, 1e-5, 0);
    p->c->ops->bias_grad(p->c, db.c, dout.c, rows, h);
    p->g->ops->bias_grad(p->g, db.g, dout.g, rows, h);
    cmp(p, "bias_grad (accumulate)", &db, 1e-5, 0);
  }
  fr(p, &x), fr(p, &w), fr(p, &b), fr(p, &out), fr(p, &mean), fr(p, &rstd);
  fr(p, &dout), fr(p, &din), fr(p, &dw), fr(p, &db);
}

/* Embedding forward/backward of one vocabulary shard [v0, v1) of a 50304
 * vocabulary: n tokens, 70 % from 300 frequent ids (many repeats spread
 * over every 256-token chunk), the rest uniform (some outside the shard). */
static void r_embedding(P *p, int64_t n, int64_t h, int64_t v0, int64_t v1) {
  const mt_dtype T = p->T;
  int32_t *tok = mt_xmalloc((size_t)n * sizeof *tok);
  for (int64_t i = 0; i < n; i++) {
    const double u = 0.5 * (rnd(p) + 1.0), v = 0.5 * (rnd(p) + 1.0);
    tok[i] = u < 0.7 ? (int32_t)(v0 + 17 + (int64_t)(v * 300) * 37 % (v1 - v0 - 17))
                     : (int32_t)(v * 50303.0);
  }
  ip tk = mki(p, tok, n);
  free(tok);
  tp w = mk(p, (v1 - v0) * h, T, 1.0f), out = mk(p, n * h, T, 1.0f);
  p->c->ops->embedding_fwd(p->c, out.c, tk.c, n, w.c, v0, v1, h);
  p->g->ops->embedding_fwd(p->g, out.g, tk.g, n, w.g, v0, v1, h);
  cmp(p, "embedding_fwd", &out, 0.0, 0);
  fr(p, &w);
  tp dout = mk(p, n * h, T, 1.0f), dw = mk(p, (v1 - v0) * h, MT_F32, 1.0f);
  p->c->ops->embedding_bwd(p->c, dw.c, tk.c, n, dout.c, v0, v1, h);
  p->g->ops->embedding_bwd(p->g, dw.g, tk.g, n, dout.g, v0, v1, h);
  cmp(p, "embedding_bwd (repeats, accumulate)", &dw, 1e-6, 0);
  fr(p, &out), fr(p, &dout), fr(p, &dw), fri(p, &tk);
}

/* Cross-entropy over rows x vl columns (valid of them real, the rest the
 * vocabulary padding), targets anywhere in [0, valid). */
static void r_xent(P *p, int64_t rows, int64_t vl, int64_t valid) {
  const mt_dtype T = p->T;
  int32_t *tg = mt_xmalloc((size_t)rows * sizeof *tg);
  for (int64_t i = 0; i < rows; i++) tg[i] = (int32_t)((0.5 * (rnd(p) + 1.0)) * (double)(valid - 1));
  ip tgt = mki(p, tg, rows);
  free(tg);
  tp lg = mk(p, rows * vl, T, 8.0f), mx = mk(p, rows, MT_F32, 1.0f), se = mk(p, rows, MT_F32, 1.0f);
  tp tl = mk(p, rows, MT_F32, 1.0f), loss = mk(p, rows, MT_F32, 1.0f);
  p->c->ops->xent_max(p->c, mx.c, lg.c, rows, vl, valid);
  p->g->ops->xent_max(p->g, mx.g, lg.g, rows, vl, valid);
  cmp(p, "xent_max", &mx, 0.0, 0);
  p->c->ops->xent_stats(p->c, se.c, tl.c, lg.c, mx.c, tgt.c, rows, vl, valid, 0);
  p->g->ops->xent_stats(p->g, se.g, tl.g, lg.g, mx.g, tgt.g, rows, vl, valid, 0);
  cmp(p, "xent_stats sumexp", &se, 1e-5, 0);
  cmp(p, "xent_stats tgt_logit", &tl, 0.0, 0);
  p->c->ops->xent_loss(p->c, loss.c, mx.c, se.c, tl.c, rows, NULL);
  p->g->ops->xent_loss(p->g, loss.g, mx.g, se.g, tl.g, rows, NULL);
  cmp(p, "xent_loss", &loss, 1e-5, 0);
  p->c->ops->xent_bwd(p->c, lg.c, mx.c, se.c, tgt.c, rows, vl, valid, 0, 1.0f / (float)rows, NULL);
  p->g->ops->xent_bwd(p->g, lg.g, mx.g, se.g, tgt.g, rows, vl, valid, 0, 1.0f / (float)rows, NULL);
  cmp(p, "xent_bwd (in place, padding 0)", &lg, p->l1, 0);
  fr(p, &lg), fr(p, &mx), fr(p, &se), fr(p, &tl), fr(p, &loss), fri(p, &tgt);
}

/* On the GPU alone: the unfused attention (cuBLAS + the softmax kernels of
 * tests/tools/cuda_ref/attn_softmax.cu, rows of s > 32 with dropout:
 * k_softmax_fwd, k_dropout_probs, k_softmax_bwd and their Philox blocks)
 * against the fused op, forward ctx and backward dqkv. */
static void r_unfused(P *p, int s, int b, int np, int ng, int hn, float drop) {
#if MT_HAVE_CUDA
  if (strcmp(p->g->name, "cuda")) return; /* self-test on cpu */
  const mt_dtype T = p->T;
  const double tol = T == MT_BF16 ? 2 * p->l2 : p->l2;
  const int npg = np / ng;
  int64_t ids[2] = {3, 11};
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .ng = ng, .head_offset = 0,
                    .n_heads_total = np, .scale = 1.0f / sqrtf((float)hn), .dropout_p = drop,
                    .key = mt_rng_key(77, "attention_dropout", 2, 0), .sample_ids = ids};
  const int64_t nq = (int64_t)s * b * ng * (npg + 2) * hn, nc = (int64_t)s * b * np * hn;
  const int64_t nl = (int64_t)b * np * s;
  const size_t es = mt_dtype_size(T);
  mt_backend *g = p->g;
  tp qkv = mk(p, nq, T, 1.5f), dctx = mk(p, nc, T, 1.0f);
  void *ctx = g->ops->alloc(g, (size_t)nc * es, MT_MEM_WORKSPACE);
  void *ctx2 = g->ops->alloc(g, (size_t)nc * es, MT_MEM_WORKSPACE);
  void *probs = g->ops->alloc(g, (size_t)(nl * s) * es, MT_MEM_WORKSPACE);
  float *lse = g->ops->alloc(g, (size_t)nl * 4, MT_MEM_WORKSPACE);
  void *d1 = g->ops->alloc(g, (size_t)nq * es, MT_MEM_WORKSPACE);
  void *d2 = g->ops->alloc(g, (size_t)nq * es, MT_MEM_WORKSPACE);
  g->ops->flash_attn_fwd(g, &d, ctx, lse, qkv.g, NULL);
  cuda_attn_fwd(g, &d, ctx2, probs, qkv.g);
  cmp_gpu2(p, "unfused vs fused ctx (GPU)", ctx2, ctx, nc, tol);
  g->ops->flash_attn_bwd(g, &d, d1, NULL, dctx.g, ctx, lse, qkv.g, NULL);
  cuda_attn_bwd(g, &d, d2, dctx.g, qkv.g, probs);
  cmp_gpu2(p, "unfused vs fused dqkv (GPU)", d2, d1, nq, tol);
  g->ops->free(g, ctx), g->ops->free(g, ctx2), g->ops->free(g, probs), g->ops->free(g, lse);
  g->ops->free(g, d1), g->ops->free(g, d2);
  fr(p, &qkv), fr(p, &dctx);
#else
  (void)p, (void)s, (void)b, (void)np, (void)ng, (void)hn, (void)drop;
#endif
}

/* Hidden dropout at [s, b, h] of a tensor-parallel shard (h_offset within
 * h_full): output and mask (bitwise zero pattern). */
static void r_dropout(P *p, int64_t s, int64_t b, int64_t h, int64_t h_offset, int64_t h_full) {
  const mt_dtype T = p->T;
  int64_t ids[4] = {12, 5, 40, 7};
  mt_dropout_desc d = {.p = 0.1f, .key = mt_rng_key(5, "hidden_dropout", 3, 0), .s = (int)s,
                       .b = (int)b, .h = (int)h, .s_offset = 0, .s_full = (int)s,
                       .h_offset = (int)h_offset, .h_full = (int)h_full, .sample_ids = ids};
  const int64_t n = s * b * h;
  tp x = mk(p, n, T, 1.0f), res = mk(p, n, T, 1.0f), out = mk(p, n, T, 1.0f);
  p->c->ops->dropout_add_fwd(p->c, &d, out.c, x.c, res.c);
  p->g->ops->dropout_add_fwd(p->g, &d, out.g, x.g, res.g);
  cmp(p, "dropout_add_fwd", &out, p->l1, 0);
  p->c->ops->dropout_bwd(p->c, &d, x.c, res.c);
  p->g->ops->dropout_bwd(p->g, &d, x.g, res.g);
  cmp(p, "dropout_bwd (mask)", &x, p->l1, 1);
  fr(p, &x), fr(p, &res), fr(p, &out);
}

/* AdamW and the gradient-norm accumulator over n (>= 1e7) elements. */
static void r_optim(P *p, int64_t n) {
  const mt_adamw_hparams hp = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                               .weight_decay = 0.1f, .step = 1000, .grad_scale = 0.5f};
  tp g = adamw_case(p, n, &hp);
  /* sumsq_acc_f32 over three pieces, one device double each side */
  const int64_t off[3] = {0, n / 3, n / 3 + n / 5}, len[3] = {n / 3, n / 5, n - n / 3 - n / 5};
  double *ac = p->c->ops->alloc(p->c, sizeof(double), MT_MEM_WORKSPACE);
  double *ag = p->g->ops->alloc(p->g, sizeof(double), MT_MEM_WORKSPACE);
  double rc = 0, rg = 0, rg2 = 0, ins = 0;
  for (int rep = 0; rep < 2; rep++) {
    p->c->ops->memset0(p->c, ac, sizeof(double));
    p->g->ops->memset0(p->g, ag, sizeof(double));
    ins = 0;
    for (int k = 0; k < 3; k++) {
      p->c->ops->sumsq_acc_f32(p->c, ac, (const float *)g.c + off[k], len[k]);
      p->g->ops->sumsq_acc_f32(p->g, ag, (const float *)g.g + off[k], len[k]);
      ins += p->g->ops->sumsq_f32(p->g, (const float *)g.g + off[k], len[k]);
    }
    p->c->ops->memcpy_d2h(p->c, &rc, ac, sizeof rc);
    p->g->ops->memcpy_d2h(p->g, rep ? &rg2 : &rg, ag, sizeof rg);
  }
  cmp_scalar(p, "sumsq_acc_f32 (3 pieces)", rc, rg, 1e-10);
  const int ok = !memcmp(&rg, &rg2, sizeof rg) && !memcmp(&rg, &ins, sizeof rg);
  p->checks++;
  if (!ok) p->fails++;
  if (!ok) note_err(p, INFINITY);
  printf("  %-4s sumsq_acc_f32 bitwise repeatable and = in-order sumsq_f32 sum\n",
         ok ? "ok" : "FAIL");
  p->c->ops->free(p->c, ac), p->g->ops->free(p->g, ag);
  fr(p, &g);
}

/* MoE combine forward and backward (weights) at [rows, h], n_tok tokens
 * with top-k slots: a shuffled permutation of the rows, one slot in 16
 * dropped (-1), so each kept row is referenced once. */
static void r_moe(P *p, int64_t rows, int64_t h, int k) {
  const mt_dtype T = p->T;
  const int64_t nt = rows / k;
  int32_t *slot = malloc((size_t)(nt * k) * sizeof(int32_t));
  for (int64_t i = 0; i < nt * k; i++) slot[i] = (int32_t)i;
  for (int64_t i = nt * k - 1; i > 0; i--) { /* Fisher-Yates with the case's generator */
    const int64_t j = (int64_t)((rnd(p) * 0.5 + 0.5) * (double)(i + 1)) % (i + 1);
    const int32_t x = slot[i];
    slot[i] = slot[j], slot[j] = x;
  }
  for (int64_t i = 0; i < nt * k; i += 16) slot[i] = -1;
  ip sl = mki(p, slot, nt * k);
  tp src = mk(p, rows * h, T, 1.0f), w = mk(p, nt * k, MT_F32, 1.0f), y = mk(p, nt * h, T, 1.0f);
  p->c->ops->moe_combine_fwd(p->c, y.c, src.c, sl.c, w.c, nt, k, h);
  p->g->ops->moe_combine_fwd(p->g, y.g, src.g, sl.g, w.g, nt, k, h);
  cmp(p, "moe_combine_fwd (weights)", &y, p->l1, 0);
  tp dy = mk(p, nt * h, T, 1.0f), dsrc = mk(p, rows * h, T, 1.0f), dw = mk(p, nt * k, MT_F32, 1.0f);
  p->c->ops->moe_combine_bwd(p->c, dsrc.c, dw.c, dy.c, src.c, sl.c, w.c, nt, k, h);
  p->g->ops->moe_combine_bwd(p->g, dsrc.g, dw.g, dy.g, src.g, sl.g, w.g, nt, k, h);
  cmp(p, "moe_combine_bwd dsrc", &dsrc, p->l1, 0);
  cmp(p, "moe_combine_bwd dw", &dw, T == MT_F32 ? 1e-5 : p->l2, 0);
  fr(p, &src), fr(p, &w), fr(p, &y), fr(p, &dy), fr(p, &dsrc), fr(p, &dw);
  fri(p, &sl);
  free(slot);
}

/* SwiGLU forward/backward at [rows, 2f] and RoPE forward/backward on a qkv
 * [s, b, ng, np/ng + 2, hn] (rotate-half, rot_dim = hn, base 10000). */
static void r_swiglu_rope(P *p, int64_t rows, int64_t f, int s, int b, int np, int ng, int hn) {
  const mt_dtype T = p->T;
  tp in = mk(p, rows * 2 * f, T, 2.0f), out = mk(p, rows * f, T, 1.0f);
  tp dout = mk(p, rows * f, T, 1.0f), din = mk(p, rows * 2 * f, T, 1.0f);
  p->c->ops->swiglu_fwd(p->c, out.c, in.c, rows, f);
  p->g->ops->swiglu_fwd(p->g, out.g, in.g, rows, f);
  cmp(p, "swiglu_fwd", &out, p->l1, 0);
  p->c->ops->swiglu_bwd(p->c, din.c, dout.c, in.c, rows, f);
  p->g->ops->swiglu_bwd(p->g, din.g, dout.g, in.g, rows, f);
  cmp(p, "swiglu_bwd", &din, p->l2, 0); /* chained: silu', products, bf16 din */
  fr(p, &in), fr(p, &out), fr(p, &dout), fr(p, &din);
  const int64_t n = (int64_t)s * b * ng * (np / ng + 2) * hn;
  mt_rope_desc d = {.s = s, .b = b, .np = np, .ng = ng, .hn = hn, .rot_dim = hn,
                    .interleaved = 0, .base = 10000.0f, .s_offset = 0};
  tp qkv = mk(p, n, T, 1.0f);
  p->c->ops->rope_fwd(p->c, &d, qkv.c);
  p->g->ops->rope_fwd(p->g, &d, qkv.g);
  cmp(p, "rope_fwd (in place)", &qkv, p->l1, 0);
  p->c->ops->rope_bwd(p->c, &d, qkv.c);
  p->g->ops->rope_bwd(p->g, &d, qkv.g);
  cmp(p, "rope_bwd (in place, after fwd)", &qkv, p->l2, 0);
  fr(p, &qkv);
}

static void t_realistic(P *p) {
  case_begin(p, "gemm NN 4096x4096x1024 +bias (fc1 forward)");
  r_gemm(p, 0, 4096, 4096, 1024);
  case_end(p);
  case_begin(p, "gemm NT 4096x1024x4096 (fc2 dgrad)");
  r_gemm(p, 1, 4096, 1024, 4096);
  case_end(p);
  case_begin(p, "gemm TN 1024x4096x4096 fp32 beta1 (wgrad)");
  r_gemm(p, 2, 1024, 4096, 4096);
  case_end(p);
  case_begin(p, "layernorm + bias_grad rows 4096 h 4096");
  r_norm(p, 4096, 4096, 0);
  case_end(p);
  case_begin(p, "layernorm rows 8192 h 1024");
  r_norm(p, 8192, 1024, 0);
  case_end(p);
  case_begin(p, "rmsnorm rows 4096 h 2048");
  r_norm(p, 4096, 2048, 1);
  case_end(p);
  case_begin(p, "embedding vocab 50304 shard [25152, 50304) h 1024, 8192 tokens");
  r_embedding(p, 8192, 1024, 25152, 50304);
  case_end(p);
  case_begin(p, "embedding vocab 50304 h 2048, 4096 tokens");
  r_embedding(p, 4096, 2048, 0, 50304);
  case_end(p);
  case_begin(p, "cross-entropy 4096 tokens x 50304 columns (50257 valid)");
  r_xent(p, 4096, 50304, 50257);
  case_end(p);
  case_begin(p, "flash s1024 b1 np8 ng4 hn128 dropout 0.1 (+cp2)");
  t_flash(p, 1024, 1, 8, 4, 128, 0.1f);
  case_end(p);
  case_begin(p, "flash s2048 b1 np4 ng4 hn64 dropout 0.1 (+cp2)");
  t_flash(p, 2048, 1, 4, 4, 64, 0.1f);
  case_end(p);
  case_begin(p, "unfused softmax vs fused, s1024 b2 np4 ng2 hn64 dropout 0.1 (GPU)");
  r_unfused(p, 1024, 2, 4, 2, 64, 0.1f);
  case_end(p);
  case_begin(p, "hidden dropout s2048 b2 h1024 (tp shard 1 of 4)");
  r_dropout(p, 2048, 2, 1024, 1024, 4096);
  case_end(p);
  case_begin(p, "hidden dropout s512 b4 h1000 (unaligned counters)");
  r_dropout(p, 512, 4, 1000, 1001, 3001);
  case_end(p);
  case_begin(p, "moe combine h 2048, 8192 rows, top-2 (1 slot in 16 dropped)");
  r_moe(p, 8192, 2048, 2);
  case_end(p);
  case_begin(p, "swiglu rows 2048 f 5632 + rope s2048 b2 np32 ng8 hn128");
  r_swiglu_rope(p, 2048, 5632, 2048, 2, 32, 8, 128);
  case_end(p);
  case_begin(p, "adamw + sumsq_acc_f32, 10000019 elements");
  r_optim(p, 10000019);
  case_end(p);
}

#endif
