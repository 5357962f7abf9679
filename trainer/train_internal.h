/* trainer/train_internal.h — the trainer's context and its pieces, shared by
 * trainer/train.c (the loop), train_setup.c (construction), train_ddp.c
 * (data-parallel gradient reduction), train_checkpoint.c (checkpoint glue),
 * replica_check.c (cross-rank parameter checks), train_pipeline.c and
 * zero_trainer.c. Tests use it to drive steps. */
#ifndef MT_TRAINER_TRAIN_INTERNAL_H
#define MT_TRAINER_TRAIN_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>

#include "core/backend.h"
#include "data/gpt_dataset.h"
#include "model/gpt.h"
#include "model/gpt_flops.h"
#include "parallel/comm.h"
#include "parallel/ddp.h"
#include "parallel/grad_sync.h"
#include "parallel/parallel_state.h"
#include "parallel/pipeline.h"
#include "parallel/topology.h"
#include "config/batch_rampup.h"
#include "config/config.h"
#include "checkpoint/state.h"
#include "optimizer/lr_schedule.h"
#include "trainer/lr_config.h"
#include "trainer/metrics.h"
#include "optimizer/optimizer.h"
#include "optimizer/distrib_optimizer.h"

/* overlap_grad_reduce / overlap_param_gather (trainer/train_ddp.c;
 * docs/communication.md, "Overlap"): the reduction buckets of ZeRO 0 (t->ddp)
 * or ZeRO 1 (each part's layout), in one list, with the model's hook parts
 * as units (0 embedding, 1 + l layer l, L + 1 head). */
typedef struct {
  int64_t lo, hi;           /* flat range */
  int part, b;              /* ZeRO 1: part and bucket; ZeRO 0: part -1, b = t->ddp index */
  void *scratch;            /* ZeRO 1 padded bucket: its own staging buffer, else NULL */
  int first_unit;           /* the first hook part that reads its parameters */
  mt_request *gather;       /* overlap_param_gather: all-gather in flight, or NULL */
} mt_overlap_bucket;

typedef struct {
  int grad, param;          /* the two keys */
  int n_units;
  mt_overlap_bucket *bkt;
  int n_bkt;
  mt_grad_sync sync;
  mt_gpt_hooks chained;     /* hooks installed before ours (ZeRO-2), called first */
} mt_trainer_overlap;

typedef struct {
  const mt_config *cfg;
  mt_dist *dist;
  int rank, world_size;
  int dp, dp_rank;          /* dense data parallel: which samples this rank reads */
  mt_topology topo;         /* rank coordinates and group lists */
  mt_parallel_state *ps;    /* this rank's group handles */
  /* Megatron's data_parallel_group_with_context_parallel (dp x cp; the dp
   * group itself when cp == 1): gradient all-reduce / ZeRO sharding, loss
   * and MoE-statistic sums, replica checks. The cp ranks of one data-parallel
   * replica read the same samples (t->dp_rank) and each sums the loss of its
   * own s/cp tokens, so sums over this group count every token of the global
   * batch once. */
  mt_group *dp_group;
  mt_group *world;
  int is_logger;            /* prints logs: first rank of the last pipeline stage */
  mt_backend *be;
  mt_gpt_dataset *data;     /* data_path's dataset (NULL with per-split paths) */
  mt_gpt_dataset *split_data[MT_NUM_SPLITS]; /* the dataset of each split (= data, or the
                                                per-split path's; NULL: none) */
  int has_valid;
  mt_gpt *model;
  mt_adamw opt;             /* zero_stage 0 */
  mt_ddp_buffer ddp;        /* zero_stage 0: gradient all-reduce buckets (parallel/ddp.h) */
  mt_zero_opt *zero;        /* zero_stage >= 1 (optimizer/distrib_optimizer.h), else NULL */
  mt_trainer_overlap ov;    /* overlap_grad_reduce / overlap_param_gather (train_ddp.c) */
  mt_lr_schedule sched;
  mt_batch_rampup rampup;   /* training.rampup_batch_size (config/batch_rampup.h) */
  mt_metrics_file metrics;
  mt_timers timers;         /* logging.timing_log_level (ids MT_TM_*, trainer/metrics.h) */
  mt_tb_writer tb;          /* logging.tensorboard_dir: open on the last world rank */
  int32_t *tokens;          /* host [mbs, s + 1] */
  int64_t *sample_ids;      /* host [mbs] */
  int64_t iteration;        /* last completed iteration */
  int64_t consumed_samples;
  int64_t sched_steps;      /* the LR scheduler's step count in samples (Megatron's
                               num_steps; = consumed_samples unless a checkpoint said otherwise) */
  int64_t skipped_iters, nan_iters;
  double flops_per_iter;    /* of training.global_batch_size samples, B s^2 attention */
  mt_flops_shape flops_shape; /* the model's, logging.flops_formula's formula */
  int64_t n_params_total;   /* unsharded model, summed over pipeline stages */
  double bubble_theory;     /* (p-1)/(v*m) */
  double t_interval;
  double iv_exposed_s, iv_comm_s; /* communication since the last log line (exposed, all) */
  double busy_s;            /* this rank's forward/backward seconds since the last log
                             * line, pipeline waits excluded (logging.log_straggler) */
  /* pipeline parallelism */
  mt_pp_schedule sched_train, sched_eval;
  mt_pp_stats pp_stats;     /* of the last training iteration */
  double pp_loss;           /* loss sum accumulated by the last stage's callbacks */
  int pp_split, pp_train;
  int64_t pp_base, pp_gbs;  /* the global batch the schedule runs over */
  int sched_train_m;        /* micro-batches sched_train was built for (ramp-up) */
  float pp_loss_scale;
  /* MoE: per-expert counts of the last step's whole global batch, [routed
   * n_moe · E | kept n_moe · E] (trainer/train_moe_bias.c); NULL until then */
  int64_t *moe_tokens_per_expert;
  /* checkpoint.save's lock, held by world rank 0 (checkpoint/lock.h) */
  struct mt_ckpt_lock *ckpt_lock;
  /* checkpoint.async_save: the background writer (checkpoint/async_writer.h);
   * NULL for synchronous saves */
  struct mt_ckpt_async *ckpt_async;
} mt_trainer;

