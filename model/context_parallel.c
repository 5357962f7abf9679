/* model/context_parallel.c — CP token layout and attention over the ring of
 * the CP group (see context_parallel.h; Megatron-core's
 * AttnFuncWithCPAndKVP2P, cp_comm_type "p2p"). */
#include "model/context_parallel.h"

#include <stdlib.h>

#include "core/util.h"

/* "CP". Bit 0 differs: over NCCL, tagged messages travel on channels
 * (sender, receiver, tag & 1), so K/V and dK/dV blocks get a FIFO each
 * (parallel/comm.h, mt_isend). */
enum { TAG_KV = 0x4350, TAG_DKV = 0x4351 };
_Static_assert(((TAG_KV ^ TAG_DKV) & 1) == 1, "TAG_KV and TAG_DKV must differ in bit 0");

mt_cp_layout mt_cp_layout_make(int64_t s, int cp, int rank) {
  mt_cp_layout L = {cp < 1 ? 1 : cp, rank, s, s / 2};
  if (L.cp > 1) {
    if (s % (2 * L.cp) != 0)
      mt_fatal("context parallelism: seq_length %lld is not divisible by 2 x "
               "context_parallel_size (%d)", (long long)s, L.cp);
    MT_ASSERT(rank >= 0 && rank < L.cp);
    L.c = s / (2 * L.cp);
  }
  return L;
}

int64_t mt_cp_local_len(const mt_cp_layout *L) { return L->s / L->cp; }

int64_t mt_cp_global_pos(const mt_cp_layout *L, int64_t i) {
  if (L->cp == 1) return i;
  return i < L->c ? L->rank * L->c + i : (2 * L->cp - 1 - L->rank) * L->c + (i - L->c);
}

int mt_cp_runs(const mt_cp_layout *L, int64_t row0, int64_t n, mt_cp_run runs[2]) {
  if (L->cp == 1 || row0 + n <= L->c || row0 >= L->c) {
    runs[0] = (mt_cp_run){row0, mt_cp_global_pos(L, row0), n};
    return 1;
  }
  runs[0] = (mt_cp_run){row0, mt_cp_global_pos(L, row0), L->c - row0};
  runs[1] = (mt_cp_run){L->c, mt_cp_global_pos(L, L->c), row0 + n - L->c};
  return 2;
}

struct mt_cp_attn {
  mt_backend *be;
  mt_group *g;
  mt_cp_layout L;
  int b, np, ng, hn, hv; /* hv: value head width (MLA; = hn otherwise) */
  int64_t u;          /* gather unit gcd(hn, hv) */
  int64_t kvn;        /* elements of one K/V block [2c, b, ng, hn + hv] */
  int64_t qkvn;       /* elements of the local qkv [2c, b, ng, (np/ng + 1)·hn + hv] */
  void *kv[2];        /* K/V blocks: the one computed on, the one arriving */
  void *dkv_part;     /* this rank's dK/dV contribution of the current step */
  void *w;            /* [dQ scratch (qkvn) | dK/dV block 0 | dK/dV block 1]: the
                         gather source of the final dqkv */
  void *ctx_b;        /* [c, b, np, hv] partial ctx of one step */
  float *lse_b;       /* [b, np, c] its lse */
  int32_t *idx_pack;  /* qkv unit (of u elements) of each K/V block unit */
  int32_t *idx_unpack; /* w unit of each dqkv unit */
  int64_t es;         /* bytes per element of T */
};

