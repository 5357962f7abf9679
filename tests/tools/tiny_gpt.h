/* tests/tools/tiny_gpt.h — a GPT config for tests and benches: the given
 * sizes, Megatron's init std and LayerNorm epsilon, no dropout, one rank
 * (tp = pp = 1), max_position_embeddings = seq, vocabulary padded to 128.
 * Callers override what they vary. */
#ifndef MT_TESTS_TINY_GPT_H
#define MT_TESTS_TINY_GPT_H

#include "core/util.h"
#include "model/gpt.h"

static inline mt_gpt_config mt_tiny_gpt(int layers, int hidden, int heads, int ffn, int seq,
                                        int64_t vocab, int micro_batch, uint64_t seed) {
  mt_gpt_config c = {0};
  c.num_layers = layers;
  c.hidden_size = hidden;
  c.num_attention_heads = heads;
  c.ffn_hidden_size = ffn;
  c.seq_length = seq;
  c.max_position_embeddings = seq;
  c.vocab_size = vocab;
  c.padded_vocab_size = mt_round_up(vocab, 128);
  c.init_method_std = 0.02f;
  c.layernorm_epsilon = 1e-5f;
  c.micro_batch_size = micro_batch;
  c.seed = seed;
  c.tp_size = 1;
  return c;
}

#endif
