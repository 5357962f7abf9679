/* model/gpt.h — GPT (Radford et al. 2019) as Megatron-LM builds it, expressed
 * only through the backend op table (core/backend.h).
 *
 * Architecture: token + learned absolute position embeddings, embedding
 * dropout, num_layers pre-LayerNorm blocks (LN -> fused QKV -> causal
 * attention -> proj -> dropout + residual; LN -> fc1 -> GELU(tanh) -> fc2 ->
 * dropout + residual), final LayerNorm, output layer tied to the word
 * embedding (or untied), cross-entropy over the real vocabulary only (padded
 * logit columns never enter the softmax).
 *
 * Llama-style options (docs/model.md; Megatron-core's flags): RoPE instead
 * of the position table (applied to q and k after linear_qkv and the q/k
 * norms, at each token's global position), RMSNorm instead of LayerNorm,
 * SwiGLU MLPs (dense and expert), grouped-query attention, no linear biases,
 * qk_layernorm (decoder.layers.N.self_attention.{q,k}_layernorm.*, [hn],
 * shared by all heads, replicated over TP with TP-summed gradients).
 *
 * Activations are [s, b, h] (Megatron order). Parameter names follow
 * Megatron-core (embedding.word_embeddings.weight,
 * decoder.layers.N.self_attention.linear_qkv.weight, ...). linear_qkv's
 * output features are ordered [query groups, np/ng q heads + k + v,
 * head_dim] as in Megatron-core ([heads, 3, head_dim] without GQA), so
 * splitting by query groups is a contiguous row block. linear_fc1 with SwiGLU
 * is [2 ffn, h]: gate rows then up rows; TP rank r holds both its gate and
 * its up slice (mt_param.halves).
 *
 * Initialisation (Megatron): weights N(0, init_method_std); linear_proj and
 * linear_fc2 N(0, init_method_std / sqrt(2 num_layers)); LayerNorm weight 1,
 * bias 0; linear biases 0. Values come from the counter-based RNG keyed by
 * (seed, parameter name) and the element's index in the unsharded tensor
 * (docs/rng.md), so any sharding reproduces them exactly.
 */
#ifndef MT_MODEL_GPT_H
#define MT_MODEL_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "model/fp8_linear.h"
#include "model/moe_layer.h"

#include "config/model_config.h"
#include "model/params.h"
#include "parallel/comm.h"

