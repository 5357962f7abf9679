/* tests/unit/op_runners_flash.h — op-case runners (op_harness.h) for the
 * fused attention ops (core/backend.h: flash_attn_fwd, attn_merge,
 * flash_attn_bwd; FlashAttention-2, arXiv:2307.08691) against a naive
 * double loop (forward) and central finite differences of it (backward).
 *
 * Every case is a slice of one GLOBAL problem: a qkv tensor G
 * [s_full, b, ng, np/ng + 2, hn] over the whole sequence (with a value
 * width hv != hn: [s_full, b, ng, (np/ng + 1) hn + hv], the value head hv
 * wide, as multi-latent attention packs it; ctx [s, b, np, hv], kv blocks
 * [sk, b, ng, hn + hv]). ne = {s, b, np, hn} with s the rows of the call;
 * ip = {ng (0 = np), cp, rank, kr, hv (0 = hn)};
 * fp[0] = attention dropout p; fp[1] > 0: document masking (Megatron's
 * reset_attention_mask): global position p > 0 of row bi starts a new
 * document when a hash of (bi, p) falls below fp[1] (of_doc_starts), and
 * mt_attn_desc.doc_start holds each position's document start.
 *   cp = 0: the plain causal case (block fields zero, s_full = s, kv NULL).
 *   cp >= 1: context-parallel chunks (Megatron's load balancing): the
 *     sequence s_full = cp * s is cut into 2 cp chunks of c = s / 2 rows and
 *     rank r holds chunks r and 2cp-1-r (q_pos = {r c, (2cp-1-r) c},
 *     q_split = c). kr: the key block of the call, that of rank kr % cp; kr
 *     == rank uses the kv == NULL form (own keys inside qkv), any other the
 *     kv [sk, b, ng, 2, hn] form (kr = rank + cp: own keys through kv).
 * The double reference attends query rows at global positions qpos to key
 * rows kpos of G (visible iff kpos <= qpos, and kpos >= the document start
 * of qpos with document masking; dropout counters with s_full) and returns
 * ctx and lse (-inf for a row with no visible key). */
#ifndef MT_TESTS_OP_RUNNERS_FLASH_H
#define MT_TESTS_OP_RUNNERS_FLASH_H

#include "op_runners_misc.h"

typedef struct {
  int s, b, np, ng, npg, hn; /* s: rows of the call                        */
  int hv;                    /* value width (mt_attn_desc.hv; hn when 0)    */
  int cp, rank, c, s_full;   /* cp 0: plain                                 */
  int32_t *ds;               /* document starts [b, s_full] (host) or NULL   */
  mt_attn_desc d;            /* of the kv == NULL (own-block) call          */
} of_prob;

/* Document starts of the global problem: position p > 0 of row bi begins a
 * document when hash(bi, p) / 2^32 < frac; ds[bi * s_full + p] = the start
 * of p's document. Malloc'ed. */
static int32_t *of_doc_starts(int b, int s_full, float frac) {
  int32_t *ds = malloc(sizeof(int32_t) * (size_t)b * (size_t)s_full);
  for (int bi = 0; bi < b; bi++) {
    int32_t start = 0;
    for (int p = 0; p < s_full; p++) {
      uint32_t h = (uint32_t)(bi * 7919 + p) * 2654435761u;
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      if (p > 0 && (double)h / 4294967296.0 < (double)frac) start = p;
      ds[(int64_t)bi * s_full + p] = start;
    }
  }
  return ds;
}

/* 1 when key position kp is visible to query position qp of row bi. */
static int of_visible(const of_prob *P, int bi, int qp, int kp) {
  if (kp > qp) return 0;
  return !P->ds || kp >= P->ds[(int64_t)bi * P->s_full + qp];
}

/* Global sample ids of the micro-batch rows (b <= 8). */
static const int64_t of_sample_ids[8] = {3, 17, 8, 1, 40, 5, 23, 11};