typedef struct {
  int64_t global_batch_size; /* of this iteration (the ramp-up's) */
  double seqlen_squared_sum; /* its sum L_i^2 (model/gpt_flops.h) */
  double lm_loss, grad_norm;
  double lr, wd;             /* Megatron's logged values: the scheduler's after this update */
  double lr_applied, wd_applied; /* the values this update used */
  int skipped;
  int64_t comm_bytes[MT_GK_N + 1]; /* per group kind, then world */
  /* this rank's communication time of the step (parallel/comm.h
   * mt_dist_comm_time): per group kind, then all kinds; exposed = the
   * compute thread blocked in it */
  mt_comm_time comm_time[MT_GK_N + 1];
  /* multi-token prediction: per depth the mean loss over the global batch */
  int n_mtp;
  double mtp_loss[MT_MAX_MTP];
  /* MoE (n_moe_layers 0 = dense): see mt_log_record */
  int n_moe_layers;
  double load_balancing_loss, z_loss, dropped_fraction;
  int64_t dropped_tokens;
  double tokens_per_expert_max[64], tokens_per_expert_mean[64];
  /* pipeline: per stage, time idle waiting for other stages / time busy */
  int n_stages;
  double bubble[64];
  double bubble_slowest;  /* of the busiest stage: pure fill/drain idle time */
} mt_step_result;

/* Build everything for cfg; loads the checkpoint named by checkpoint.load.
 * Returns 0, or -1 with a message in err (t is then safe to tear down). */
int mt_trainer_setup(mt_trainer *t, const mt_config *cfg, mt_dist *dist, char *err,
                     size_t errlen);
void mt_trainer_teardown(mt_trainer *t);
/* The model's config for this rank: cfg's model section, whole, plus the
 * padded vocabulary, micro-batch size, seed and this rank's coordinates and
 * groups in ps (what mt_trainer_setup builds; also `megatrain generate`). */
/* Megatron's tokenizer.eod for the data: the id that ends a document in
 * the packed samples (reset_position_ids, reset_attention_mask,
 * eod_mask_loss): the configured tokenizer's (data/tokenizer.h; 50256,
 * GPT-2's <|endoftext|>, for GPT2BPETokenizer without vocab_file, and when
 * none of the three keys is on). -1 and a message in err when the tokenizer
 * does not load or has no EOD. */
enum { MT_GPT2_EOD = 50256 };
int mt_trainer_eod_token(const mt_config *c, char *err, size_t errlen);
mt_gpt_config mt_trainer_model_config(const mt_config *c, const mt_parallel_state *ps);

/* One training iteration (1-based `iteration`): forward/backward over the
 * global batch, gradient reduction, norm, clipping, AdamW update. */
mt_step_result mt_trainer_step(mt_trainer *t, int64_t iteration);