typedef struct {
  /* The architecture: the config file's model section as the loader resolved
   * it (config/model_config.h, docs/config.md), embedded whole. A caller that
   * builds it by hand (tests, benches) starts from mt_model_config_defaults
   * (config/config.h: the key table's defaults); a derived size left 0 takes
   * its derivation (num_query_groups = num_attention_heads, kv_channels =
   * hidden_size / heads, max_position_embeddings = seq_length,
   * moe_ffn_hidden_size = ffn_hidden_size). mt_gpt_create resolves those in
   * its copy (mt_gpt_get_config) and asserts that the enumerated strings are
   * among the key's choices. Not read here: make_vocab_size_divisible_by (the
   * caller pads the vocabulary: padded_vocab_size), group_query_attention
   * (num_query_groups holds the groups) and layernorm_epsilon (= norm_epsilon). */
  mt_model_config model;
  int64_t padded_vocab_size; /* vocab_size padded to a multiple of make_vocab_size_divisible_by
                                · tp (mt_config_padded_vocab) */
  int micro_batch_size;      /* b: sizes the activation buffers */
  /* documents inside packed sequences (the data section's Megatron flags;
   * model/gpt_docs.c): attention limited to the token's own document,
   * learned positions restarting at each document, no loss on the
   * prediction made at an end-of-document token (id eod_token) */
  int reset_attention_mask, reset_position_ids, eod_mask_loss;
  /* training.apply_wd_to_qk_layernorm: the q/k norm parameters (weight and,
   * with LayerNorm, bias) take weight decay (Megatron's
   * --apply-wd-to-qk-layernorm); 0: none, as every norm and bias */
  int apply_wd_to_qk_layernorm;
  int eod_token;
  uint64_t seed;             /* training.seed: keys init and dropout */
  int skip_init;             /* 1: weights drawn from N(0, std) are zero-filled instead (the
                                caller loads every parameter: `megatrain generate`) */
  /* tensor / sequence parallelism (Megatron); tp_group NULL when tp_size 1 */
  int tp_size, tp_rank;
  int sequence_parallel;
  mt_group *tp_group;
  /* context parallelism (Megatron's context_parallel_size, cp_comm_type
   * "p2p"; model/context_parallel.h): CP rank cp_rank of cp_size holds
   * sequence chunks cp_rank and 2·cp_size−1−cp_rank of 2·cp_size (its tokens
   * and targets are picked from the full samples given to the model);
   * attention runs over the ring of cp_group; everything else is
   * token-local. seq_length must be a multiple of 2·cp_size (·tp with
   * sequence parallelism). cp_group NULL when cp_size 1. */
  int cp_size, cp_rank;
  mt_group *cp_group;
  /* pipeline parallelism (Narayanan et al. 2021): stage pp_rank of pp_size
   * holds vpp_size model chunks; chunk c is global model chunk c·pp + pp_rank
   * with layers [g·L/(pp·vpp), (g+1)·L/(pp·vpp)) (Megatron's interleaved
   * assignment; vpp_size 1 = contiguous stages). The first stage holds the
   * embedding, the last the final LayerNorm, output layer and loss; with tied
   * embeddings and pp > 1 the last stage keeps its own copy of the word
   * embedding (same name, same initial values) whose gradient is summed with
   * the first stage's over embd_group in mt_gpt_finalize_grads. */
  int pp_size, pp_rank, vpp_size;
  int first_stage_layers, last_stage_layers; /* uneven split (vpp_size 1); 0 = equal */
  mt_group *embd_group;      /* first + last stage; NULL when pp_size 1 */
  /* expert parallelism (model/moe_layer.h; Megatron's names): an MoE layer
   * (mt_gpt_is_moe_layer) has a router [E, h]
   * (decoder.layers.l.mlp.router.weight, replicated over TP) and experts
   * decoder.layers.l.mlp.experts.e.linear_fc{1,2}.{weight,bias} (global
   * expert index e; this rank holds e in [ep_rank·E/ep, ...)). Needs sequence
   * parallelism when tp > 1. ep_group NULL when ep_size 1. */
  int ep_size, ep_rank;
  mt_group *ep_group;
  /* expert tensor parallelism (Megatron's parallel folding): each expert's
   * fc1 split by columns and fc2 by rows over the etp_group of etp_size
   * ranks; etp_group NULL when etp_size 1 */
  int etp_size, etp_rank;
  mt_group *etp_group;
  /* FP8 linear layers (model/fp8_linear.h; the training.fp8_* keys): fp8 0
   * = off; the transformer layers' qkv, proj, fc1 and fc2 GEMMs run in FP8
   * except in the first fp8_bf16_start and the last fp8_bf16_end layers
   * (global indices); the output layer stays in T */
  int fp8;
  mt_fp8_options fp8_options;
  int fp8_bf16_start, fp8_bf16_end;
  /* the delayed recipe's data-parallel amax reduction group (NULL: none,
   * dp 1 or tp_only_amax_red; docs/fp8.md "Amax reductions") */
  mt_group *fp8_dp_group;
  /* the same for the routed experts: their expert-data-parallel group
   * (every rank holding the same expert shard; NULL: none) */
  mt_group *fp8_edp_group;
} mt_gpt_config;

typedef struct mt_gpt mt_gpt;

/* Create this rank's part of the model on backend `be`: registers its
 * parameters, allocates the flat parameter buffer (MT_MEM_PARAM, dtype T),
 * gradient buffer (MT_MEM_GRAD, fp32) and workspaces, and initialises the
 * parameters (see above). Activations are allocated per micro-batch slot on
 * first use (MT_MEM_ACT) and reused, so the allocator's activation peak is
 * the number of micro-batches a schedule keeps in flight. */
mt_gpt *mt_gpt_create(mt_backend *be, const mt_gpt_config *cfg);
void mt_gpt_destroy(mt_gpt *m);