static int of_chunk_pos(const of_prob *P, int r, int i) {
  return i < P->c ? r * P->c + i : (2 * P->cp - 1 - r) * P->c + (i - P->c);
}

/* Global position of local row i of rank r (identity when plain). */
static int of_pos(const of_prob *P, int r, int i) { return P->cp ? of_chunk_pos(P, r, i) : i; }

static of_prob of_problem(const op_case *c) {
  of_prob P;
  memset(&P, 0, sizeof P);
  P.s = (int)c->ne[0], P.b = (int)c->ne[1], P.np = (int)c->ne[2], P.hn = (int)c->ne[3];
  P.hv = c->ip[4] > 0 ? c->ip[4] : P.hn;
  P.ng = c->ip[0] > 0 ? c->ip[0] : P.np;
  P.npg = P.np / P.ng;
  P.cp = c->ip[1], P.rank = c->ip[2];
  P.c = P.s / 2;
  P.s_full = P.cp ? P.cp * P.s : P.s;
  P.d = ot_attn_desc(c);
  P.d.s = P.s;
  P.d.hv = c->ip[4]; /* 0: hn (the descriptor's default) */
  if (P.b > 8) abort(); /* of_sample_ids */
  P.d.sample_ids = of_sample_ids;
  if (P.cp) {
    P.d.sq = P.s, P.d.sk = P.s, P.d.s_full = P.s_full;
    P.d.q_pos[0] = P.rank * P.c, P.d.q_pos[1] = (2 * P.cp - 1 - P.rank) * P.c;
    P.d.q_split = P.c;
  }
  return P;
}

/* Descriptor of a call with the key block of rank kr (kv form). */
static mt_attn_desc of_kv_desc(const of_prob *P, int kr) {
  mt_attn_desc d = P->d;
  if (P->cp) {
    d.k_pos[0] = kr * P->c, d.k_pos[1] = (2 * P->cp - 1 - kr) * P->c;
    d.k_split = P->c;
  }
  return d;
}

/* Elements of one query group's slot of qkv, of qkv rows of G (or of the
 * local qkv) and of a kv block; the width of slot t (the value head: hv). */
static int64_t of_grp(const of_prob *P) { return (int64_t)(P->npg + 1) * P->hn + P->hv; }
static int64_t of_row(const of_prob *P) { return (int64_t)P->b * P->ng * of_grp(P); }
static int64_t of_kvrow(const of_prob *P) { return (int64_t)P->b * P->ng * (P->hn + P->hv); }
static int of_width(const of_prob *P, int t) { return t == P->npg + 1 ? P->hv : P->hn; }

/* Offset of (bi, group g, slot) within one qkv row (slot npg + 1: the
 * value head). */
static int64_t of_slot(const of_prob *P, int bi, int g, int slot) {
  return ((int64_t)bi * P->ng + g) * of_grp(P) + (int64_t)slot * P->hn;
}

/* Offset of (bi, group g, t: 0 key, 1 value) within one kv-block row. */
static int64_t of_kvslot(const of_prob *P, int bi, int g, int t) {
  return ((int64_t)bi * P->ng + g) * (P->hn + P->hv) + (int64_t)t * P->hn;
}

/* Elements of ctx (and dctx) [s, b, np, hv]. */
static int64_t of_nctx(const of_prob *P) { return (int64_t)P->s * P->b * P->np * P->hv; }

/* ctx [sq, b, np, hv] and lse [b, np, sq] of queries at global rows qpos[]
 * over keys at global rows kpos[] of the global tensor G, in double. */
