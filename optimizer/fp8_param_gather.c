/* optimizer/fp8_param_gather.c — see fp8_param_gather.h. */
#include "optimizer/fp8_param_gather.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp8.h"
#include "core/fp8_gather.h"
#include "core/util.h"

struct mt_fp8pg {
  mt_zero_opt *z;
  mt_zero_part *P;           /* the dense part */
  mt_group *tp;              /* NULL or size 1: no tp reduction */
  int nw;                    /* FP8 weights, in flat order */
  int64_t *wlo, *whi;        /* their flat ranges */
  int block;                 /* blockwise recipe: 128x128 weight blocks, power-of-2 scales */
  int64_t *wcols, *wnbc;     /* [nw] columns and column blocks of each weight (blockwise) */
  int64_t *soff, ns;         /* [nw] each weight's first scale; all scales */
  int *chunk_w;              /* [P->n_chunk] the weight of each owned chunk, or -1 */
  uint8_t *codes;            /* [codes_n] e4m3 codes at flat - codes_lo (MT_MEM_PARAM) */
  int64_t codes_lo, codes_n;
  mt_fp8_wcode *tab;         /* [nw] installed on the model's FP8 linear */
  float *amax_h, *scale_h, *sinv_h; /* [ns] host */
  float *d_amax;             /* [ns] device (MT_MEM_COMM) */
  float *d_one;              /* [3] device: a piece's amax, scale, scale_inv */
  int64_t *cnt, *dsp;        /* [n_bkt * dp] bytes of each rank's part of each bucket */
  uint8_t *send, *stage;     /* the largest part / bucket (MT_MEM_COMM) */
  int64_t fp8_numel;         /* F */
  mt_fp8pg_stats last;
};

/* Walk [lo, hi) in pieces split at FP8 weight boundaries: fn(g, ctx, a, e,
 * w) for each piece (w: its weight, or -1 for bf16 elements) with the byte
 * offset of the piece in the packed part; returns the part's bytes. */
typedef void (*piece_fn)(mt_fp8pg *g, void *ctx, int64_t a, int64_t e, int w, int64_t off);
static int64_t walk(mt_fp8pg *g, int64_t lo, int64_t hi, piece_fn fn, void *ctx) {
  int w = 0;
  while (w < g->nw && g->whi[w] <= lo) w++;
  int64_t pos = lo, off = 0;
  while (pos < hi) {
    int64_t e;
    if (w < g->nw && g->wlo[w] <= pos) {
      e = g->whi[w] < hi ? g->whi[w] : hi;
      if (fn) fn(g, ctx, pos, e, w, off);
      off += e - pos;
      if (e == g->whi[w]) w++;
    } else {
      e = w < g->nw && g->wlo[w] < hi ? g->wlo[w] : hi;
      if (fn) fn(g, ctx, pos, e, -1, off);
      off += 2 * (e - pos);
    }
    pos = e;
  }
  return off;
}

static char *flat(mt_fp8pg *g) { return mt_gpt_param_buffer(g->z->model); }

/* The flat piece [a, e) of FP8 weight w cut into runs that share one scale
 * (tensorwise: the whole piece; blockwise: row segments inside one
 * 128-column block): fn(g, ctx, x, n, j, off) for the run [x, x + n) with
 * scale index j at byte offset off of the piece. */
typedef void (*run_fn)(mt_fp8pg *g, void *ctx, int64_t x, int64_t n, int64_t j, int64_t off);
static void runs(mt_fp8pg *g, int w, int64_t a, int64_t e, run_fn fn, void *ctx) {
  if (!g->block) {
    fn(g, ctx, a, e - a, g->soff[w], 0);
    return;
  }
  const int64_t cols = g->wcols[w];
  for (int64_t k = a - g->wlo[w]; k < e - g->wlo[w];) {
    const int64_t r = k / cols, c = k % cols;
    int64_t c1 = (c / 128 + 1) * 128; /* the end of the column block */
    if (c1 > cols) c1 = cols;
    if (r * cols + c1 > e - g->wlo[w]) c1 = e - g->wlo[w] - r * cols;
    fn(g, ctx, g->wlo[w] + k, c1 - c, g->soff[w] + (r / 128) * g->wnbc[w] + c / 128,
       k - (a - g->wlo[w]));
    k = r * cols + c1;
  }
}

static void cb_gather(void *g) { mt_fp8pg_gather(g); }
static void cb_refresh(void *g) { mt_fp8pg_refresh_bf16(g); }

