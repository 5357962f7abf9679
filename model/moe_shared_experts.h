/* model/moe_shared_experts.h — the shared experts of an MoE layer
 * (Megatron-core transformer/moe/shared_experts.py SharedExpertMLP;
 * DeepSeekMoE, Dai et al. 2024, arXiv:2401.06066 §3.2 "shared expert
 * isolation"; DeepSeek-V2/V3): one always-on MLP of width
 * S = moe_shared_expert_intermediate_size beside the routed experts of every
 * MoE layer; the layer's output is routed + shared (Megatron's MoELayer adds
 * the shared output to the combined routed output).
 *
 * Layout: exactly the dense MLP's (model/gpt_block.c, docs/model.md):
 *   decoder.layers.L.mlp.shared_experts.linear_fc1.weight [g·S, h]
 *     ColumnParallel: TP rank r holds rows [r·S/tp, ...) (SwiGLU, g = 2:
 *     its gate slice then its up slice, mt_param.halves), bias [g·S] likewise
 *   decoder.layers.L.mlp.shared_experts.linear_fc2.weight [h, S]
 *     RowParallel: TP rank r holds columns [r·S/tp, ...); bias [h] replicated,
 *     added once (TP rank 0)
 * Biases only with add_bias_linear (Megatron refuses biases in shared experts;
 * megatrain supports them as in the dense MLP). Dense parameters (not
 * is_expert): gradients reduce over dp like the other dense ones; fc1 is
 * initialised N(0, init_method_std), fc2 with the scaled output-layer std, keyed
 * by name and global indices (independent of tp). Activation: the model's
 * (GELU tanh or SwiGLU); no dropout inside. Megatron's optional shared-expert
 * gate (moe_shared_expert_gate) is not implemented.
 *
 * Shapes: x = the MoE input [sl, b, h] (this rank's sequence shard under
 * sequence parallelism, sl = s/tp; else the whole CP-local sequence s);
 * fc1 output [s, b, g·S/tp], activation [s, b, S/tp] (saved per layer,
 * MT_MEM_ACT); T = backend dtype, gradients fp32 accumulated.
 *
 * Communication over TP (tp > 1), per MoE layer and micro-batch, as the dense
 * MLP: with SP forward all-gather x + reduce-scatter the output, backward
 * all-gather dy + (re-gather x) + reduce-scatter dx; without SP one
 * all-reduce forward (output) and one backward (dx).
 */
#ifndef MT_MODEL_MOE_SHARED_EXPERTS_H
#define MT_MODEL_MOE_SHARED_EXPERTS_H

#include "model/gpt_internal.h"

/* Activation buffers of one layer set (sh_fc1, sh_act; NULL without shared
 * experts) and their release. */
void mt_moe_shared_alloc_acts(mt_gpt *m, mt_layer_acts *a);
void mt_moe_shared_free_acts(mt_gpt *m, mt_layer_acts *a);

/* Forward: out [sl, b, h] (the routed MoE output, T) += SharedExpertMLP(x),
 * x = a->ln2 [sl, b, h], with the layer's shared-expert weights w
 * (m->w.layers[i].moe.shared_experts; no-op when absent). Registered by
 * model/gpt_register.c after the routed experts. Collective over TP. */
void mt_moe_shared_forward(mt_gpt *m, const mt_mlp_tensors *w, mt_layer_acts *a, void *out);

/* Backward: dy [sl, b, h] is the MoE output gradient on entry and the
 * input gradient of the whole MoE block on exit: the shared expert's dx plus
 * dx_routed [sl, b, h] (the routed experts' and router's). Parameter
 * gradients accumulate into g (m->g's shared_experts). Collective over TP. */
void mt_moe_shared_backward(mt_gpt *m, const mt_mlp_tensors *w, const mt_mlp_tensors *g,
                            mt_layer_acts *a, void *dy, const void *dx_routed);

/* The same two calls in parts, for moe_shared_expert_overlap (the parts run
 * while the routed tokens' all-to-alls travel; model/gpt_block.c):
 *   forward  = fc1 (column-parallel fc1 and the activation), fc2 (the
 *              row-parallel fc2 into the model's sh_out workspace), add
 *              (out += sh_out);
 *   backward = own (dy <- the shared expert's dx; parameter gradients),
 *              add (dy += dx_routed; dy = dx_routed without a shared
 *              expert).
 * Each part is a no-op (add: a copy) without shared-expert weights; the
 * parts in this order are bitwise the whole call. Collective over TP. */
void mt_moe_shared_forward_fc1(mt_gpt *m, const mt_mlp_tensors *w, mt_layer_acts *a);
void mt_moe_shared_forward_fc2(mt_gpt *m, const mt_mlp_tensors *w, mt_layer_acts *a);
void mt_moe_shared_forward_add(mt_gpt *m, const mt_mlp_tensors *w, void *out);
void mt_moe_shared_backward_own(mt_gpt *m, const mt_mlp_tensors *w, const mt_mlp_tensors *g,
                                mt_layer_acts *a, void *dy);
void mt_moe_shared_backward_add(mt_gpt *m, const mt_mlp_tensors *w, void *dy,
                                const void *dx_routed);

#endif
