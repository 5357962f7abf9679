/* parallel/grad_sync.c — bucket readiness during the backward pass (see
 * grad_sync.h). */
#include "parallel/grad_sync.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void mt_grad_sync_build(mt_grad_sync *S, int n_bkt, const int64_t *bkt_lo, const int64_t *bkt_hi,
                        int n_par, const int64_t *par_lo, const int64_t *par_hi,
                        const int *par_unit, int n_units, const mt_grad_sync_ops *ops) {
  memset(S, 0, sizeof *S);
  S->n_bkt = n_bkt;
  S->n_units = n_units;
  S->ops = *ops;
  S->need0 = mt_xcalloc((size_t)n_bkt + 1, sizeof(int));
  S->need = mt_xcalloc((size_t)n_bkt + 1, sizeof(int));
  S->req = mt_xcalloc((size_t)n_bkt + 1, sizeof(mt_request *));
  S->order = mt_xcalloc((size_t)n_bkt + 1, sizeof(int));
  S->started = mt_xcalloc((size_t)n_bkt + 1, sizeof(int));
  S->calls = mt_xcalloc((size_t)n_units + 1, sizeof(int));
  S->unit_bkt_at = mt_xcalloc((size_t)n_units + 2, sizeof(int));
  /* touch[b * n_units + u]: bucket b holds elements of unit u */
  char *touch = mt_xcalloc((size_t)n_bkt * (size_t)n_units + 1, 1);
  for (int b = 0; b < n_bkt; b++)
    for (int i = 0; i < n_par; i++) {
      if (par_hi[i] <= bkt_lo[b] || par_lo[i] >= bkt_hi[b] || par_hi[i] <= par_lo[i]) continue;
      int u = par_unit[i];
      if (u < 0) S->need0[b] = -1; /* final only at finish */
      else if (S->need0[b] >= 0) {
        MT_ASSERT(u < n_units);
        if (!touch[(size_t)b * n_units + u]) S->need0[b]++;
        touch[(size_t)b * n_units + u] = 1;
      }
    }
  int n_links = 0;
  for (int u = 0; u < n_units; u++) {
    S->unit_bkt_at[u] = n_links;
    for (int b = 0; b < n_bkt; b++) n_links += S->need0[b] > 0 && touch[(size_t)b * n_units + u];
  }
  S->unit_bkt_at[n_units] = n_links;
  S->unit_bkt = mt_xcalloc((size_t)n_links + 1, sizeof(int));
  for (int u = 0, k = 0; u < n_units; u++)
    for (int b = n_bkt - 1; b >= 0; b--) /* decreasing: the start order of a unit's buckets */
      if (S->need0[b] > 0 && touch[(size_t)b * n_units + u]) S->unit_bkt[k++] = b;
  free(touch);
}

void mt_grad_sync_free(mt_grad_sync *S) {
  free(S->need0);
  free(S->need);
  free(S->req);
  free(S->order);
  free(S->started);
  free(S->calls);
  free(S->unit_bkt_at);
  free(S->unit_bkt);
  memset(S, 0, sizeof *S);
}

void mt_grad_sync_begin(mt_grad_sync *S, int micro_batches) {
  MT_ASSERT(S->n_started == 0);
  memcpy(S->need, S->need0, sizeof(int) * (size_t)S->n_bkt);
  memset(S->calls, 0, sizeof(int) * (size_t)S->n_units);
  memset(S->started, 0, sizeof(int) * (size_t)S->n_bkt);
  S->micro_batches = micro_batches;
}

static void start(mt_grad_sync *S, int b) {
  S->started[b] = 1;
  S->order[S->n_started] = b;
  S->req[S->n_started++] = S->ops.start(S->ops.ctx, b);
}

void mt_grad_sync_unit_done(mt_grad_sync *S, int u) {
  if (!S->micro_batches || u < 0 || u >= S->n_units) return;
  if (++S->calls[u] != S->micro_batches) return;
  if (S->ops.unit_final) S->ops.unit_final(S->ops.ctx, u);
  for (int k = S->unit_bkt_at[u]; k < S->unit_bkt_at[u + 1]; k++) {
    int b = S->unit_bkt[k];
    if (--S->need[b] == 0) start(S, b);
  }
}

void mt_grad_sync_finish(mt_grad_sync *S) {
  for (int u = 0; u < S->n_units; u++)
    if (S->calls[u] < S->micro_batches || !S->micro_batches) {
      S->calls[u] = S->micro_batches; /* final now */
      if (S->ops.unit_final) S->ops.unit_final(S->ops.ctx, u);
      for (int k = S->unit_bkt_at[u]; k < S->unit_bkt_at[u + 1]; k++) S->need[S->unit_bkt[k]]--;
    }
  for (int b = 0; b < S->n_bkt; b++)
    if (!S->started[b]) start(S, b);
  for (int k = 0; k < S->n_started; k++) {
    if (S->req[k]) mt_wait(S->req[k]);
    S->req[k] = NULL;
  }
  if (S->ops.done)
    for (int k = 0; k < S->n_started; k++) S->ops.done(S->ops.ctx, S->order[k]);
  S->n_started = 0;
  S->micro_batches = 0;
  memset(S->started, 0, sizeof(int) * (size_t)S->n_bkt);
  memcpy(S->need, S->need0, sizeof(int) * (size_t)S->n_bkt);
}
