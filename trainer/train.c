/* trainer/train.c — the training loop: micro-batches with gradient
 * accumulation, data-parallel gradient reduction, global grad norm and
 * clipping, AdamW with the LR schedule, evaluation, logging, checkpoints.
 * It sequences work; the math happens in model/ and the backend. */
#include "trainer/train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/gpt_dataset.h"
#include "model/gpt.h"
#include "optimizer/lr_schedule.h"
#include "trainer/metrics.h"
#include "optimizer/optimizer.h"
#include "trainer/train_internal.h"
#include "trainer/train_signals.h"
#include "trainer/train_watchdog.h"

/* Print this rank's error; an empty message means another rank prints the
 * one every rank agreed on (checkpoint loading). */
static void rank_error(const mt_trainer *t, const char *msg) {
  if (!msg[0]) return;
  if (t->world_size > 1) fprintf(stderr, "[rank %d] megatrain: error: %s\n", t->rank, msg);
  else fprintf(stderr, "megatrain: error: %s\n", msg);
  fflush(stderr);
}

/* Tokens of the global batch at `base` that count in the loss: global
 * batch x seq_length, or with eod_mask_loss those whose input token is not
 * the end-of-document token (every rank reads the whole global batch's
 * samples from the dataset: no communication, the same count everywhere).
 * With ssq non-NULL also its sum L_i^2 for the FLOPs (model/gpt_flops.h;
 * the documents' with reset_attention_mask under the megatron formula, else
 * gbs s^2) from the same reads. */
static int64_t global_loss_tokens(mt_trainer *t, int split, int64_t base, int64_t gbs,
                                  double *ssq) {
  const mt_config *c = t->cfg;
  const int64_t mbs = c->training.micro_batch_size, s = c->model.seq_length;
  const int docs = ssq && c->data.reset_attention_mask && t->flops_shape.formula == MT_FLOPS_MEGATRON;
  if (ssq) *ssq = (double)gbs * (double)s * (double)s;
  if (!c->data.eod_mask_loss && !docs) return gbs * s;
  const mt_gpt_config *mc = mt_gpt_get_config(t->model);
  int64_t n = 0;
  if (docs) *ssq = 0.0;
  for (int64_t first = 0; first < gbs; first += mbs) {
    mt_trainer_load_micro_batch(t, split, base, first);
    n += mt_gpt_loss_tokens(mc, t->tokens);
    if (docs) *ssq += mt_gpt_seqlen_squared_sum(mc, t->tokens);
  }
  return n;
}

/* Forward (and backward when train) over this rank's share of one global
 * batch of gbs samples (training.global_batch_size, or the ramp-up's batch
 * of the iteration) that starts at sample `base`; returns the global token-loss sum and
 * in *n_tokens the number of tokens in it (global_loss_tokens). Every rank
 * scales its token losses by 1 / that count (with eod_mask_loss: the
 * unmasked tokens of the whole global batch, Megatron's
 * calculate_per_token_loss normalization): with context parallelism a rank
 * holds s/cp tokens of each sample, but the divisor stays the global token
 * count (not Megatron's former local one) and the sum over dp x cp counts
 * each token once. */
static double run_global_batch(mt_trainer *t, int split, int64_t base, int64_t gbs, int train,
                               int64_t *n_tokens, double *ssq) {
  const mt_config *c = t->cfg;
  const int64_t mbs = c->training.micro_batch_size;
  const int64_t per_rank = gbs / t->dp, n_micro = per_rank / mbs;
  *n_tokens = global_loss_tokens(t, split, base, gbs, ssq);
  const float loss_scale = (float)(1.0 / (double)(*n_tokens > 0 ? *n_tokens : 1));
  double loss_sum = 0.0;
  if (train) t->busy_s += mt_straggler_failpoint(t->rank);
  if (train) mt_timer_start(&t->timers, MT_TM_FORWARD_BACKWARD);
  const double t0 = mt_now();
  if (t->topo.pp > 1) {
    /* the last stage computes the loss; the others contribute 0 */
    loss_sum = mt_trainer_run_pipeline(t, split, base, gbs, train, loss_scale);
    if (train) t->busy_s += t->pp_stats.wall_s - t->pp_stats.wait_s;
    mt_allreduce(t->ps->pp, &loss_sum, 1, MT_F64, MT_OP_SUM);
  } else {
    for (int64_t mb = 0; mb < n_micro; mb++) {
      mt_group_set_micro_batch(t->dp_group, (int)mb);
      mt_trainer_load_micro_batch(t, split, base, t->dp_rank * per_rank + mb * mbs);
      loss_sum += mt_trainer_forward_backward(t, train, loss_scale);
      if (t->zero) mt_zero_opt_flush(t->zero);
    }
    if (train) t->busy_s += mt_now() - t0;
  }
  if (train) mt_timer_stop(&t->timers, MT_TM_FORWARD_BACKWARD);
  mt_allreduce(t->dp_group, &loss_sum, 1, MT_F64, MT_OP_SUM);
  return loss_sum;
}


