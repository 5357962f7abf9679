/* optimizer/zero_residency.c — the ZeRO-2/3 residency policy (see
 * zero_residency.h). */
#include "optimizer/zero_residency.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

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
