/* model/gpt_infer.h — autoregressive inference (text generation) on the
 * parameters of an mt_gpt (Megatron's inference engine, reduced to one
 * sequence): the same shards as training, so tensor parallelism works as in
 * the training forward (column-parallel linear_qkv / linear_fc1,
 * row-parallel linear_proj / linear_fc2 all-reduced over the TP group,
 * vocab-parallel embedding; the vocab-parallel logits are all-gathered over
 * TP so every rank holds the same full row).
 *
 * Two paths, same results up to the order of floating-point sums:
 *  - KV cache (Pope et al. 2022, "Efficiently Scaling Transformer
 *    Inference"): each layer keeps the keys and values of every position
 *    seen, [max_len, 1, ng, 2, hn] (T, this rank's query groups; the layout of
 *    mt_attn_desc's kv block), the prompt is run once (prefill) and every
 *    later call runs only its new tokens, whose queries attend to the cached
 *    keys through the fused attention op (flash_attn_fwd with a kv block at
 *    global positions: causal by position);
 *  - recompute (use_cache 0): every call runs the whole sequence so far
 *    through the causal forward — the reference the cache is checked against.
 * Dropout is off (inference). Only the backend op table and the group API
 * are used. Supports everything of the dense block (LayerNorm / RMSNorm,
 * learned / RoPE / no positions, rotary_percent, GELU / SwiGLU, GQA, linear
 * biases or none, qk_layernorm, tied or untied output layer) and MoE layers
 * (model/moe_layer.h's forward on the call's tokens with the model's routing
 * options and expert bias, dropless; shared experts) in one process (tp,
 * ep, etp 1). Pipeline parallelism (one chunk per stage): the first stage
 * embeds, each stage runs its own layers (and keeps their KV cache) and
 * sends the hidden states [rows, h] to the next (a broadcast over the
 * pipeline group rooted at the sender), the last stage computes the logits
 * and broadcasts them over the pipeline group, so every rank of every stage
 * holds the same row. Multi-latent attention (model/gpt_infer_mla.h): the
 * cache holds each layer's normalised kv latent and rotated shared RoPE key
 * (Megatron's cache_mla_latents), up-projected to the heads' keys and values
 * on every call; multi-token prediction depths are not used for decoding.
 * Not context parallelism, virtual pipeline chunks, or
 * sequence parallelism (refused by mt_gpt_infer_create).
 */
#ifndef MT_MODEL_GPT_INFER_H
#define MT_MODEL_GPT_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt.h"

typedef struct mt_gpt_infer mt_gpt_infer;

/* Inference state for model m (not owned; it must outlive the state) and the
 * pipeline group pp (NULL with pipeline_model_parallel_size 1) holding
 * up to max_len positions (1 <= max_len; with learned positions at most
 * max_position_embeddings). use_cache: 1 = KV cache, 0 = recompute the
 * prefix every call. Allocates the cache (MT_MEM_ACT) and the buffers for
 * max_len rows (MT_MEM_WORKSPACE) on m's backend. Returns NULL with a
 * message naming the unsupported option (MoE with tp / ep / etp > 1,
 * cp_size > 1, several chunks per stage, sequence_parallel, max_len) in
 * err. No communication. */
mt_gpt_infer *mt_gpt_infer_create(mt_gpt *m, mt_group *pp, int max_len, int use_cache,
                                  char *err, size_t errlen);
void mt_gpt_infer_destroy(mt_gpt_infer *g); /* NULL is a no-op */

/* Multi-latent attention decoding with weight absorption (model/gpt_infer_mla.h:
 * the attention over the cached latents, W_UK folded into the queries and
 * W_UV applied after; the same logits within rounding). Returns 0, or -1
 * with a message in err when the model has no multi-latent attention. */
int mt_gpt_infer_mla_absorb(mt_gpt_infer *g, char *err, size_t errlen);

/* KV cache bytes per token of model m, all its layers (num_layers, not this
 * stage's), in the backend's storage dtype: *cache what this module's cache
 * holds, *full what a cache of the full keys and values holds. Standard
 * attention: both 2·num_query_groups·kv_channels per layer. Multi-latent
 * attention: *cache = kv_lora_rank + qk_pos_emb_head_dim per layer (the
 * normalised latent and the rotated shared key), *full =
 * num_attention_heads·(qk_head_dim + qk_pos_emb_head_dim + v_head_dim) per
 * layer (the up-projected keys and values of every head). Under tensor
 * parallelism each rank of a group holds 1/tp of the full K/V but a whole
 * copy of the latents. */
void mt_gpt_infer_kv_bytes(const mt_gpt *m, int64_t *cache, int64_t *full);


/* Append n >= 1 tokens (host int32 ids < vocab_size, the same on every TP
 * rank) at positions len .. len + n - 1 (len + n <= max_len, checked:
 * aborts otherwise) and write into logits (host fp32 [vocab_size], the real
 * vocabulary: padding columns cut) the next-token logits after the last
 * one — identical on every rank. Collective over the model's tp_group and
 * the pipeline group. */
void mt_gpt_infer_append(mt_gpt_infer *g, const int32_t *tokens, int n, float *logits);

#endif