mt_cp_attn *mt_cp_attn_create(mt_backend *be, mt_group *cp_group, const mt_cp_layout *L, int b,
                              int np, int ng, int hn, int hv) {
  MT_ASSERT(L->cp > 1 && cp_group && mt_group_size(cp_group) == L->cp &&
            mt_group_rank(cp_group) == L->rank && np % ng == 0);
  mt_cp_attn *a = mt_xcalloc(1, sizeof *a);
  a->be = be;
  a->g = cp_group;
  a->L = *L;
  a->b = b;
  a->np = np;
  a->ng = ng;
  a->hn = hn;
  a->hv = hv > 0 ? hv : hn;
  a->u = mt_gcd64(hn, a->hv);
  a->es = (int64_t)mt_dtype_size(be->dtype);
  const int npg = np / ng;
  const int64_t s2 = mt_cp_local_len(L), units = s2 * b * ng; /* (row, bi, group) */
  /* per (row, bi, group), in gather units: its q heads, K and V in qkv; K
   * and V in a block */
  const int64_t uq = npg * hn / a->u, uk = hn / a->u, uv = a->hv / a->u;
  const int64_t ug = uq + uk + uv, ukv = uk + uv;
  a->kvn = units * (hn + a->hv);
  a->qkvn = units * (npg * hn + hn + a->hv);
  MT_ASSERT(units * ug + 2 * units * ukv < INT32_MAX);
  const mt_backend_ops *o = be->ops;
  for (int k = 0; k < 2; k++) a->kv[k] = o->alloc(be, (size_t)(a->kvn * a->es), MT_MEM_WORKSPACE);
  a->dkv_part = o->alloc(be, (size_t)(a->kvn * a->es), MT_MEM_WORKSPACE);
  a->w = o->alloc(be, (size_t)((a->qkvn + 2 * a->kvn) * a->es), MT_MEM_WORKSPACE);
  a->ctx_b = o->alloc(be, (size_t)(L->c * b * np * a->hv * a->es), MT_MEM_WORKSPACE);
  a->lse_b = o->alloc(be, (size_t)(L->c * b * np) * sizeof(float), MT_MEM_WORKSPACE);
  /* index tables, in units of u elements: K/V block unit t·ukv + e <- qkv
   * unit t·ug + uq + e; dqkv unit t·ug + k <- w unit of the same index for
   * the q heads (the dQ scratch), of the final dK/dV block otherwise (the
   * one received after the last step: block cp % 2) */
  int32_t *pk = mt_xmalloc(sizeof(int32_t) * (size_t)(units * ukv));
  int32_t *up = mt_xmalloc(sizeof(int32_t) * (size_t)(units * ug));
  const int64_t dbase = units * ug + (int64_t)(L->cp % 2) * units * ukv;
  for (int64_t t = 0; t < units; t++) {
    for (int64_t e = 0; e < ukv; e++) pk[t * ukv + e] = (int32_t)(t * ug + uq + e);
    for (int64_t k = 0; k < ug; k++)
      up[t * ug + k] = (int32_t)(k < uq ? t * ug + k : dbase + t * ukv + (k - uq));
  }
  a->idx_pack = o->alloc(be, sizeof(int32_t) * (size_t)(units * ukv), MT_MEM_WORKSPACE);
  a->idx_unpack = o->alloc(be, sizeof(int32_t) * (size_t)(units * ug), MT_MEM_WORKSPACE);
  o->memcpy_h2d(be, a->idx_pack, pk, sizeof(int32_t) * (size_t)(units * ukv));
  o->memcpy_h2d(be, a->idx_unpack, up, sizeof(int32_t) * (size_t)(units * ug));
  free(pk);
  free(up);
  return a;
}

void mt_cp_attn_destroy(mt_cp_attn *a) {
  if (!a) return;
  mt_backend *be = a->be;
  void *p[] = {a->kv[0], a->kv[1], a->dkv_part, a->w, a->ctx_b, a->lse_b, a->idx_pack,
               a->idx_unpack};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
  free(a);
}

/* ---- the blocks of one ring step ----
 * Local query chunk h (0: chunk r, 1: chunk 2cp−1−r) against the K/V block of
 * rank src: `full` = both of its chunks (positions src·c and (2cp−1−src)·c),
 * else its first chunk only (the leading c rows of the block). */
typedef struct {
  int h, full;
} pair;

