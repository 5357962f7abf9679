/* trainer/train_setup.c — building the trainer from a config: layout
 * checks, backend, groups, data, model, optimizer, schedules, the start-up
 * summary and the memory peaks it prints, and tearing it down again (see
 * train_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "checkpoint/async_writer.h"
#include "checkpoint/lock.h"
#include "data/tokenizer.h"
#include "optimizer/fp8_param_gather.h"
#include "trainer/train_internal.h"

int mt_trainer_eod_token(const mt_config *c, char *err, size_t errlen) {
  const mt_data_config *d = &c->data;
  if (!d->reset_attention_mask && !d->reset_position_ids && !d->eod_mask_loss) return MT_GPT2_EOD;
  /* GPT-2 without its files named: the GPT-2 vocabulary's <|endoftext|> */
  if (mt_tokenizer_type_parse(d->tokenizer_type) == MT_TOK_GPT2BPE && !d->vocab_file[0])
    return MT_GPT2_EOD;
  mt_tokenizer_spec sp = {.type = d->tokenizer_type,
                          .model = d->tokenizer_model[0] ? d->tokenizer_model : NULL,
                          .vocab_file = d->vocab_file[0] ? d->vocab_file : NULL,
                          .merge_file = d->merge_file[0] ? d->merge_file : NULL};
  mt_tokenizer *tk = mt_tokenizer_load(&sp, err, errlen);
  if (!tk) return -1;
  const int eod = mt_tokenizer_eod(tk);
  mt_tokenizer_free(tk);
  if (eod < 0)
    snprintf(err, errlen,
             "data.tokenizer_type %s has no end-of-document token, which "
             "data.reset_attention_mask / reset_position_ids / eod_mask_loss split documents at "
             "(expected a tokenizer with an EOS or <|endoftext|> token)",
             d->tokenizer_type);
  return eod;
}

mt_gpt_config mt_trainer_model_config(const mt_config *c, const mt_parallel_state *ps) {
  mt_gpt_config g = {0};
  g.model = c->model; /* the model section is the model's config (config/model_config.h) */
  g.padded_vocab_size = mt_config_padded_vocab(c);
  g.micro_batch_size = c->training.micro_batch_size;
  g.seed = c->training.seed;
  g.reset_attention_mask = c->data.reset_attention_mask;
  g.reset_position_ids = c->data.reset_position_ids;
  g.eod_mask_loss = c->data.eod_mask_loss;
  g.apply_wd_to_qk_layernorm = c->training.apply_wd_to_qk_layernorm;
  g.eod_token = MT_GPT2_EOD; /* mt_trainer_setup: the tokenizer's (mt_trainer_eod_token) */
  /* this rank's place in the layout */
  g.tp_size = c->parallel.tensor_model_parallel_size;
  g.tp_rank = ps->tp_rank;
  g.tp_group = ps->tp;
  g.sequence_parallel = c->parallel.sequence_parallel;
  g.cp_size = c->parallel.context_parallel_size;
  g.cp_rank = ps->cp_rank;
  g.cp_group = g.cp_size > 1 ? ps->cp : NULL;
  g.pp_size = c->parallel.pipeline_model_parallel_size;
  g.pp_rank = ps->pp_rank;
  g.vpp_size = c->parallel.virtual_pipeline_model_parallel_size;
  if (c->training.fp8_format[0]) { /* the FP8 keys (checked by the config rules) */
    const mt_training_config *t = &c->training;
    g.fp8 = mt_fp8_options_parse(&g.fp8_options, t->fp8_format, t->fp8_recipe,
                                 t->fp8_amax_compute_algo, t->fp8_wgrad, t->fp8_margin,
                                 t->fp8_amax_history_len) == 0;
    g.fp8_bf16_start = t->first_last_layers_bf16 ? t->num_layers_at_start_in_bf16 : 0;
    g.fp8_bf16_end = t->first_last_layers_bf16 ? t->num_layers_at_end_in_bf16 : 0;
    if (g.fp8_options.recipe == MT_FP8_RECIPE_DELAYED && !t->tp_only_amax_red && ps->dp &&
        mt_group_size(ps->dp) > 1)
      g.fp8_dp_group = ps->dp;
    if (g.fp8_options.recipe == MT_FP8_RECIPE_DELAYED && !t->tp_only_amax_red && ps->edp &&
        mt_group_size(ps->edp) > 1)
      g.fp8_edp_group = ps->edp;
  }
  g.first_stage_layers = c->parallel.num_layers_in_first_pipeline_stage;
  g.last_stage_layers = c->parallel.num_layers_in_last_pipeline_stage;
  g.embd_group = ps->embd;
  g.ep_size = c->parallel.expert_model_parallel_size;
  g.ep_rank = ps->ep_rank;
  g.ep_group = ps->ep;
  g.etp_size = c->parallel.expert_tensor_parallel_size;
  g.etp_rank = ps->etp_rank;
  g.etp_group = g.etp_size > 1 ? ps->etp : NULL;
  return g;
}

