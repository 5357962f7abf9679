/* tests/tools/tiny_gpt.h — a GPT config for tests and benches: the key
 * table's model defaults (mt_model_config_defaults) with the given sizes,
 * no dropout, one rank (tp = pp = 1), max_position_embeddings = seq,
 * vocabulary padded to 128. Callers override what they vary. */
#ifndef MT_TESTS_TINY_GPT_H
#define MT_TESTS_TINY_GPT_H

#include <stdio.h>

#include "tests/support/probes.h"
#include "config/config.h"
#include "core/util.h"
#include "model/gpt.h"

/* Set an enumerated (string) model key, e.g.
 * MT_GPT_SET(c.model.normalization, "RMSNorm"). */
#define MT_GPT_SET(field, value) snprintf((field), sizeof(field), "%s", (value))

static inline mt_gpt_config mt_tiny_gpt(int layers, int hidden, int heads, int ffn, int seq,
                                        int64_t vocab, int micro_batch, uint64_t seed) {
  mt_gpt_config c = {0};
  mt_model_config_defaults(&c.model);
  c.model.num_layers = layers;
  c.model.hidden_size = hidden;
  c.model.num_attention_heads = heads;
  c.model.ffn_hidden_size = ffn;
  c.model.seq_length = seq;
  c.model.max_position_embeddings = seq;
  c.model.vocab_size = (int)vocab;
  c.model.hidden_dropout = c.model.attention_dropout = 0.0f;
  c.model.init_method_std = 0.02f;
  c.model.norm_epsilon = c.model.layernorm_epsilon = 1e-5f;
  c.padded_vocab_size = mt_round_up(vocab, 128);
  c.micro_batch_size = micro_batch;
  c.seed = seed;
  c.tp_size = 1;
  return c;
}

#endif