/* The step's multi-token prediction losses (mt_gpt_mtp_losses): per depth
 * the sums over the stages and the data x context-parallel ranks, loss over
 * count. Collective over pp and dp x cp. */
static void mtp_step_losses(mt_trainer *t, mt_step_result *r) {
  double v[2 * MT_MAX_MTP];
  const int D = mt_gpt_mtp_losses(t->model, v, v + MT_MAX_MTP);
  if (D <= 0) return;
  memmove(v + D, v + MT_MAX_MTP, (size_t)D * sizeof(double)); /* [sums | counts] */
  if (t->topo.pp > 1) mt_allreduce(t->ps->pp, v, 2 * D, MT_F64, MT_OP_SUM);
  mt_allreduce(t->dp_group, v, 2 * D, MT_F64, MT_OP_SUM);
  r->n_mtp = D;
  for (int k = 0; k < D; k++) r->mtp_loss[k] = v[D + k] > 0 ? v[k] / v[D + k] : 0.0;
}

double mt_trainer_evaluate(mt_trainer *t, int64_t iteration) {
  const mt_config *c = t->cfg;
  const int64_t gbs = c->training.global_batch_size;
  /* Megatron's consumed_valid_samples: evaluation k (at iteration
   * k · eval_interval) continues after the k − 1 before it */
  const int64_t n_before = iteration / c->training.eval_interval - 1;
  const int64_t base = (n_before > 0 ? n_before : 0) * c->training.eval_iters * gbs;
  double sum = 0.0;
  int64_t tokens = 0; /* Megatron's evaluate: total loss over total loss tokens */
  for (int64_t i = 0; i < c->training.eval_iters; i++) {
    int64_t n = 0;
    sum += run_global_batch(t, MT_SPLIT_VALID, base + i * gbs, gbs, 0, &n, NULL);
    tokens += n;
  }
  return tokens > 0 ? sum / (double)tokens : 0.0;
}

