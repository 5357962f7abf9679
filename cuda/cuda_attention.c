/* cuda/cuda_attention.c — causal self-attention core on the GPU (Vaswani
 * et al. 2017; Megatron "core attention"), forward and backward.
 *
 * Layouts (core/backend.h, mt_attn_desc): qkv [s, b, np, 3, hn], ctx
 * [s, b, np, hn], probs [b, np, s, s]. For pair = bi * np + n the q rows
 * start at pair * 3hn with row stride b*np*3hn, the ctx rows at pair * hn
 * with row stride b*np*hn, and probs at pair * s*s: the per-pair offsets are
 * uniform, so each product over all b*np pairs is ONE strided-batched GEMM
 * (cuda_gemm) with no copies. Between them run the warp-per-row causal
 * softmax kernels of cuda_attn.cu.
 *
 * Forward: probs = scale Q K^T (T), softmax in place (fp32 math); with
 * dropout, pd = dropout(P) goes to the workspace; ctx = pd V.
 * Backward: pd regenerated from the RNG; dV = pd^T dctx; dP = dctx V^T
 * (fp32 workspace); dS = softmax backward (T, reusing pd's workspace);
 * dQ = dS K; dK = dS^T Q.
 */
#include "cuda_internal.h"

/* One strided-batched product over the b*np pairs. */
static void pair_gemm(mt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb,
                      int64_t sb, void *c, int64_t ldc, int64_t sc, mt_dtype c_type, int batch) {
  mt_gemm_desc g = {0};
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = 0.0f;
  g.a = a;
  g.lda = lda;
  g.stride_a = sa;
  g.b = b;
  g.ldb = ldb;
  g.stride_b = sb;
  g.c = c;
  g.ldc = ldc;
  g.stride_c = sc;
  g.a_type = be->dtype;
  g.b_type = be->dtype;
  g.c_type = c_type;
  g.bias = NULL;
  g.batch = batch;
  cuda_gemm(be, &g);
}

void cuda_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, void *probs,
                   const void *qkv) {
  const int s = d->s, hn = d->hn, pairs = d->b * d->np;
  if (s <= 0 || pairs <= 0) return;
  const size_t es = mt_dtype_size(be->dtype);
  const int64_t ld = (int64_t)pairs * 3 * hn, ldc = (int64_t)pairs * hn, ss = (int64_t)s * s;
  const char *q = (const char *)qkv, *k = q + (size_t)hn * es, *v = q + (size_t)2 * hn * es;
  const int use_drop = d->dropout_p > 0.0f;
  /* scores = scale * Q K^T into probs */
  pair_gemm(be, 0, 1, s, s, hn, d->scale, q, ld, 3 * hn, k, ld, 3 * hn, probs, s, ss, be->dtype,
            pairs);
  const int64_t *ids = use_drop ? cuda_upload_ids(be, d->sample_ids, d->b) : NULL;
  void *pd = use_drop ? cuda_workspace(be, (size_t)(pairs * ss) * es) : NULL;
  cudak_attn_softmax_fwd(cuda_impl_of(be)->stream, be->dtype, d, ids, probs, pd);
  /* ctx = dropout(P) V */
  pair_gemm(be, 0, 0, s, hn, s, 1.0f, use_drop ? pd : probs, s, ss, v, ld, 3 * hn, ctx, ldc, hn,
            be->dtype, pairs);
}

void cuda_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, const void *dctx,
                   const void *qkv, const void *probs) {
  const int s = d->s, hn = d->hn, pairs = d->b * d->np;
  if (s <= 0 || pairs <= 0) return;
  const mt_dtype T = be->dtype;
  const size_t es = mt_dtype_size(T);
  const int64_t ld = (int64_t)pairs * 3 * hn, ldc = (int64_t)pairs * hn, ss = (int64_t)s * s;
  const char *q = (const char *)qkv, *k = q + (size_t)hn * es, *v = q + (size_t)2 * hn * es;
  char *dq = (char *)dqkv, *dk = dq + (size_t)hn * es, *dv = dq + (size_t)2 * hn * es;
  const int use_drop = d->dropout_p > 0.0f;
  cudaStream_t st = cuda_impl_of(be)->stream;
  /* workspace: [pairs, s, s] T (pd, then dS) followed by [pairs, s, s] fp32 (dP) */
  const size_t t_bytes = (size_t)mt_round_up((int64_t)((size_t)(pairs * ss) * es), 256);
  char *ws = cuda_workspace(be, t_bytes + (size_t)(pairs * ss) * sizeof(float));
  void *pd = ws;
  float *dp = (float *)(ws + t_bytes);
  const int64_t *ids = use_drop ? cuda_upload_ids(be, d->sample_ids, d->b) : NULL;
  const void *pused = probs;
  if (use_drop) {
    cudak_attn_dropout_probs(st, T, d, ids, probs, pd);
    pused = pd;
  }
  /* dV = dropout(P)^T dctx */
  pair_gemm(be, 1, 0, s, hn, s, 1.0f, pused, s, ss, dctx, ldc, hn, dv, ld, 3 * hn, T, pairs);
  /* dP = dctx V^T (fp32) */
  pair_gemm(be, 0, 1, s, s, hn, 1.0f, dctx, ldc, hn, v, ld, 3 * hn, dp, s, ss, MT_F32, pairs);
  /* dS (T) into pd's space: the dV product above has consumed pd (stream order) */
  cudak_attn_softmax_bwd(st, T, d, ids, probs, dp, pd);
  /* dQ = dS K, dK = dS^T Q */
  pair_gemm(be, 0, 0, s, hn, s, 1.0f, pd, s, ss, k, ld, 3 * hn, dq, ld, 3 * hn, T, pairs);
  pair_gemm(be, 1, 0, s, hn, s, 1.0f, pd, s, ss, q, ld, 3 * hn, dk, ld, 3 * hn, T, pairs);
}
