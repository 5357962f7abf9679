/* tools/hf_map.h — how megatrain's global tensors (Megatron-core names and
 * layouts) map to Hugging Face's GPT-2 and Llama names and layouts, tensor by
 * tensor (docs/checkpoint.md "Hugging Face"). Pure index arithmetic on host
 * fp32 arrays: no I/O, no communication, no state.
 *
 * A megatrain tensor is [rows, cols] (weights [out, in]; 1-D tensors [1, n]).
 * Each Hugging Face tensor takes a selection of the megatrain tensor's rows
 * (a 1-D tensor is seen as the column [n, 1]), in the order given by `sel`,
 * and is then transposed for GPT-2's Conv1D ([in, out]):
 *   - linear_qkv rows are grouped per query group g: its nh/ng query heads,
 *     its key head, its value head (hn rows each); HF wants all query heads,
 *     then all key heads, then all value heads (GPT-2's c_attn: the three
 *     concatenated along the output; Llama: q_proj, k_proj, v_proj). Query
 *     head n reads key/value head n / (nh/ng) in both (HF's repeat_kv).
 *   - SwiGLU linear_fc1 rows [0, ffn) are the gate (HF gate_proj), rows
 *     [ffn, 2 ffn) the up projection (up_proj).
 * RoPE needs no permutation: megatrain's non-interleaved RoPE is HF's
 * rotate_half (rotary_interleaved models are refused). Qwen3 naming is
 * Llama's plus self_attn.{q,k}_norm.weight [head_dim] = megatrain's
 * qk_layernorm (RMSNorm over each head's channels, shared by the heads,
 * before RoPE in both).
 *
 * Mixture of experts (docs/checkpoint.md "Mixture of experts"): an MoE
 * layer's router decoder.layers.L.mlp.router.weight [E, h] is HF's gate
 * (Qwen3-MoE mlp.gate.weight, Mixtral block_sparse_moe.gate.weight), expert
 * e's SwiGLU linear_fc1 [2F, h] gives the gate projection (rows [0, F):
 * Qwen3-MoE gate_proj, Mixtral w1) and the up projection (rows [F, 2F):
 * up_proj, w3), linear_fc2 [h, F] the down projection (down_proj, w2).
 * DeepSeek-V3 adds mlp.gate.e_score_correction_bias [E] = the router's
 * expert_bias buffer [1, E] and mlp.shared_experts.{gate,up,down}_proj = the
 * shared expert's linear_fc1 halves and linear_fc2.
 *
 * DeepSeek-V3's multi-latent attention maps tensor for tensor, with no row
 * permutation but RoPE's below (docs/checkpoint.md "DeepSeek-V3"): self_attn.q_a_proj =
 * linear_q_down_proj [qr, h], q_a_layernorm = q_layernorm, q_b_proj =
 * linear_q_up_proj [n(dn + dr), qr] (q_proj = linear_q_proj when q_lora_rank
 * is null), kv_a_proj_with_mqa = linear_kv_down_proj [kr + dr, h],
 * kv_a_layernorm = kv_layernorm, kv_b_proj = linear_kv_up_proj
 * [n(dn + dv), kr], o_proj = linear_proj; the per-head row order (nope then
 * rope; keys then values; the latent then k_pe) is the same on both sides.
 * RoPE: with "rope_interleave": true (what the export writes and DeepSeek's
 * checkpoints mean) HF's apply_rotary_pos_emb_interleave views q_pe/k_pe as
 * pairs (2i, 2i + 1), moves them to halves and applies rotate_half: the
 * rotation megatrain's MLA applies to the pairs in place, up to one channel
 * permutation queries and keys share, so q.k is equal and the weights need no
 * permutation. With "rope_interleave": false HF's apply_rotary_pos_emb turns
 * channel i with channel i + dr/2 (frequency i, rotate_half on the
 * unpermuted channels), so the rope rows are permuted (rope_halves): rope
 * channel r of a q head (rows dn + r of q_b_proj / q_proj per head) and of
 * k_pe (rows kr + r of kv_a_proj_with_mqa) is megatrain's channel 2r for
 * r < dr/2 and 2(r - dr/2) + 1 above (MT_HF_QROPE, MT_HF_KVROPE). MTP depth k is DeepSeek's
 * layer num_hidden_layers + k: embed_tokens (a copy of the embedding), enorm,
 * hnorm, eh_proj, a decoder layer (mtp.layers.k.mtp_model_layer),
 * shared_head.norm (mtp.layers.k.final_layernorm) and shared_head.head (a copy
 * of the output layer, the embedding when tied).
 */
#ifndef MT_TOOLS_HF_MAP_H
#define MT_TOOLS_HF_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

typedef enum {
  MT_HF_GPT2 = 0,
  MT_HF_LLAMA = 1,
  MT_HF_QWEN3 = 2,
  MT_HF_QWEN3_MOE = 3, /* Qwen3MoeForCausalLM: Qwen3's attention, softmax top-k experts */
  MT_HF_MIXTRAL = 4,   /* MixtralForCausalLM: Llama's attention, every layer softmax top-k */
  MT_HF_DEEPSEEK_V3 = 5 /* DeepseekV3ForCausalLM: sigmoid experts with the expert bias,
                           groups, shared experts, first dense layers; multi-latent or
                           standard attention; MTP layers as DeepSeek stores them */
} mt_hf_family;

