/* parallel/zero.c — ZeRO flat-buffer layout and shard collectives (see zero.h). */
#include "zero.h"

#include <stdlib.h>
#include <string.h>

#include "../core/util.h"

void mt_zero_layout_build(mt_zero_layout *L, const int64_t *bounds, int n_seg,
                          int64_t flat_numel, int64_t bucket_size, int dp, int dp_rank) {
  memset(L, 0, sizeof *L);
  if (dp < 1 || dp_rank < 0 || dp_rank >= dp || n_seg < 1)
    mt_fatal("zero layout: bad arguments (dp %d, rank %d, %d segments)", dp, dp_rank, n_seg);
  L->dp = dp;
  L->dp_rank = dp_rank;
  L->flat_numel = flat_numel;
  int64_t largest = 0;
  for (int i = 0; i < n_seg; i++) {
    int64_t a = bounds[2 * i], e = bounds[2 * i + 1];
    if (a < 0 || e <= a || e > flat_numel || (i > 0 && a < bounds[2 * i - 1]))
      mt_fatal("zero layout: segment %d [%lld, %lld) is empty, overlaps or leaves the buffer", i,
               (long long)a, (long long)e);
    if (e - a > largest) largest = e - a;
  }
  int64_t bs = bucket_size > 0 ? bucket_size : largest;
  bs = bs / dp * dp;
  if (bs < dp) bs = dp;
  L->bucket_size = bs;
  L->n_seg = n_seg;
  L->seg = mt_xcalloc((size_t)n_seg, sizeof *L->seg);
  int n_bkt = 0;
  for (int i = 0; i < n_seg; i++) n_bkt += (int)((bounds[2 * i + 1] - bounds[2 * i] + bs - 1) / bs);
  L->bkt = mt_xcalloc((size_t)n_bkt, sizeof *L->bkt);
  int b = 0;
  int64_t shard_off = 0;
  for (int i = 0; i < n_seg; i++) {
    mt_zero_segment *s = &L->seg[i];
    s->flat_start = bounds[2 * i];
    s->len = bounds[2 * i + 1] - bounds[2 * i];
    s->first_bucket = b;
    s->shard_offset = shard_off;
    for (int64_t off = 0; off < s->len; off += bs, b++) {
      mt_zero_bucket *k = &L->bkt[b];
      k->segment = i;
      k->flat_start = s->flat_start + off;
      k->len = s->len - off < bs ? s->len - off : bs;
      int64_t plen = mt_round_up(k->len, dp);
      k->shard_len = plen / dp;
      k->seg_offset = off;
      k->shard_offset = shard_off;
      shard_off += k->shard_len;
      L->padding += plen - k->len;
      if (plen > L->max_bucket_padded) L->max_bucket_padded = plen;
      s->n_buckets++;
      s->padded_len = off + plen;
    }
    s->shard_len = shard_off - s->shard_offset;
    L->sharded_numel += s->len;
  }
  MT_ASSERT(b == n_bkt);
  L->n_bkt = n_bkt;
  L->shard_numel = shard_off;
}

void mt_zero_layout_free(mt_zero_layout *L) {
  free(L->seg);
  free(L->bkt);
  memset(L, 0, sizeof *L);
}

void mt_zero_owned_range(const mt_zero_layout *L, int b, int rank, int64_t *lo, int64_t *hi) {
  const mt_zero_bucket *k = &L->bkt[b];
  int64_t a = (int64_t)rank * k->shard_len, e = a + k->shard_len;
  if (a > k->len) a = k->len;
  if (e > k->len) e = k->len;
  *lo = k->flat_start + a;
  *hi = k->flat_start + e;
}

void mt_zero_reduce_scatter_segment(mt_group *g, mt_backend *be, const mt_zero_layout *L, int s,
                                    float *work, float *grad_shard) {
  const mt_zero_segment *sg = &L->seg[s];
  for (int b = sg->first_bucket; b < sg->first_bucket + sg->n_buckets; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    float *send = work + k->seg_offset;
    float *mine = send + (int64_t)L->dp_rank * k->shard_len;
    mt_reduce_scatter(g, send, mine, k->shard_len, MT_F32, MT_OP_SUM);
    be->ops->axpy_f32(be, grad_shard + k->shard_offset, 1.0f, mine, k->shard_len);
  }
}

