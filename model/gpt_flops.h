/* model/gpt_flops.h — model FLOPs of one training iteration of the GPT,
 * from its shape alone (no config struct, no backend), so the trainer's
 * throughput/MFU line, the planner's step-time model and the benchmarks use
 * one formula.
 */
#ifndef MT_MODEL_GPT_FLOPS_H
#define MT_MODEL_GPT_FLOPS_H

#include <stdint.h>

/* Model FLOPs of one iteration (forward + backward, no recomputation), as
 * Megatron-LM's num_floating_point_operations() computes them for a GPT with
 * MHA and a non-gated MLP:
 *   12 * B * s * L * h^2 * ((1 + 1 + s/h) + ffn/h + V_padded / (2 L h))
 * (Narayanan et al. 2021, arXiv:2104.04473 §5.1, extended for ffn != 4h).
 * B = global batch size (samples), s = seq length, L = layers, h = hidden
 * size, ffn = MLP width, V_padded = padded vocabulary. Computed in double
 * on the host; whole model, all ranks together; no errors. */
double mt_flops_per_iteration(int64_t global_batch, int64_t seq, int64_t layers, int64_t hidden,
                              int64_t ffn, int64_t padded_vocab);

#endif
