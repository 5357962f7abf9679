/* model/gpt_flops.h — model FLOPs of one training iteration of the GPT,
 * from its shape alone (no config struct, no backend), so the trainer's
 * throughput/MFU line, the planner's step-time model and the benchmarks use
 * one formula.
 */
#ifndef MT_MODEL_GPT_FLOPS_H
#define MT_MODEL_GPT_FLOPS_H

#include <stdint.h>

#include "model/gpt.h"

/* The shape the FLOPs depend on (whole model, global sizes). Zero-valued
 * optional fields take the GPT-2 meaning noted on each. */
typedef struct {
  int64_t global_batch;        /* B: samples per iteration */
  int64_t seq_length;          /* s */
  int64_t num_layers;          /* L */
  int64_t hidden_size;         /* h */
  int64_t num_attention_heads; /* np (0: the attention projection ratio is 1) */
  int64_t num_query_groups;    /* ng: K/V heads (0 = np: no GQA) */
  int64_t kv_channels;         /* hn: channels per head (0 = h / np) */
  int64_t ffn_hidden_size;     /* dense MLP width */
  int swiglu;                  /* gated SiLU MLPs (dense and expert): fc1 2 ffn rows */
  int64_t num_experts;         /* 0 = dense model */
  int64_t moe_router_topk;     /* experts per token (0 = 1) */
  int64_t moe_ffn_hidden_size; /* expert MLP width (0 = ffn_hidden_size) */
  int64_t moe_layer_freq;      /* layers 0, k, 2k, ... are MoE (0 = 1: every layer) */
  int64_t num_moe_layers;      /* > 0: the number of MoE layers (moe_layer_freq list
                                  form), overrides moe_layer_freq */
  int64_t padded_vocab_size;   /* Vp */
  int64_t moe_shared_expert_intermediate_size; /* S: shared experts per MoE layer (0 = none) */
  /* issue 32: which formula counts core attention, and over which lengths */
  int formula;               /* mt_flops_formula (0 = MT_FLOPS_MEGATRON) */
  double seqlen_squared_sum; /* MT_FLOPS_MEGATRON: sum of L_i^2 over the attention segments
                                of the global batch (documents with reset_attention_mask);
                                0 = B s^2 (every sample one causal sequence) */
  /* multi-token prediction (model.mtp_num_layers D; 0 = none): D more
   * transformer layers, MoE ones when mtp_moe (the last decoder layer's
   * kind; num_moe_layers counts the decoder's only), their norms and
   * eh_proj, and D more output-layer GEMMs (Megatron's
   * num_floating_point_operations) */
  int64_t mtp_num_layers;
  int mtp_moe;
  /* multi-latent attention (issue 31; model.multi_latent_attention): every
   * layer's attention is MLA with these widths (np = num_attention_heads;
   * num_query_groups and kv_channels unused) */
  int multi_latent_attention;
  int64_t q_lora_rank;         /* 0: one direct linear_q_proj */
  int64_t kv_lora_rank;
  int64_t qk_head_dim;         /* per-head q/k channels without position */
  int64_t qk_pos_emb_head_dim; /* per-head rotated q/k channels */
  int64_t v_head_dim;
} mt_flops_shape;

/* Which model-FLOPs formula (logging.flops_formula):
 *   MT_FLOPS_MEGATRON: Megatron-core's num_floating_point_operations as of
 *     2026 (megatron/training/training.py): causal core attention counted at
 *     half, 6 sum(L_i^2) (np hn) per layer for QK^T and PV (forward +
 *     backward), L_i the lengths attention runs over (packed documents);
 *   MT_FLOPS_PAPER: Narayanan et al. 2021 (2104.04473 §5.1, Appendix) and
 *     Korthikanti et al. 2022 (2205.05198): core attention over the full
 *     s x s, 12 B s^2 (np hn) per layer; the paper tables use it. */
typedef enum { MT_FLOPS_MEGATRON = 0, MT_FLOPS_PAPER = 1 } mt_flops_formula;

/* The formula named `name` ("megatron" or "paper"); -1 for another name. */
int mt_flops_formula_from_name(const char *name);
/* "megatron" or "paper". */
const char *mt_flops_formula_name(int formula);