/* One dataset over blend `bl` (docs/data.md): with split NULL the config's
 * split applies; else the split string given ("1,0,0": every document in
 * the training split, Megatron's per-split blend). Samples are built for the
 * splits whose want[] flag is set. */
static mt_gpt_dataset *open_blend(mt_trainer *t, const mt_data_blend *bl, const char *split,
                                  const int want[MT_NUM_SPLITS], char *err, size_t errlen) {
  const mt_config *c = t->cfg;
  const char *paths[MT_MAX_DATA_PATHS];
  for (int i = 0; i < bl->n_paths; i++) paths[i] = bl->data_path[i];
  mt_gpt_dataset_options o = {0};
  o.n_paths = bl->n_paths;
  o.paths = paths;
  o.weights = bl->data_weight;
  o.weighted = bl->weighted;
  /* the float key back to the decimal the user wrote (0.005, not 0.00499999989) */
  char sbuf[32];
  snprintf(sbuf, sizeof sbuf, "%.7g", (double)c->data.mid_level_dataset_surplus);
  o.mid_level_dataset_surplus = strtod(sbuf, NULL);
  o.split = split ? split : c->data.split;
  o.seq_length = c->model.seq_length;
  o.seed = c->training.seed;
  o.cache_dir = c->data.data_cache_path[0] ? c->data.data_cache_path : NULL;
  /* Megatron's get_train_valid_test_num_samples: every evaluation (one per
   * eval_interval, plus one at the end) reads eval_iters new global batches;
   * the test split is not used */
  const int64_t gbs = c->training.global_batch_size;
  /* (with a ramp-up Megatron's train_samples: train_iters × gbs is more
   * than the ramped iterations read) */
  if (want[MT_SPLIT_TRAIN])
    o.num_samples[MT_SPLIT_TRAIN] = c->training.rampup_batch_size[0] > 0
                                        ? c->training.train_samples
                                        : c->training.train_iters * gbs;
  if (want[MT_SPLIT_VALID])
    o.num_samples[MT_SPLIT_VALID] =
        c->training.eval_interval > 0
            ? (c->training.train_iters / c->training.eval_interval + 1) * c->training.eval_iters *
                  gbs
            : 0;
  o.num_samples[MT_SPLIT_TEST] = 0;
  return mt_gpt_dataset_open(&o, err, errlen);
}

