/* config/config_table.c — the table of config keys, the single source of
 * every key's section, name, type, range, default, Megatron flag and
 * description. The loader applies the defaults from it, the walk and
 * config_check.c validate types, ranges and enumerations with it, the
 * did-you-mean searches it, the canonical JSON follows its order, the last
 * column names the setting a key needs to have an effect (given without it
 * the key is refused, config_needs.c), and docs/config.md is generated from
 * it (`make docs`, tests/support/config_doc.c). */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

const char *const mt_cfg_sections[MT_CFG_NSECTIONS] = {
    "", "model", "parallel", "training", "data", "checkpoint", "logging"};

enum { S_TOP, S_MODEL, S_PAR, S_TRAIN, S_DATA, S_CKPT, S_LOG };

/* Row: section, name, type, FLD(field), flags + range, choices, default
 * (number, string or derivation rule), Megatron flag, description[, needs]. */
#define FLD(path) offsetof(mt_config, path), sizeof(((mt_config *)0)->path)
#define GE(x) MT_CK_GE, (x), 0
#define GT(x) MT_CK_GT, (x), 0
#define REQ MT_CK_REQUIRED
#define NUL MT_CK_NULLABLE
#define DER MT_CK_DERIVED
#define NUM(x) (x), NULL   /* default of a number or bool key */
#define STR(s) 0, (s)      /* default of a string key */
#define RULE(s) 0, (s)     /* derived key: how it is derived */