const mt_gpt_config *mt_gpt_get_config(const mt_gpt *m);
const mt_param_list *mt_gpt_params(const mt_gpt *m);
/* The backend the model was created on (its storage dtype T is be->dtype). */
mt_backend *mt_gpt_backend(const mt_gpt *m);
/* Flat buffers: params (T) and grads (fp32), mt_gpt_params()->numel elements. */
void *mt_gpt_param_buffer(mt_gpt *m);
float *mt_gpt_grad_buffer(mt_gpt *m);

/* Hooks around each stage of the pass, for runtimes that manage parameter
 * and gradient memory (ZeRO-2/3): `layer` is 0..num_layers-1 for transformer
 * layers, MT_GPT_EMBEDDING for the embedding and MT_GPT_HEAD for the final
 * LayerNorm + output layer + loss. Backward runs HEAD, layers L-1..0, then
 * EMBEDDING; after_backward(l) means the gradients of that part's parameters
 * are complete for this micro-batch (with tied embeddings the word-embedding
 * gradient completes only after EMBEDDING). NULL members are skipped. */
enum { MT_GPT_EMBEDDING = -1, MT_GPT_HEAD = 1 << 20 }; /* layers use global indices */
typedef struct {
  void *ctx;
  void (*before_forward)(void *ctx, int layer);
  void (*after_forward)(void *ctx, int layer);
  void (*before_backward)(void *ctx, int layer);
  void (*after_backward)(void *ctx, int layer);
} mt_gpt_hooks;
void mt_gpt_set_hooks(mt_gpt *m, const mt_gpt_hooks *h);

/* Device pointer of parameter idx (T) and of its gradient (fp32). They point
 * into the flat buffers unless re-pointed with the setters (ZeRO-3 gathers a
 * layer into a working buffer and points its parameters there). */
void *mt_gpt_param_ptr(mt_gpt *m, int idx);
float *mt_gpt_grad_ptr(mt_gpt *m, int idx);
void mt_gpt_set_param_ptr(mt_gpt *m, int idx, void *p);
void mt_gpt_set_grad_ptr(mt_gpt *m, int idx, float *g);
/* Parameter indices [first, last] belonging to `layer` (as in the hooks). */
void mt_gpt_layer_param_range(const mt_gpt *m, int layer, int *first, int *last);

/* Free the flat parameter buffer (params != 0) and/or gradient buffer
 * (grads != 0) once a ZeRO runtime holds sharded copies: the buffer getters
 * and every per-parameter pointer into it return NULL until re-pointed with
 * the setters; mt_gpt_zero_grad is then a no-op. */
void mt_gpt_release_flat_buffers(mt_gpt *m, int params, int grads);

/* After the last micro-batch of an iteration: sum over the TP group the
 * gradients of parameters that sequence parallelism leaves partial
 * (LayerNorm/RMSNorm weights and biases, position embedding: each rank saw
 * only its sequence shard) or that TP itself leaves partial (q/k-norm
 * weights and biases: each rank saw only its heads; with or without SP),
 * and over the embedding group (first and last pipeline stage) the gradient
 * of the tied word embedding. Communicates over cfg->tp_group and
 * cfg->embd_group. */
void mt_gpt_finalize_grads(mt_gpt *m);
/* mt_gpt_finalize_grads in parts, for runtimes that reduce gradients during
 * the backward pass (overlap_grad_reduce): the TP sum of the partial
 * gradients of hook part `layer`'s parameters (call once, after its last
 * backward of the step; over cfg->tp_group), and the embedding-group sum of
 * the tied word embedding (after the whole backward; over
 * cfg->embd_group). Together, in any order of the parts, they do exactly
 * what mt_gpt_finalize_grads does. mt_gpt_tied_grad_param: the parameter
 * index the tied sum changes on this rank, -1 when none. */
void mt_gpt_finalize_layer_grads(mt_gpt *m, int layer);
void mt_gpt_finalize_tied_grads(mt_gpt *m);
int mt_gpt_tied_grad_param(const mt_gpt *m);
/* The hooks installed (mt_gpt_set_hooks; zeros when none), so that a runtime
 * can chain its own around them. */
mt_gpt_hooks mt_gpt_get_hooks(const mt_gpt *m);