void mt_zero_allgather_segment(mt_group *g, mt_backend *be, const mt_zero_layout *L, int s,
                               const void *shard, void *work, mt_dtype t) {
  (void)be;
  const mt_zero_segment *sg = &L->seg[s];
  size_t es = mt_dtype_size(t);
  for (int b = sg->first_bucket; b < sg->first_bucket + sg->n_buckets; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    mt_allgather(g, (const char *)shard + (size_t)k->shard_offset * es,
                 (char *)work + (size_t)k->seg_offset * es, k->shard_len, t);
  }
}

void mt_zero_reduce_scatter_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                 float *flat, float *scratch) {
  for (int b = 0; b < L->n_bkt; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    int64_t plen = k->shard_len * L->dp, mine = (int64_t)L->dp_rank * k->shard_len;
    if (plen == k->len) {
      mt_reduce_scatter(g, flat + k->flat_start, flat + k->flat_start + mine, k->shard_len,
                        MT_F32, MT_OP_SUM);
      continue;
    }
    MT_ASSERT(scratch != NULL);
    be->ops->memcpy_d2d(be, scratch, flat + k->flat_start, (size_t)k->len * sizeof(float));
    be->ops->memset0(be, scratch + k->len, (size_t)(plen - k->len) * sizeof(float));
    mt_reduce_scatter(g, scratch, scratch + mine, k->shard_len, MT_F32, MT_OP_SUM);
    int64_t lo, hi;
    mt_zero_owned_range(L, b, L->dp_rank, &lo, &hi);
    if (hi > lo)
      be->ops->memcpy_d2d(be, flat + lo, scratch + mine, (size_t)(hi - lo) * sizeof(float));
  }
}

void mt_zero_allgather_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L, void *flat,
                            void *scratch, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  char *f = flat, *sc = scratch;
  for (int b = 0; b < L->n_bkt; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    int64_t plen = k->shard_len * L->dp, mine = (int64_t)L->dp_rank * k->shard_len;
    if (plen == k->len) {
      char *recv = f + (size_t)k->flat_start * es;
      mt_allgather(g, recv + (size_t)mine * es, recv, k->shard_len, t);
      continue;
    }
    MT_ASSERT(scratch != NULL);
    int64_t lo, hi;
    mt_zero_owned_range(L, b, L->dp_rank, &lo, &hi);
    be->ops->memset0(be, sc + (size_t)mine * es, (size_t)k->shard_len * es);
    if (hi > lo) be->ops->memcpy_d2d(be, sc + (size_t)mine * es, f + (size_t)lo * es,
                                     (size_t)(hi - lo) * es);
    mt_allgather(g, sc + (size_t)mine * es, sc, k->shard_len, t);
    be->ops->memcpy_d2d(be, f + (size_t)k->flat_start * es, sc, (size_t)k->len * es);
  }
}

void mt_zero_flat_to_shard(mt_backend *be, const mt_zero_layout *L, const void *flat, void *shard,
                           mt_dtype t) {
  size_t es = mt_dtype_size(t);
  be->ops->memset0(be, shard, (size_t)L->shard_numel * es);
  for (int b = 0; b < L->n_bkt; b++) {
    int64_t lo, hi;
    mt_zero_owned_range(L, b, L->dp_rank, &lo, &hi);
    if (hi > lo)
      be->ops->memcpy_d2d(be, (char *)shard + (size_t)L->bkt[b].shard_offset * es,
                          (const char *)flat + (size_t)lo * es, (size_t)(hi - lo) * es);
  }
}

/* ---- ZeRO-2/3 residency policy ---- */

void mt_zero_residency_init(mt_zero_residency *R, int n_seg, int stage, int prefetch, int tied) {
  memset(R, 0, sizeof *R);
  if (n_seg < 1 || stage < 2 || stage > 3)
    mt_fatal("zero residency: bad arguments (%d segments, stage %d)", n_seg, stage);
  R->n_seg = n_seg;
  R->stage = stage;
  R->prefetch = prefetch;
  R->tied = tied;
  R->param = mt_xcalloc((size_t)n_seg, 1);
  R->grad = mt_xcalloc((size_t)n_seg, 1);
  R->want = mt_xcalloc((size_t)n_seg, 1);
  R->nopen = mt_xcalloc((size_t)n_seg, sizeof(int));
  R->act = mt_xcalloc((size_t)(2 * n_seg + 2), sizeof(mt_zero_action));
}

void mt_zero_residency_free(mt_zero_residency *R) {
  free(R->param);
  free(R->grad);
  free(R->want);
  free(R->nopen);
  free(R->act);
  memset(R, 0, sizeof *R);
}