static int open_data(mt_trainer *t, char *err, size_t errlen) {
  const mt_config *c = t->cfg;
  const mt_data_config *d = &c->data;
  if (d->split_blend[0].n_paths == 0) { /* one blend, split by data.split */
    t->data = open_blend(t, &d->blend, NULL, (const int[3]){1, 1, 0}, err, errlen);
    if (!t->data) return -1;
    for (int k = 0; k < MT_NUM_SPLITS; k++) t->split_data[k] = t->data;
  } else { /* Megatron's per-split blends: all documents of each in its split */
    static const char *const whole[MT_NUM_SPLITS] = {"1,0,0", "0,1,0", "0,0,1"};
    for (int k = 0; k < MT_NUM_SPLITS; k++) {
      if (!d->split_blend[k].n_paths) continue;
      const int want[3] = {k == MT_SPLIT_TRAIN, k == MT_SPLIT_VALID, 0};
      t->split_data[k] = open_blend(t, &d->split_blend[k], whole[k], want, err, errlen);
      if (!t->split_data[k]) return -1;
    }
  }
  const int64_t want_valid =
      c->training.eval_interval > 0 ? c->training.eval_iters : 0; /* batches per evaluation */
  t->has_valid = want_valid > 0 && t->split_data[MT_SPLIT_VALID] &&
                 mt_gpt_dataset_num_samples(t->split_data[MT_SPLIT_VALID], MT_SPLIT_VALID) > 0;
  for (int k = 0; k < MT_NUM_SPLITS; k++) {
    if (!t->split_data[k] || (k > 0 && t->split_data[k] == t->split_data[k - 1])) continue;
    int64_t max_tok = mt_gpt_dataset_max_token(t->split_data[k]);
    if (max_tok >= c->model.vocab_size) {
      snprintf(err, errlen,
               "data contains token id %lld but model.vocab_size is %d (token ids must be < "
               "vocab_size)",
               (long long)max_tok, c->model.vocab_size);
      return -1;
    }
  }
  return 0;
}

int mt_trainer_setup(mt_trainer *t, const mt_config *cfg, mt_dist *dist, char *err,
                     size_t errlen) {
  memset(t, 0, sizeof *t);
  t->cfg = cfg;
  t->dist = dist;
  t->rank = mt_dist_rank(dist);
  t->world_size = mt_dist_size(dist);
  t->world = mt_dist_world(dist);
  mt_timers_init(&t->timers, mt_trainer_timer_defs, MT_TM_N, cfg->logging.timing_log_level);
  mt_topology_sizes sz = {
      .tensor_model_parallel_size = cfg->parallel.tensor_model_parallel_size,
      .pipeline_model_parallel_size = cfg->parallel.pipeline_model_parallel_size,
      .expert_model_parallel_size = cfg->parallel.expert_model_parallel_size,
      .expert_tensor_parallel_size = cfg->parallel.expert_tensor_parallel_size,
      .context_parallel_size = cfg->parallel.context_parallel_size};
  if (mt_topology_build(&t->topo, t->world_size, &sz, err, errlen) != 0) return -1;
  /* one writer per checkpoint directory (checkpoint/lock.h) */
  if (cfg->checkpoint.save[0] &&
      mt_ckpt_lock_acquire(cfg->checkpoint.save, t->world, &t->ckpt_lock, err, errlen) != 0)
    return -1;
  /* layout refusals (e.g. zero_stage >= 2 with pp > 1) are in
   * config/config_check.c, shared with `megatrain plan` and `topology`, and
   * ran before this (main.c: mt_config_load, mt_config_check_trainable): a
   * layout is never refused by device here, and a missing device is never
   * mistaken for a config error (tests/integration/test_cuda_layouts_accept.sh) */
  /* the backend first: a missing device is reported before any group needs it */
  mt_backend_options bo = {.device = cfg->device,
                           .num_threads = cfg->training.num_threads,
                           .local_rank = mt_dist_local_rank(dist),
                           .dtype = strcmp(cfg->training.precision, "bf16") ? MT_F32 : MT_BF16};
  t->be = mt_backend_create(&bo, err, errlen);
  if (!t->be) return -1;
  mt_dist_set_backend(dist, t->be); /* before the groups (comm.h) */
  t->ps = mt_parallel_state_create(
      dist, &t->topo, mt_comm_engine_choose(t->be, cfg->parallel.distributed_backend));
  t->dp = t->topo.dp;
  t->dp_rank = t->ps->dp_rank;
  t->dp_group = t->ps->dp_cp; /* = ps->dp when cp == 1 */
  /* Megatron logs from the first rank of the last pipeline stage */
  t->is_logger = t->ps->is_last_stage && t->ps->tp_rank == 0 && t->ps->dp_cp_rank == 0;
  /* the pipeline's and the CP ring's tagged p2p: NCCL channels, created
   * collectively here (a no-op for the MPI and staging engines) */
  mt_group_enable_p2p(t->ps->pp);
  mt_group_enable_p2p(t->ps->cp);

  if (open_data(t, err, errlen) != 0) return -1;

  mt_gpt_config gc = mt_trainer_model_config(cfg, t->ps);
  if ((gc.eod_token = mt_trainer_eod_token(cfg, err, errlen)) < 0) return -1;
  t->model = mt_gpt_create(t->be, &gc);
  if (cfg->parallel.zero_stage > 0) {
    t->zero = mt_trainer_zero_create(t);
    t->zero->timers = &t->timers;
    t->zero->gather_timer = MT_TM_PARAMS_ALL_GATHER;
  } else {
    mt_adamw_init(&t->opt, t->be, mt_gpt_params(t->model), mt_gpt_param_buffer(t->model),
                  mt_gpt_grad_buffer(t->model), cfg->training.adam_beta1,
                  cfg->training.adam_beta2, cfg->training.adam_eps, cfg->training.weight_decay);
    mt_trainer_ddp_init(t);
  }
  mt_trainer_overlap_init(t);
  t->sched = mt_trainer_lr_schedule(&cfg->training);
  t->rampup = mt_batch_rampup_make(cfg->training.rampup_batch_size,
                                   cfg->training.global_batch_size);
  const int s = cfg->model.seq_length, b = cfg->training.micro_batch_size;
  t->tokens = mt_xmalloc((size_t)b * (s + 1) * sizeof(int32_t));
  t->sample_ids = mt_xmalloc((size_t)b * sizeof(int64_t));
  if (t->topo.pp > 1 && mt_trainer_pipeline_setup(t, err, errlen) != 0) return -1;
  if (t->topo.pp > 1) {
    int m = cfg->training.global_batch_size / (cfg->training.micro_batch_size * t->dp);
    t->bubble_theory = (double)(t->topo.pp - 1) /
                       ((double)cfg->parallel.virtual_pipeline_model_parallel_size * m);
  }
  t->n_params_total = mt_gpt_num_parameters(t->model);
  mt_allreduce(t->ps->pp, &t->n_params_total, 1, MT_I64, MT_OP_SUM);
  t->flops_shape = mt_gpt_flops_shape(&gc, cfg->training.global_batch_size);
  t->flops_shape.formula = mt_flops_formula_from_name(cfg->logging.flops_formula);
  t->flops_per_iter = mt_flops_per_iteration(&t->flops_shape);

  if (mt_trainer_load_checkpoint(t, err, errlen) != 0) return -1;
  if (t->is_logger &&
      mt_metrics_open(&t->metrics, cfg->logging.metrics_file, t->iteration, err, errlen) != 0)
    return -1;
  /* Megatron's SummaryWriter lives on the last rank */
  if (cfg->logging.tensorboard_dir[0] && t->rank == t->world_size - 1 &&
      mt_tb_open(&t->tb, cfg->logging.tensorboard_dir, err, errlen) != 0)
    return -1;
  t->t_interval = mt_now();
  return 0;
}