/* Number of parameters of the unsharded model (tied output counted once). */
int64_t mt_gpt_num_parameters(const mt_gpt *m);

/* MoE: 1 when global layer l is an MoE layer; number of MoE layers of the
 * whole model; routing statistics of the training forward passes since the
 * last reset (NULL for a dense model; see model/moe_layer.h; indices are global
 * MoE-layer indices l / moe_layer_freq, entries of layers on other pipeline
 * stages stay 0; with context parallelism every CP rank routes the whole
 * micro-batch and only CP rank 0 records it, so sums over data x context
 * parallel ranks count each micro-batch once). */
int mt_gpt_is_moe_layer(const mt_gpt_config *c, int l);
/* Parameter-name prefix of global layer l: "decoder.layers.l", or for the
 * layer of MTP depth k (l = num_layers + k - 1, of the last decoder layer's
 * kind) "mtp.layers.(k-1).mtp_model_layer" (Megatron-core's names). */
void mt_gpt_layer_name(const mt_gpt_config *c, int l, char *buf, size_t n);
/* Global MoE-layer index of layer l (the number of MoE layers before it);
 * -1 when l is dense. Statistics and expert biases are indexed by it. */
int mt_gpt_moe_layer_index(const mt_gpt_config *c, int l);
int mt_gpt_num_moe_layers(const mt_gpt_config *c);
const mt_moe_stats *mt_gpt_moe_stats(const mt_gpt *m);
void mt_gpt_moe_stats_reset(mt_gpt *m);
/* The MoE buffers' rows on this rank (model/moe_layer.h mt_moe_buffer_rows:
 * the high-water marks of the rows received and of the rows the experts
 * saw, and the dropless worst case). Returns 0 (all three 0) for a dense
 * model, else 1. */
int mt_gpt_moe_buffer_rows(const mt_gpt *m, int64_t *recv, int64_t *expert, int64_t *worst);

/* ---- aux-loss-free load balancing (moe_router_enable_expert_bias; Wang et
 * al. 2024, arXiv:2408.15664; DeepSeek-V3 §2.1.2; Megatron's
 * TopKRouter.expert_bias and moe_utils.get_updated_expert_bias) ----
 * The model owns, for EVERY MoE layer of the model (also those on other
 * pipeline stages, so every rank holds the same state), an fp32 bias [E]
 * (initially 0; added to the routing scores for the top-k selection only,
 * never to the gate weights) and the int64 tokens-per-expert counts [E] of
 * the last global batch. Host memory, not parameters: no gradient, no
 * optimizer state, not in the flat buffers. */
/* Bias [E] of global MoE layer `moe_layer` (mt_gpt_moe_layer_index), writable
 * (checkpoint load); NULL when the option is off or moe_layer is out of range. */
float *mt_gpt_moe_expert_bias(mt_gpt *m, int moe_layer);
/* Counts [E] of the last global batch of that layer (what the last update
 * used: kept slots per expert; all zero before the first step); held with
 * the expert bias and for moe_router_load_balancing_type global_aux_loss
 * (mt_moe_weights.global_tokens_per_expert), else NULL. Writable
 * (checkpoint load). */
int64_t *mt_gpt_moe_bias_counts(mt_gpt *m, int moe_layer);
/* One update after an optimizer step (also a skipped one, as Megatron's
 * finalize_model_grads): stores the counts (when held) and, with the expert
 * bias, updates it. counts [n_moe · E] (n_moe = mt_gpt_num_moe_layers)
 * are the slots kept per expert (after capacity dropping, as Megatron's
 * routing_map) of the WHOLE global batch (all micro-batches, summed over
 * data and context parallel ranks and pipeline stages by the caller; not over
 * TP, whose ranks route the same tokens). For every layer and expert:
 *   bias_e += rate · sign(mean_e' count_e' − count_e)      (fp32)
 * and the counts are stored. Host arithmetic only, no communication; equal
 * counts give bitwise equal biases on every rank. No-op when off. */
void mt_gpt_moe_update_expert_bias(mt_gpt *m, const int64_t *counts);
/* Global layer number of MoE layer `moe_layer` when one of this rank's model
 * chunks holds it (its pipeline stage), else -1 (checkpoints save the biases
 * of their own stage's layers). */