static void of_ref(const of_prob *P, const double *G, int sq, const int *qpos, int sk,
                   const int *kpos, double *ctx, double *lse) {
  const mt_attn_desc *d = &P->d;
  const int b = P->b, np = P->np, hn = P->hn, hv = P->hv, npg = P->npg;
  const int64_t row = of_row(P);
  double *sc = ot_dbl(sk);
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int i = 0; i < sq; i++) {
        int g = n / npg;
        const double *Q = G + qpos[i] * row + of_slot(P, bi, g, n % npg);
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < sk; j++) {
          if (!of_visible(P, bi, qpos[i], kpos[j])) continue;
          const double *K = G + kpos[j] * row + of_slot(P, bi, g, npg);
          double dot = 0;
          for (int e = 0; e < hn; e++) dot += Q[e] * K[e];
          sc[j] = d->scale * dot;
          mx = fmax(mx, sc[j]);
        }
        for (int j = 0; j < sk; j++)
          if (of_visible(P, bi, qpos[i], kpos[j])) sum += (sc[j] = exp(sc[j] - mx));
        double *out = ctx + (((int64_t)i * b + bi) * np + n) * hv;
        for (int e = 0; e < hv; e++) out[e] = 0;
        lse[((int64_t)bi * np + n) * sq + i] = sum > 0 ? mx + log(sum) : -INFINITY;
        if (sum == 0) continue;
        for (int j = 0; j < sk; j++) {
          if (!of_visible(P, bi, qpos[i], kpos[j])) continue;
          double p = sc[j] / sum;
          if (d->dropout_p > 0) {
            uint64_t S = (uint64_t)P->s_full;
            uint64_t ctr = (((uint64_t)d->sample_ids[bi] * d->n_heads_total + d->head_offset + n) * S +
                            (uint64_t)qpos[i]) * S + (uint64_t)kpos[j];
            p = mt_rng_uniform(d->key, ctr) >= d->dropout_p ? p / (1.0 - (double)d->dropout_p) : 0.0;
          }
          const double *V = G + kpos[j] * row + of_slot(P, bi, g, npg + 1);
          for (int e = 0; e < hv; e++) out[e] += p * V[e];
        }
      }
  free(sc);
}

/* The global tensor G (host, random) and views of it. */
typedef struct {
  of_prob P;
  ot_t *G;        /* [s_full, row] (only its host values are used)          */
  double *Gd;     /* G in double                                             */
  int *qpos;      /* [s] global rows of the call's queries                   */
} of_set;

static of_set of_setup(ot_run *r) {
  of_set S;
  S.P = of_problem(r->c);
  S.G = ot_rnd(r, (int64_t)S.P.s_full * of_row(&S.P), MT_F32, -1.5, 1.5);
  S.Gd = ot_dbl(S.G->n);
  for (int64_t i = 0; i < S.G->n; i++) S.Gd[i] = S.G->h[i];
  S.qpos = malloc(sizeof(int) * (size_t)S.P.s);
  for (int i = 0; i < S.P.s; i++) S.qpos[i] = of_pos(&S.P, S.P.rank, i);
  if (r->c->fp[1] > 0.0f) {
    S.P.ds = of_doc_starts(S.P.b, S.P.s_full, r->c->fp[1]);
    S.P.d.doc_start = ot_ints(r, S.P.ds, (int64_t)S.P.b * S.P.s_full);
  }
  return S;
}

static void of_free(of_set *S) { free(S->Gd), free(S->qpos), free(S->P.ds); }

/* Local qkv of the call's rank (rows qpos of G), on the device. */
static ot_t *of_local_qkv(ot_run *r, const of_set *S) {
  const int64_t row = of_row(&S->P);
  ot_t *q = ot_rnd(r, (int64_t)S->P.s * row, r->T, 0, 1);
  for (int i = 0; i < S->P.s; i++)
    for (int64_t e = 0; e < row; e++) ot_set(r, q, i * row + e, S->G->h[S->qpos[i] * row + e]);
  ot_put(r, q);
  return q;
}