void mt_trainer_teardown(mt_trainer *t) {
  mt_ckpt_async_destroy(t->ckpt_async); /* joins a writer still running */
  mt_ckpt_lock_release(t->ckpt_lock);
  mt_metrics_close(&t->metrics);
  mt_tb_close(&t->tb);
  mt_adamw_free(&t->opt);
  mt_trainer_overlap_free(t); /* completes what is in flight */
  mt_ddp_buffer_free(&t->ddp);
  mt_trainer_zero_destroy(t->zero);
  mt_gpt_destroy(t->model);
  if (t->data) mt_gpt_dataset_close(t->data);
  for (int k = 0; k < MT_NUM_SPLITS; k++)
    if (t->split_data[k] && t->split_data[k] != t->data) mt_gpt_dataset_close(t->split_data[k]);
  mt_trainer_pipeline_free(t);
  /* groups first (communicators, channel streams, staging blocks may use the
   * backend's stream and pool), then the backend */
  mt_parallel_state_destroy(t->ps);
  if (t->be && t->dist) mt_dist_set_backend(t->dist, NULL);
  if (t->be) mt_backend_destroy(t->be);
  mt_topology_free(&t->topo);
  free(t->tokens);
  free(t->sample_ids);
  free(t->moe_tokens_per_expert);
  memset(t, 0, sizeof *t);
}

