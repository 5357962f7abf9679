/* model/gpt_flops.c — see gpt_flops.h. */
#include "model/gpt_flops.h"

double mt_flops_per_iteration(int64_t global_batch, int64_t seq, int64_t layers, int64_t hidden,
                              int64_t ffn, int64_t padded_vocab) {
  double B = (double)global_batch, s = (double)seq, L = (double)layers, h = (double)hidden;
  double terms = (2.0 + s / h) + (double)ffn / h + (double)padded_vocab / (2.0 * L * h);
  return 12.0 * B * s * L * h * h * terms;
}
