/* tests/tools/cuda_ref/attn_unfused.c — the UNFUSED causal self-attention
 * core on the GPU (Vaswani et al. 2017; Megatron "core attention"), forward
 * and backward. Not in the op table since issue 15 (the model runs the fused
 * op, cuda/cuda_flash_attn.cu): the GPU reference of the fused op, test
 * code (moved out of cuda/ with issue 27), linked by the Makefile into the
 * two programs that call it, tests/tools/cuda_parity.c and
 * bench/bench_flash_gpu.c (CUDA builds only); attn_unfused.h declares it.
 *
 * Layouts (core/backend.h, mt_attn_desc): qkv [s, b, ng, np/ng + 2, hn]
 * (grouped-query attention, Ainslie et al. 2023: query head n = g*npg + j,
 * npg = np/ng, reads the key/value heads of its group g), ctx [s, b, np, hn],
 * probs [b, np, s, s]. For a fixed slot j the b*ng heads grp = bi*ng + g
 * have uniform offsets: q at (grp*(npg+2) + j)*hn, k at (grp*(npg+2) + npg)*hn
 * (row stride b*ng*(npg+2)*hn), ctx at (grp*npg + j)*hn (row stride
 * b*np*hn), probs at (grp*npg + j)*s*s. So each product is ONE strided-batched
 * GEMM (cuda_gemm) over b*ng heads per slot j, npg of them (one with ng = np:
 * exactly the plain multi-head calls). Between them run the warp-per-row
 * causal softmax kernels of attn_softmax.cu over all b*np (head, query) rows.
 *
 * Forward: probs = scale Q K^T (T), softmax in place (fp32 math); with
 * dropout, pd = dropout(P) goes to the workspace; ctx = pd V.
 * Backward: pd regenerated from the RNG; dV = sum_j pd_j^T dctx_j; dP =
 * dctx V^T (fp32 workspace); dS = softmax backward (T, reusing pd's
 * workspace); dQ = dS K; dK = sum_j dS_j^T Q_j. The sums over the group's
 * query heads accumulate in the GEMM (beta = 1 after the first slot), in the
 * storage dtype (bf16 rounds once per query head of the group).
 * The fused (flash) attention of the op table, which stores nothing of size
 * s x s, is cuda/cuda_flash_attn.cu.
 */
#include "tests/tools/cuda_ref/attn_unfused.h"

/* One strided-batched product C = alpha op(A) op(B) + beta C over `batch` heads. */
static void pair_gemm(mt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb,
                      int64_t sb, float beta, void *c, int64_t ldc, int64_t sc, mt_dtype c_type,
                      int batch) {
  mt_gemm_desc g = {0};
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
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

/* Strides of the GQA layout (file comment): per slot j the b*ng heads. */
typedef struct {
  int s, hn, ng, npg, heads; /* heads = b*ng (GEMM batch) */
  int64_t ld, ldc, ss;       /* qkv and ctx row strides, s*s */
  int64_t sq, sc, sp;        /* batch strides: qkv (npg+2)*hn, ctx npg*hn, probs npg*s*s */
} attn_geom;

static attn_geom attn_geom_of(const mt_attn_desc *d) {
  attn_geom g;
  g.s = d->s;
  g.hn = d->hn;
  g.ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % g.ng == 0);
  g.npg = d->np / g.ng;
  g.heads = d->b * g.ng;
  g.ld = (int64_t)g.heads * (g.npg + 2) * g.hn;
  g.ldc = (int64_t)d->b * d->np * g.hn;
  g.ss = (int64_t)g.s * g.s;
  g.sq = (int64_t)(g.npg + 2) * g.hn;
  g.sc = (int64_t)g.npg * g.hn;
  g.sp = (int64_t)g.npg * g.ss;
  return g;
}