/* Forward FLOPs of one iteration split by part (2 FLOPs per multiply-add,
 * GEMMs only, as Megatron counts them). */
typedef struct {
  double attn_linear; /* linear_qkv + linear_proj, all layers (MLA: its down and
                         up projections, latent norms and linear_proj) */
  double attn_core;   /* Q K^T and P V, all layers (MT_FLOPS_PAPER: full s x s;
                         MT_FLOPS_MEGATRON: the causal half over sum(L_i^2)) */
  double mlp;         /* fc1 + fc2 of the dense layers, the routed and the shared experts */
  double logits;      /* output layer */
} mt_flops_parts;

/* Model FLOPs of one iteration (forward + backward = 3 x forward, no
 * recomputation) as Megatron-LM's num_floating_point_operations()
 * (megatron/training/training.py). MT_FLOPS_PAPER is its 2021-2024 form
 * (with query_projection_to_hidden_size_ratio and gated_linear_multiplier;
 * Narayanan et al. 2021, arXiv:2104.04473 §5.1 and Appendix):
 *   12 B s L h^2 [ (1 + ng/np + s/h) (np hn / h)            attention
 *                 + g (n_dense ffn + n_moe (k F + S)) / (L h)   MLPs
 *                 + Vp / (2 L h) ]                            logits
 * MT_FLOPS_MEGATRON is today's (d98e8a6): the token-linear terms the same
 * (T = B s tokens), the core-attention term s/h replaced by the causal half
 * over the segments attention runs over:
 *   12 T L h^2 [ (1 + ng/np) (np hn / h) + MLPs + logits ]
 *   + 6 L (np hn) sum(L_i^2)          (sum(L_i^2) = B s^2 unpacked)
 * with g = 3/2 for SwiGLU (fc1 has 2 ffn rows) else 1, n_moe the MoE layers
 * (moe_layer_freq), k = moe_router_topk, F = moe_ffn_hidden_size, S =
 * moe_shared_expert_intermediate_size (Megatron's shared_expert_ffn_hidden_size); the router
 * GEMM is not counted (Megatron does not). Untied embeddings do not change
 * the count (the logits GEMM exists either way), nor do RoPE, RMSNorm,
 * biases or qk_layernorm (not GEMMs). With np = ng, hn = h/np, no SwiGLU and
 * no MoE this is 12 B s L h^2 (2 + s/h + ffn/h + Vp/(2Lh)), bit for bit.
 * With multi_latent_attention the attention bracket is replaced, per layer
 * and token, by Megatron's MLA count (d98e8a6; DeepSeek-V2 §2.1), with
 * n = np, dq = qk_head_dim + qk_pos_emb_head_dim, dv = v_head_dim:
 *   6 [ q + kv_lora (h + n (qk_head_dim + dv) + 1) + h qk_pos_emb_head_dim
 *       + n dv h ],   q = h n dq (q_lora_rank 0) or q_lora (h + n dq + 1)
 * (the + 1 is the latent RMSNorm, as Megatron counts it), and core
 * attention 6 sum(L_i^2) n (dq + dv) / 2 (MT_FLOPS_MEGATRON) or
 * 6 B s^2 n (dq + dv) (MT_FLOPS_PAPER: the full s x s).
 * Computed in double on the host; whole model, all ranks; no errors. */
double mt_flops_per_iteration(const mt_flops_shape *m);

/* The forward FLOPs of one iteration by part; their sum times 3 is
 * mt_flops_per_iteration up to rounding. Used for recomputation: selective
 * repeats attn_core, full repeats every layer's forward (attn_linear +
 * attn_core + mlp; 2205.05198 Appendix A, 2104.04473 eq. 3). */
void mt_flops_forward_parts(const mt_flops_shape *m, mt_flops_parts *out);

/* The shape of a model config (mt_gpt_config: global sizes; its zero
 * defaults keep their meaning) for `global_batch` samples per iteration. */
mt_flops_shape mt_gpt_flops_shape(const mt_gpt_config *c, int64_t global_batch);

#endif
