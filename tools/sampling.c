/* tools/sampling.c — see sampling.h. */
#include "tools/sampling.h"

#include <math.h>
#include <stdlib.h>

#include "core/rng.h"
#include "core/util.h"

struct mt_sampler {
  mt_sample_opts o;
  int64_t vocab;
  mt_rng_key_t key;
  int32_t *idx;  /* [vocab] candidate ids, most probable first */
  double *prob;  /* [vocab] their unnormalised probabilities */
  const float *cur; /* the row being sorted (qsort has no context argument) */
};

mt_sampler *mt_sampler_create(const mt_sample_opts *o, int64_t vocab) {
  mt_sampler *s = mt_xcalloc(1, sizeof *s);
  s->o = *o;
  s->vocab = vocab;
  s->key = mt_rng_key(o->seed, "generate.sample", 0, 0);
  s->idx = mt_xmalloc((size_t)vocab * sizeof(int32_t));
  s->prob = mt_xmalloc((size_t)vocab * sizeof(double));
  return s;
}

void mt_sampler_free(mt_sampler *s) {
  if (!s) return;
  free(s->idx);
  free(s->prob);
  free(s);
}

/* Uniform double in [0, 1) with 53 bits for step `step`. */
static double uniform(mt_rng_key_t key, int64_t step) {
  uint32_t ctr[4] = {(uint32_t)step, (uint32_t)((uint64_t)step >> 32), 7u, 0u}, out[4];
  mt_philox4x32(ctr, key, out);
  uint64_t bits = ((uint64_t)out[0] << 21) ^ ((uint64_t)out[1] >> 11);
  return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* Order of candidates: larger logit first, then lower id (NaN last). */
static int better(float a, int32_t ia, float b, int32_t ib) {
  int fa = isfinite(a) || (isinf(a) && a > 0), fb = isfinite(b) || (isinf(b) && b > 0);
  if (fa != fb) return fa;
  if (a != b) return a > b;
  return ia < ib;
}

static void sift_down(mt_sampler *s, int32_t *h, int64_t n, int64_t i) {
  const float *l = s->cur;
  for (;;) { /* min-heap on `better`: the root is the worst kept candidate */
    int64_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && better(l[h[c]], h[c], l[h[c + 1]], h[c + 1])) c++;
    if (!better(l[h[i]], h[i], l[h[c]], h[c])) return;
    int32_t t = h[i];
    h[i] = h[c];
    h[c] = t;
    i = c;
  }
}

/* s->idx[0, k) = the k best candidates, best first (heap selection then
 * sort of the heap: O(V log k)). */
static void select_top(mt_sampler *s, int64_t k) {
  const float *l = s->cur;
  int32_t *h = s->idx;
  for (int64_t i = 0; i < k; i++) h[i] = (int32_t)i;
  for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(s, h, k, i);
  for (int64_t v = k; v < s->vocab; v++)
    if (better(l[v], (int32_t)v, l[h[0]], h[0])) {
      h[0] = (int32_t)v;
      sift_down(s, h, k, 0);
    }
  for (int64_t n = k; n > 1; n--) { /* heap sort: worst to the end */
    int32_t t = h[0];
    h[0] = h[n - 1];
    h[n - 1] = t;
    sift_down(s, h, n - 1, 0);
  }
}

int32_t mt_sample_next(mt_sampler *s, const float *logits, int64_t step) {
  const int64_t V = s->vocab;
  s->cur = logits;
  if (s->o.temperature <= 0.0f) {
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
      if (better(logits[v], (int32_t)v, logits[best], best)) best = (int32_t)v;
    return best;
  }
  const int64_t k = s->o.top_k > 0 && s->o.top_k < V ? s->o.top_k : V;
  select_top(s, k);
  const double T = s->o.temperature;
  const double lmax = logits[s->idx[0]];
  if (!isfinite(lmax)) return s->idx[0];
  double total = 0.0;
  int64_t n = 0;
  for (; n < k; n++) {
    float lv = logits[s->idx[n]];
    if (!isfinite(lv)) break; /* -inf / NaN: probability 0, and sorted last */
    s->prob[n] = exp(((double)lv - lmax) / T);
    total += s->prob[n];
  }
  if (s->o.top_p < 1.0f) { /* nucleus: smallest prefix reaching top_p */
    double cum = 0.0;
    int64_t keep = 0;
    while (keep < n) {
      cum += s->prob[keep++];
      if (cum >= (double)s->o.top_p * total) break;
    }
    n = keep;
    total = cum;
  }
  const double u = uniform(s->key, step) * total;
  double cum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    cum += s->prob[i];
    if (u < cum) return s->idx[i];
  }
  return s->idx[n - 1];
}