/* Unfused forward (reference; attn_unfused.h). */
void cuda_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, void *probs,
                   const void *qkv) {
  const attn_geom g = attn_geom_of(d);
  const int s = g.s, hn = g.hn, pairs = d->b * d->np;
  if (s <= 0 || pairs <= 0) return;
  const size_t es = mt_dtype_size(be->dtype);
  const char *q = (const char *)qkv, *k = q + (size_t)g.npg * hn * es, *v = k + (size_t)hn * es;
  const int use_drop = d->dropout_p > 0.0f;
  char *pr = (char *)probs, *cx = (char *)ctx;
  /* scores = scale * Q K^T into probs */
  for (int j = 0; j < g.npg; j++)
    pair_gemm(be, 0, 1, s, s, hn, d->scale, q + (size_t)j * hn * es, g.ld, g.sq, k, g.ld, g.sq,
              0.0f, pr + (size_t)j * g.ss * es, s, g.sp, be->dtype, g.heads);
  const int64_t *ids = use_drop ? cuda_upload_ids(be, d->sample_ids, d->b) : NULL;
  char *pd = use_drop ? cuda_workspace(be, (size_t)(pairs * g.ss) * es) : NULL;
  cudak_attn_softmax_fwd(cuda_impl_of(be)->stream, be->dtype, d, ids, probs, pd);
  /* ctx = dropout(P) V */
  const char *pu = use_drop ? pd : pr;
  for (int j = 0; j < g.npg; j++)
    pair_gemm(be, 0, 0, s, hn, s, 1.0f, pu + (size_t)j * g.ss * es, s, g.sp, v, g.ld, g.sq, 0.0f,
              cx + (size_t)j * hn * es, g.ldc, g.sc, be->dtype, g.heads);
}

/* Unfused backward (reference; attn_unfused.h). */
void cuda_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, const void *dctx,
                   const void *qkv, const void *probs) {
  const attn_geom g = attn_geom_of(d);
  const int s = g.s, hn = g.hn, pairs = d->b * d->np;
  if (s <= 0 || pairs <= 0) return;
  const mt_dtype T = be->dtype;
  const size_t es = mt_dtype_size(T);
  const int64_t ss = g.ss;
  const char *q = (const char *)qkv, *k = q + (size_t)g.npg * hn * es, *v = k + (size_t)hn * es;
  char *dq = (char *)dqkv, *dk = dq + (size_t)g.npg * hn * es, *dv = dk + (size_t)hn * es;
  const char *dc = (const char *)dctx;
  const int use_drop = d->dropout_p > 0.0f;
  cudaStream_t st = cuda_impl_of(be)->stream;
  /* workspace: [pairs, s, s] T (pd, then dS) followed by [pairs, s, s] fp32 (dP) */
  const size_t t_bytes = (size_t)mt_round_up((int64_t)((size_t)(pairs * ss) * es), 256);
  char *ws = cuda_workspace(be, t_bytes + (size_t)(pairs * ss) * sizeof(float));
  char *pd = ws;
  float *dp = (float *)(ws + t_bytes);
  const int64_t *ids = use_drop ? cuda_upload_ids(be, d->sample_ids, d->b) : NULL;
  const char *pused = (const char *)probs;
  if (use_drop) {
    cudak_attn_dropout_probs(st, T, d, ids, probs, pd);
    pused = pd;
  }
  for (int j = 0; j < g.npg; j++) {
    const size_t po = (size_t)j * ss * es, co = (size_t)j * hn * es;
    /* dV (+)= dropout(P)^T dctx */
    pair_gemm(be, 1, 0, s, hn, s, 1.0f, pused + po, s, g.sp, dc + co, g.ldc, g.sc,
              j ? 1.0f : 0.0f, dv, g.ld, g.sq, T, g.heads);
    /* dP = dctx V^T (fp32) */
    pair_gemm(be, 0, 1, s, s, hn, 1.0f, dc + co, g.ldc, g.sc, v, g.ld, g.sq, 0.0f, dp + j * ss, s,
              g.sp, MT_F32, g.heads);
  }
  /* dS (T) into pd's space: the dV products above have consumed pd (stream order) */
  cudak_attn_softmax_bwd(st, T, d, ids, probs, dp, pd);
  for (int j = 0; j < g.npg; j++) {
    const size_t po = (size_t)j * ss * es, qo = (size_t)j * hn * es;
    /* dQ = dS K, dK (+)= dS^T Q */
    pair_gemm(be, 0, 0, s, hn, s, 1.0f, pd + po, s, g.sp, k, g.ld, g.sq, 0.0f, dq + qo, g.ld, g.sq,
              T, g.heads);
    pair_gemm(be, 1, 0, s, hn, s, 1.0f, pd + po, s, g.sp, q + qo, g.ld, g.sq, j ? 1.0f : 0.0f, dk,
              g.ld, g.sq, T, g.heads);
  }
}