mt_step_result mt_trainer_step(mt_trainer *t, int64_t iteration) {
  const mt_config *c = t->cfg;
  mt_step_result r = {0};
  for (int k = 0; k <= MT_GK_N; k++) {
    mt_group *g = k < MT_GK_N ? t->ps->by_kind[k] : t->ps->world_group;
    if (g) mt_group_reset_counters(g);
  }
  mt_dist_reset_comm_time(t->dist);
  if (t->zero) mt_zero_opt_zero_grad(t->zero);
  else mt_gpt_zero_grad(t->model);
  mt_gpt_moe_stats_reset(t->model);
  mt_gpt_mtp_stats_reset(t->model);
  int64_t loss_tokens = 0;
  /* Megatron's update_num_microbatches(consumed_train_samples) */
  const int64_t gbs = mt_batch_rampup_gbs(&t->rampup, t->consumed_samples);
  r.global_batch_size = gbs;
  mt_trainer_overlap_begin_step(t, gbs);
  double loss_sum =
      run_global_batch(t, MT_SPLIT_TRAIN, t->consumed_samples, gbs, 1, &loss_tokens,
                       &r.seqlen_squared_sum);
  /* ZeRO-2/3 finalize each layer's SP-partial gradients in their hooks */
  mt_timer_start(&t->timers, MT_TM_ALL_GRADS_SYNC);
  if (!t->zero || t->zero->o.stage == 1) mt_trainer_finalize_grads(t);
  mt_trainer_reduce_gradients(t);
  mt_timer_stop(&t->timers, MT_TM_ALL_GRADS_SYNC);
  r.lm_loss = loss_tokens > 0 ? loss_sum / (double)loss_tokens : 0.0;
  mtp_step_losses(t, &r);
  /* squares of sharded tensors from every model-parallel rank, replicated
   * tensors once (tp rank 0) */
  double sumsq;
  mt_timer_start(&t->timers, MT_TM_OPTIMIZER);
  mt_timer_start(&t->timers, MT_TM_OPT_CLIP);
  if (t->zero) {
    sumsq = mt_zero_opt_grad_sumsq(t->zero); /* over dp and mp */
  } else {
    /* dense over mp (skips pipeline copies); each expert shard once: over
     * etp x ep and the stages; one device-to-host copy */
    sumsq = mt_grad_sumsq_reduced(&t->opt, t->ps->tp_rank == 0, c->model.num_experts > 0,
                                  t->ps->mp, t->ps->etp_ep, t->ps->pp);
  }
  r.grad_norm = sqrt(sumsq);
  mt_timer_stop(&t->timers, MT_TM_OPT_CLIP);
  /* Megatron's OptimizerParamScheduler counts samples and is stepped after
   * optimizer.step(): update k uses the values at the samples consumed
   * before it ((k - 1) · gbs with a constant batch; lr_warmup_init for the
   * first warmup update), and the logged values are those after the step
   * (k · gbs); the step grows by the iteration's batch (the ramp-up's) */
  (void)iteration;
  const double before = (double)t->sched_steps;
  const double after = before + (double)gbs;
  r.lr_applied = mt_lr_sched_lr(&t->sched, before);
  r.wd_applied = mt_lr_sched_wd(&t->sched, before);
  const float lr = (float)r.lr_applied, wd = (float)r.wd_applied;
  mt_timer_start(&t->timers, MT_TM_OPT_INNER);
  if (!isfinite(r.lm_loss) || !isfinite(r.grad_norm)) {
    r.skipped = 1;
  } else if (t->zero) {
    t->zero->o.weight_decay = wd;
    mt_zero_opt_step(t->zero, lr, mt_clip_coefficient(r.grad_norm, c->training.clip_grad));
    mt_trainer_params_start(t); /* overlap_param_gather: behind the next forward */
  } else {
    t->opt.weight_decay = wd;
    mt_adamw_step(&t->opt, lr, mt_clip_coefficient(r.grad_norm, c->training.clip_grad));
  }
  mt_timer_stop(&t->timers, MT_TM_OPT_INNER);
  mt_timer_stop(&t->timers, MT_TM_OPTIMIZER);
  r.lr = mt_lr_sched_lr(&t->sched, after);
  r.wd = mt_lr_sched_wd(&t->sched, after);
  t->consumed_samples += gbs;
  t->sched_steps += gbs; /* opt_param_scheduler.step(increment=gbs), skipped updates too */
  mt_trainer_moe_bias_step(t); /* every step, also a skipped one (Megatron) */
  mt_trainer_moe_step_stats(t, &r);
  for (int k = 0; k <= MT_GK_N; k++) {
    mt_group *g = k < MT_GK_N ? t->ps->by_kind[k] : t->ps->world_group;
    if (!g || (k < MT_GK_N && mt_parallel_state_is_alias(t->ps, (mt_group_kind)k))) continue;
    const mt_coll_counter *cc = mt_group_counters(g);
    for (int op = 0; op < MT_COLL_N; op++) r.comm_bytes[k] += cc[op].bytes;
  }
  for (int k = 0; k < MT_GK_N; k++) /* before the bubble's all-gather */
    r.comm_time[k] = mt_dist_comm_time(t->dist, mt_group_kind_name((mt_group_kind)k));
  r.comm_time[MT_GK_N] = mt_dist_comm_time(t->dist, NULL);
  if (t->topo.pp > 1 && t->topo.pp <= 64) {
    /* measured bubble of every stage (gathered; not counted in comm_bytes) */
    const mt_pp_stats *st = &t->pp_stats;
    double mine[2] = {st->wall_s - st->wait_s, st->wait_s}, all[128];
    mt_allgather(t->ps->pp, mine, all, 2, MT_F64);
    r.n_stages = t->topo.pp;
    int slow = 0;
    for (int k = 0; k < r.n_stages; k++) {
      r.bubble[k] = all[2 * k] > 0 ? all[2 * k + 1] / all[2 * k] : 0.0;
      if (all[2 * k] > all[2 * slow]) slow = k;
    }
    r.bubble_slowest = r.bubble[slow];
  }
  return r;
}