/* Order = order of the canonical JSON and of docs/config.md. */
const mt_cfg_key mt_cfg_keys[] = {
    {S_TOP, "device", MT_CT_STR, FLD(device), 0, 0, 0, "cpu|cuda", STR("cpu"),
     "always CUDA / DeepSpeed accelerator",
     "backend every rank computes on (`cuda`: one GPU per rank, NCCL)", NULL},

    {S_MODEL, "num_layers", MT_CT_INT, FLD(model.num_layers), REQ | GE(1), NULL, NUM(12),
     "`--num-layers`", "transformer layers", NULL},
    {S_MODEL, "hidden_size", MT_CT_INT, FLD(model.hidden_size), REQ | GE(1), NULL, NUM(768),
     "`--hidden-size`", "model width h", NULL},
    {S_MODEL, "num_attention_heads", MT_CT_INT, FLD(model.num_attention_heads), REQ | GE(1), NULL,
     NUM(12), "`--num-attention-heads`", "attention heads; divides `hidden_size`", NULL},
    {S_MODEL, "ffn_hidden_size", MT_CT_INT, FLD(model.ffn_hidden_size), DER | GE(1), NULL,
     RULE("4 × `hidden_size`; with `swiglu` ⌊8 × `hidden_size` / 3 / 64⌋ × 64 (Megatron's)"),
     "`--ffn-hidden-size`", "MLP inner width (with `swiglu`: width of each of the gate and up halves)",
     NULL},
    {S_MODEL, "seq_length", MT_CT_INT, FLD(model.seq_length), REQ | GE(1), NULL, NUM(1024),
     "`--seq-length`", "tokens per sample s", NULL},
    {S_MODEL, "max_position_embeddings", MT_CT_INT, FLD(model.max_position_embeddings),
     DER | GE(1), NULL, RULE("`seq_length`"), "`--max-position-embeddings`",
     "rows of the learned position embedding", NULL},
    {S_MODEL, "vocab_size", MT_CT_INT, FLD(model.vocab_size), GE(1), NULL, NUM(50257),
     "set by the tokenizer (`--vocab-size`)", "tokenizer vocabulary (GPT-2) before padding", NULL},
    {S_MODEL, "make_vocab_size_divisible_by", MT_CT_INT, FLD(model.make_vocab_size_divisible_by),
     GE(1), NULL, NUM(128), "`--make-vocab-size-divisible-by`",
     "vocabulary is padded to a multiple of this × tp", NULL},
    {S_MODEL, "hidden_dropout", MT_CT_FLOAT, FLD(model.hidden_dropout), MT_CK_GE | MT_CK_LT, 0, 1,
     NULL, NUM(0.1), "`--hidden-dropout`", "dropout after attention / MLP", NULL},
    {S_MODEL, "attention_dropout", MT_CT_FLOAT, FLD(model.attention_dropout), MT_CK_GE | MT_CK_LT,
     0, 1, NULL, NUM(0.1), "`--attention-dropout`", "dropout on attention probabilities", NULL},
    {S_MODEL, "init_method_std", MT_CT_FLOAT, FLD(model.init_method_std), GT(0), NULL, NUM(0.02),
     "`--init-method-std`", "std of the normal weight init", NULL},
    {S_MODEL, "norm_epsilon", MT_CT_FLOAT, FLD(model.norm_epsilon), GT(0), NULL, NUM(1e-5),
     "`--norm-epsilon`", "ε of every LayerNorm / RMSNorm (also the qk norms)", NULL},
    {S_MODEL, "layernorm_epsilon", MT_CT_FLOAT, FLD(model.layernorm_epsilon), GT(0), NULL,
     NUM(1e-5), "`--layernorm-epsilon` (older Megatron)",
     "alias of `norm_epsilon`, kept for old configs; giving both with different values is an "
     "error", NULL},
    {S_MODEL, "untie_embeddings_and_output_weights", MT_CT_BOOL,
     FLD(model.untie_embeddings_and_output_weights), 0, 0, 0, NULL, NUM(0),
     "`--untie-embeddings-and-output-weights`",
     "separate output projection instead of the word embedding", NULL},
    {S_MODEL, "position_embedding_type", MT_CT_STR, FLD(model.position_embedding_type), 0, 0, 0,
     "learned_absolute|rope|none", STR("learned_absolute"), "`--position-embedding-type`",
     "learned absolute table, rotary embedding (RoFormer) on q and k, or none", NULL},
    {S_MODEL, "rotary_base", MT_CT_FLOAT, FLD(model.rotary_base), GT(0), NULL, NUM(10000),
     "`--rotary-base`",
     "RoPE base θ: pair i turns by pos · θ^(−2i/d), d the rotated channels",
     "model.position_embedding_type=rope"},
    {S_MODEL, "rotary_percent", MT_CT_FLOAT, FLD(model.rotary_percent), MT_CK_GT | MT_CK_LE, 0, 1,
     NULL, NUM(1.0), "`--rotary-percent`",
     "fraction of each head's channels that RoPE rotates: d = ⌊`kv_channels` × it⌋ must be even "
     "(channel pairs)",
     "model.position_embedding_type=rope"},
    {S_MODEL, "rotary_interleaved", MT_CT_BOOL, FLD(model.rotary_interleaved), 0, 0, 0, NULL,
     NUM(0), "`--rotary-interleaved`",
     "pair channels (2i, 2i+1) instead of rotate-half (i, i + d/2, Hugging Face's)",
     "model.position_embedding_type=rope"},
    {S_MODEL, "normalization", MT_CT_STR, FLD(model.normalization), 0, 0, 0, "LayerNorm|RMSNorm",
     STR("LayerNorm"), "`--normalization`", "LayerNorm (weight, bias) or RMSNorm (weight only)",
     NULL},
    {S_MODEL, "swiglu", MT_CT_BOOL, FLD(model.swiglu), 0, 0, 0, NULL, NUM(0), "`--swiglu`",
     "gated SiLU MLP: fc1 gives gate and up halves of `ffn_hidden_size` each", NULL},
    {S_MODEL, "group_query_attention", MT_CT_BOOL, FLD(model.group_query_attention), 0, 0, 0,
     NULL, NUM(0), "`--group-query-attention`",
     "K and V have `num_query_groups` heads shared by the query heads", NULL},
    {S_MODEL, "num_query_groups", MT_CT_INT, FLD(model.num_query_groups), DER | GE(1), NULL,
     RULE("1 with `group_query_attention` (MQA, Megatron's default), else `num_attention_heads`"),
     "`--num-query-groups`",
     "K/V heads, each shared by `num_attention_heads` / `num_query_groups` query heads; divides "
     "`num_attention_heads`, a multiple of tp",
     "model.group_query_attention"},
    {S_MODEL, "kv_channels", MT_CT_INT, FLD(model.kv_channels), DER | GE(1), NULL,
     RULE("`hidden_size` / `num_attention_heads`"), "`--kv-channels`",
     "channels per head; when given, `hidden_size` need not be `num_attention_heads` × it", NULL},
    {S_MODEL, "add_bias_linear", MT_CT_BOOL, FLD(model.add_bias_linear), 0, 0, 0, NULL, NUM(1),
     "`--add-bias-linear` / `--disable-bias-linear`", "biases on every linear layer", NULL},
    {S_MODEL, "qk_layernorm", MT_CT_BOOL, FLD(model.qk_layernorm), 0, 0, 0, NULL, NUM(0),
     "`--qk-layernorm`",
     "normalise each head's query and key with `normalization` (weights of [`kv_channels`] "
     "shared by the heads); needs `kv_channels` ≥ 2", NULL},
    {S_MODEL, "recompute_granularity", MT_CT_STR, FLD(model.recompute_granularity), NUL, 0, 0,
     "selective|full", STR(NULL), "`--recompute-granularity`",
     "activation recomputation: attention core only, or whole layers; null = off", NULL},
    {S_MODEL, "recompute_num_layers", MT_CT_INT, FLD(model.recompute_num_layers), GE(1), NULL,
     NUM(1), "`--recompute-num-layers`",
     "with `full`: layers per stage recomputed; ≤ `num_layers` / pp",
     "model.recompute_granularity=full"},
    {S_MODEL, "num_experts", MT_CT_INT, FLD(model.num_experts), NUL | GE(0), NULL, NUM(0),
     "`--num-experts` / DeepSpeed `num_experts`",
     "experts per MoE layer; 0 or null = dense model", NULL},
    {S_MODEL, "moe_router_topk", MT_CT_INT, FLD(model.moe_router_topk), GE(1), NULL, NUM(2),
     "`--moe-router-topk`", "experts per token; ≤ `num_experts`",
     "model.num_experts>0"},
    {S_MODEL, "moe_ffn_hidden_size", MT_CT_INT, FLD(model.moe_ffn_hidden_size), DER | GE(1), NULL,
     RULE("`ffn_hidden_size`"), "`--moe-ffn-hidden-size`", "expert MLP inner width",
     "model.num_experts>0"},
    {S_MODEL, "moe_layer_freq", MT_CT_LAYER_FREQ, FLD(model.moe_layer_freq), GE(1), NULL, NUM(1),
     "`--moe-layer-freq`",
     "integer k: layers 0, k, 2k, ... are MoE layers; or a list of `num_layers` 0/1 entries "
     "(1 = MoE), e.g. `[0, 1, 1, 1]` for a dense first layer",
     "model.num_experts>0"},
    {S_MODEL, "moe_aux_loss_coeff", MT_CT_FLOAT, FLD(model.moe_aux_loss_coeff), GE(0), NULL,
     NUM(0), "`--moe-aux-loss-coeff`", "load-balancing loss weight",
     "model.moe_router_load_balancing_type!=none"},
    {S_MODEL, "moe_z_loss_coeff", MT_CT_FLOAT, FLD(model.moe_z_loss_coeff), GE(0), NULL, NUM(0),
     "`--moe-z-loss-coeff`", "router z-loss weight",
     "model.num_experts>0"},
    {S_MODEL, "moe_expert_capacity_factor", MT_CT_FLOAT, FLD(model.moe_expert_capacity_factor),
     NUL, 0, 0, NULL, NUM(0), "`--moe-expert-capacity-factor` / DeepSpeed `capacity_factor`",
     "expert capacity = factor × tokens × topk / experts; ≤ 0 or null = dropless",
     "model.num_experts>0"},
    {S_MODEL, "moe_token_drop_policy", MT_CT_STR, FLD(model.moe_token_drop_policy), 0, 0, 0,
     "probs|position", STR("probs"), "`--moe-token-drop-policy`",
     "which tokens an over-full expert drops",
     "model.moe_expert_capacity_factor>0"},
    {S_MODEL, "moe_router_pre_softmax", MT_CT_BOOL, FLD(model.moe_router_pre_softmax), 0, 0, 0,
     NULL, NUM(0), "`--moe-router-pre-softmax`", "softmax before top-k instead of after",
     "model.moe_router_score_function=softmax"},
    {S_MODEL, "moe_pad_expert_input_to_capacity", MT_CT_BOOL,
     FLD(model.moe_pad_expert_input_to_capacity), 0, 0, 0, NULL, NUM(0),
     "`--moe-pad-expert-input-to-capacity`",
     "pad every expert's input to its capacity",
     "model.moe_expert_capacity_factor>0"},
    {S_MODEL, "moe_router_score_function", MT_CT_STR, FLD(model.moe_router_score_function), 0, 0,
     0, "softmax|sigmoid", STR("softmax"), "`--moe-router-score-function`",
     "router score: softmax over experts, or an independent sigmoid per expert",
     "model.num_experts>0"},
    {S_MODEL, "moe_router_topk_scaling_factor", MT_CT_FLOAT,
     FLD(model.moe_router_topk_scaling_factor), NUL | GT(0), NULL, NUM(0),
     "`--moe-router-topk-scaling-factor`", "multiplies the gate weights; null = 1",
     "model.num_experts>0"},
    {S_MODEL, "moe_router_enable_expert_bias", MT_CT_BOOL,
     FLD(model.moe_router_enable_expert_bias), 0, 0, 0, NULL, NUM(0),
     "`--moe-router-enable-expert-bias`",
     "aux-loss-free balancing: a per-expert bias added to the scores for expert selection only",
     "model.num_experts>0"},
    {S_MODEL, "moe_router_bias_update_rate", MT_CT_FLOAT, FLD(model.moe_router_bias_update_rate),
     GE(0), NULL, NUM(1e-3), "`--moe-router-bias-update-rate`",
     "expert bias step per global batch: bias += rate × sign(mean count − count)",
     "model.moe_router_enable_expert_bias"},
    {S_MODEL, "moe_router_load_balancing_type", MT_CT_STR,
     FLD(model.moe_router_load_balancing_type), 0, 0, 0,
     "aux_loss|seq_aux_loss|global_aux_loss|none", STR("aux_loss"),
     "`--moe-router-load-balancing-type`",
     "balance loss: per micro-batch, per sequence, per global batch, or none",
     "model.num_experts>0"},
    {S_MODEL, "moe_router_num_groups", MT_CT_INT, FLD(model.moe_router_num_groups), NUL | GE(1),
     NULL, NUM(0), "`--moe-router-num-groups`",
     "group-limited routing: experts in this many equal groups; null = off",
     "model.num_experts>0"},
    {S_MODEL, "moe_router_group_topk", MT_CT_INT, FLD(model.moe_router_group_topk), NUL | GE(1),
     NULL, NUM(0), "`--moe-router-group-topk`",
     "groups each token may pick its experts from (with `moe_router_num_groups`)",
     "model.moe_router_num_groups>0"},
    {S_MODEL, "moe_router_dtype", MT_CT_STR, FLD(model.moe_router_dtype), NUL, 0, 0, "fp32|fp64",
     STR(NULL), "`--moe-router-dtype`",
     "dtype of the router logits, scores and top-k; null = the training dtype",
     "model.num_experts>0"},
    {S_MODEL, "moe_shared_expert_intermediate_size", MT_CT_INT,
     FLD(model.moe_shared_expert_intermediate_size), NUL | GE(1), NULL, NUM(0),
     "`--moe-shared-expert-intermediate-size`",
     "width of the always-on shared expert MLP beside the routed experts; null = none",
     "model.num_experts>0"},
    {S_MODEL, "moe_shared_expert_overlap", MT_CT_BOOL, FLD(model.moe_shared_expert_overlap), 0, 0,
     0, NULL, NUM(0), "`--moe-shared-expert-overlap`",
     "compute the shared expert while the routed tokens' all-to-alls travel (forward: fc1 during "
     "the dispatch, fc2 during the combine; backward: during the combine's backward); needs "
     "`expert_model_parallel_size` > 1; bitwise the same results",
     "model.moe_shared_expert_intermediate_size"},
    {S_MODEL, "moe_grouped_gemm", MT_CT_BOOL, FLD(model.moe_grouped_gemm), 0, 0, 0, NULL, NUM(0),
     "`--moe-grouped-gemm`", "run the local experts' fc1 and fc2 each as one grouped GEMM",
     "model.num_experts>0"},

    {S_PAR, "tensor_model_parallel_size", MT_CT_INT, FLD(parallel.tensor_model_parallel_size),
     GE(1), NULL, NUM(1), "`--tensor-model-parallel-size`",
     "tp: ranks sharing each layer (Megatron column/row parallel)", NULL},
    {S_PAR, "pipeline_model_parallel_size", MT_CT_INT, FLD(parallel.pipeline_model_parallel_size),
     GE(1), NULL, NUM(1),
     "`--pipeline-model-parallel-size` / DeepSpeed `PipelineModule(num_stages)`",
     "pp: pipeline stages (1F1B schedule)", NULL},
    {S_PAR, "virtual_pipeline_model_parallel_size", MT_CT_INT,
     FLD(parallel.virtual_pipeline_model_parallel_size), DER | GE(1), NULL, RULE("1"),
     "`--num-virtual-stages-per-pipeline-rank` (`--virtual-pipeline-model-parallel-size`)",
     "model chunks per stage (interleaved 1F1B)",
     "parallel.pipeline_model_parallel_size>1"},
    {S_PAR, "overlap_p2p_comm", MT_CT_BOOL, FLD(parallel.overlap_p2p_comm), 0, 0, 0, NULL,
     NUM(1), "`--no-overlap-p2p-communication` turns it off (Megatron: interleaved only)",
     "post each pipeline receive one compute step ahead of its use (1F1B and interleaved; "
     "bitwise the same results)",
     "parallel.pipeline_model_parallel_size>1"},
    {S_PAR, "num_layers_in_first_pipeline_stage", MT_CT_INT,
     FLD(parallel.num_layers_in_first_pipeline_stage), NUL | GE(0), NULL, NUM(0),
     "`--decoder-first-pipeline-num-layers`",
     "layers on the first pipeline stage; 0 or null = equal split; the stages without an "
     "explicit count share the rest equally; not with interleaving",
     "parallel.pipeline_model_parallel_size>1"},
    {S_PAR, "num_layers_in_last_pipeline_stage", MT_CT_INT,
     FLD(parallel.num_layers_in_last_pipeline_stage), NUL | GE(0), NULL, NUM(0),
     "`--decoder-last-pipeline-num-layers`",
     "layers on the last pipeline stage (which also holds the output layer and loss); 0 or "
     "null = equal split",
     "parallel.pipeline_model_parallel_size>1"},
    {S_PAR, "sequence_parallel", MT_CT_BOOL, FLD(parallel.sequence_parallel), 0, 0, 0, NULL,
     NUM(0), "`--sequence-parallel`",
     "shard LayerNorm/dropout activations along the sequence over tp; ignored (with a note) "
     "when tp = 1", NULL},
    {S_PAR, "expert_model_parallel_size", MT_CT_INT, FLD(parallel.expert_model_parallel_size),
     GE(1), NULL, NUM(1), "`--expert-model-parallel-size` / DeepSpeed `ep_size`",
     "ep: ranks the experts are spread over",
     "model.num_experts>0"},
    {S_PAR, "expert_tensor_parallel_size", MT_CT_INT, FLD(parallel.expert_tensor_parallel_size),
     DER | GE(1), NULL, RULE("`tensor_model_parallel_size`"), "`--expert-tensor-parallel-size`",
     "tp inside each expert (expert parallel folding)",
     "model.num_experts>0"},
    {S_PAR, "context_parallel_size", MT_CT_INT, FLD(parallel.context_parallel_size), GE(1), NULL,
     NUM(1), "`--context-parallel-size`",
     "cp: ranks sharing each sequence (2·cp chunks, rank r holds r and 2cp−1−r; attention over "
     "a K/V ring); `seq_length` must be a multiple of 2·cp (2·cp·tp with SP); gradients are "
     "reduced over dp × cp", NULL},
    {S_PAR, "cp_comm_type", MT_CT_STR, FLD(parallel.cp_comm_type), 0, 0, 0,
     "p2p|a2a|allgather|a2a+p2p", STR("p2p"), "`--cp-comm-type` (one value for all layers)",
     "context-parallel attention communication; only `p2p` (the K/V ring) is implemented",
     "parallel.context_parallel_size>1"},
    {S_PAR, "zero_stage", MT_CT_INT, FLD(parallel.zero_stage), MT_CK_GE | MT_CK_LE, 0, 3, NULL,
     NUM(0),
     "DeepSpeed `zero_optimization.stage`; Megatron `--use-distributed-optimizer` ≈ 1",
     "ZeRO sharding over dp: 1 optimizer state, 2 + gradients, 3 + parameters", NULL},
    {S_PAR, "ddp_bucket_size", MT_CT_I64, FLD(parallel.ddp_bucket_size), GE(1), NULL,
     NUM(40000000), "`--ddp-bucket-size` / DeepSpeed `reduce_bucket_size`",
     "gradient all-reduce / reduce-scatter bucket, in elements (ZeRO: rounded down to a "
     "multiple of dp, buckets never cross a layer; docs/zero.md)", NULL},
    {S_PAR, "overlap_grad_reduce", MT_CT_BOOL, FLD(parallel.overlap_grad_reduce), 0, 0, 0, NULL,
     NUM(0), "`--overlap-grad-reduce`",
     "launch each gradient bucket's all-reduce (ZeRO 0) or reduce-scatter (ZeRO 1-3; expert "
     "buckets over the expert-data-parallel group) as soon as its last gradient is final in the "
     "backward pass, and wait for them before the optimizer step; bitwise the same results "
     "(docs/communication.md, \"Overlap\")", NULL},
    {S_PAR, "overlap_param_gather", MT_CT_BOOL, FLD(parallel.overlap_param_gather), 0, 0, 0, NULL,
     NUM(0), "`--overlap-param-gather`",
     "ZeRO-1/2: start each bucket's all-gather of the updated parameters after the optimizer "
     "step and wait for it just before the bucket's first use in the next forward pass; ZeRO-3: "
     "its layer prefetch on the same handles. Needs `overlap_grad_reduce` (as Megatron)",
     "parallel.zero_stage>0"},
    {S_PAR, "distributed_timeout_minutes", MT_CT_FLOAT, FLD(parallel.distributed_timeout_minutes),
     GT(0), NULL, NUM(10), "`--distributed-timeout-minutes` (fractions allowed here)",
     "deadline of every collective and point-to-point operation; on expiry the job prints which "
     "ranks of which group never arrived and aborts", NULL},
    {S_PAR, "distributed_backend", MT_CT_STR, FLD(parallel.distributed_backend), DER, 0, 0,
     "nccl|mpi", RULE("`nccl` when `device` is `cuda`, else `mpi`"), "`--distributed-backend`",
     "engine of the collectives and point-to-point on device buffers: `nccl` (NCCL on the "
     "backend's stream; one GPU per rank) or `mpi` (on cuda: device buffers staged through "
     "pinned host buffers over MPI, two PCIe copies per call; several ranks may share a GPU). "
     "`nccl` needs `device` `cuda`. Megatron's choices are `nccl` and `gloo`: `mpi` stands in "
     "for `gloo` (the host-side engine); docs/communication.md, \"Engines\"", NULL},
    {S_PAR, "zero_prefetch_layers", MT_CT_INT, FLD(parallel.zero_prefetch_layers), GE(0), NULL,
     NUM(1), "DeepSpeed `stage3_prefetch_bucket_size` (in bytes there)",
     "ZeRO-3: layers whose parameters are all-gathered ahead (on the MPI engine: gathered "
     "early, blocking; docs/zero.md)",
     "parallel.zero_stage=3"},

    {S_TRAIN, "micro_batch_size", MT_CT_INT, FLD(training.micro_batch_size), GE(1), NULL, NUM(1),
     "`--micro-batch-size` / DeepSpeed `train_micro_batch_size_per_gpu`",
     "samples per rank per forward/backward", NULL},
    {S_TRAIN, "global_batch_size", MT_CT_INT, FLD(training.global_batch_size), DER | GE(1), NULL,
     RULE("`micro_batch_size` × dp"), "`--global-batch-size` / DeepSpeed `train_batch_size`",
     "samples per optimizer step; a multiple of `micro_batch_size` × dp (the quotient is the "
     "number of accumulated micro-batches)", NULL},
    {S_TRAIN, "train_iters", MT_CT_I64, FLD(training.train_iters), DER | GE(1), NULL,
     RULE("`train_samples` / `global_batch_size` when `train_samples` is set (with "
          "`rampup_batch_size`: Megatron's count of the ramped iterations)"), "`--train-iters`",
     "optimizer steps; one of `train_iters` and `train_samples` is required", NULL},
    {S_TRAIN, "train_samples", MT_CT_I64, FLD(training.train_samples), NUL | GE(1), NULL, NUM(0),
     "`--train-samples`",
     "sample-based training: train on this many samples (`train_iters` = ⌊`train_samples` / "
     "`global_batch_size`⌋), with the schedule lengths in samples (`lr_decay_samples`, "
     "`lr_warmup_samples`, `lr_wsd_decay_samples`); null = iteration-based", NULL},
    {S_TRAIN, "rampup_batch_size", MT_CT_I64x3, FLD(training.rampup_batch_size), NUL, 0, 0, NULL,
     NUM(0), "`--rampup-batch-size`",
     "[start, increment, ramp-up samples]: the global batch of an iteration is `start` + "
     "`increment` × ⌊consumed samples / (samples / ((`global_batch_size` − `start`) / "
     "`increment`))⌋ until the consumed samples pass the ramp-up samples, then "
     "`global_batch_size` (Megatron's RampupBatchsizeNumMicroBatchesCalculator; `train_iters` "
     "is Megatron's count of the ramped iterations; docs/optimizer.md); null = constant batch",
     "training.train_samples"},
    {S_TRAIN, "seed", MT_CT_U64, FLD(training.seed), 0, 0, 0, NULL, NUM(1234), "`--seed`",
     "seed of initialization, dropout and data shuffling", NULL},
    {S_TRAIN, "lr", MT_CT_FLOAT, FLD(training.lr), REQ | GT(0), NULL, NUM(0), "`--lr`",
     "peak learning rate", NULL},
    {S_TRAIN, "min_lr", MT_CT_FLOAT, FLD(training.min_lr), GE(0), NULL, NUM(0), "`--min-lr`",
     "floor of the decay; ≤ `lr`", NULL},
    {S_TRAIN, "lr_decay_style", MT_CT_STR, FLD(training.lr_decay_style), 0, 0, 0,
     "constant|linear|cosine|inverse-square-root|WSD", STR("linear"), "`--lr-decay-style`",
     "decay after warmup (WSD: constant, then the `lr_wsd_decay_style` decay over the last "
     "`lr_wsd_decay_iters` / `_samples` of the decay length)", NULL},
    {S_TRAIN, "lr_warmup_iters", MT_CT_I64, FLD(training.lr_warmup_iters), GE(0), NULL, NUM(0),
     "`--lr-warmup-iters`",
     "linear warmup steps from `lr_warmup_init` to `lr`; < `lr_decay_iters`; iteration-based "
     "only", NULL},
    {S_TRAIN, "lr_decay_iters", MT_CT_I64, FLD(training.lr_decay_iters), DER | GE(1), NULL,
     RULE("`train_iters`"), "`--lr-decay-iters`",
     "step where the decay reaches `min_lr`; iteration-based only", NULL},
    {S_TRAIN, "lr_warmup_samples", MT_CT_I64, FLD(training.lr_warmup_samples), GE(0), NULL,
     NUM(0), "`--lr-warmup-samples`", "warmup length in samples", "training.train_samples"},
    {S_TRAIN, "lr_decay_samples", MT_CT_I64, FLD(training.lr_decay_samples), NUL | GE(1), NULL,
     NUM(0), "`--lr-decay-samples`",
     "samples where the decay reaches `min_lr`; null = `train_samples`", "training.train_samples"},
    {S_TRAIN, "lr_warmup_fraction", MT_CT_FLOAT, FLD(training.lr_warmup_fraction),
     NUL | MT_CK_GT | MT_CK_LT, 0, 1, NULL, NUM(0), "`--lr-warmup-fraction`",
     "warmup length as a fraction of the decay length (either basis); null = unset; excludes "
     "`lr_warmup_iters` and `lr_warmup_samples`", NULL},
    {S_TRAIN, "lr_warmup_init", MT_CT_FLOAT, FLD(training.lr_warmup_init), NUL | GE(0), NULL,
     NUM(0), "`--lr-warmup-init`",
     "learning rate where the warmup starts; ≤ `lr`; needs a warmup; null = 0", NULL},
    {S_TRAIN, "lr_wsd_decay_style", MT_CT_STR, FLD(training.lr_wsd_decay_style), 0, 0, 0,
     "exponential|linear|cosine|minus_sqrt", STR("exponential"), "`--lr-wsd-decay-style`",
     "shape of WSD's final decay", "training.lr_decay_style=WSD"},
    {S_TRAIN, "lr_wsd_decay_iters", MT_CT_I64, FLD(training.lr_wsd_decay_iters), NUL | GE(1), NULL,
     NUM(0), "`--lr-wsd-decay-iters`",
     "iterations of WSD's final decay (ending at `lr_decay_iters`); required with `WSD` "
     "(iteration-based)", "training.lr_decay_style=WSD"},
    {S_TRAIN, "lr_wsd_decay_samples", MT_CT_I64, FLD(training.lr_wsd_decay_samples), NUL | GE(1),
     NULL, NUM(0), "`--lr-wsd-decay-samples`",
     "samples of WSD's final decay; required with `WSD` and `train_samples`",
     "training.lr_decay_style=WSD"},
    {S_TRAIN, "weight_decay", MT_CT_FLOAT, FLD(training.weight_decay), GE(0), NULL, NUM(0.01),
     "`--weight-decay`",
     "AdamW decoupled weight decay (not on biases and norm weights, as Megatron); with "
     "`weight_decay_incr_style` `constant` only", NULL},
    {S_TRAIN, "apply_wd_to_qk_layernorm", MT_CT_BOOL, FLD(training.apply_wd_to_qk_layernorm), 0,
     0, 0, NULL, NUM(0), "`--apply-wd-to-qk-layernorm`",
     "weight decay also on the q/k norm parameters (`q_layernorm`, `k_layernorm`: weight and, "
     "with LayerNorm, bias); false: none, as every norm and bias (Megatron's regularization "
     "group, hence this section)",
     "model.qk_layernorm"},
    {S_TRAIN, "start_weight_decay", MT_CT_FLOAT, FLD(training.start_weight_decay), NUL | GE(0),
     NULL, NUM(0), "`--start-weight-decay`",
     "weight decay at the first update; null = 0 (Megatron requires it)",
     "training.weight_decay_incr_style!=constant"},
    {S_TRAIN, "end_weight_decay", MT_CT_FLOAT, FLD(training.end_weight_decay), NUL | GE(0), NULL,
     NUM(0), "`--end-weight-decay`",
     "weight decay reached at the end of training; ≥ `start_weight_decay`; required with "
     "`weight_decay_incr_style` `linear` or `cosine`",
     "training.weight_decay_incr_style!=constant"},
    {S_TRAIN, "weight_decay_incr_style", MT_CT_STR, FLD(training.weight_decay_incr_style), 0, 0, 0,
     "constant|linear|cosine", STR("constant"), "`--weight-decay-incr-style`",
     "weight decay from `start_weight_decay` to `end_weight_decay` over the training length", NULL},
    {S_TRAIN, "adam_beta1", MT_CT_FLOAT, FLD(training.adam_beta1), MT_CK_GE | MT_CK_LT, 0, 1, NULL,
     NUM(0.9), "`--adam-beta1`", "Adam β1", NULL},
    {S_TRAIN, "adam_beta2", MT_CT_FLOAT, FLD(training.adam_beta2), MT_CK_GE | MT_CK_LT, 0, 1, NULL,
     NUM(0.999), "`--adam-beta2`", "Adam β2", NULL},
    {S_TRAIN, "adam_eps", MT_CT_FLOAT, FLD(training.adam_eps), GT(0), NULL, NUM(1e-8),
     "`--adam-eps`", "Adam ε", NULL},
    {S_TRAIN, "clip_grad", MT_CT_FLOAT, FLD(training.clip_grad), GE(0), NULL, NUM(1.0),
     "`--clip-grad` / DeepSpeed `gradient_clipping`", "global gradient-norm clip; 0 = off", NULL},
    {S_TRAIN, "eval_interval", MT_CT_I64, FLD(training.eval_interval), GE(0), NULL, NUM(1000),
     "`--eval-interval`", "validate every N steps; 0 = never", NULL},
    {S_TRAIN, "eval_iters", MT_CT_I64, FLD(training.eval_iters), GE(0), NULL, NUM(100),
     "`--eval-iters`", "validation batches per evaluation", NULL},
    {S_TRAIN, "precision", MT_CT_STR, FLD(training.precision), 0, 0, 0, "fp32|bf16", STR("fp32"),
     "`--bf16` / DeepSpeed `bf16.enabled`", "compute dtype (bf16 keeps fp32 master weights)", NULL},
    {S_TRAIN, "max_nan_iters", MT_CT_INT, FLD(training.max_nan_iters), GE(1), NULL, NUM(10),
     "megatrain-only (Megatron's `--check-for-nan-in-loss-and-grad` aborts at once)",
     "consecutive steps with a non-finite loss or gradient (each skipped) before aborting", NULL},
    {S_TRAIN, "exit_interval", MT_CT_I64, FLD(training.exit_interval), GE(0), NULL, NUM(0),
     "`--exit-interval`",
     "after an iteration divisible by it, save a checkpoint (when `checkpoint.save` is set) "
     "and exit with status 0; 0 = off", NULL},
    {S_TRAIN, "finetune", MT_CT_BOOL, FLD(training.finetune), 0, 0, 0, NULL, NUM(0),
     "`--finetune`",
     "with `checkpoint.load`: load the model weights only (any layout) and start at iteration "
     "0 with fresh optimizer state and data position; the way to train from `megatrain convert "
     "--from hf`", NULL},
    {S_TRAIN, "exit_signal_handler", MT_CT_BOOL, FLD(training.exit_signal_handler), 0, 0, 0, NULL,
     NUM(1), "`--exit-signal-handler` (Megatron's default is false)",
     "on `exit_signal` (and SIGUSR1) every rank finishes the current iteration, a checkpoint is "
     "saved (when `checkpoint.save` is set) and the job exits 0", NULL},
    {S_TRAIN, "exit_signal", MT_CT_STR, FLD(training.exit_signal), 0, 0, 0,
     "SIGTERM|SIGINT|SIGUSR1|SIGUSR2", STR("SIGTERM"), "`--exit-signal`",
     "the signal that asks for a checkpoint and a clean exit (SIGUSR1 is caught as well)",
     "training.exit_signal_handler"},
    {S_TRAIN, "exit_duration_in_mins", MT_CT_FLOAT, FLD(training.exit_duration_in_mins), GE(0),
     NULL, NUM(0), "`--exit-duration-in-mins` (fractions allowed here)",
     "save and exit 0 after the first iteration that ends this many minutes after start-up; "
     "0 = off", NULL},
    {S_TRAIN, "override_opt_param_scheduler", MT_CT_BOOL,
     FLD(training.override_opt_param_scheduler), 0, 0, 0, NULL, NUM(0),
     "`--override-opt_param-scheduler`",
     "on resume, use this config's learning-rate schedule and weight decay even where they "
     "differ from the checkpoint's (docs/checkpoint.md lists the keys compared)", NULL},
    {S_TRAIN, "use_checkpoint_opt_param_scheduler", MT_CT_BOOL,
     FLD(training.use_checkpoint_opt_param_scheduler), 0, 0, 0, NULL, NUM(0),
     "`--use-checkpoint-opt_param-scheduler`",
     "on resume, take the learning-rate schedule and weight decay from the checkpoint's "
     "config", NULL},
    {S_TRAIN, "check_replicas_interval", MT_CT_I64, FLD(training.check_replicas_interval), GE(0),
     NULL, NUM(0), "megatrain-only",
     "every N iterations compare checksums of the parameters across the data-parallel group "
     "(experts across the expert-data-parallel group) and of the replicated parameters (norm "
     "weights and biases incl. q/k norms, position embedding, row-parallel biases) across the "
     "tensor-parallel group; a mismatch is an error. 0 = only at the end of training", NULL},
    {S_TRAIN, "num_threads", MT_CT_INT, FLD(training.num_threads), GE(0), NULL, NUM(0),
     "`OMP_NUM_THREADS`", "CPU threads per rank; 0 = OpenMP default", NULL},

    {S_DATA, "data_path", MT_CT_PATHS, FLD(data.blend), NUL, 0, 0, NULL, STR(NULL), "`--data-path`",
     "data prefixes (`PREFIX.bin`/`PREFIX.idx` from `megatrain preprocess`, or llm.c shards). "
     "Forms: `\"prefix\"`, `[\"a\", \"b\"]` (equal weights), or Megatron's weighted form "
     "`[0.7, \"a\", 0.3, \"b\"]` / `[\"0.7\", \"a\", \"0.3\", \"b\"]` (a weight > 0 before "
     "each prefix; weights are stored as given and normalized by the data code). The weighted "
     "form is recognized by the first element being a number or numeric string. Required "
     "unless `train_data_path` is given (the two exclude each other).", NULL},
    {S_DATA, "train_data_path", MT_CT_PATHS, FLD(data.split_blend[0]), NUL, 0, 0, NULL,
     STR(NULL), "`--train-data-path`",
     "the training data alone (Megatron's per-split blend, same forms as `data_path`): every "
     "document of these prefixes is a training document, no `split` applies; with "
     "`valid_data_path` and `test_data_path`; excludes `data_path` and `split`", NULL},
    {S_DATA, "valid_data_path", MT_CT_PATHS, FLD(data.split_blend[1]), NUL, 0, 0, NULL,
     STR(NULL), "`--valid-data-path`",
     "the validation data (per-split); null = no validation", "data.train_data_path"},
    {S_DATA, "test_data_path", MT_CT_PATHS, FLD(data.split_blend[2]), NUL, 0, 0, NULL,
     STR(NULL), "`--test-data-path`",
     "the test data (per-split; opened and checked, not used by training)", "data.train_data_path"},
    {S_DATA, "data_cache_path", MT_CT_STR, FLD(data.data_cache_path), NUL, 0, 0, NULL, STR(NULL),
     "`--data-cache-path`",
     "folder for the sample-index files (`gpt_index_<key>.bin`, reused when their inputs "
     "match); null = built in memory at every start (Megatron caches beside the data by "
     "default)", NULL},
    {S_DATA, "split", MT_CT_STR, FLD(data.split), 0, 0, 0, NULL, STR("969,30,1"), "`--split`",
     "train,valid,test weights by document (up to three non-negative numbers separated by `,` "
     "or `/`, positive sum)", "data.train_data_path=null"},
    {S_DATA, "vocab_file", MT_CT_STR, FLD(data.vocab_file), NUL, 0, 0, NULL, STR(NULL),
     "`--vocab-file`", "GPT-2 `vocab.json` (for decoding samples)",
     "data.tokenizer_type=GPT2BPETokenizer"},
    {S_DATA, "merge_file", MT_CT_STR, FLD(data.merge_file), NUL, 0, 0, NULL, STR(NULL),
     "`--merge-file`", "GPT-2 `merges.txt`", "data.tokenizer_type=GPT2BPETokenizer"},
    {S_DATA, "tokenizer_type", MT_CT_STR, FLD(data.tokenizer_type), 0, 0, 0,
     "GPT2BPETokenizer|HuggingFaceTokenizer|SentencePieceTokenizer", STR("GPT2BPETokenizer"),
     "`--tokenizer-type`",
     "the tokenizer `generate` decodes with (and `preprocess` encodes with): GPT-2 BPE from "
     "`vocab_file`/`merge_file`, a Hugging Face `tokenizer.json` (byte-level BPE: Llama 3, "
     "Qwen2/3, DeepSeek-V3, GPT-NeoX), or a SentencePiece `tokenizer.model` (Llama 2, "
     "Mistral); docs/data.md",
     NULL},
    {S_DATA, "tokenizer_model", MT_CT_STR, FLD(data.tokenizer_model), NUL, 0, 0, NULL, STR(NULL),
     "`--tokenizer-model`",
     "with `HuggingFaceTokenizer`: a `tokenizer.json` or the folder holding it (and "
     "`tokenizer_config.json`); with `SentencePieceTokenizer`: the `tokenizer.model` file; "
     "required by both",
     "data.tokenizer_type!=GPT2BPETokenizer"},
    {S_DATA, "mid_level_dataset_surplus", MT_CT_FLOAT, FLD(data.mid_level_dataset_surplus),
     GE(0), NULL, NUM(0.005), "`--mid-level-dataset-surplus`",
     "a weighted blend builds ceil(ceil(n·w)·(1 + this)) samples of each dataset for the "
     "ceil(n·w) it draws (Megatron's margin); needs the weighted `data_path` form", NULL},
    {S_DATA, "reset_position_ids", MT_CT_BOOL, FLD(data.reset_position_ids), 0, 0, 0, NULL, NUM(0),
     "`--reset-position-ids`",
     "learned absolute positions restart at 0 after every end-of-document token of a packed "
     "sample (RoPE scores depend on position differences only, which document masking keeps "
     "inside a document)", "model.position_embedding_type=learned_absolute"},
    {S_DATA, "reset_attention_mask", MT_CT_BOOL, FLD(data.reset_attention_mask), 0, 0, 0, NULL,
     NUM(0), "`--reset-attention-mask`",
     "a token attends only to the earlier tokens of its own document inside a packed sample "
     "(documents end at the end-of-document token, which belongs to the document it ends)", NULL},
    {S_DATA, "eod_mask_loss", MT_CT_BOOL, FLD(data.eod_mask_loss), 0, 0, 0, NULL, NUM(0),
     "`--eod-mask-loss`",
     "no loss on the prediction made at an end-of-document token; the loss is the mean over the "
     "other tokens of the global batch", NULL},

    {S_CKPT, "save", MT_CT_STR, FLD(checkpoint.save), NUL, 0, 0, NULL, STR(NULL), "`--save`",
     "checkpoint directory to write; null = do not save", NULL},
    {S_CKPT, "load", MT_CT_STR, FLD(checkpoint.load), NUL, 0, 0, NULL, STR(NULL), "`--load`",
     "checkpoint directory to resume from; null = fresh start", NULL},
    {S_CKPT, "save_interval", MT_CT_I64, FLD(checkpoint.save_interval), GE(0), NULL, NUM(0),
     "`--save-interval`", "save every N steps; 0 = only at the end (when `save` is set)", NULL},
    {S_CKPT, "async_save", MT_CT_BOOL, FLD(checkpoint.async_save), 0, 0, 0, NULL, NUM(0),
     "`--async-save`",
     "copy the state to host memory at the iteration boundary and write it in the background "
     "while training continues", NULL},

    {S_LOG, "log_interval", MT_CT_I64, FLD(logging.log_interval), GE(1), NULL, NUM(100),
     "`--log-interval` / DeepSpeed `steps_per_print`", "print a log line every N steps", NULL},
    {S_LOG, "metrics_file", MT_CT_STR, FLD(logging.metrics_file), NUL, 0, 0, NULL, STR(NULL),
     "megatrain-only (like `--tensorboard-dir` / `--wandb-project`)",
     "JSON-lines file of per-step metrics; null = none", NULL},
    {S_LOG, "log_straggler", MT_CT_BOOL, FLD(logging.log_straggler), 0, 0, 0, NULL, NUM(1),
     "`--log-straggler` (Megatron's default is false)",
     "every `log_interval`, the slowest and fastest rank's compute time per iteration "
     "(forward and backward, without waits for other pipeline stages) with their ranks, in the "
     "log line and the JSONL", NULL},
    {S_LOG, "timing_log_level", MT_CT_INT, FLD(logging.timing_log_level), MT_CK_GE | MT_CK_LE, 0,
     2, NULL, NUM(0), "`--timing-log-level`",
     "Megatron's timers after each log line: 0 none; 1 once-per-iteration sections "
     "(forward-backward, all-grads-sync, params-all-gather, optimizer and its parts); 2 also "
     "per-micro-batch ones (forward-compute, backward-compute); docs/observability.md", NULL},
    {S_LOG, "timing_log_option", MT_CT_STR, FLD(logging.timing_log_option), 0, 0, 0,
     "max|minmax|all", STR("minmax"), "`--timing-log-option`",
     "timers across ranks: the max, the min and max, or every rank's",
     "logging.timing_log_level>0"},
    {S_LOG, "tensorboard_dir", MT_CT_STR, FLD(logging.tensorboard_dir), NUL, 0, 0, NULL,
     STR(NULL), "`--tensorboard-dir`",
     "write a TensorBoard event file here (the last rank, Megatron's tags); null = none", NULL},
    {S_LOG, "tensorboard_log_interval", MT_CT_I64, FLD(logging.tensorboard_log_interval), GE(1),
     NULL, NUM(1), "`--tensorboard-log-interval`",
     "write the per-iteration scalars every N iterations", "logging.tensorboard_dir"},
    {S_LOG, "log_timers_to_tensorboard", MT_CT_BOOL, FLD(logging.log_timers_to_tensorboard), 0, 0,
     0, NULL, NUM(0), "`--log-timers-to-tensorboard`",
     "also write iteration-time, throughput and the timers (`<name>-time`, max over ranks, "
     "seconds) at every log line", "logging.tensorboard_dir"},
    {S_LOG, "log_memory_to_tensorboard", MT_CT_BOOL, FLD(logging.log_memory_to_tensorboard), 0,
     0, 0, NULL, NUM(0), "`--log-memory-to-tensorboard`",
     "also write the allocator's mem-allocated-bytes and mem-max-allocated-bytes of the last rank",
     "logging.tensorboard_dir"},

};
const int mt_cfg_nkeys = (int)(sizeof(mt_cfg_keys) / sizeof(mt_cfg_keys[0]));

