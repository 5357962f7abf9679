/* config/config_rules_layout.c — the layout rules (world, tp, pp, vpp, cp,
 * ZeRO, batch and recomputation against the layout), as rows of the rule
 * table that config_check.c runs first and docs/config.md lists
 * (config_doc.c); each row's example config breaks it
 * (tests/unit/config/test_config_rules.c). */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"
#include "core/util.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

/* ---- the layout rules, in the order they are checked ---- */

static int r_ffn_swiglu(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (!c->ffn_given && m->swiglu && m->ffn_hidden_size == 0 && m->hidden_size >= 1)
    return mt_cfg_fail(c, key("model.ffn_hidden_size"),
                       "derived as 0 for swiglu with hidden_size %d (Megatron's rule "
                       "floor(8 x hidden_size / 3 / 64) x 64; expected hidden_size >= 24 or "
                       "ffn_hidden_size set explicitly)",
                       m->hidden_size);
  return 0;
}

/* norm_epsilon and its older name layernorm_epsilon: the one given wins,
 * both given must agree; afterwards both fields hold the value. */
static int r_norm_epsilon(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  mt_model_config *m = &cfg->model;
  int kn = key("model.norm_epsilon"), kl = key("model.layernorm_epsilon");
  if (c->present[kn] && c->present[kl] && m->norm_epsilon != m->layernorm_epsilon)
    return mt_cfg_fail(c, kl,
                       "%g differs from norm_epsilon %g (expected only one of the two: "
                       "layernorm_epsilon is the older name of norm_epsilon)",
                       (double)m->layernorm_epsilon, (double)m->norm_epsilon);
  if (c->present[kl] && !c->present[kn]) m->norm_epsilon = m->layernorm_epsilon;
  m->layernorm_epsilon = m->norm_epsilon;
  return 0;
}

static int r_nccl_device(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (!strcmp(cfg->parallel.distributed_backend, "nccl") && strcmp(cfg->device, "cuda"))
    return mt_cfg_fail(c, key("parallel.distributed_backend"),
                       "\"nccl\" with device \"%s\" (NCCL runs on GPUs; expected \"mpi\", or "
                       "device \"cuda\")",
                       cfg->device);
  return 0;
}

static int r_cp_comm_type(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  if (strcmp(cfg->parallel.cp_comm_type, "p2p") != 0)
    return mt_cfg_fail(c, key("parallel.cp_comm_type"),
                       "\"%s\" is not implemented (expected \"p2p\": K/V blocks travel around "
                       "the context-parallel ring; Megatron's a2a, allgather and a2a+p2p are not "
                       "available)",
                       cfg->parallel.cp_comm_type);
  return 0;
}

static int r_world(mt_cfg_ctx *c, mt_config *cfg, int world) {
  const mt_parallel_config *p = &cfg->parallel;
  const int tp = p->tensor_model_parallel_size, pp = p->pipeline_model_parallel_size;
  const int cp = p->context_parallel_size;
  if (mt_cfg_data_parallel(cfg, world)) return 0;
  if (cp > 1)
    return mt_cfg_fail(c, key("parallel.context_parallel_size"),
                       "tensor_model_parallel_size (%d) x context_parallel_size (%d) x "
                       "pipeline_model_parallel_size (%d) = %lld does not divide the world size %d "
                       "(expected the number of ranks to be a multiple of tp x cp x pp; "
                       "data-parallel size = world / (tp x cp x pp))",
                       tp, cp, pp, (long long)tp * cp * pp, world);
  return mt_cfg_fail(c,
                     key(tp == 1 ? "parallel.pipeline_model_parallel_size"
                                 : "parallel.tensor_model_parallel_size"),
                     "tensor_model_parallel_size (%d) x pipeline_model_parallel_size (%d) = %lld "
                     "does not divide the world size %d (expected the number of ranks to be a "
                     "multiple of tp x pp; data-parallel size = world / (tp x pp))",
                     tp, pp, (long long)tp * pp, world);
}