mt_fp8pg *mt_fp8pg_create(mt_zero_opt *z, mt_group *tp) {
  MT_ASSERT(z->o.stage <= 2 && !z->part[0].expert);
  mt_backend *be = z->be;
  MT_ASSERT(be->dtype == MT_BF16);
  mt_fp8pg *g = mt_xcalloc(1, sizeof *g);
  g->z = z, g->P = &z->part[0], g->tp = tp && mt_group_size(tp) > 1 ? tp : NULL;
  const mt_param_list *pl = z->params;
  g->wlo = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  g->whi = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  g->wcols = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  g->wnbc = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  g->soff = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  const mt_fp8_recipe rec = mt_gpt_get_config(z->model)->fp8_options.recipe;
  MT_ASSERT(rec == MT_FP8_RECIPE_TENSORWISE || rec == MT_FP8_RECIPE_BLOCKWISE);
  g->block = rec == MT_FP8_RECIPE_BLOCKWISE;
  int *pw = mt_xcalloc((size_t)pl->n + 1, sizeof(int));
  g->tab = mt_xcalloc((size_t)pl->n + 1, sizeof *g->tab);
  for (int i = 0; i < pl->n; i++) {
    pw[i] = -1;
    if (!mt_gpt_fp8_gathered_weight(z->model, i) || pl->p[i].numel == 0) continue;
    MT_ASSERT(g->nw == 0 || pl->p[i].offset >= g->whi[g->nw - 1]);
    g->wlo[g->nw] = pl->p[i].offset, g->whi[g->nw] = pl->p[i].offset + pl->p[i].numel;
    g->wcols[g->nw] = pl->p[i].local_cols;
    g->wnbc[g->nw] = (pl->p[i].local_cols + 127) / 128;
    g->soff[g->nw] = g->ns;
    g->ns += g->block ? (pl->p[i].local_rows + 127) / 128 * g->wnbc[g->nw] : 1;
    g->tab[g->nw].w = mt_gpt_param_ptr(z->model, i);
    g->fp8_numel += pl->p[i].numel;
    pw[i] = g->nw++;
  }
  if (g->nw > 0) g->codes_lo = g->wlo[0], g->codes_n = g->whi[g->nw - 1] - g->wlo[0];
  g->codes = be->ops->alloc(be, (size_t)g->codes_n + 1, MT_MEM_PARAM);
  be->ops->memset0(be, g->codes, (size_t)g->codes_n + 1);
  g->amax_h = mt_xcalloc((size_t)g->ns + 1, sizeof(float));
  g->scale_h = mt_xcalloc((size_t)g->ns + 1, sizeof(float));
  g->sinv_h = mt_xcalloc((size_t)g->ns + 1, sizeof(float));
  for (int w = 0; w < g->nw; w++) {
    g->tab[w].q = g->codes + (g->wlo[w] - g->codes_lo);
    g->tab[w].scale_inv = g->sinv_h + g->soff[w];
  }
  g->chunk_w = mt_xcalloc((size_t)g->P->n_chunk + 1, sizeof(int));
  for (int c = 0; c < g->P->n_chunk; c++) g->chunk_w[c] = pw[g->P->chunk[c].param];
  free(pw);
  g->d_amax = be->ops->alloc(be, ((size_t)g->ns + 1) * sizeof(float), MT_MEM_COMM);
  g->d_one = be->ops->alloc(be, 3 * sizeof(float), MT_MEM_COMM);
  /* each rank's bytes of each bucket (every rank knows the whole layout) */
  const mt_zero_layout *L = &g->P->L;
  g->cnt = mt_xcalloc((size_t)L->n_bkt * (size_t)L->dp, sizeof(int64_t));
  g->dsp = mt_xcalloc((size_t)L->n_bkt * (size_t)L->dp, sizeof(int64_t));
  int64_t max_part = 1, max_bkt = 1;
  for (int b = 0; b < L->n_bkt; b++) {
    int64_t tot = 0;
    for (int r = 0; r < L->dp; r++) {
      int64_t lo, hi;
      mt_zero_owned_range(L, b, r, &lo, &hi);
      const int64_t n = walk(g, lo, hi, NULL, NULL);
      g->cnt[(size_t)b * L->dp + r] = n, g->dsp[(size_t)b * L->dp + r] = tot;
      tot += n;
      if (n > max_part) max_part = n;
    }
    if (tot > max_bkt) max_bkt = tot;
  }
  g->send = be->ops->alloc(be, (size_t)max_part, MT_MEM_COMM);
  g->stage = be->ops->alloc(be, (size_t)max_bkt, MT_MEM_COMM);
  mt_fp8_linear_set_weight_codes(mt_gpt_fp8_dense_linear(z->model), g->tab, g->nw);
  z->dense_gather = cb_gather, z->dense_refresh = cb_refresh, z->dense_ctx = g;
  mt_fp8pg_gather(g);
  return g;
}

