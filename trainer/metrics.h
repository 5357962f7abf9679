/* trainer/metrics.h — throughput accounting and the Megatron-style log line
 * plus one JSON object per iteration in the metrics file (JSONL).
 */
#ifndef MT_TRAINER_METRICS_H
#define MT_TRAINER_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "config/model_config.h"
#include "core/tb_writer.h"
#include "core/timers.h"
#include "parallel/comm.h"

/* Megatron's timers that the trainer records, in the order training.py's
 * training_log lists them (docs/observability.md). Level 1: once per
 * iteration; level 2: per micro-batch. */
enum {
  MT_TM_FORWARD_BACKWARD,  /* the forward and backward passes of the global batch */
  MT_TM_ALL_GRADS_SYNC,    /* gradient reduction after the last backward (finalize_model_grads) */
  MT_TM_PARAMS_ALL_GATHER, /* ZeRO-1/2: the updated parameters' all-gather */
  MT_TM_OPT_CLIP,          /* optimizer-clip-main-grad: the global gradient norm */
  MT_TM_OPT_INNER,         /* optimizer-inner-step: the Adam update */
  MT_TM_OPTIMIZER,         /* the whole optimizer step (norm, update, gather) */
  MT_TM_BATCH_GENERATOR,   /* reading a micro-batch's samples */
  MT_TM_FORWARD_COMPUTE,   /* one micro-batch's (model chunk's) forward */
  MT_TM_BACKWARD_COMPUTE,  /* one micro-batch's (model chunk's) backward */
  MT_TM_N
};
extern const mt_timer_def mt_trainer_timer_defs[MT_TM_N];

typedef struct {
  int64_t iteration, train_iters;
  int64_t consumed_samples;
  double elapsed_ms;        /* per iteration, averaged over the log interval */
  double tokens_per_s;      /* whole job */
  double tflops_per_device;
  const char *flops_formula; /* logging.flops_formula behind tflops/mfu (NULL: not printed) */
  double mfu;               /* < 0: unknown peak */
  double lr;                /* Megatron's logged learning rate: its scheduler's value after the
                               update (the next update's), 6 significant digits on the console */
  double weight_decay;      /* the same convention (metrics file only) */
  double lr_applied, wd_applied; /* what this iteration's update used (metrics file only) */
  int64_t global_batch_size;
  double lm_loss;
  double grad_norm;
  int64_t skipped_iters, nan_iters;
  double eta_s;             /* estimated time to finish */
  /* multi-token prediction (n_mtp 0 = off): per depth k = 1..n_mtp the
   * cross-entropy of the token k + 1 ahead, per unmasked shifted target of
   * the global batch (console "mtp_k loss", averaged over the log interval
   * like lm loss; JSONL "mtp_loss": the list) */
  int n_mtp;
  double mtp_loss[MT_MAX_MTP];
  /* mixture of experts (n_moe_layers 0 = dense model): auxiliary losses
   * before their coefficients, summed over MoE layers and averaged over the
   * micro-batches of the global batch; per MoE layer the routed token slots
   * of the busiest expert and the mean over experts (whole global batch);
   * dropped slots and their fraction of all routed slots */
  int n_moe_layers;
  double load_balancing_loss, z_loss, dropped_fraction;
  int64_t dropped_tokens;
  double tokens_per_expert_max[64], tokens_per_expert_mean[64];
  /* every MoE layer (moe_list_layers of them, E experts): routed slots per
   * expert of the step's global batch [moe_list_layers · E] and, with
   * moe_router_enable_expert_bias, the expert bias after the step's update
   * (else NULL); JSONL "tokens_per_expert" / "expert_bias" (lists of lists) */
  int moe_list_layers, moe_E;
  const int64_t *tokens_per_expert;
  const float *expert_bias;
  /* bytes this rank sent into collectives during the step, per group; its
   * communication time (ms; the log line: means of the interval): all of it
   * and the exposed part (the compute thread waiting), in total and per
   * group (JSONL comm_ms / exposed_comm_ms, and by group) */
  int n_comm;
  const char *comm_group[16];
  int64_t comm_bytes[16];
  double comm_ms, exposed_comm_ms;
  int n_comm_time;
  const char *comm_time_group[16];
  double comm_time_ms[16], exposed_time_ms[16];
  /* pipeline bubble per stage: idle / busy time (paper: (p-1)/(v m)) */
  int n_stages;
  double bubble[64];
  double bubble_theory;
  double bubble_slowest;    /* idle/busy of the busiest stage (imbalance excluded) */
  /* straggler report (logging.log_straggler, world size > 1; has_straggler 0 = absent): the
   * slowest and fastest rank's mean forward/backward time per iteration over
   * the log interval, world ranks (JSONL straggler_max_ms / _max_rank /
   * straggler_min_ms / _min_rank) */
  int has_straggler;
  double straggler_max_ms, straggler_min_ms;
  int straggler_max_rank, straggler_min_rank;
} mt_log_record;

/* Print the Megatron-style line for r to f. */
void mt_log_line(FILE *f, const mt_log_record *r);

typedef struct {
  FILE *f; /* NULL = disabled */
} mt_metrics_file;

/* Open the JSONL file, creating parent directories. A fresh run
 * (resume_iteration 0) truncates it; a run resumed at iteration k keeps the
 * records of iterations <= k, drops later ones (left by a run that went
 * further than the checkpoint) and appends. Returns 0, or -1 with a message. */
int mt_metrics_open(mt_metrics_file *mf, const char *path, int64_t resume_iteration, char *err,
                    size_t errlen);
/* Write one object: training record (val_loss < 0 means absent). Floats
 * round-trip (%.17g). */
void mt_metrics_write(mt_metrics_file *mf, const mt_log_record *r, double val_loss);
void mt_metrics_close(mt_metrics_file *mf);

/* TensorBoard scalars of one training iteration r (Megatron's training_log
 * tags): learning-rate, batch-size, lm loss, grad-norm, each also "<tag> vs
 * samples" at step consumed_samples; with mem_bytes >= 0 mem-allocated-bytes
 * and mem-max-allocated-bytes (mem_peak). No-op when tb is closed. */
void mt_tb_iteration(mt_tb_writer *tb, const mt_log_record *r, double mem_bytes,
                     double mem_peak);
/* At a log line, on every rank (collective over world when timers are on):
 * gathers every rank's timers, `print` (the logger) prints Megatron's report
 * after its line (option: logging.timing_log_option), tb (open on the last
 * rank; tb_timers: logging.log_timers_to_tensorboard) gets iteration-time
 * (s), throughput (TFLOP/s/device) and "<name>-time" (max over ranks, s per
 * iteration) of `line`; then the timers restart from 0. n_iv: iterations
 * of the interval. */
void mt_log_timers(mt_timers *ts, mt_group *world, int print, const char *option,
                   mt_tb_writer *tb, int tb_timers, const mt_log_record *line, double n_iv);

#endif