/* Context parallelism (Megatron's validate_args and its CP attention):
 * seq_length a multiple of 2·cp (the load-balanced chunks), and of 2·cp·tp
 * with sequence parallelism (each chunk is cut again over tp). Megatron
 * asserts the first; the second is its SP rule (seq_length % tp) applied to
 * the chunks. */
static int r_cp_chunks(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int cp = cfg->parallel.context_parallel_size, s = cfg->model.seq_length;
  if (cp > 1 && s % (2 * cp))
    return mt_cfg_fail(c, key("model.seq_length"),
                       "%d is not divisible by 2 x context_parallel_size = %d (expected a multiple: "
                       "each sequence is cut into 2·cp chunks, CP rank r holds chunks r and "
                       "2cp-1-r)",
                       s, 2 * cp);
  return 0;
}

static int r_cp_chunks_sp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  const int cp = p->context_parallel_size, tp = p->tensor_model_parallel_size;
  const int s = cfg->model.seq_length;
  if (cp > 1 && p->sequence_parallel && tp > 1 && s % (2 * cp * tp))
    return mt_cfg_fail(c, key("model.seq_length"),
                       "%d is not divisible by 2 x context_parallel_size x "
                       "tensor_model_parallel_size = %d (expected a multiple with "
                       "sequence_parallel: the two chunks of s/(2·cp) tokens of a CP rank are split "
                       "further over tp)",
                       s, 2 * cp * tp);
  return 0;
}

static int r_heads_hidden(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (!c->kv_given && !m->multi_latent_attention && m->hidden_size % m->num_attention_heads)
    return mt_cfg_fail(c, key("model.num_attention_heads"),
                       "hidden_size (%d) is not divisible by num_attention_heads (%d) (expected a "
                       "divisor of hidden_size, or model.kv_channels set explicitly)",
                       m->hidden_size, m->num_attention_heads);
  return 0;
}

static int r_heads_tp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int tp = cfg->parallel.tensor_model_parallel_size, h = cfg->model.num_attention_heads;
  if (h % tp)
    return mt_cfg_fail(c, key("model.num_attention_heads"),
                       "%d heads cannot be split over tensor_model_parallel_size %d (expected a "
                       "multiple of tp)",
                       h, tp);
  return 0;
}

static int r_ffn_tp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int tp = cfg->parallel.tensor_model_parallel_size, f = cfg->model.ffn_hidden_size;
  if (f % tp)
    return mt_cfg_fail(c, key("model.ffn_hidden_size"),
                       "%d is not divisible by tensor_model_parallel_size %d (expected a multiple "
                       "of tp)",
                       f, tp);
  return 0;
}

static int stage_key(const mt_parallel_config *p) {
  return key(p->num_layers_in_first_pipeline_stage > 0 ? "parallel.num_layers_in_first_pipeline_stage"
                                                       : "parallel.num_layers_in_last_pipeline_stage");
}

static int r_stages_vpp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  const int nf = p->num_layers_in_first_pipeline_stage, nl = p->num_layers_in_last_pipeline_stage;
  if ((nf > 0 || nl > 0) && p->virtual_pipeline_model_parallel_size > 1)
    return mt_cfg_fail(c, stage_key(p),
                       "uneven pipeline stages are not supported with the interleaved schedule "
                       "(expected virtual_pipeline_model_parallel_size 1)");
  return 0;
}

static int r_stages_share(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  const int nf = p->num_layers_in_first_pipeline_stage, nl = p->num_layers_in_last_pipeline_stage;
  const int pp = p->pipeline_model_parallel_size, L = cfg->model.num_layers;
  if (nf <= 0 && nl <= 0) return 0;
  /* stages without an explicit count share the remaining layers equally */
  int n_free = pp - (nf > 0) - (nl > 0);
  int rest = L - (nf > 0 ? nf : 0) - (nl > 0 ? nl : 0);
  if (rest < 0 || (n_free == 0 && rest != 0) || (n_free > 0 && (rest % n_free || rest == 0)))
    return mt_cfg_fail(c, stage_key(p),
                       "first %d + last %d layers leave %d of num_layers %d for %d other "
                       "stage(s) (expected an equal positive share per stage)",
                       nf, nl, rest, L, n_free);
  return 0;
}

