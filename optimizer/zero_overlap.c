/* optimizer/zero_overlap.c — ZeRO stages 2/3 with overlap_grad_reduce and
 * overlap_param_gather (distrib_optimizer.h; docs/communication.md,
 * "Overlap"): the hooks start a segment's gradient reduce-scatter instead of
 * running it, and complete them all, in start order, before the gradient
 * norm — the same additions into the gradient shard in the same order, so
 * the same bits; stage 3's parameter gathers (its prefetch included) start
 * when the residency policy asks for them and are waited for just before
 * the unit's forward or backward. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "optimizer/distrib_optimizer.h"

static mt_zero_pending *push(mt_zero_pending **list, int *n, int *cap) {
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 16;
    *list = mt_xrealloc(*list, (size_t)*cap * sizeof **list);
  }
  mt_zero_pending *e = &(*list)[(*n)++];
  memset(e, 0, sizeof *e);
  return e;
}

void mt_zero_ov_reduce_start(mt_zero_opt *z, int k, int s, float *work) {
  mt_zero_part *P = &z->part[k];
  mt_zero_pending *e = push(&z->pend, &z->n_pend, &z->cap_pend);
  e->part = k;
  e->seg = s;
  e->unit = -1;
  e->work = work;
  e->req = mt_xcalloc((size_t)P->L.seg[s].n_buckets + 1, sizeof *e->req);
  mt_zero_reduce_scatter_segment_start(P->group, &P->L, s, work, e->req);
}

/* Complete the started reduce-scatters of part k's segment s (k < 0: all),
 * in start order. Segments add into disjoint parts of the gradient shard,
 * so completing one segment's before another's changes no bit. */
static void finish(mt_zero_opt *z, int k, int s) {
  int kept = 0;
  for (int i = 0; i < z->n_pend; i++) {
    mt_zero_pending *e = &z->pend[i];
    if (k >= 0 && (e->part != k || e->seg != s)) {
      z->pend[kept++] = *e;
      continue;
    }
    mt_zero_part *P = &z->part[e->part];
    for (int b = 0; b < P->L.seg[e->seg].n_buckets; b++) mt_wait(e->req[b]);
    mt_zero_reduce_scatter_segment_done(z->be, &P->L, e->seg, e->work, P->grad_shard);
    z->be->ops->free(z->be, e->work);
    free(e->req);
  }
  z->n_pend = kept;
}

void mt_zero_ov_finish_grads(mt_zero_opt *z) { finish(z, -1, 0); }

void mt_zero_ov_finish_segment(mt_zero_opt *z, int k, int s) { finish(z, k, s); }

void mt_zero_ov_gather_start(mt_zero_opt *z, int k, int s, int u) {
  mt_zero_part *P = &z->part[k];
  mt_zero_pending *e = push(&z->gath, &z->n_gath, &z->cap_gath);
  e->part = k;
  e->seg = s;
  e->unit = u;
  e->req = mt_xcalloc((size_t)P->L.seg[s].n_buckets + 1, sizeof *e->req);
  mt_zero_allgather_segment_start(P->group, &P->L, s, P->param_shard, P->pwork[s],
                                  z->be->dtype, e->req);
}

/* 1 when unit a's parameters are read by unit b's pass: itself, and with
 * tied embeddings the embedding (unit 0) and the head (the last) both. */
static int reads(const mt_zero_opt *z, int a, int b) {
  const int last = z->n_units - 1;
  return a == b || (z->tied && (a == 0 || a == last) && (b == 0 || b == last));
}

void mt_zero_ov_gather_wait(mt_zero_opt *z, int u) {
  int kept = 0;
  for (int i = 0; i < z->n_gath; i++) {
    mt_zero_pending *e = &z->gath[i];
    if (u >= 0 && !reads(z, e->unit, u)) {
      z->gath[kept++] = *e;
      continue;
    }
    for (int b = 0; b < z->part[e->part].L.seg[e->seg].n_buckets; b++) mt_wait(e->req[b]);
    free(e->req);
  }
  z->n_gath = kept;
}

void mt_zero_ov_free(mt_zero_opt *z) {
  mt_zero_ov_gather_wait(z, -1);
  mt_zero_ov_finish_grads(z);
  free(z->pend);
  free(z->gath);
  z->pend = z->gath = NULL;
  z->n_pend = z->cap_pend = z->n_gath = z->cap_gath = 0;
}