int mt_gpt_moe_layer_is_local(const mt_gpt *m, int moe_layer);

/* FP8 delayed-scaling state (model/gpt_fp8.c; docs/fp8.md "Checkpoints").
 * Every state is keyed by its global identity (mt_fp8_linear_select), the
 * same under every layout: linear k of global layer l (MTP depth d is layer
 * num_layers + d, after the main layers, its eh_proj included), and routed
 * expert e (global index, the same under any ep / etp) of layer l, fc1
 * (fc 0) or fc2 (fc 1). mt_gpt_fp8_meta lists this rank's states one by
 * one: for i = 0, 1, ... the i-th (linear, role) of its chunks' FP8 layers
 * and MTP depths, with its checkpoint name "<linear prefix>.fp8_meta.<role>"
 * (e.g. "decoder.layers.3.self_attention.linear_qkv.fp8_meta.input",
 * "decoder.layers.3.mlp.experts.5.linear_fc1.fp8_meta.weight",
 * "mtp.layers.0.eh_proj.fp8_meta.grad_output"; roles input, weight,
 * grad_output as TE's fp8 meta), *expert 1 for a routed expert's (saved by
 * the expert-data-parallel, ETP rank 0), and its host fp32 data [*numel] =
 * [scale, amax history] (mt_fp8_linear_meta). Returns 1, or 0 past the
 * last one (and always 0 without the delayed recipe). */
enum {
  MT_GPT_FP8_QKV = 0, MT_GPT_FP8_PROJ, MT_GPT_FP8_FC1, MT_GPT_FP8_FC2,
  MT_GPT_FP8_SHARED_FC1, MT_GPT_FP8_SHARED_FC2,   /* mlp.shared_experts.linear_fc{1,2} */
  MT_GPT_FP8_Q_PROJ, MT_GPT_FP8_Q_DOWN, MT_GPT_FP8_Q_UP, /* MLA (self_attention.linear_*) */
  MT_GPT_FP8_KV_DOWN, MT_GPT_FP8_KV_UP,
  MT_GPT_FP8_EH_PROJ,                             /* mtp.layers.d.eh_proj (l = num_layers + d) */
  MT_GPT_FP8_NLIN = 16
};
static inline int mt_gpt_fp8_key(int l, int k) { return MT_GPT_FP8_NLIN * l + k; }
static inline int mt_gpt_fp8_expert_key(const mt_gpt_config *c, int l, int fc, int e) {
  const int nl = c->model.num_layers + c->model.mtp_num_layers;
  return MT_GPT_FP8_NLIN * nl + (2 * l + fc) * c->model.num_experts + e;
}
int mt_gpt_fp8_meta(mt_gpt *m, int i, char *name, size_t n, float **data, int64_t *numel,
                    int *expert);

/* fp8_param_gather (model/gpt_fp8_gather.c, docs/fp8.md "FP8 parameter
 * gather"): 1 if parameter i is the weight of a dense transformer layer's
 * FP8 linear (linear_qkv, linear_proj, linear_fc1, linear_fc2 of a layer
 * that runs in FP8: not kept bf16 by first_last_layers_bf16; not MoE
 * experts, MLA or MTP, which fp8_param_gather refuses), else 0; and the
 * FP8 linear those weights go through (NULL without FP8), on which the
 * optimizer installs their pre-quantized codes. */
int mt_gpt_fp8_gathered_weight(const mt_gpt *m, int i);
mt_fp8_linear *mt_gpt_fp8_dense_linear(mt_gpt *m);

/* Multi-token prediction (model.mtp_num_layers D; DeepSeek-V3 §2.2,
 * docs/model.md): this rank's training losses since the last reset, per
 * depth k = 1..D: sum[k-1] the masked cross-entropy sum (nats) of its rows
 * and count[k-1] their unmasked shifted targets (0 on ranks without the
 * last stage; TP ranks hold the same values, CP ranks their own rows).
 * Returns D (0 without MTP). The mean loss of depth k over a global batch
 * is the sum of sum[k-1] over data x context-parallel ranks and stages
 * divided by the same sum of count[k-1]. */