static int r_layers_pp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  const int pp = p->pipeline_model_parallel_size, L = cfg->model.num_layers;
  if (p->num_layers_in_first_pipeline_stage <= 0 && p->num_layers_in_last_pipeline_stage <= 0 &&
      L % pp)
    return mt_cfg_fail(c, key("model.num_layers"),
                       "%d layers cannot be split over pipeline_model_parallel_size %d (expected "
                       "a multiple of pp, or parallel.num_layers_in_first/last_pipeline_stage)",
                       L, pp);
  return 0;
}

static int r_layers_vpp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  const int pp = p->pipeline_model_parallel_size, vpp = p->virtual_pipeline_model_parallel_size;
  const int L = cfg->model.num_layers;
  if (p->num_layers_in_first_pipeline_stage <= 0 && p->num_layers_in_last_pipeline_stage <= 0 &&
      L % ((int64_t)pp * vpp))
    return mt_cfg_fail(c, key("parallel.virtual_pipeline_model_parallel_size"),
                       "num_layers (%d) is not divisible by pipeline_model_parallel_size (%d) x "
                       "virtual_pipeline_model_parallel_size (%d) (expected equal chunks)",
                       L, pp, vpp);
  return 0;
}

/* a limit of the trainer, checked here so that `megatrain plan` / --sweep
 * and `megatrain topology` refuse the same layouts training refuses */
static int r_zero_pp(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  if (p->zero_stage >= 2 && p->pipeline_model_parallel_size > 1)
    return mt_cfg_fail(c, key("parallel.zero_stage"),
                       "zero_stage %d with pipeline parallelism is not implemented yet "
                       "(pipeline_model_parallel_size %d): use zero_stage 0 or 1 with pipelines",
                       p->zero_stage, p->pipeline_model_parallel_size);
  return 0;
}

/* Megatron's assert: overlap_param_gather needs overlap_grad_reduce */
static int r_overlap_param_gather(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_parallel_config *p = &cfg->parallel;
  if (p->overlap_param_gather && !p->overlap_grad_reduce)
    return mt_cfg_fail(c, key("parallel.overlap_param_gather"),
                       "overlap_param_gather needs overlap_grad_reduce true (as Megatron's "
                       "--overlap-param-gather needs --overlap-grad-reduce)");
  return 0;
}

static int r_seq_positions(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  if (m->seq_length > m->max_position_embeddings)
    return mt_cfg_fail(c, key("model.seq_length"),
                       "%d is larger than max_position_embeddings %d (expected seq_length <= "
                       "max_position_embeddings)",
                       m->seq_length, m->max_position_embeddings);
  return 0;
}

static int r_sp_tp1(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  mt_parallel_config *p = &cfg->parallel;
  if (p->sequence_parallel && p->tensor_model_parallel_size == 1) {
    p->sequence_parallel = 0;
    mt_cfg_note(c, "parallel.sequence_parallel: ignored because tensor_model_parallel_size is 1 "
                   "(as in Megatron)");
  }
  return 0;
}

static int r_sp_seq(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const int tp = cfg->parallel.tensor_model_parallel_size, s = cfg->model.seq_length;
  if (cfg->parallel.sequence_parallel && s % tp)
    return mt_cfg_fail(c, key("parallel.sequence_parallel"),
                       "seq_length (%d) is not divisible by tensor_model_parallel_size (%d) "
                       "(expected a multiple of tp with sequence parallelism)",
                       s, tp);
  return 0;
}

static int r_batch(mt_cfg_ctx *c, mt_config *cfg, int world) {
  const mt_training_config *t = &cfg->training;
  const int dp = mt_cfg_data_parallel(cfg, world);
  int64_t per_step = (int64_t)t->micro_batch_size * dp;
  if (t->global_batch_size % per_step)
    return mt_cfg_fail(c, key("training.global_batch_size"),
                       "%d is not divisible by micro_batch_size (%d) x data-parallel size (%d) = "
                       "%lld (expected a multiple of it)",
                       t->global_batch_size, t->micro_batch_size, dp, (long long)per_step);
  return 0;
}

