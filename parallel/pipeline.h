/* parallel/pipeline.h — pipeline-parallel schedules (Narayanan et al. 2021,
 * arXiv:2104.04473 §2.2: 1F1B "PipeDream-Flush" and the interleaved 1F1B
 * schedule; Megatron-LM pipeline_parallel/schedules.py) and their executor.
 * Knows nothing of the Transformer: the model is reached through callbacks
 * and the tensors passed between stages are opaque buffers.
 */
#ifndef MT_PARALLEL_PIPELINE_H
#define MT_PARALLEL_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "parallel/comm.h"

typedef struct {
  int fwd;   /* 1 forward, 0 backward */
  int chunk; /* model chunk on this stage (0..v-1) */
  int mb;    /* micro-batch (0..m-1) */
} mt_pp_action;

typedef struct {
  int n_actions;        /* 2·m·v (m·v when forward only) */
  int n_warmup;         /* forwards before the first backward */
  int n_steady;         /* forward+backward pairs */
  int n_cooldown;       /* backwards after the last forward */
  mt_pp_action *actions;
} mt_pp_schedule;

/* The two builders below fill s with stage r's order of compute for m
 * micro-batches and p stages (0 <= r < p); both produce the same three
 * phases — n_warmup forwards, n_steady (forward, backward) pairs, then
 * n_cooldown backwards — that mt_pp_run executes. forward_only (evaluation):
 * the m·v forwards in order, nothing else. Return 0, or -1 with a message
 * naming the numbers in err (p, m < 1, r out of range, and the builder's
 * own constraints). Host memory; no communication. Free with
 * mt_pp_schedule_free. */

/* 1F1B, "PipeDream-Flush" (Narayanan et al. 2021 §2.2, Fig. 4 top; Megatron
 * forward_backward_pipelining_without_interleaving): one model chunk per
 * stage (every action has chunk 0); min(p−r−1, m) warm-up forwards, then
 * alternating one forward and one backward, then the remaining backwards,
 * so stage r holds at most min(p−r, m) micro-batches in flight. */
int mt_pp_schedule_1f1b(mt_pp_schedule *s, int p, int m, int r, int forward_only, char *err,
                        size_t errlen);

/* Interleaved 1F1B (Narayanan et al. 2021 §2.2.2, Fig. 4 bottom; Megatron
 * forward_backward_pipelining_with_interleaving): v >= 2 model chunks per
 * stage; warm-up (p−r−1)·2 + (v−1)·p forwards (all m·v when m == p, capped
 * at m·v), micro-batches taken in groups of p per chunk (forward chunk =
 * (k mod p·v) div p, backward chunk reversed). Requires m % p == 0. */
int mt_pp_schedule_interleaved(mt_pp_schedule *s, int p, int v, int m, int r, int forward_only,
                               char *err, size_t errlen);
void mt_pp_schedule_free(mt_pp_schedule *s);

/* Peers of an action on stage r: where its forward input comes from / its
 * output goes (and, reversed, its gradients). -1 when none (the model's
 * first chunk has no input, its last no output). *peer_chunk receives the
 * chunk index on the peer stage. */
int mt_pp_prev_stage(int p, int v, int r, int chunk, int *peer_chunk);
int mt_pp_next_stage(int p, int v, int r, int chunk, int *peer_chunk);
/* Tag of a message for (receiver chunk, micro-batch, direction):
 * 2 (mb v + chunk) + is_grad, < 32768 (asserted). Bit 0 is the direction
 * (activations even, gradients odd): the NCCL engine's tagged p2p puts the
 * two on different channels (comm.h mt_isend). */
int mt_pp_tag(int v, int chunk, int mb, int is_grad);

/* The model, as the executor sees it. Buffers are device memory of
 * `count` elements of `dtype` ([s/tp, b, h] activations). */
typedef struct {
  void *ctx;
  mt_backend *be;       /* comm buffers (MT_MEM_COMM) and copies */
  int64_t count;
  mt_dtype dtype;
  void (*begin)(void *ctx, int chunk, int mb);
  void *(*input_buffer)(void *ctx, int chunk, int mb);
  void (*forward)(void *ctx, int chunk, int mb);
  void *(*output_buffer)(void *ctx, int chunk, int mb);
  void *(*grad_buffer)(void *ctx); /* output grad in, input grad out */
  void (*backward)(void *ctx, int chunk, int mb);
  void (*end)(void *ctx, int chunk, int mb);
} mt_pp_model;

typedef struct {
  double wall_s;        /* time in mt_pp_run */
  double wait_s;        /* time blocked waiting for another stage (idle: the bubble) */
  int max_in_flight;    /* most micro-batches begun but not ended at once */
} mt_pp_stats;

/* Run schedule s on stage r over the pipeline group pp (group rank = stage):
 * receives each forward input from the previous stage and each output
 * gradient from the next one (the wait for it counted as wait time), sends
 * outputs and input gradients without blocking (gradients from a pool of
 * copies), and waits for every send before returning. overlap_p2p_comm
 * (Megatron's --overlap-p2p-communication): the receive of the next action
 * is posted before the current one computes, into one of two buffers the
 * executor owns (MT_MEM_COMM, 2 x count elements), waited for just before
 * that action and copied into the model's buffer, so the transfer overlaps
 * the current action's compute; 0: posted when its action starts. Both
 * modes post the same messages in the same order per (peer, direction) and
 * wait at the same points, so results, counters and the watchdog's records
 * are the same (docs/communication.md, "Overlap: pipeline"). Deadlock-free
 * for the schedules of mt_pp_schedule_1f1b and mt_pp_schedule_interleaved
 * (v the number of chunks the schedule was built for: 1 for 1F1B). */
/* Buffers of one stage tensor that mt_pp_run allocates for the receives it
 * posts ahead with overlap_p2p_comm on stage r running s: 0, 1 or 2 (action
 * i + 1's receive goes to buffer (i + 1) mod 2; a buffer is allocated at its
 * first use). The planner's communication memory. */
int mt_pp_ahead_buffers(int p, int v, int r, const mt_pp_schedule *s);
void mt_pp_run(mt_group *pp, int p, int v, int r, const mt_pp_schedule *s, const mt_pp_model *md,
               int overlap_p2p_comm, mt_pp_stats *stats);

#endif