/* kv block [s, b, ng, hn + hv] of the key rows kpos of G, on the device. */
static ot_t *of_kv_block(ot_run *r, const of_set *S, const int *kpos) {
  const of_prob *P = &S->P;
  ot_t *kv = ot_rnd(r, (int64_t)P->s * of_kvrow(P), r->T, 0, 1);
  for (int j = 0; j < P->s; j++)
    for (int bi = 0; bi < P->b; bi++)
      for (int g = 0; g < P->ng; g++)
        for (int t = 0; t < 2; t++)
          for (int e = 0; e < of_width(P, P->npg + t); e++)
            ot_set(r, kv, j * of_kvrow(P) + of_kvslot(P, bi, g, t) + e,
                   S->G->h[kpos[j] * of_row(P) + of_slot(P, bi, g, P->npg + t) + e]);
  ot_put(r, kv);
  return kv;
}

/* Key rows of rank kr's block (kr % cp; the call's own rows when plain). */
static int *of_kpos(const of_prob *P, int kr) {
  int *k = malloc(sizeof(int) * (size_t)P->s);
  for (int j = 0; j < P->s; j++) k[j] = of_pos(P, P->cp ? kr % P->cp : 0, j);
  return k;
}

/* The op of the backend, or a runner failure naming it (backends that do not
 * implement the fused ops yet). */
#define OF_NEED(r, name)                                                     \
  do {                                                                       \
    if (!(r)->be->ops->name) {                                               \
      ot_failf((r), "backend has no " #name);                                \
      return;                                                                \
    }                                                                        \
  } while (0)

/* lse output: rows whose reference is -inf must be -inf (checked here), and
 * both sides then read 0 so the table's tolerance applies to the rest. */
static void of_output_lse(ot_run *r, const char *name, ot_t *lse, double *want) {
  ot_output(r, name, lse, want, NULL);
  ot_out *o = &r->outs[r->no - 1];
  for (int64_t i = 0; i < o->n; i++) {
    if (o->want && (isinf(o->want[i]) != 0) != (isinf(o->got[i]) != 0))
      ot_failf(r, "%s[%lld] = %g, want %g", name, (long long)i, o->got[i], o->want[i]);
    if (isinf(o->got[i]) && o->got[i] < 0) o->got[i] = 0;
    if (o->want && isinf(o->want[i]) && o->want[i] < 0) o->want[i] = 0;
  }
}

/* flash_attn_fwd: one call (own block or the key block kr = ip[3]);
 * outputs "ctx" (starts as NaN: every entry must be written) and "lse". */
static void ot_run_flash_fwd(ot_run *r) {
  OF_NEED(r, flash_attn_fwd);
  of_set S = of_setup(r);
  const of_prob *P = &S.P;
  const int kr = r->c->ip[3], own = !P->cp || kr == P->rank;
  int64_t nc = of_nctx(P), nl = (int64_t)P->b * P->np * P->s;
  ot_t *qkv = of_local_qkv(r, &S), *ctx = ot_rnd(r, nc, r->T, 0, 1);
  ot_t *lse = ot_rnd(r, nl, MT_F32, 0, 1);
  for (int64_t i = 0; i < nc; i++) ctx->h[i] = NAN;
  ot_put(r, ctx);
  int *kpos = own ? of_kpos(P, P->rank) : of_kpos(P, kr);
  if (own) {
    r->be->ops->flash_attn_fwd(r->be, &P->d, ctx->d, lse->d, qkv->d, NULL);
  } else {
    ot_t *kv = of_kv_block(r, &S, kpos);
    mt_attn_desc d = of_kv_desc(P, kr % P->cp);
    r->be->ops->flash_attn_fwd(r->be, &d, ctx->d, lse->d, qkv->d, kv->d);
  }
  double *wc = ot_dbl(nc), *wl = ot_dbl(nl);
  of_ref(P, S.Gd, P->s, S.qpos, P->s, kpos, wc, wl);
  ot_output(r, "ctx", ctx, wc, NULL);
  of_output_lse(r, "lse", lse, wl);
  free(kpos);
  of_free(&S);
}

#include "op_runners_flash_bwd.h"

#endif