void mt_fp8pg_destroy(mt_fp8pg *g) {
  if (!g) return;
  mt_backend *be = g->z->be;
  mt_fp8_linear_set_weight_codes(mt_gpt_fp8_dense_linear(g->z->model), NULL, 0);
  g->z->dense_gather = NULL, g->z->dense_refresh = NULL, g->z->dense_ctx = NULL;
  void *dev[] = {g->codes, g->d_amax, g->d_one, g->send, g->stage};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) be->ops->free(be, dev[i]);
  free(g->wlo), free(g->whi), free(g->chunk_w), free(g->tab), free(g->amax_h), free(g->scale_h);
  free(g->sinv_h), free(g->wcols), free(g->wnbc), free(g->soff);
  free(g->cnt), free(g->dsp);
  free(g);
}

/* Quantize the run [x, x + n) with scale j into ctx + off. */
static void quant_run(mt_fp8pg *g, void *ctx, int64_t x, int64_t n, int64_t j, int64_t off) {
  mt_backend *be = g->z->be;
  mt_fp8_desc d = {.fmt = MT_FP8_E4M3, .blocking = MT_FP8_TENSOR, .rows = 1, .cols = n};
  be->ops->memcpy_h2d(be, g->d_one + 1, &g->scale_h[j], sizeof(float));
  be->ops->fp8_quantize(be, &d, (uint8_t *)ctx + off, g->d_one + 2, flat(g) + (size_t)x * 2,
                        NULL, g->d_one + 1);
}

/* The amax of the run [x, x + n) into amax_h[j] (max). */
static void amax_run(mt_fp8pg *g, void *ctx, int64_t x, int64_t n, int64_t j, int64_t off) {
  (void)ctx, (void)off;
  mt_backend *be = g->z->be;
  mt_fp8_desc d = {.fmt = MT_FP8_E4M3, .blocking = MT_FP8_TENSOR, .rows = 1, .cols = n};
  float a;
  be->ops->fp8_amax(be, &d, g->d_one, flat(g) + (size_t)x * 2);
  be->ops->memcpy_d2h(be, &a, g->d_one, sizeof a);
  g->amax_h[j] = fmaxf(g->amax_h[j], a);
}

/* Pack one piece of this rank's part into g->send: bf16 copied, FP8
 * quantized with its weight's scale (the scale the forward then uses). */
static void pack(mt_fp8pg *g, void *ctx, int64_t a, int64_t e, int w, int64_t off) {
  (void)ctx;
  mt_backend *be = g->z->be;
  if (w < 0) {
    be->ops->memcpy_d2d(be, g->send + off, flat(g) + (size_t)a * 2, (size_t)(e - a) * 2);
    return;
  }
  runs(g, w, a, e, quant_run, g->send + off);
}

/* Unpack one piece of a rank's part (ctx: its bytes in g->stage). */
static void unpack(mt_fp8pg *g, void *ctx, int64_t a, int64_t e, int w, int64_t off) {
  mt_backend *be = g->z->be;
  const uint8_t *src = (const uint8_t *)ctx + off;
  if (w < 0) {
    be->ops->memcpy_d2d(be, flat(g) + (size_t)a * 2, src, (size_t)(e - a) * 2);
    g->last.bf16_bytes += (e - a) * 2;
  } else {
    be->ops->memcpy_d2d(be, g->codes + (a - g->codes_lo), src, (size_t)(e - a));
    g->last.fp8_bytes += e - a;
  }
}

/* The amax of every scale block (tensorwise: the whole weight; blockwise:
 * each 128x128 block) over the shards: dp x cp, and for tensorwise then tp
 * (megatrain's rule for per-tensor weight scales; block scales are local
 * to the tp shard, as without fp8_param_gather); its scale by TE's
 * current-scaling rule (e4m3 max / amax, power-of-2 for blockwise as the
 * recipe, no epsilon) and scale_inv = 1 / scale, as the quantize op makes
 * them. */
