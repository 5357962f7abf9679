/* tools/sampling.h — choosing the next token from a row of logits
 * (`megatrain generate`): greedy, or sampling with temperature, top-k and
 * top-p (nucleus, Holtzman et al. 2020), in the order Hugging Face's
 * generate and Megatron's inference apply them: logits / temperature, keep
 * the k largest, keep the smallest set of most probable tokens whose
 * probability reaches p (the most probable one always kept), renormalise,
 * draw.
 *
 * The draw is a pure function of (seed, step): one uniform number in [0, 1)
 * from the counter-based generator (core/rng.h, Philox keyed by the seed
 * and "generate.sample", counter = step), so a seed reproduces a
 * continuation and every tensor-parallel rank draws the same token from the
 * same logits. Host arithmetic only (fp32 logits, double probabilities);
 * ties are broken towards the lower token id. */
#ifndef MT_TOOLS_SAMPLING_H
#define MT_TOOLS_SAMPLING_H

#include <stdint.h>

typedef struct {
  float temperature; /* 0 = greedy (argmax); > 0 scales the logits */
  int top_k;         /* 0 = all tokens */
  float top_p;       /* (0, 1]; 1 = all tokens */
  uint64_t seed;
} mt_sample_opts;

typedef struct mt_sampler mt_sampler;

/* A sampler for rows of `vocab` logits (scratch of O(vocab)). */
mt_sampler *mt_sampler_create(const mt_sample_opts *o, int64_t vocab);
void mt_sampler_free(mt_sampler *s); /* NULL is a no-op */

/* The token chosen from logits [vocab] (fp32, host, not modified) at
 * generation step `step` (0 for the first new token). Non-finite logits
 * are never chosen unless every logit is (then token 0). */
int32_t mt_sample_next(mt_sampler *s, const float *logits, int64_t step);

#endif