/* zero_stage 0 (trainer/train_ddp.c): lay the flat fp32 gradient buffer out
 * for parallel/ddp.h — runs of dense parameters over the data-parallel
 * group, runs of expert parameters over the expert-data-parallel group, in
 * buckets of parallel.ddp_bucket_size elements — into t->ddp. No
 * communication. */
void mt_trainer_ddp_init(mt_trainer *t);

/* ZeRO (t->zero): stage 1 reduce-scatters instead, stages 2/3 do nothing
 * here (their hooks reduced each layer during backward). Otherwise:
 * sum gradients over the buckets of t->ddp (all-reduce, MT_OP_SUM, over the
 * dp x cp / edp groups). The loss is already normalised by the global token
 * count (global batch x seq_length, on every CP rank), so the sum is the
 * global mean gradient. */
void mt_trainer_reduce_gradients(mt_trainer *t);
/* Overlap (trainer/train_ddp.c): init after the model and optimizer exist
 * (no-op unless a key is on; ZeRO 2/3 gradients overlap in their own hooks);
 * begin_step before the step's first micro-batch; finalize_grads in place
 * of mt_gpt_finalize_grads; params_start after the optimizer step starts
 * the parameter all-gathers (overlap_param_gather); params_wait completes the parameter
 * all-gathers still in flight (before anything but a forward pass reads
 * the parameters: checkpoints, replica checks, teardown); free. */
void mt_trainer_overlap_init(mt_trainer *t);
void mt_trainer_overlap_begin_step(mt_trainer *t, int64_t global_batch);
void mt_trainer_finalize_grads(mt_trainer *t);
void mt_trainer_params_start(mt_trainer *t);
void mt_trainer_params_wait(mt_trainer *t);
void mt_trainer_overlap_free(mt_trainer *t);

/* Fill t->tokens / t->sample_ids with micro-batch rows [first, first + mbs)
 * of the global batch starting at sample base_sample of `split`. */
void mt_trainer_load_micro_batch(mt_trainer *t, int split, int64_t base_sample, int64_t first);
/* mt_gpt_forward_backward of the micro-batch in t->tokens / t->sample_ids
 * (no pipeline), timing its forward and backward (timing_log_level 2). */
double mt_trainer_forward_backward(mt_trainer *t, int train, float loss_scale);

/* Build the 1F1B / interleaved schedules of this stage (train and eval). */
int mt_trainer_pipeline_setup(mt_trainer *t, char *err, size_t errlen);
void mt_trainer_pipeline_free(mt_trainer *t);
/* Run this stage's schedule over this rank's share of one global batch of
 * gbs samples (parallel/pipeline.h; the training schedule is rebuilt when a
 * ramp-up changes its micro-batch count); returns the sum of token losses
 * on the last stage, 0 elsewhere. */
double mt_trainer_run_pipeline(mt_trainer *t, int split, int64_t base, int64_t gbs, int train,
                               float loss_scale);

/* Mean validation loss over eval_iters global batches of the valid split at
 * `iteration` (a multiple of eval_interval): evaluation k reads the batches
 * after those of evaluations 1..k-1, as Megatron's validation iterator. */
double mt_trainer_evaluate(mt_trainer *t, int64_t iteration);

/* Check (trainer/replica_check.c) that replicated parameters are bitwise
 * identical: every parameter across the data x context-parallel group
 * (t->dp_group), the experts
 * across the expert-data-parallel group, the first and last pipeline
 * stage's copies of a tied word embedding (embedding group), and the
 * tp-replicated tensors across the tensor-parallel group, with the fp32
 * master weights where the unsharded optimizer keeps them (bf16) (64-bit FNV-1a hash
 * of the bytes compared with an all-reduce of max and min). Collective over
 * those groups. Returns 0, or -1 with a message naming the group. */
int mt_trainer_check_replicas(mt_trainer *t, char *err, size_t errlen);

/* MoE after each step (trainer/train_moe_bias.c): sum the routed and kept
 * slots per expert of the step over dp x cp and pp (every rank gets the whole
 * global batch's counts; not over TP: its ranks route the same tokens) into
 * t->moe_tokens_per_expert, then update the expert bias from the kept ones
 * (mt_gpt_moe_update_expert_bias; a no-op without moe_router_enable_expert_bias).
 * Collective over t->dp_group and the pipeline group. */
void mt_trainer_moe_bias_step(mt_trainer *t);
/* The step's MoE statistics into r (dropped tokens, balance and z losses,
 * tokens per expert), summed over dp x cp and pp. Collective over
 * t->dp_group and the pipeline group. */