/* Parameter segments needed by step i (0 .. 2S-1); returns the count in out[2]. */
static int pneed(const mt_zero_residency *R, int i, int out[2]) {
  const int S = R->n_seg;
  int fwd = i < S, pos = fwd ? i : 2 * S - 1 - i, n = 0;
  if (!fwd && pos == 0) return 0;
  out[n++] = pos;
  if (pos == S - 1 && R->tied) out[n++] = 0;
  return n;
}

/* Gradient segments written by backward step i (>= S). */
static int gneed(const mt_zero_residency *R, int i, int out[2]) {
  const int S = R->n_seg;
  int pos = 2 * S - 1 - i, n = 0;
  out[n++] = pos;
  if (pos == S - 1 && R->tied) out[n++] = 0;
  return n;
}

static void emit(mt_zero_residency *R, mt_zero_action_kind kind, int seg) {
  MT_ASSERT(R->n_act < 2 * R->n_seg + 2);
  R->act[R->n_act].kind = kind;
  R->act[R->n_act].seg = seg;
  R->n_act++;
}

static void gather(mt_zero_residency *R, int s) {
  if (R->param[s]) return;
  R->param[s] = 1;
  emit(R, MT_ZERO_GATHER_PARAMS, s);
}

/* want[s] = 1 for segments needed by steps [from, to] (clamped). */
static void mark_wanted(mt_zero_residency *R, int from, int to) {
  memset(R->want, 0, (size_t)R->n_seg);
  if (to > 2 * R->n_seg - 1) to = 2 * R->n_seg - 1;
  for (int j = from; j <= to; j++) {
    int need[2], n = pneed(R, j, need);
    for (int k = 0; k < n; k++) R->want[need[k]] = 1;
  }
}

/* Free gathered segments that are not wanted and not in use by an open step. */
static void release_unwanted(mt_zero_residency *R) {
  for (int s = 0; s < R->n_seg; s++)
    if (!R->want[s] && R->nopen[s] == 0 && R->param[s]) {
      R->param[s] = 0;
      emit(R, MT_ZERO_FREE_PARAMS, s);
    }
}

static void before_step(mt_zero_residency *R, int i) {
  const int S = R->n_seg;
  if (R->stage == 3) {
    int to = i + R->prefetch;
    mark_wanted(R, i, to);
    release_unwanted(R);
    if (to > 2 * S - 1) to = 2 * S - 1;
    for (int j = i; j <= to; j++) {
      int need[2], n = pneed(R, j, need);
      for (int k = 0; k < n; k++) gather(R, need[k]);
    }
    int need[2], n = pneed(R, i, need);
    for (int k = 0; k < n; k++) R->nopen[need[k]]++;
  }
  if (i >= S) {
    int g[2], n = gneed(R, i, g);
    for (int k = 0; k < n; k++)
      if (!R->grad[g[k]]) {
        R->grad[g[k]] = 1;
        emit(R, MT_ZERO_ALLOC_GRADS, g[k]);
      }
  }
}

static void after_step(mt_zero_residency *R, int i) {
  const int S = R->n_seg;
  if (R->stage == 3) {
    int need[2], n = pneed(R, i, need);
    for (int k = 0; k < n; k++)
      if (R->nopen[need[k]] > 0) R->nopen[need[k]]--;
    mark_wanted(R, i + 1, i + (R->prefetch > 1 ? R->prefetch : 1));
    release_unwanted(R);
  }
  if (i >= S) {
    int g[2], n = gneed(R, i, g);
    for (int k = 0; k < n; k++) {
      int s = g[k];
      if (2 * S - 1 - s != i || !R->grad[s]) continue; /* not complete yet */
      R->grad[s] = 0;
      emit(R, MT_ZERO_REDUCE_GRADS, s);
    }
  }
}

int mt_zero_residency_step(mt_zero_residency *R, int i, int after) {
  MT_ASSERT(i >= 0 && i < 2 * R->n_seg);
  R->n_act = 0;
  if (after) after_step(R, i);
  else before_step(R, i);
  return R->n_act;
}

int mt_zero_residency_release_all(mt_zero_residency *R) {
  R->n_act = 0;
  for (int s = 0; s < R->n_seg; s++) {
    R->nopen[s] = 0;
    if (R->param[s]) {
      R->param[s] = 0;
      emit(R, MT_ZERO_FREE_PARAMS, s);
    }
  }
  return R->n_act;
}