int mt_cp_ring_step(const mt_cp_layout *L, int i, int h[2], int full[2]) {
  MT_ASSERT(i >= 0 && i < L->cp);
  if (i == 0) { /* own block: chunk r vs chunk r (diagonal), chunk 2cp-1-r vs both */
    h[0] = 0, full[0] = 0;
    h[1] = 1, full[1] = 1;
    return 2;
  }
  if (i <= L->rank) { /* block of an earlier rank: its first chunk precedes both of ours */
    h[0] = 0, full[0] = 0;
    h[1] = 1, full[1] = 0;
    return 2;
  }
  h[0] = 1, full[0] = 1; /* a later rank: both its chunks lie between our two */
  return 1;
}

static int step_pairs(const mt_cp_layout *L, int i, pair p[2]) {
  int h[2], f[2];
  const int n = mt_cp_ring_step(L, i, h, f);
  for (int k = 0; k < n; k++) p[k] = (pair){h[k], f[k]};
  return n;
}

static int chunk_of(const mt_cp_layout *L, int r, int h) { return h ? 2 * L->cp - 1 - r : r; }

/* Descriptor of the pair: query chunk h of this rank vs the block of src. */
static mt_attn_desc pair_desc(const mt_cp_attn *a, const mt_attn_desc *base, int src, pair p) {
  const mt_cp_layout *L = &a->L;
  mt_attn_desc d = *base;
  d.b = a->b;
  d.np = a->np;
  d.ng = a->ng;
  d.hn = a->hn;
  d.hv = a->hv;
  d.s = (int)L->c;
  d.sq = (int)L->c;
  d.sk = (int)(p.full ? 2 * L->c : L->c);
  d.s_full = (int)L->s;
  d.q_pos[0] = (int)(chunk_of(L, L->rank, p.h) * L->c);
  d.q_pos[1] = 0;
  d.q_split = 0;
  d.k_pos[0] = (int)(src * L->c);
  d.k_pos[1] = p.full ? (int)((2 * L->cp - 1 - src) * L->c) : 0;
  d.k_split = p.full ? (int)L->c : 0;
  return d;
}

/* Offsets (elements) of local query chunk h in qkv, ctx and lse. */
static int64_t q_at(const mt_cp_attn *a, int h) {
  return h * a->L.c * a->b * ((int64_t)a->np * a->hn + (int64_t)a->ng * (a->hn + a->hv));
}
static int64_t ctx_at(const mt_cp_attn *a, int h) { return h * a->L.c * a->b * a->np * a->hv; }
static int64_t lse_at(const mt_cp_attn *a, int h) { return h * a->L.c * a->b * a->np; }

static void *at(void *p, int64_t elems, int64_t es) { return (char *)p + elems * es; }
static const void *cat(const void *p, int64_t elems, int64_t es) {
  return (const char *)p + elems * es;
}

static void pack_kv(mt_cp_attn *a, void *kv, const void *qkv) {
  a->be->ops->moe_gather_rows(a->be, kv, qkv, a->idx_pack, a->kvn / a->u, a->u);
}

void mt_cp_attn_fwd(mt_cp_attn *a, const mt_attn_desc *base, void *ctx, float *lse,
                    const void *qkv) {
  mt_backend *be = a->be;
  const mt_cp_layout *L = &a->L;
  const int cp = L->cp, r = L->rank, next = (r + 1) % cp, prev = (r + cp - 1) % cp;
  const int64_t es = a->es;
  pack_kv(a, a->kv[0], qkv);
  for (int i = 0; i < cp; i++) {
    void *kv = a->kv[i % 2];
    mt_request *rq[2] = {NULL, NULL};
    if (i < cp - 1) { /* the next block travels while this one is computed */
      rq[0] = mt_isend(a->g, next, TAG_KV, kv, a->kvn, be->dtype);
      rq[1] = mt_irecv(a->g, prev, TAG_KV, a->kv[(i + 1) % 2], a->kvn, be->dtype);
    }
    const int src = (r - i + cp) % cp;
    pair p[2];
    const int n = step_pairs(L, i, p);
    for (int k = 0; k < n; k++) {
      mt_attn_desc d = pair_desc(a, base, src, p[k]);
      const void *q = cat(qkv, q_at(a, p[k].h), es);
      void *c = at(ctx, ctx_at(a, p[k].h), es);
      float *l = lse + lse_at(a, p[k].h);
      if (i == 0) { /* the first block of each local chunk: written directly */
        be->ops->flash_attn_fwd(be, &d, c, l, q, kv);
      } else {
        be->ops->flash_attn_fwd(be, &d, a->ctx_b, a->lse_b, q, kv);
        be->ops->attn_merge(be, &d, c, l, a->ctx_b, a->lse_b);
      }
    }
    mt_wait(rq[0]);
    mt_wait(rq[1]);
  }
}