void mt_trainer_moe_step_stats(mt_trainer *t, mt_step_result *r);
/* The start-up line describing the MoE layers (logger only; docs/moe.md). */
void mt_trainer_print_moe_summary(const mt_trainer *t);
/* Point rec's per-layer lists (tokens_per_expert, expert_bias) at that state. */
void mt_trainer_moe_log_fields(mt_trainer *t, mt_log_record *rec);
/* Check that every rank holds bitwise the same expert biases (all MoE layers;
 * hash compared over the world). Returns 0 or -1 with a message. */
int mt_trainer_check_expert_bias(mt_trainer *t, char *err, size_t errlen);

/* Checkpoint buffers of this rank's stage's MoE layers (expert bias fp32 and
 * the last global batch's counts int64, whichever the model holds; names
 * decoder.layers.L.mlp.router.{expert_bias,tokens_per_expert}) pointing into
 * the model; *out malloc'ed (free()); returns their number (0: none). */
int mt_trainer_moe_ckpt_buffers(mt_trainer *t, mt_ckpt_buffer **out);
/* After a checkpoint load: every stage restored its own layers' biases; share
 * them over the pipeline group so every rank holds all of them again. */
void mt_trainer_moe_bias_after_load(mt_trainer *t);

/* ZeRO glue (trainer/zero_trainer.c): build the sharded optimizer for
 * parallel.zero_stage >= 1 over t->dp_group (dp x cp); destroy (NULL is a no-op);
 * copy the full parameters into host[flat numel * sizeof(T)] (collective
 * over dp for stage 3). */
mt_zero_opt *mt_trainer_zero_create(mt_trainer *t);
void mt_trainer_zero_destroy(mt_zero_opt *z);
void mt_trainer_zero_full_params_host(mt_trainer *t, void *host);
/* Bytes and bus bytes moved by this rank's collectives since the counters were
 * last reset (every step resets them), summed over all of its groups. */
void mt_trainer_comm_totals(const mt_trainer *t, int64_t *bytes, int64_t *bus_bytes);

/* Checkpoint glue (trainer/train_checkpoint.c). Load: when checkpoint.load
 * is set, fill this rank's model, optimizer state (ZeRO shards too) and MoE
 * buffers from the layout-free checkpoint, whatever layout wrote it
 * (checkpoint/views.h), and restore iteration, sample counters and Adam
 * step; training.finetune loads the weights only and starts afresh. A
 * checkpoint of the previous per-layout format loads under the layout that
 * wrote it. Refuses another model shape, a damaged checkpoint, another
 * training.seed. When only checkpoint.save is set and already holds a
 * checkpoint, warns on rank 0. Collective over the world (and dp for
 * ZeRO-1/2's parameter all-gather). Returns 0, or -1 with a message; when
 * all ranks agreed on the error only rank 0's err holds it (others are
 * empty, so the message is printed once). */
int mt_trainer_load_checkpoint(mt_trainer *t, char *err, size_t errlen);
/* Save the layout-free checkpoint of the current state to checkpoint.save
 * (each rank writes its own pieces: data-parallel rank 0 its boxes, ZeRO
 * ranks the sub-ranges they own; checkpoint/views.h); rank 0 prints
 * "saved checkpoint at iteration N to DIR in X s (Y MiB)". Collective over
 * the world. Returns 0, or -1 with a message. */
int mt_trainer_save(mt_trainer *t, char *err, size_t errlen);
/* At an iteration boundary (every rank): publish a finished asynchronous
 * save (wait = 1: wait for it; every exit path does). 0, or -1 with a
 * message (the save failed; previous checkpoint untouched). No-op for
 * synchronous saves. */
int mt_trainer_save_poll(mt_trainer *t, int wait, char *err, size_t errlen);
/* checkpoint.async_save: create t->ckpt_async and its host snapshot (the
 * size of this rank's share of a checkpoint, touched now). No communication. */
void mt_trainer_async_init(mt_trainer *t);

/* printf to stdout on the logging rank only (flushed). */
static inline void mt_trainer_say(const mt_trainer *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void mt_trainer_say(const mt_trainer *t, const char *fmt, ...) {
  if (!t->is_logger) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}
/* The start-up summary (layout, model, parameters, batch, memory, FLOPs) and
 * the allocator peaks of the training loop (trainer/train_setup.c; with
 * MEGATRAIN_MEM_REPORT every rank also writes its peaks to stderr). Logger
 * prints; no communication. */
void mt_trainer_print_summary(const mt_trainer *t);
void mt_trainer_report_peaks(const mt_trainer *t);

#endif