int mt_train(const mt_config *cfg, mt_dist *dist) {
  mt_trainer T, *t = &T;
  char err[2048];
  /* handlers first: a preemption during set-up (e.g. a long checkpoint
   * load) is acted on at the first iteration boundary; before the watchdog
   * thread, which may write to stderr (the log streams are swapped here) */
  mt_exit_watch watch;
  if (mt_exit_watch_start(&watch, &cfg->training, mt_now(), err, sizeof err) != 0) {
    fprintf(stderr, "megatrain: error: %s\n", err);
    return 1;
  }
  mt_trainer_watchdog_start(cfg, dist);
  if (mt_trainer_setup(t, cfg, dist, err, sizeof err) != 0) {
    rank_error(t, err);
    mt_trainer_teardown(t);
    mt_exit_watch_stop(&watch);
    return 1;
  }
  mt_trainer_print_summary(t);
  if (cfg->checkpoint.save[0] && cfg->checkpoint.async_save)
    mt_trainer_async_init(t);
  /* peaks from here on are the training loop's (not set-up transients such
   * as ZeRO-2/3's full flat buffers before they are sharded) */
  mt_mem_reset_peak(&t->be->mem);
  const mt_training_config *tc = &cfg->training;
  int64_t start = t->iteration;
  if (start > 0) mt_trainer_say(t, "> resumed from iteration %lld (consumed samples %lld)\n",
                     (long long)start, (long long)t->consumed_samples);
  mt_dist_reset_comm_time(dist); /* the training loop's communication from here */
  double t_log = mt_now(), t_start = mt_now(), acc_loss = 0.0, acc_norm = 0.0;
  double acc_mtp[MT_MAX_MTP] = {0};
  int64_t n_acc = 0, consecutive_nan = 0, iters_done = 0, iv_samples = 0;
  double iv_flops = 0.0; /* model FLOPs since the last log line */
  int status = 0;
  for (int64_t it = start + 1; it <= tc->train_iters; it++) {
    mt_trainer_iteration_begin(dist, it);
    mt_step_result r = mt_trainer_step(t, it);
    t->iteration = it;
    iters_done++;
    if (r.skipped) {
      t->skipped_iters++;
      t->nan_iters++;
      if (++consecutive_nan >= tc->max_nan_iters) {
        snprintf(err, sizeof err,
                 "%lld consecutive iterations had a non-finite loss or grad norm (last: loss %g, "
                 "grad norm %g); giving up (training.max_nan_iters = %d)",
                 (long long)consecutive_nan, r.lm_loss, r.grad_norm, tc->max_nan_iters);
        rank_error(t, err);
        status = 1;
        break;
      }
    } else {
      consecutive_nan = 0;
      acc_loss += r.lm_loss;
      for (int k = 0; k < r.n_mtp; k++) acc_mtp[k] += r.mtp_loss[k];
      acc_norm += r.grad_norm;
      n_acc++;
    }
    double now = mt_now();
    mt_log_record rec = {0};
    rec.iteration = it;
    rec.train_iters = tc->train_iters;
    rec.consumed_samples = t->consumed_samples;
    rec.lr = r.lr;
    rec.weight_decay = r.wd;
    rec.lr_applied = r.lr_applied;
    rec.wd_applied = r.wd_applied;
    rec.global_batch_size = r.global_batch_size; /* Megatron's log: the ramp-up's batch */
    iv_samples += r.global_batch_size;
    rec.lm_loss = r.lm_loss;
    rec.grad_norm = r.grad_norm;
    rec.n_mtp = r.n_mtp;
    for (int k = 0; k < r.n_mtp; k++) rec.mtp_loss[k] = r.mtp_loss[k];
    rec.n_moe_layers = r.n_moe_layers;
    rec.load_balancing_loss = r.load_balancing_loss;
    rec.z_loss = r.z_loss;
    rec.dropped_fraction = r.dropped_fraction;
    rec.dropped_tokens = r.dropped_tokens;
    memcpy(rec.tokens_per_expert_max, r.tokens_per_expert_max, sizeof rec.tokens_per_expert_max);
    memcpy(rec.tokens_per_expert_mean, r.tokens_per_expert_mean, sizeof rec.tokens_per_expert_mean);
    mt_trainer_moe_log_fields(t, &rec);
    rec.skipped_iters = t->skipped_iters;
    rec.nan_iters = t->nan_iters;
    rec.elapsed_ms = 1e3 * (now - t_log);
    /* this iteration's batch (ramp-up) and documents (reset_attention_mask) */
    mt_flops_shape fs = t->flops_shape;
    fs.global_batch = r.global_batch_size;
    fs.seqlen_squared_sum = r.seqlen_squared_sum;
    const double flops = mt_flops_per_iteration(&fs);
    iv_flops += flops;
    rec.flops_formula = mt_flops_formula_name(fs.formula);
    rec.tokens_per_s = (double)r.global_batch_size * cfg->model.seq_length / (now - t_log);
    rec.tflops_per_device = flops / (now - t_log) / t->world_size / 1e12;
    rec.mfu = -1;
    for (int k = 0; k <= MT_GK_N && rec.n_comm < 16; k++) {
      if (!r.comm_bytes[k]) continue;
      rec.comm_group[rec.n_comm] = k < MT_GK_N ? mt_group_kind_name((mt_group_kind)k) : "world";
      rec.comm_bytes[rec.n_comm++] = r.comm_bytes[k];
    }
    rec.comm_ms = 1e3 * r.comm_time[MT_GK_N].comm_s;
    rec.exposed_comm_ms = 1e3 * r.comm_time[MT_GK_N].exposed_s;
    t->iv_comm_s += r.comm_time[MT_GK_N].comm_s;
    t->iv_exposed_s += r.comm_time[MT_GK_N].exposed_s;
    for (int k = 0; k < MT_GK_N && rec.n_comm_time < 16; k++) {
      if (r.comm_time[k].ops == 0 || mt_parallel_state_is_alias(t->ps, (mt_group_kind)k)) continue;
      rec.comm_time_group[rec.n_comm_time] = mt_group_kind_name((mt_group_kind)k);
      rec.comm_time_ms[rec.n_comm_time] = 1e3 * r.comm_time[k].comm_s;
      rec.exposed_time_ms[rec.n_comm_time++] = 1e3 * r.comm_time[k].exposed_s;
    }
    rec.n_stages = r.n_stages;
    for (int k = 0; k < r.n_stages; k++) rec.bubble[k] = r.bubble[k];
    rec.bubble_theory = t->bubble_theory;
    rec.bubble_slowest = r.bubble_slowest;
    if (it % cfg->logging.tensorboard_log_interval == 0)
      mt_tb_iteration(&t->tb, &rec,
                      cfg->logging.log_memory_to_tensorboard ? (double)t->be->mem.live_total : -1,
                      (double)t->be->mem.peak_total);
    if (tc->check_replicas_interval > 0 && it % tc->check_replicas_interval == 0 &&
        mt_trainer_check_replicas(t, err, sizeof err) != 0) {
      rank_error(t, err);
      status = 1;
      break;
    }
    if (it % cfg->logging.log_interval == 0 || it == tc->train_iters) {
      /* the printed line averages loss/norm/time over the interval (Megatron) */
      int64_t n_iv = it % cfg->logging.log_interval ? it % cfg->logging.log_interval
                                                    : cfg->logging.log_interval;
      if (n_iv > iters_done) n_iv = iters_done;
      double per_it = (now - t_start) / (double)iters_done;
      mt_log_record line = rec;
      line.lm_loss = n_acc ? acc_loss / n_acc : r.lm_loss;
      for (int k = 0; k < r.n_mtp; k++) line.mtp_loss[k] = n_acc ? acc_mtp[k] / n_acc : r.mtp_loss[k];
      line.grad_norm = n_acc ? acc_norm / n_acc : r.grad_norm;
      line.elapsed_ms = 1e3 * (now - t->t_interval) / (double)n_iv;
      line.tokens_per_s = (double)iv_samples * cfg->model.seq_length / (now - t->t_interval);
      line.tflops_per_device = iv_flops / (now - t->t_interval) / t->world_size / 1e12;
      iv_samples = 0;
      iv_flops = 0.0;
      line.eta_s = per_it * (double)(tc->train_iters - it);
      line.comm_ms = 1e3 * t->iv_comm_s / (double)n_iv;
      line.exposed_comm_ms = 1e3 * t->iv_exposed_s / (double)n_iv;
      t->iv_comm_s = t->iv_exposed_s = 0.0;
      if (cfg->logging.log_straggler && t->world_size > 1) {
        /* collective over the world: every rank reaches this line */
        mt_straggler sg = mt_straggler_reduce(t->world, 1e3 * t->busy_s / (double)n_iv);
        rec.has_straggler = line.has_straggler = 1;
        rec.straggler_max_ms = line.straggler_max_ms = sg.max_ms;
        rec.straggler_max_rank = line.straggler_max_rank = sg.max_rank;
        rec.straggler_min_ms = line.straggler_min_ms = sg.min_ms;
        rec.straggler_min_rank = line.straggler_min_rank = sg.min_rank;
      }
      t->busy_s = 0.0;
      if (t->is_logger) mt_log_line(stdout, &line);
      mt_log_timers(&t->timers, t->world, t->is_logger, cfg->logging.timing_log_option, &t->tb,
                    cfg->logging.log_timers_to_tensorboard, &line, (double)n_iv);
      acc_loss = acc_norm = 0.0;
      memset(acc_mtp, 0, sizeof acc_mtp);
      n_acc = 0;
      t->t_interval = mt_now();
    }
    /* evaluation after the training line, as Megatron prints them */
    double val = -1.0;
    if (tc->eval_interval > 0 && it % tc->eval_interval == 0 && t->has_valid) {
      val = mt_trainer_evaluate(t, it);
      mt_trainer_say(t, " validation loss at iteration %lld | lm loss value: %.6E | lm loss PPL: %.6E |\n",
          (long long)it, val, exp(val < 700 ? val : 700));
      mt_tb_scalar(&t->tb, "lm loss validation", val, it);
      mt_tb_scalar(&t->tb, "lm loss validation vs samples", val, t->consumed_samples);
      t->t_interval += mt_now() - now; /* keep evaluation out of the throughput figures */
    }
    if (t->is_logger) mt_metrics_write(&t->metrics, &rec, val);
    /* publish a finished asynchronous save (Megatron's async finalize) */
    if (t->ckpt_async && mt_trainer_save_poll(t, 0, err, sizeof err) != 0) {
      rank_error(t, err);
      status = 1;
      break;
    }
    int exiting = tc->exit_interval > 0 && it % tc->exit_interval == 0 && it < tc->train_iters;
    int saved = 0;
    /* Megatron saves when the ramp-up changes the batch of the next iteration */
    const int ramp_save =
        mt_batch_rampup_gbs(&t->rampup, t->consumed_samples) != r.global_batch_size;
    if (cfg->checkpoint.save[0] &&
        ((cfg->checkpoint.save_interval > 0 && it % cfg->checkpoint.save_interval == 0) ||
         it == tc->train_iters || exiting || ramp_save)) {
      mt_exit_failpoint_in_save(&watch, t->rank, it);
      if (mt_trainer_save(t, err, sizeof err) != 0) {
        rank_error(t, err);
        status = 1;
        break;
      }
      saved = 1;
    }
    if (exiting) {
      mt_trainer_say(t, "> exiting after iteration %lld (training.exit_interval = %lld)\n", (long long)it,
          (long long)tc->exit_interval);
      break;
    }
    /* preemption / time budget: agreed after the regular save, so a signal
     * that arrived during that save ends the run here without another one */
    if (it < tc->train_iters && mt_exit_watch_active(&watch)) {
      int rc = mt_trainer_exit_boundary(t, &watch, saved, err, sizeof err);
      if (rc < 0) {
        rank_error(t, err);
        status = 1;
        break;
      }
      if (rc > 0) break;
    }
    t_log = mt_now();
  }
  /* every exit path waits for (and publishes) the last asynchronous save */
  if (t->ckpt_async && mt_trainer_save_poll(t, 1, err, sizeof err) != 0) {
    rank_error(t, err);
    status = 1;
  }
  if (status == 0) mt_trainer_report_peaks(t);
  const int n_dp_cp = mt_group_size(t->dp_group);
  if (status == 0 && (n_dp_cp > 1 || t->topo.tp > 1 || t->topo.pp > 1)) {
    if (mt_trainer_check_replicas(t, err, sizeof err) != 0) {
      rank_error(t, err);
      status = 1;
    } else {
      mt_trainer_say(t, "> parameters are bitwise identical on all %d data-parallel%s ranks; replicated "
             "parameters identical on all %d tensor-parallel ranks; word-embedding copies "
             "identical on the first and last of %d pipeline stages\n", n_dp_cp,
          t->topo.cp > 1 ? " x context-parallel" : "", t->topo.tp, t->topo.pp);
    }
  }
  if (status == 0 && t->is_logger) {
    const mt_comm_time ct = mt_dist_comm_time(dist, NULL);
    printf("> training done: %lld iterations in %.1f s; communication %.2f s, of it exposed "
           "(the compute thread waiting) %.2f s\n", (long long)iters_done, mt_now() - t_start,
           ct.comm_s, ct.exposed_s);
  }
  mt_trainer_teardown(t);
  mt_exit_watch_stop(&watch);
  return status;
}