int mt_gpt_mtp_losses(const mt_gpt *m, double *sum, double *count);
void mt_gpt_mtp_stats_reset(mt_gpt *m);

/* Zero the gradient buffer (start of an iteration). */
void mt_gpt_zero_grad(mt_gpt *m);

/* One micro-batch through the whole model when it lives on this rank
 * (pp_size 1, one chunk). tokens: host int32 [b, s + 1] (sample rows; inputs
 * are tokens[:, :s], targets tokens[:, 1:]). sample_ids: host [b] global
 * sample ids (key the dropout RNG). If `train`, dropout is on and the
 * backward pass runs, ACCUMULATING into the gradient buffer
 * d(loss_scale * sum of token losses)/dparams. Returns the SUM of the b*s
 * token losses (nats, fp64); with eod_mask_loss the losses of masked targets
 * are 0 (not in the sum nor the gradient: mt_gpt_loss_tokens counts the
 * others). With context parallelism the full samples are
 * still passed (every CP rank the same ones); the model takes its 2 chunks
 * of each, and the returned sum and the gradients cover only this rank's
 * b*s/cp tokens (the caller sums both over the CP group; loss_scale stays
 * 1/(global tokens), so every token of the global batch counts once). */
double mt_gpt_forward_backward(mt_gpt *m, const int32_t *tokens, const int64_t *sample_ids,
                               int train, float loss_scale);

/* ---- pipeline-parallel interface: one model chunk, one micro-batch ----
 * A micro-batch `mb` (any id unique among those in flight) goes through
 * begin -> [receive input into mt_gpt_chunk_input] -> forward ->
 * [send mt_gpt_chunk_output] ... [receive output gradient into
 * mt_gpt_grad_buffer_stage] -> backward -> [send mt_gpt_grad_buffer_stage]
 * -> end. */
/* Targets of a micro-batch's samples tokens [b, s + 1] that count in the
 * loss: b*s, or with eod_mask_loss those whose input token is not
 * eod_token (Megatron's loss_mask.sum()). Host; no model needed. */
int64_t mt_gpt_loss_tokens(const mt_gpt_config *c, const int32_t *tokens);
/* Sum over the micro-batch's attention segments of their length squared,
 * sum L_i^2 (Megatron's seqlen_squared_sum_in_batch, the core-attention
 * term of model/gpt_flops.h): with reset_attention_mask the documents of
 * tokens [b, s + 1] (split after every eod_token of the inputs, as
 * gpt_docs.c masks them), else b s^2. Host; no model needed. */
double mt_gpt_seqlen_squared_sum(const mt_gpt_config *c, const int32_t *tokens);
/* Elements of the tensor passed between stages: [sl, b, h]. */
int64_t mt_gpt_stage_tensor_elems(const mt_gpt *m);
/* Take an activation slot for (c, mb); tokens/sample_ids as above (tokens are
 * uploaded when the chunk has the embedding or the head). */
void mt_gpt_chunk_begin(mt_gpt *m, int c, int mb, const int32_t *tokens,
                        const int64_t *sample_ids, int train);
/* Device buffer [sl, b, h] receiving the chunk's input (not the first chunk). */
void *mt_gpt_chunk_input(mt_gpt *m, int c, int mb);
/* Forward; returns the sum of token losses for the last chunk, else 0. */
double mt_gpt_chunk_forward(mt_gpt *m, int c, int mb);
/* Device buffer [sl, b, h] with the chunk's output after forward. */
void *mt_gpt_chunk_output(mt_gpt *m, int c, int mb);
/* Workspace [sl, b, h]: holds the output gradient before chunk_backward (not
 * the last chunk) and the input gradient after it (not the first chunk). */
void *mt_gpt_grad_buffer_stage(mt_gpt *m);
/* Backward; the last chunk seeds it with loss_scale · d(sum of losses). */
void mt_gpt_chunk_backward(mt_gpt *m, int c, int mb, float loss_scale);
/* Release the slot of (c, mb). */
void mt_gpt_chunk_end(mt_gpt *m, int c, int mb);

#endif
