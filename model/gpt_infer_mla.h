/* model/gpt_infer_mla.h — multi-latent attention for autoregressive
 * inference (model/gpt_infer.c) with the latent KV cache of Megatron-core's
 * MLASelfAttention (cache_mla_latents; DeepSeek-V2 §2.1.2): per layer and
 * position the cache holds the normalised kv latent kv_layernorm(kv_c)
 * [kv_lora_rank] and the rotated decoupled key k_pe [qk_pos_emb_head_dim]
 * (shared by the heads), not the heads' keys and values:
 *   cache [max_len, kr + dr] (T) per local layer.
 * Each call up-projects the cached latents of every position seen
 * (linear_kv_up_proj, column-parallel: this rank's heads) into the heads'
 * k_nope and v, joins the cached k_pe, and runs the fused attention of the
 * new rows' queries over them (no weight absorption: the same arithmetic as
 * the training forward of model/gpt_mla.c on the same latents).
 * Private to model/gpt_infer.c. */
#ifndef MT_MODEL_GPT_INFER_MLA_H
#define MT_MODEL_GPT_INFER_MLA_H

#include <stdint.h>

#include "model/gpt.h"
#include "model/tensor_parallel.h"

typedef struct mt_infer_mla mt_infer_mla;

/* The latent cache and buffers of model m (multi_latent_attention) for up
 * to max_len positions on m's backend (cache MT_MEM_ACT, the rest
 * MT_MEM_WORKSPACE). */
mt_infer_mla *mt_infer_mla_create(mt_gpt *m, int max_len);
void mt_infer_mla_destroy(mt_infer_mla *x); /* NULL is a no-op */

/* Switch x to weight absorption (DeepSeek-V2 §2.1.2; docs/attention.md):
 * later calls fold the key up-projection W_UK into each head's query and
 * apply the value up-projection W_UV to the attention output, so the
 * attention runs over the cached latents as one shared key/value head
 * (hn = kv_lora_rank + qk_pos_emb_head_dim, hv = kv_lora_rank) and the
 * cache is never up-projected. Allocates its buffers and gather tables
 * (MT_MEM_WORKSPACE); a second call is a no-op. */
void mt_infer_mla_absorb(mt_infer_mla *x);

/* Local layer li's attention up to its core: from ln [rows, h] (T, the
 * input norm of rows new tokens at global positions pos0 ..) the queries,
 * the latents of the new rows appended to the cache at pos0 .., and
 * ctx [rows, np·v_head_dim] (T) = the causal attention of the new queries
 * over positions 0 .. pos0 + rows - 1. lse [np, rows] fp32 scratch.
 * tp: the TP context of `rows` tokens (no sequence parallelism); no
 * communication (column-parallel forwards without SP are local). */
void mt_infer_mla_attention(mt_infer_mla *x, mt_tp_ctx *tp, int li, const void *ln, void *ctx,
                            float *lse, int64_t rows, int64_t pos0);

#endif