static void scales(mt_fp8pg *g) {
  mt_backend *be = g->z->be;
  const mt_zero_part *P = g->P;
  memset(g->amax_h, 0, (size_t)g->ns * sizeof(float));
  for (int c = 0; c < P->n_chunk; c++) {
    const int w = g->chunk_w[c];
    if (w >= 0)
      runs(g, w, P->chunk[c].flat_off, P->chunk[c].flat_off + P->chunk[c].n, amax_run, NULL);
  }
  if (g->ns == 0) return;
  be->ops->memcpy_h2d(be, g->d_amax, g->amax_h, (size_t)g->ns * sizeof(float));
  mt_allreduce(P->group, g->d_amax, g->ns, MT_F32, MT_OP_MAX);
  g->last.amax_bytes = mt_group_size(P->group) > 1 ? 4 * g->ns : 0;
  if (g->tp && !g->block) {
    mt_allreduce(g->tp, g->d_amax, g->ns, MT_F32, MT_OP_MAX);
    g->last.amax_bytes += 4 * g->ns;
  }
  be->ops->memcpy_d2h(be, g->amax_h, g->d_amax, (size_t)g->ns * sizeof(float));
  for (int64_t j = 0; j < g->ns; j++) {
    g->scale_h[j] = mt_fp8_scale_current(g->amax_h[j], mt_fp8_max(MT_FP8_E4M3), g->block, 0.0f);
    g->sinv_h[j] = 1.0f / g->scale_h[j];
  }
}

void mt_fp8pg_gather(mt_fp8pg *g) {
  const mt_zero_layout *L = &g->P->L;
  mt_group *grp = g->P->group;
  const int64_t before = mt_group_counters(grp)[MT_COLL_ALLGATHER].bytes;
  g->last.fp8_bytes = g->last.bf16_bytes = g->last.ops = 0;
  scales(g);
  for (int b = 0; b < L->n_bkt; b++) {
    const int64_t *cnt = g->cnt + (size_t)b * L->dp, *dsp = g->dsp + (size_t)b * L->dp;
    int64_t lo, hi;
    mt_zero_owned_range(L, b, L->dp_rank, &lo, &hi);
    walk(g, lo, hi, pack, NULL);
    mt_allgatherv(grp, g->send, cnt[L->dp_rank], g->stage, cnt, dsp, MT_U8);
    g->last.ops++;
    for (int r = 0; r < L->dp; r++) {
      mt_zero_owned_range(L, b, r, &lo, &hi);
      walk(g, lo, hi, unpack, g->stage + dsp[r]);
    }
  }
  g->last.measured = mt_group_counters(grp)[MT_COLL_ALLGATHER].bytes - before;
}

void mt_fp8pg_refresh_bf16(mt_fp8pg *g) {
  mt_backend *be = g->z->be;
  mt_zero_allgather_flat(g->P->group, be, &g->P->L, flat(g), g->P->scratch, be->dtype);
}

void mt_fp8pg_print(const mt_fp8pg *g, FILE *f) {
  const mt_zero_layout *L = &g->P->L;
  const int64_t S = L->sharded_numel, F = g->fp8_numel, P = L->padding;
  const int64_t fp8 = mt_fp8_gather_bytes(S, F), bf16 = mt_bf16_gather_bytes(S, P);
  fprintf(f,
          "> fp8_param_gather: %d FP8 weights (%lld %s scales), %lld of %lld sharded elements "
          "gathered as e4m3 codes over dp=%d in %lld all-gathers: %lld bytes (codes %lld + bf16 "
          "%lld), analytic 2(S-F)+F = %lld, dp counter %lld; amax all-reduce %lld bytes (4 per "
          "scale: %lld per group); the "
          "bf16 gather 2(S+P) = %lld bytes (padding %lld): %.2f%% fewer\n",
          g->nw, (long long)g->ns, g->block ? "128x128-block" : "tensorwise", (long long)F,
          (long long)S, L->dp, (long long)g->last.ops,
          (long long)(g->last.fp8_bytes + g->last.bf16_bytes), (long long)g->last.fp8_bytes,
          (long long)g->last.bf16_bytes, (long long)fp8, (long long)g->last.measured,
          (long long)g->last.amax_bytes, (long long)mt_fp8_gather_amax_bytes(g->ns),
          (long long)bf16, (long long)P,
          100.0 * (double)(bf16 - fp8) / (double)bf16);
}