/* The model as both sides see it. */
typedef struct {
  mt_hf_family family;
  int64_t L, h, nh, ng, hn, ffn, V, max_pos; /* layers, hidden, heads, kv heads, head dim,
                                                 ffn, real vocabulary, positions */
  int bias;                                  /* add_bias_linear */
  int untie;                                 /* untie_embeddings_and_output_weights */
  double eps, rope_theta;                    /* as the user wrote them (mt_float_decimal) */
  double hidden_dropout, attention_dropout, init_std; /* for config.json only */
  /* mixture of experts (num_experts > 0; the Qwen3-MoE and Mixtral namings) */
  int64_t E, topk, moe_ffn;  /* num_experts, moe_router_topk, moe_ffn_hidden_size */
  int norm_topk;             /* 1: gates renormalised over the chosen experts (megatrain's
                                softmax over the chosen logits); 0: moe_router_pre_softmax */
  double aux_coef;           /* moe_aux_loss_coeff, for config.json only */
  unsigned char moe[MT_MAX_LAYERS]; /* layer l is an MoE layer */
  /* DeepSeek-V3 (sigmoid routing) */
  int64_t shared_ffn;        /* moe_shared_expert_intermediate_size (n_shared_experts · F) */
  int64_t n_group, topk_group, first_dense, moe_freq; /* groups (1, 1 without); the pattern */
  double scaling;            /* moe_router_topk_scaling_factor (1 when null) */
  /* DeepSeek-V3 multi-latent attention (mla) and multi-token prediction */
  int mla;
  int64_t qr, kr, dn, dr, dv; /* q_lora_rank (0: q_proj), kv_lora_rank, qk_nope_head_dim,
                                 qk_rope_head_dim, v_head_dim */
  int yarn;                   /* rope_scaling {"type": "yarn", ...} */
  double yarn_factor, beta_fast, beta_slow, mscale, mscale_all_dim;
  int64_t yarn_orig;          /* original_max_position_embeddings */
  int64_t mtp;                /* num_nextn_predict_layers */
  int rope_halves;            /* config.json "rope_interleave": false (read on import) */
} mt_hf_model;

typedef enum {
  MT_HF_ALL, MT_HF_Q, MT_HF_K, MT_HF_V, MT_HF_QKV, MT_HF_HALF0, MT_HF_HALF1,
  MT_HF_QROPE, /* MLA q rows [n, dn + dr]: rope channels permuted when rope_halves */
  MT_HF_KVROPE /* MLA kv down rows [kr + dr]: the same for k_pe */
} mt_hf_sel;

/* One Hugging Face tensor and where it comes from. */
typedef struct {
  int copy;               /* a copy of a megatrain tensor another entry maps too (DeepSeek's
                             MTP layers' embed_tokens and shared_head.head): written on
                             export, must equal it on import */
  char hf[160];           /* Hugging Face name */
  char mt[160];           /* megatrain (Megatron) name */
  int64_t mt_rows, mt_cols; /* megatrain global shape (vocabulary padding removed) */
  mt_hf_sel sel;
  int transpose;          /* GPT-2 Conv1D */
  int vec;                /* megatrain [1, n], HF [n] */
  int ndim;               /* HF shape: [hf_rows] (vec) or [hf_rows, hf_cols] */
  int64_t hf_rows, hf_cols;
} mt_hf_entry;

/* Which naming expresses the model of cfg: GPT-2 for LayerNorm + learned
 * absolute positions + GELU + biases + multi-head attention, Llama for
 * RMSNorm + RoPE (rotate-half, all channels) + SwiGLU, Qwen3 for that with
 * qk_layernorm and no linear biases; with experts (num_experts > 0, SwiGLU,
 * no biases, softmax routing, dropless) Qwen3-MoE with qk_layernorm and
 * Mixtral without (every layer MoE, gates renormalised), DeepSeek-V3 with
 * sigmoid routing and the expert bias (multi-latent attention, YaRN and MTP
 * layers only there). Anything else (interleaved or partial RoPE, a mix such
 * as LayerNorm with RoPE, a capacity factor) is refused: returns -1 with a message naming
 * the config key, its value and what the naming needs. */
int mt_hf_model_of(const mt_config *cfg, mt_hf_model *m, char *err, size_t errlen);

/* Every Hugging Face tensor of the model, in save_pretrained's order
 * (embeddings, layers, final norm, lm_head when untied); tensors of one
 * megatrain tensor are adjacent. Returns the count; *out is malloc'ed. */
int mt_hf_entries(const mt_hf_model *m, mt_hf_entry **out);

/* Hugging Face tensor e from the megatrain tensor `mt` ([mt_rows, mt_cols]
 * fp32) into `hf` (hf_rows x hf_cols fp32, row-major). */
void mt_hf_export(const mt_hf_model *m, const mt_hf_entry *e, const float *mt, float *hf);
/* The reverse: scatter `hf` into its rows of `mt`. */
void mt_hf_import(const mt_hf_model *m, const mt_hf_entry *e, const float *hf, float *mt);

/* config.json of a Hugging Face model directory for m (GPT2LMHeadModel /
 * LlamaForCausalLM / Qwen3ForCausalLM / Qwen3MoeForCausalLM /
 * MixtralForCausalLM), torch_dtype "float32" or "bfloat16"; malloc'ed text
 * (tools/hf_config.c). */
char *mt_hf_config_json(const mt_hf_model *m, const char *torch_dtype);

/* Check a Hugging Face config.json (text `json`, read from `path`) against
 * m: model_type, every size, the activation, norm epsilon, RoPE base and
 * scaling, biases and tying — what the tensor shapes cannot show. With
 * multi-latent attention it reads "rope_interleave" (absent: true, HF's
 * default) into m->rope_halves. Returns 0, or -1 with a message naming the
 * config.json key and both values. */
int mt_hf_config_check(mt_hf_model *m, const char *json, const char *path, char *err,
                       size_t errlen);

/* Family name ("GPT-2", "Llama", "Qwen3", "Qwen3-MoE", "Mixtral", "DeepSeek-V3") for messages. */
const char *mt_hf_family_name(mt_hf_family f);

#endif