void mt_cp_attn_bwd(mt_cp_attn *a, const mt_attn_desc *base, void *dqkv, const void *dctx,
                    const void *ctx, const float *lse, const void *qkv) {
  mt_backend *be = a->be;
  const mt_backend_ops *o = be->ops;
  const mt_cp_layout *L = &a->L;
  const int cp = L->cp, r = L->rank, next = (r + 1) % cp, prev = (r + cp - 1) % cp;
  const int64_t es = a->es;
  const size_t kvb = (size_t)(a->kvn * es);
  void *dq = a->w; /* dQ accumulates into the q heads of this [2c, b, ...] scratch */
  void *dk[2] = {at(a->w, a->qkvn, es), at(a->w, a->qkvn + a->kvn, es)};
  o->memset0(be, dq, (size_t)(a->qkvn * es));
  pack_kv(a, a->kv[0], qkv);
  for (int i = 0; i < cp; i++) {
    void *kv = a->kv[i % 2];
    mt_request *rq[4] = {NULL, NULL, NULL, NULL};
    if (i < cp - 1) {
      rq[0] = mt_isend(a->g, next, TAG_KV, kv, a->kvn, be->dtype);
      rq[1] = mt_irecv(a->g, prev, TAG_KV, a->kv[(i + 1) % 2], a->kvn, be->dtype);
    }
    /* dK/dV of the block computed at step i−1 goes on to the next rank (which
     * computes that block now); the partial of this step's block arrives */
    if (i > 0) {
      rq[2] = mt_isend(a->g, next, TAG_DKV, dk[(i - 1) % 2], a->kvn, be->dtype);
      rq[3] = mt_irecv(a->g, prev, TAG_DKV, dk[i % 2], a->kvn, be->dtype);
    }
    void *acc = i == 0 ? dk[0] : a->dkv_part;
    o->memset0(be, acc, kvb);
    const int src = (r - i + cp) % cp;
    pair p[2];
    const int n = step_pairs(L, i, p);
    for (int k = 0; k < n; k++) {
      mt_attn_desc d = pair_desc(a, base, src, p[k]);
      const int h = p[k].h;
      o->flash_attn_bwd(be, &d, at(dq, q_at(a, h), es), acc, cat(dctx, ctx_at(a, h), es),
                        cat(ctx, ctx_at(a, h), es), lse + lse_at(a, h), cat(qkv, q_at(a, h), es),
                        kv);
    }
    for (int k = 0; k < 4; k++) mt_wait(rq[k]);
    if (i > 0) o->add(be, dk[i % 2], dk[i % 2], a->dkv_part, a->kvn);
  }
  /* the last block's dK/dV completes at its owner, the next rank */
  mt_request *s = mt_isend(a->g, next, TAG_DKV, dk[(cp - 1) % 2], a->kvn, be->dtype);
  mt_request *q = mt_irecv(a->g, prev, TAG_DKV, dk[cp % 2], a->kvn, be->dtype);
  mt_wait(s);
  mt_wait(q);
  /* dqkv = q heads from the dQ scratch, k/v heads from the returned block */
  o->moe_gather_rows(be, dqkv, a->w, a->idx_unpack, a->qkvn / a->u, a->u);
}
