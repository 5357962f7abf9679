/* parallel/grad_sync.h — when to launch each gradient bucket's reduction
 * during the backward pass (Megatron-core's overlap_grad_reduce:
 * param_and_grad_buffer.py register_grad_ready / start_grad_sync /
 * finish_grad_sync; docs/communication.md, "Overlap"). Knows nothing of
 * the Transformer nor of the reduction itself: the caller describes its
 * buckets as flat ranges and its parameters as flat ranges owned by UNITS
 * (the model's hook parts: embedding, layers, head), reports each unit's
 * backward with mt_grad_sync_unit_done, and gets a start(bucket) call as
 * soon as every parameter of that bucket is final; finish waits for them.
 *
 * Rules (the same on every rank, so every group sees the same start order):
 *  - a unit's gradients are final at its micro_batches-th backward of the
 *    step (mt_grad_sync_begin's count);
 *  - when a unit becomes final, unit_final(u) runs first;
 *  - a bucket starts when the last unit it touches becomes final; buckets
 *    that become ready together start in decreasing index (reverse order of
 *    use: later layers sit at larger flat offsets);
 *  - at finish, units not final yet become final (unit_final, increasing u);
 *  - parameters of unit -1 (e.g. the tied word embedding across pipeline
 *    stages, summed over the embedding group after the backward) are final
 *    only at mt_grad_sync_finish: their buckets start there, in increasing
 *    index, with every bucket not started by then;
 *  - mt_grad_sync_finish completes all started buckets in start order, then
 *    calls done(bucket) for each in that order.
 * The reduction of a bucket does not depend on when it starts: bucket
 * boundaries, group and collective are the caller's, so the bits are those
 * of the blocking path. */
#ifndef MT_PARALLEL_GRAD_SYNC_H
#define MT_PARALLEL_GRAD_SYNC_H

#include <stdint.h>

#include "parallel/comm.h"

typedef struct {
  void *ctx;
  /* start bucket b's reduction; returns its handle (NULL: nothing to wait) */
  mt_request *(*start)(void *ctx, int b);
  /* after its handle completed (NULL: nothing to do) */
  void (*done)(void *ctx, int b);
  /* unit u's gradients just became final, before its buckets start (e.g.
   * the TP sum of its partial gradients; NULL: nothing to do) */
  void (*unit_final)(void *ctx, int u);
} mt_grad_sync_ops;

typedef struct {
  int n_bkt, n_units;
  int *need0;        /* [n_bkt] distinct units a bucket touches (-1: deferred to finish) */
  int *need;         /* [n_bkt] units still pending this step */
  int *unit_bkt_at;  /* [n_units + 1] CSR into unit_bkt */
  int *unit_bkt;     /* buckets touched by each unit */
  int *calls;        /* [n_units] backward passes seen this step */
  int micro_batches; /* 0: not in a step (unit_done ignored) */
  mt_request **req;  /* [n_bkt] in start order (order[]) */
  int *order;        /* [n_bkt] buckets in start order */
  int n_started;
  int *started;      /* [n_bkt] */
  mt_grad_sync_ops ops;
} mt_grad_sync;

/* Build from n_bkt buckets [bkt_lo[b], bkt_hi[b]) and n_par parameters
 * [par_lo[i], par_hi[i]) of units par_unit[i] (0..n_units-1, or -1:
 * final only at finish). Host memory, no communication. */
void mt_grad_sync_build(mt_grad_sync *S, int n_bkt, const int64_t *bkt_lo, const int64_t *bkt_hi,
                        int n_par, const int64_t *par_lo, const int64_t *par_hi,
                        const int *par_unit, int n_units, const mt_grad_sync_ops *ops);
void mt_grad_sync_free(mt_grad_sync *S);
/* A step of `micro_batches` backward passes per unit begins. */
void mt_grad_sync_begin(mt_grad_sync *S, int micro_batches);
/* Unit u finished one backward pass; at its last one of the step, start
 * the buckets it completes. Outside a step: no-op. */
void mt_grad_sync_unit_done(mt_grad_sync *S, int u);
/* Start the buckets not started yet, complete all (see above); ends the
 * step. */
void mt_grad_sync_finish(mt_grad_sync *S);

#endif