static int r_batch_interleaved(mt_cfg_ctx *c, mt_config *cfg, int world) {
  const mt_training_config *t = &cfg->training;
  const int pp = cfg->parallel.pipeline_model_parallel_size;
  const int vpp = cfg->parallel.virtual_pipeline_model_parallel_size;
  const int64_t n_micro = t->global_batch_size / ((int64_t)t->micro_batch_size *
                                                  mt_cfg_data_parallel(cfg, world));
  if (vpp > 1 && n_micro % pp)
    return mt_cfg_fail(c, key("training.global_batch_size"),
                       "gives %lld micro-batches per step, which the interleaved schedule "
                       "(virtual_pipeline_model_parallel_size %d) needs to be a multiple of "
                       "pipeline_model_parallel_size %d",
                       (long long)n_micro, vpp, pp);
  return 0;
}

static int r_recompute_layers(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_model_config *m = &cfg->model;
  const int per_stage = m->num_layers / cfg->parallel.pipeline_model_parallel_size;
  if (!strcmp(m->recompute_granularity, "full") && m->recompute_num_layers > per_stage)
    return mt_cfg_fail(c, key("model.recompute_num_layers"),
                       "%d is more than the %d layers of a pipeline stage (expected 1..%d)",
                       m->recompute_num_layers, per_stage, per_stage);
  return 0;
}