void mt_trainer_print_summary(const mt_trainer *t) {
  const mt_config *c = t->cfg;
  const mt_mem_stats *ms = &t->be->mem;
  mt_trainer_say(t, "> megatrain: device %s (%s), world size %d: tp=%d pp=%d dp=%d", c->device,
      mt_dtype_name(t->be->dtype), t->world_size, c->parallel.tensor_model_parallel_size,
      c->parallel.pipeline_model_parallel_size, t->dp);
  if (t->topo.cp > 1)
    mt_trainer_say(t, " cp=%d (cp_comm_type %s; gradients over dp x cp = %d ranks)", t->topo.cp,
        c->parallel.cp_comm_type, mt_group_size(t->dp_group));
  if (c->model.num_experts > 0)
    mt_trainer_say(t, " | experts: ep=%d etp=%d edp=%d", t->topo.ep, t->topo.etp, t->topo.edp);
  /* the engine of the layout's groups (parallel.distributed_backend) */
  mt_trainer_say(t, " | communication: %s", mt_comm_engine_describe(t->ps->engine));
  mt_trainer_say(t, "\n");
  if (c->model.num_experts > 0) mt_trainer_print_moe_summary(t);
  mt_trainer_say(t, "> model: %d layers, hidden %d, %d heads, ffn %d, seq %d, vocab %d (padded %lld)\n",
      c->model.num_layers, c->model.hidden_size, c->model.num_attention_heads,
      c->model.ffn_hidden_size, c->model.seq_length, c->model.vocab_size,
      (long long)mt_config_padded_vocab(c));
  const mt_model_config *m = &c->model;
  int rope = !strcmp(m->position_embedding_type, "rope");
  if (m->multi_latent_attention) /* docs/attention.md, "Multi-latent attention" */
    mt_trainer_say(t, "> attention: multi-latent, q %s %d, kv latent %d, heads of %d + %d rotated "
                      "channels (%s), values of %d%s\n",
                   m->q_lora_rank > 0 ? "latent" : "direct", m->q_lora_rank > 0 ? m->q_lora_rank : 0,
                   m->kv_lora_rank, m->qk_head_dim, m->qk_pos_emb_head_dim,
                   (m->rope_type[0] ? m->rope_type[0] == 'y' : 1) ? "YaRN" : "RoPE", m->v_head_dim,
                   m->qk_layernorm ? ", latent norms" : "");
  else if (rope || strcmp(m->position_embedding_type, "learned_absolute") ||
      strcmp(m->normalization, "LayerNorm") || m->swiglu || m->group_query_attention ||
      !m->add_bias_linear || m->qk_layernorm ||
      m->kv_channels * m->num_attention_heads != m->hidden_size) {
    char pos[128];
    /* rotated channels as Megatron's RotaryEmbedding: int(hn * rotary_percent) */
    int rot = mt_rotary_dim(m->kv_channels, m->rotary_percent);
    if (rope)
      snprintf(pos, sizeof pos, "rope (base %g, %d of %d channels rotated%s)",
               (double)m->rotary_base, rot, m->kv_channels,
               m->rotary_interleaved ? ", interleaved" : ", rotate-half");
    else
      snprintf(pos, sizeof pos, "%s", m->position_embedding_type);
    mt_trainer_say(t, "> block: positions %s, %s (eps %g)%s, %s MLP, %d query heads in %d K/V groups of %d "
           "channels, %s linear biases%s\n",
        pos, m->normalization, (double)m->norm_epsilon, m->qk_layernorm ? " + qk norm" : "",
        m->swiglu ? "SwiGLU" : "GELU", m->num_attention_heads, m->num_query_groups,
        m->kv_channels, m->add_bias_linear ? "with" : "no",
        m->untie_embeddings_and_output_weights ? ", untied output layer" : "");
  }
  mt_trainer_say(t, "> number of parameters: %lld (%.2fM); per rank: %lld\n",
      (long long)t->n_params_total, t->n_params_total / 1e6,
      (long long)mt_gpt_params(t->model)->numel);
  mt_trainer_say(t, "> batch: micro %d, global %d (%lld micro-batches per rank), %lld tokens/iteration\n",
      c->training.micro_batch_size, c->training.global_batch_size,
      (long long)(c->training.global_batch_size / t->dp / c->training.micro_batch_size),
      (long long)c->training.global_batch_size * c->model.seq_length);
  if (t->rampup.start > 0)
    mt_trainer_say(t, "> batch-size ramp-up: global batch %lld + %lld every %.17g samples until %lld "
           "samples are consumed, then %d (%lld iterations)\n",
        (long long)t->rampup.start, (long long)t->rampup.increment, t->rampup.per_increment,
        (long long)t->rampup.samples, c->training.global_batch_size,
        (long long)c->training.train_iters);
  mt_trainer_say(t, "> memory per rank (allocator, MiB):");
  for (int k = 0; k < MT_MEM_NCAT; k++)
    mt_trainer_say(t, " %s %.1f", mt_mem_cat_name((mt_mem_cat)k), ms->live[k] / 1048576.0);
  mt_trainer_say(t, " | total %.1f\n", ms->live_total / 1048576.0);
  if (t->zero && t->is_logger) mt_zero_opt_print_summary(t->zero, stdout);
  if (t->zero && t->zero->dense_gather && t->is_logger) mt_fp8pg_print(t->zero->dense_ctx, stdout);
  mt_trainer_say(t, "> FLOPs per iteration (logging.flops_formula %s%s): %.4g GFLOP\n",
                 mt_flops_formula_name(t->flops_shape.formula),
                 c->data.reset_attention_mask && t->flops_shape.formula == MT_FLOPS_MEGATRON
                     ? ", unpacked; each iteration counts its documents"
                     : "",
                 t->flops_per_iter / 1e9);
}

