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

/* The fp32 sum reduce-scatter / the all-gather of one bucket: started
 * (a handle) or, with now = 1, the blocking call (NULL) — the same MPI call
 * and bits; the blocking wrappers below take the caller's path rather than
 * the communication thread's hand-off and arrival gate. */
static mt_request *rs(mt_group *g, int now, const void *send, void *recv, int64_t n) {
  if (!now) return mt_ireduce_scatter(g, send, recv, n, MT_F32, MT_OP_SUM);
  mt_reduce_scatter(g, send, recv, n, MT_F32, MT_OP_SUM);
  return NULL;
}

static mt_request *ag(mt_group *g, int now, const void *send, void *recv, int64_t n, mt_dtype t) {
  if (!now) return mt_iallgather(g, send, recv, n, t);
  mt_allgather(g, send, recv, n, t);
  return NULL;
}

static void rs_segment(mt_group *g, const mt_zero_layout *L, int s, float *work, mt_request **req,
                       int now) {
  const mt_zero_segment *sg = &L->seg[s];
  for (int b = sg->first_bucket; b < sg->first_bucket + sg->n_buckets; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    float *send = work + k->seg_offset;
    float *mine = send + (int64_t)L->dp_rank * k->shard_len;
    mt_request *q = rs(g, now, send, mine, k->shard_len);
    if (req) req[b - sg->first_bucket] = q;
  }
}

void mt_zero_reduce_scatter_segment_start(mt_group *g, const mt_zero_layout *L, int s,
                                          float *work, mt_request **req) {
  rs_segment(g, L, s, work, req, 0);
}

void mt_zero_reduce_scatter_segment_done(mt_backend *be, const mt_zero_layout *L, int s,
                                         const float *work, float *grad_shard) {
  const mt_zero_segment *sg = &L->seg[s];
  for (int b = sg->first_bucket; b < sg->first_bucket + sg->n_buckets; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    const float *mine = work + k->seg_offset + (int64_t)L->dp_rank * k->shard_len;
    be->ops->axpy_f32(be, grad_shard + k->shard_offset, 1.0f, mine, k->shard_len);
  }
}

void mt_zero_reduce_scatter_segment(mt_group *g, mt_backend *be, const mt_zero_layout *L, int s,
                                    float *work, float *grad_shard) {
  rs_segment(g, L, s, work, NULL, 1);
  mt_zero_reduce_scatter_segment_done(be, L, s, work, grad_shard);
}

static void ag_segment(mt_group *g, const mt_zero_layout *L, int s, const void *shard, void *work,
                       mt_dtype t, mt_request **req, int now) {
  const mt_zero_segment *sg = &L->seg[s];
  size_t es = mt_dtype_size(t);
  for (int b = sg->first_bucket; b < sg->first_bucket + sg->n_buckets; b++) {
    const mt_zero_bucket *k = &L->bkt[b];
    mt_request *q = ag(g, now, (const char *)shard + (size_t)k->shard_offset * es,
                       (char *)work + (size_t)k->seg_offset * es, k->shard_len, t);
    if (req) req[b - sg->first_bucket] = q;
  }
}

void mt_zero_allgather_segment_start(mt_group *g, const mt_zero_layout *L, int s,
                                     const void *shard, void *work, mt_dtype t, mt_request **req) {
  ag_segment(g, L, s, shard, work, t, req, 0);
}

void mt_zero_allgather_segment(mt_group *g, mt_backend *be, const mt_zero_layout *L, int s,
                               const void *shard, void *work, mt_dtype t) {
  (void)be;
  ag_segment(g, L, s, shard, work, t, NULL, 1);
}

static mt_request *rs_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L, int b,
                           float *flat, float *scratch, int now) {
  const mt_zero_bucket *k = &L->bkt[b];
  int64_t plen = k->shard_len * L->dp, mine = (int64_t)L->dp_rank * k->shard_len;
  if (plen == k->len)
    return rs(g, now, flat + k->flat_start, flat + k->flat_start + mine, k->shard_len);
  MT_ASSERT(scratch != NULL);
  be->ops->memcpy_d2d(be, scratch, flat + k->flat_start, (size_t)k->len * sizeof(float));
  be->ops->memset0(be, scratch + k->len, (size_t)(plen - k->len) * sizeof(float));
  return rs(g, now, scratch, scratch + mine, k->shard_len);
}

mt_request *mt_zero_reduce_scatter_flat_start(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                              int b, float *flat, float *scratch) {
  return rs_flat(g, be, L, b, flat, scratch, 0);
}

void mt_zero_reduce_scatter_flat_done(mt_backend *be, const mt_zero_layout *L, int b, float *flat,
                                      const float *scratch) {
  const mt_zero_bucket *k = &L->bkt[b];
  int64_t plen = k->shard_len * L->dp, mine = (int64_t)L->dp_rank * k->shard_len;
  if (plen == k->len) return;
  int64_t lo, hi;
  mt_zero_owned_range(L, b, L->dp_rank, &lo, &hi);
  if (hi > lo)
    be->ops->memcpy_d2d(be, flat + lo, scratch + mine, (size_t)(hi - lo) * sizeof(float));
}

void mt_zero_reduce_scatter_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                 float *flat, float *scratch) {
  for (int b = 0; b < L->n_bkt; b++) {
    rs_flat(g, be, L, b, flat, scratch, 1);
    mt_zero_reduce_scatter_flat_done(be, L, b, flat, scratch);
  }
}

static mt_request *ag_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L, int b,
                           void *flat, void *scratch, mt_dtype t, int now) {
  size_t es = mt_dtype_size(t);
  char *f = flat, *sc = scratch;
  const mt_zero_bucket *k = &L->bkt[b];
  int64_t plen = k->shard_len * L->dp, mine = (int64_t)L->dp_rank * k->shard_len;
  if (plen == k->len) {
    char *recv = f + (size_t)k->flat_start * es;
    return ag(g, now, recv + (size_t)mine * es, recv, k->shard_len, t);
  }
  MT_ASSERT(scratch != NULL);
  int64_t lo, hi;
  mt_zero_owned_range(L, b, L->dp_rank, &lo, &hi);
  be->ops->memset0(be, sc + (size_t)mine * es, (size_t)k->shard_len * es);
  if (hi > lo) be->ops->memcpy_d2d(be, sc + (size_t)mine * es, f + (size_t)lo * es,
                                   (size_t)(hi - lo) * es);
  return ag(g, now, sc + (size_t)mine * es, sc, k->shard_len, t);
}

mt_request *mt_zero_allgather_flat_start(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                        int b, void *flat, void *scratch, mt_dtype t) {
  return ag_flat(g, be, L, b, flat, scratch, t, 0);
}

void mt_zero_allgather_flat_done(mt_backend *be, const mt_zero_layout *L, int b, void *flat,
                                 const void *scratch, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  const mt_zero_bucket *k = &L->bkt[b];
  if (k->shard_len * L->dp == k->len) return;
  be->ops->memcpy_d2d(be, (char *)flat + (size_t)k->flat_start * es, scratch, (size_t)k->len * es);
}

void mt_zero_allgather_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L, void *flat,
                            void *scratch, mt_dtype t) {
  for (int b = 0; b < L->n_bkt; b++) {
    ag_flat(g, be, L, b, flat, scratch, t, 1);
    mt_zero_allgather_flat_done(be, L, b, flat, scratch, t);
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