static const mt_cfg_rule k_layout[] = {
    {"model.ffn_hidden_size", r_ffn_swiglu,
     "`model.ffn_hidden_size` derived for `swiglu` (⌊8 × `hidden_size` / 3 / 64⌋ × 64) is at "
     "least 1: `hidden_size` ≥ 24, or `ffn_hidden_size` given",
     "1: model.swiglu=true; model.hidden_size=16", 0, 1},
    {"model.layernorm_epsilon", r_norm_epsilon,
     "`model.layernorm_epsilon` (the older name) and `norm_epsilon`, when both given, are equal",
     "1: model.norm_epsilon=1e-6; model.layernorm_epsilon=1e-5", 0, 0},
    {"parallel.distributed_backend", r_nccl_device,
     "`parallel.distributed_backend` `nccl` needs `device` `cuda`",
     "1: parallel.distributed_backend=nccl", 0, 0},
    {"parallel.cp_comm_type", r_cp_comm_type,
     "`parallel.cp_comm_type` is `p2p`, the only one implemented",
     "2: parallel.context_parallel_size=2; parallel.cp_comm_type=a2a", 0, 0},
    {"*", mt_cfg_check_needs,
     "a key given (at any value but `null`, its default included) while the setting it needs "
     "does not hold is refused, naming the key and the one that would enable it: the table "
     "[Keys that need another setting](#keys-that-need-another-setting) below",
     "1: model.moe_router_topk=2", 0, 0},
    {"parallel.context_parallel_size parallel.tensor_model_parallel_size "
     "parallel.pipeline_model_parallel_size",
     r_world,
     "tp × cp × pp divides the world (dp = world / (tp × cp × pp)); the message names "
     "`context_parallel_size` when cp > 1, else `tensor_model_parallel_size` (tp > 1) or "
     "`pipeline_model_parallel_size`",
     "3: parallel.tensor_model_parallel_size=2", 0, 0},
    {"model.seq_length", r_cp_chunks,
     "with cp > 1, 2 × cp divides `model.seq_length` (the 2·cp load-balanced chunks)",
     "3: parallel.context_parallel_size=3", 0, 0},
    {"model.seq_length", r_cp_chunks_sp,
     "with cp > 1 and sequence parallelism (tp > 1), 2 × cp × tp divides `model.seq_length`",
     "8: parallel.context_parallel_size=2; parallel.tensor_model_parallel_size=4; "
     "parallel.sequence_parallel=true; model.seq_length=24",
     0, 0},
    {"model.num_attention_heads", r_heads_hidden,
     "`model.num_attention_heads` divides `hidden_size` unless `kv_channels` is given",
     "1: model.num_attention_heads=5", 0, 0},
    {"model.num_attention_heads", r_heads_tp, "tp divides `model.num_attention_heads`",
     "2: parallel.tensor_model_parallel_size=2; model.num_attention_heads=1", 0, 0},
    {"model.ffn_hidden_size", r_ffn_tp, "tp divides `model.ffn_hidden_size`",
     "2: parallel.tensor_model_parallel_size=2; model.ffn_hidden_size=33", 0, 0},
    {"parallel.num_layers_in_first_pipeline_stage parallel.num_layers_in_last_pipeline_stage",
     r_stages_vpp,
     "uneven stages (`parallel.num_layers_in_first/last_pipeline_stage`) are not combined with "
     "the interleaved schedule (vpp > 1)",
     "4: parallel.pipeline_model_parallel_size=2; parallel.virtual_pipeline_model_parallel_size=2; "
     "parallel.num_layers_in_first_pipeline_stage=1; model.num_layers=4",
     0, 0},
    {"parallel.num_layers_in_first_pipeline_stage parallel.num_layers_in_last_pipeline_stage",
     r_stages_share,
     "with uneven stages, the layers left after the first and last stage's counts split into "
     "an equal positive share for every other stage (none left when pp = 2)",
     "2: parallel.pipeline_model_parallel_size=2; parallel.num_layers_in_first_pipeline_stage=2",
     0, 0},
    {"model.num_layers", r_layers_pp, "without uneven stages, pp divides `model.num_layers`",
     "3: parallel.pipeline_model_parallel_size=3", 0, 0},
    {"parallel.virtual_pipeline_model_parallel_size", r_layers_vpp,
     "without uneven stages, pp × vpp divides `num_layers` (equal model chunks)",
     "2: parallel.pipeline_model_parallel_size=2; parallel.virtual_pipeline_model_parallel_size=2",
     0, 0},
    {"parallel.zero_stage", r_zero_pp,
     "`parallel.zero_stage` ≥ 2 needs pp = 1 (a limit of this build's trainer, checked here so "
     "that `megatrain plan`, `--sweep` and `megatrain topology` refuse what training refuses)",
     "4: parallel.pipeline_model_parallel_size=2; parallel.zero_stage=2", 0, 0},
    {"parallel.overlap_param_gather", r_overlap_param_gather,
     "`parallel.overlap_param_gather` needs `parallel.overlap_grad_reduce` (Megatron's assert)",
     "2: parallel.zero_stage=1; parallel.overlap_param_gather=true", 0, 0},
    {"model.seq_length", r_seq_positions, "`model.seq_length` ≤ `max_position_embeddings`",
     "1: model.max_position_embeddings=16", 0, 0},
    {"parallel.sequence_parallel", r_sp_tp1,
     "`parallel.sequence_parallel` with tp = 1 is turned off with a note in `mt_config.notes` "
     "(as Megatron does)",
     "1: parallel.sequence_parallel=true", 1, 0},
    {"parallel.sequence_parallel", r_sp_seq,
     "with `parallel.sequence_parallel`, tp divides `seq_length`",
     "4: parallel.tensor_model_parallel_size=4; parallel.sequence_parallel=true; "
     "model.seq_length=30",
     0, 0},
    {"training.global_batch_size", r_batch,
     "`training.global_batch_size` is a multiple of `micro_batch_size` × dp",
     "1: training.global_batch_size=3", 0, 0},
    {"training.global_batch_size", r_batch_interleaved,
     "with the interleaved schedule (vpp > 1), the micro-batches per step "
     "(`global_batch_size` / (`micro_batch_size` × dp)) are a multiple of pp",
     "2: parallel.pipeline_model_parallel_size=2; parallel.virtual_pipeline_model_parallel_size=2; "
     "model.num_layers=4; training.global_batch_size=2",
     0, 0},
    {"model.recompute_num_layers", r_recompute_layers,
     "`model.recompute_num_layers` ≤ `num_layers` / pp (with `full` recomputation, the only one "
     "it applies to)",
     "1: model.recompute_granularity=full; model.recompute_num_layers=3", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_layout(int *n) {
  *n = (int)(sizeof k_layout / sizeof k_layout[0]);
  return k_layout;
}