/* Allocator peaks of the training loop by category: the logger prints them
 * on stdout; with MEGATRAIN_MEM_REPORT set every rank also writes one line
 * "megatrain-mem-peak {json}" to stderr (tests/integration/test_plan_memory.sh
 * compares them with `megatrain plan`). */
void mt_trainer_report_peaks(const mt_trainer *t) {
  const mt_mem_stats *ms = &t->be->mem;
  mt_trainer_say(t, "> peak memory per rank during training (allocator, MiB):");
  for (int k = 0; k < MT_MEM_NCAT; k++)
    mt_trainer_say(t, " %s %.1f", mt_mem_cat_name((mt_mem_cat)k), ms->peak[k] / 1048576.0);
  mt_trainer_say(t, " | total %.1f\n", ms->peak_total / 1048576.0);
  int64_t rr, rx, rw;
  const int moe = mt_gpt_moe_buffer_rows(t->model, &rr, &rx, &rw);
  if (moe) /* the grown MoE buffers (model/moe_rowbuf.h): `plan --moe-recv-rows` takes them */
    mt_trainer_say(t, "> MoE buffer rows (high-water, logger rank): received %lld, experts %lld "
                   "(worst case if all tokens route to one rank: %lld)\n",
                   (long long)rr, (long long)rx, (long long)rw);
  if (!getenv("MEGATRAIN_MEM_REPORT")) return;
  char line[1024];
  int n = snprintf(line, sizeof line,
                   "megatrain-mem-peak {\"rank\":%d,\"tp_rank\":%d,\"pp_rank\":%d,\"dp_rank\":%d,"
                   "\"cp_rank\":%d,\"peak\":{",
                   t->rank, t->ps->tp_rank, t->ps->pp_rank, t->dp_rank, t->ps->cp_rank);
  for (int k = 0; k < MT_MEM_NCAT && n < (int)sizeof line; k++)
    n += snprintf(line + n, sizeof line - (size_t)n, "%s\"%s\":%zu", k ? "," : "",
                  mt_mem_cat_name((mt_mem_cat)k), ms->peak[k]);
  if (n < (int)sizeof line)
    snprintf(line + n, sizeof line - (size_t)n,
             "},\"peak_total\":%zu,\"op_scratch\":%zu,\"moe_recv_rows\":%lld,"
             "\"moe_expert_rows\":%lld}",
             ms->peak_total, ms->op_scratch, (long long)rr, (long long)rx);
  fprintf(stderr, "%s\n", line);
  fflush(stderr);
}