_Static_assert(sizeof(mt_cfg_keys) / sizeof(mt_cfg_keys[0]) <= MT_CFG_MAX_KEYS,
               "raise MT_CFG_MAX_KEYS");

int mt_cfg_find_key(int sec, const char *name) {
  for (int k = 0; k < mt_cfg_nkeys; k++)
    if (mt_cfg_keys[k].sec == sec && strcmp(mt_cfg_keys[k].name, name) == 0) return k;
  return -1;
}

int mt_cfg_find_dotted(const char *dotted) {
  const char *dot = strchr(dotted, '.');
  if (!dot) return mt_cfg_find_key(0, dotted);
  for (int s = 1; s < MT_CFG_NSECTIONS; s++) {
    size_t n = strlen(mt_cfg_sections[s]);
    if ((size_t)(dot - dotted) == n && strncmp(dotted, mt_cfg_sections[s], n) == 0)
      return mt_cfg_find_key(s, dot + 1);
  }
  return -1;
}

void *mt_cfg_field(mt_config *cfg, int k) { return (char *)cfg + mt_cfg_keys[k].off; }
const void *mt_cfg_cfield(const mt_config *cfg, int k) {
  return (const char *)cfg + mt_cfg_keys[k].off;
}

void mt_cfg_apply_default(mt_config *cfg, int k) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  void *p = mt_cfg_field(cfg, k);
  if (kd->type != MT_CT_PATHS) memset(p, 0, kd->size);
  if (kd->type == MT_CT_LAYER_FREQ) cfg->model.moe_layer_pattern_len = 0;
  if (kd->flags & MT_CK_DERIVED) return; /* 0 = derive */
  switch (kd->type) {
    case MT_CT_INT:
    case MT_CT_LAYER_FREQ:
    case MT_CT_BOOL: *(int *)p = (int)kd->def; break;
    case MT_CT_I64: *(int64_t *)p = (int64_t)kd->def; break;
    case MT_CT_U64: *(uint64_t *)p = (uint64_t)kd->def; break;
    case MT_CT_FLOAT: *(float *)p = (float)kd->def; break;
    case MT_CT_STR:
      if (kd->def_str) snprintf((char *)p, kd->size, "%s", kd->def_str);
      break;
    case MT_CT_I64x3: break; /* null: all 0 */
    case MT_CT_PATHS: /* no default: an empty blend */
      ((mt_data_blend *)p)->n_paths = 0;
      ((mt_data_blend *)p)->weighted = 0;
      break;
  }
}

void mt_cfg_apply_defaults(mt_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  for (int k = 0; k < mt_cfg_nkeys; k++) mt_cfg_apply_default(cfg, k);
}
