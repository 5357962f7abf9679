/* trainer/train_pipeline.c — glue between the training loop, the model's
 * chunk interface (model/gpt.h) and the pipeline executor
 * (parallel/pipeline.h): which samples a micro-batch holds (also for the
 * loop without a pipeline, trainer/train.c), and the loss. */
#include <stdio.h>

#include "core/util.h"
#include "trainer/train_internal.h"

/* Gather one micro-batch (rows [first, first + mbs) of this rank's slice of
 * global batch `gb` in `split`) into t->tokens / t->sample_ids. */
void mt_trainer_load_micro_batch(mt_trainer *t, int split, int64_t base_sample, int64_t first) {
  const int s = t->cfg->model.seq_length, b = t->cfg->training.micro_batch_size;
  mt_timer_start(&t->timers, MT_TM_BATCH_GENERATOR);
  for (int j = 0; j < b; j++) {
    int64_t id = base_sample + first + j;
    t->sample_ids[j] = id;
    mt_gpt_dataset_get(t->split_data[split], split, id, t->tokens + (int64_t)j * (s + 1));
  }
  mt_timer_stop(&t->timers, MT_TM_BATCH_GENERATOR);
}

double mt_trainer_forward_backward(mt_trainer *t, int train, float loss_scale) {
  /* mt_gpt_forward_backward's calls, with the level-2 timers between them */
  mt_gpt_chunk_begin(t->model, 0, 0, t->tokens, t->sample_ids, train);
  mt_timer_start(&t->timers, MT_TM_FORWARD_COMPUTE);
  double loss_sum = mt_gpt_chunk_forward(t->model, 0, 0);
  mt_timer_stop(&t->timers, MT_TM_FORWARD_COMPUTE);
  if (train) {
    mt_timer_start(&t->timers, MT_TM_BACKWARD_COMPUTE);
    mt_gpt_chunk_backward(t->model, 0, 0, loss_scale);
    mt_timer_stop(&t->timers, MT_TM_BACKWARD_COMPUTE);
  }
  mt_gpt_chunk_end(t->model, 0, 0);
  return loss_sum;
}

static void cb_begin(void *ctx, int chunk, int mb) {
  mt_trainer *t = ctx;
  const int64_t mbs = t->cfg->training.micro_batch_size;
  mt_trainer_load_micro_batch(t, t->pp_split, t->pp_base,
                              t->dp_rank * (t->pp_gbs / t->dp) + mb * mbs);
  mt_gpt_chunk_begin(t->model, chunk, mb, t->tokens, t->sample_ids, t->pp_train);
}

static void *cb_input(void *ctx, int chunk, int mb) {
  return mt_gpt_chunk_input(((mt_trainer *)ctx)->model, chunk, mb);
}

static void cb_forward(void *ctx, int chunk, int mb) {
  mt_trainer *t = ctx;
  mt_timer_start(&t->timers, MT_TM_FORWARD_COMPUTE);
  t->pp_loss += mt_gpt_chunk_forward(t->model, chunk, mb);
  mt_timer_stop(&t->timers, MT_TM_FORWARD_COMPUTE);
}

static void *cb_output(void *ctx, int chunk, int mb) {
  return mt_gpt_chunk_output(((mt_trainer *)ctx)->model, chunk, mb);
}

static void *cb_grad(void *ctx) { return mt_gpt_grad_buffer_stage(((mt_trainer *)ctx)->model); }

static void cb_backward(void *ctx, int chunk, int mb) {
  mt_trainer *t = ctx;
  mt_timer_start(&t->timers, MT_TM_BACKWARD_COMPUTE);
  mt_gpt_chunk_backward(t->model, chunk, mb, t->pp_loss_scale);
  mt_timer_stop(&t->timers, MT_TM_BACKWARD_COMPUTE);
}

static void cb_end(void *ctx, int chunk, int mb) {
  mt_gpt_chunk_end(((mt_trainer *)ctx)->model, chunk, mb);
}

/* This stage's schedule over m micro-batches: interleaved 1F1B with v > 1
 * model chunks, else 1F1B. */
static int build_schedule(mt_trainer *t, mt_pp_schedule *s, int m, int forward_only, char *err,
                          size_t errlen) {
  const mt_config *c = t->cfg;
  const int p = t->topo.pp, v = c->parallel.virtual_pipeline_model_parallel_size;
  if (v > 1)
    return mt_pp_schedule_interleaved(s, p, v, m, t->ps->pp_rank, forward_only, err, errlen);
  return mt_pp_schedule_1f1b(s, p, m, t->ps->pp_rank, forward_only, err, errlen);
}

static int n_micro(const mt_trainer *t, int64_t gbs) {
  return (int)(gbs / ((int64_t)t->cfg->training.micro_batch_size * t->dp));
}

int mt_trainer_pipeline_setup(mt_trainer *t, char *err, size_t errlen) {
  const int m = n_micro(t, t->cfg->training.global_batch_size);
  t->sched_train_m = m;
  if (build_schedule(t, &t->sched_train, m, 0, err, errlen) != 0) return -1;
  return build_schedule(t, &t->sched_eval, m, 1, err, errlen);
}

void mt_trainer_pipeline_free(mt_trainer *t) {
  mt_pp_schedule_free(&t->sched_train);
  mt_pp_schedule_free(&t->sched_eval);
}

double mt_trainer_run_pipeline(mt_trainer *t, int split, int64_t base, int64_t gbs, int train,
                               float loss_scale) {
  const mt_config *c = t->cfg;
  if (train && n_micro(t, gbs) != t->sched_train_m) {
    /* a ramp-up step: the config check made every ramped count valid */
    char err[256];
    mt_pp_schedule_free(&t->sched_train);
    t->sched_train_m = n_micro(t, gbs);
    if (build_schedule(t, &t->sched_train, t->sched_train_m, 0, err, sizeof err) != 0)
      mt_fatal("pipeline schedule of %d micro-batches: %s", t->sched_train_m, err);
  }
  t->pp_gbs = gbs;
  mt_pp_model md = {.ctx = t,
                    .be = t->be,
                    .count = mt_gpt_stage_tensor_elems(t->model),
                    .dtype = t->be->dtype,
                    .begin = cb_begin,
                    .input_buffer = cb_input,
                    .forward = cb_forward,
                    .output_buffer = cb_output,
                    .grad_buffer = cb_grad,
                    .backward = train ? cb_backward : NULL,
                    .end = cb_end};
  t->pp_loss = 0.0;
  t->pp_split = split;
  t->pp_base = base;
  t->pp_train = train;
  t->pp_loss_scale = loss_scale;
  mt_pp_stats st;
  mt_pp_run(t->ps->pp, t->topo.pp, c->parallel.virtual_pipeline_model_parallel_size,
            t->ps->pp_rank, train ? &t->sched_train : &t->sched_eval, &md,
            c->parallel.overlap_p2p_comm, &st);
  if (train) t->pp_stats = st;
  return t->pp_loss;
}
