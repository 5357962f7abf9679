/* model/gpt_tensors.h — the GPT's parameter tensors by name (llm.c's
 * ParameterTensors; the modules of Megatron-core's GPTModel). A field's path
 * is its Megatron parameter name: w.layers[i].self_attention.linear_qkv.weight
 * is decoder.layers.L.self_attention.linear_qkv.weight of global layer L (the
 * i-th local layer, see mt_chunk), w.layers[i].moe.experts[e].linear_fc1.bias
 * is decoder.layers.L.mlp.experts.E.linear_fc1.bias of global expert
 * E = ep_rank·E/ep + e.
 *
 * The model holds two of them (struct mt_gpt, model/gpt_internal.h): w, the
 * device pointers of this rank's weight shards (storage dtype T), and g, the
 * pointers of their gradients (fp32), field for field. A field is NULL when
 * the model options leave the tensor out (biases without add_bias_linear,
 * norm biases with RMSNorm, q/k norms without qk_layernorm, the dense MLP of
 * an MoE layer and the MoE parts of a dense one, the embedding and head on
 * stages without them) and, after mt_gpt_release_flat_buffers, until a ZeRO
 * runtime re-points it. They point into the flat buffers (model/params.h),
 * whose order the registration fixes (model/gpt.c register_params); every
 * registered parameter is bound to its two fields (mt_param_ref), so that the
 * by-index interface of model/gpt.h (mt_gpt_param_ptr, mt_gpt_set_param_ptr)
 * reads and re-points the very fields the passes use.
 */
#ifndef MT_MODEL_GPT_TENSORS_H
#define MT_MODEL_GPT_TENSORS_H

/* A module's weight and bias (a linear layer, a norm, an embedding table). */
typedef struct {
  void *weight, *bias;
} mt_wb;

/* An MLP: the dense one of a layer, one routed expert, or the shared expert.
 * linear_fc1 [g·f, h] (column-parallel; with SwiGLU, g = 2, gate rows then
 * up rows), linear_fc2 [h, f] (row-parallel). */
typedef struct {
  mt_wb linear_fc1, linear_fc2;
} mt_mlp_tensors;

/* self_attention: linear_qkv [(np + 2 ng)·hn, h] (column-parallel, rows
 * grouped per query group), q_layernorm / k_layernorm [hn] (qk_layernorm),
 * linear_proj [h, np·hn] (row-parallel).
 * Multi-latent attention (model/gpt_mla.c; Megatron's MLASelfAttention,
 * weights only; n heads, dn = qk_head_dim, dr = qk_pos_emb_head_dim,
 * dv = v_head_dim, hq = dn + dr, qr = q_lora_rank, kr = kv_lora_rank):
 * linear_q_proj [n·hq, h] without q_lora_rank, else linear_q_down_proj
 * [qr, h] (replicated), q_layernorm [qr] (qk_layernorm) and
 * linear_q_up_proj [n·hq, qr] (column-parallel); linear_kv_down_proj
 * [kr + dr, h] (replicated), kv_layernorm [kr] (qk_layernorm),
 * linear_kv_up_proj [n·(dn + dv), kr] (column-parallel); linear_proj
 * [h, n·dv]. Rows of the column-parallel ones are per head (q: dn "nope"
 * rows then dr rotated rows; kv: dn key rows then dv value rows). */
typedef struct {
  mt_wb linear_qkv, q_layernorm, k_layernorm, linear_proj;
  mt_wb linear_q_proj, linear_q_down_proj, linear_q_up_proj;
  mt_wb linear_kv_down_proj, kv_layernorm, linear_kv_up_proj;
} mt_attention_tensors;

/* The MLP of an MoE layer (Megatron's MoELayer, named mlp.*): router [E, h]
 * (weight only, replicated over TP), this rank's routed experts and the
 * shared expert (fields NULL without moe_shared_expert_intermediate_size). */
typedef struct {
  mt_wb router;
  mt_mlp_tensors *experts;  /* [E/ep]; NULL on dense layers */
  mt_mlp_tensors shared_experts;
} mt_moe_tensors;

/* One transformer layer (Megatron's TransformerLayer). */
typedef struct {
  mt_wb input_layernorm;
  mt_attention_tensors self_attention;
  mt_wb pre_mlp_layernorm;
  mt_mlp_tensors mlp;       /* dense layers */
  mt_moe_tensors moe;       /* MoE layers (router.weight non-NULL) */
} mt_layer_tensors;

/* One multi-token prediction depth (Megatron's MultiTokenPredictionLayer,
 * mtp.layers.K.*): enorm and hnorm [h] (the norm of the model's kind),
 * eh_proj [h, 2h] (weight only; input features: the normed embedding, then
 * the normed hidden state), final_layernorm [h]. Its transformer layer
 * (mtp.layers.K.mtp_model_layer.*) is mt_gpt_tensors.layers[n_local_layers + K]. */
typedef struct {
  mt_wb enorm, hnorm, eh_proj, final_layernorm;
} mt_mtp_tensors;

/* The whole model on this rank. */
typedef struct {
  /* embedding.*: first stage (Megatron's pre_process) */
  mt_wb word_embeddings;    /* [Vp, h] vocab-parallel: this rank's vl rows */
  mt_wb position_embeddings; /* [max_position_embeddings, h], learned positions only */
  mt_layer_tensors *layers; /* [n_local_layers + n_mtp], in local order (chunk by chunk),
                               then the MTP depths' transformer layers */
  /* last stage (post_process) */
  mt_wb final_layernorm;    /* decoder.final_layernorm [h] */
  mt_wb output_layer;       /* [Vp, h]: output_layer.weight when untied; with tied
                               embeddings on a last stage without the embedding, its copy
                               of embedding.word_embeddings.weight (mt_param.shared_copy);
                               NULL when tied on the stage that holds word_embeddings (the
                               head then uses word_embeddings, as Megatron's
                               shared_embedding_or_output_weight) */
  mt_mtp_tensors *mtp;      /* [n_mtp]: multi-token prediction depths (last stage; NULL
                               without) */
  mt_wb mtp_word_embeddings; /* untied embeddings with MTP on a last stage without the
                               embedding: its copy of embedding.word_embeddings.weight
                               (mt_param.shared_copy) for the MTP depths; else NULL */
} mt_gpt_tensors;

/* The fields parameter i of the registry is bound to: its weight pointer in
 * m->w and its gradient pointer in m->g (the same path in both). */
typedef struct {
  void **w, **g;
} mt_param_ref;

#endif
