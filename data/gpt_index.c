/* data/gpt_index.c — Megatron GPTDataset/BlendedDataset indices (see
 * gpt_index.h). */
#include "data/gpt_index.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"

int mt_parse_split(const char *s, double w[3], char *err, size_t errlen) {
  int n = 0;
  w[0] = w[1] = w[2] = 0;
  const char *p = s;
  while (*p) {
    if ((*p >= '0' && *p <= '9') || *p == '.') {
      char *end;
      double v = strtod(p, &end);
      if (end == p) {
        p++;
        continue;
      }
      if (n == 3) {
        snprintf(err, errlen, "split \"%s\": more than 3 weights (train,valid,test)", s);
        return -1;
      }
      w[n++] = v;
      p = end;
    } else if (*p == ',' || *p == '/' || *p == ' ') {
      p++;
    } else {
      snprintf(err, errlen, "split \"%s\": expected weights like \"969,30,1\"", s);
      return -1;
    }
  }
  double sum = w[0] + w[1] + w[2];
  if (n == 0 || !(sum > 0) || !isfinite(sum)) {
    snprintf(err, errlen, "split \"%s\": weights must be >= 0 with a positive sum", s);
    return -1;
  }
  for (int i = 0; i < 3; i++) w[i] /= sum;
  return 0;
}

void mt_split_bounds(const double w[3], int64_t n_docs, int64_t bounds[4]) {
  bounds[0] = 0;
  for (int i = 0; i < 3; i++) bounds[i + 1] = bounds[i] + (int64_t)nearbyint(w[i] * (double)n_docs);
  int64_t diff = bounds[3] - n_docs;
  for (int i = 1; i < 4; i++) bounds[i] -= diff;
  for (int i = 1; i < 4; i++) { /* guard against tiny weights near 0 docs */
    if (bounds[i] < 0) bounds[i] = 0;
    if (bounds[i] < bounds[i - 1]) bounds[i] = bounds[i - 1];
  }
}

int64_t mt_gpt_num_epochs(int64_t tokens_per_epoch, int seq_length, int64_t num_samples) {
  int64_t need = num_samples * (int64_t)seq_length + 1, have = tokens_per_epoch, e = 1;
  if (tokens_per_epoch <= 0) return 0;
  if (have < need) {
    e = (need + tokens_per_epoch - 1) / tokens_per_epoch;
  }
  return e;
}

static uint64_t philox_u64(mt_rng_key_t key, uint64_t i) {
  uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), 2u, 0u}, out[4];
  mt_philox4x32(ctr, key, out);
  return (uint64_t)out[0] | (uint64_t)out[1] << 32;
}

static uint64_t pick(mt_rng_key_t key, int64_t i) {
  unsigned __int128 m = (unsigned __int128)philox_u64(key, (uint64_t)i) * (uint64_t)(i + 1);
  return (uint64_t)(m >> 64);
}

void mt_shuffle_i32(int32_t *a, int64_t n, uint64_t seed, const char *name, uint64_t s, uint64_t p) {
  mt_rng_key_t key = mt_rng_key(seed, name, s, p);
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t j = pick(key, i);
    int32_t t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

void mt_shuffle_i64(int64_t *a, int64_t n, uint64_t seed, const char *name, uint64_t s, uint64_t p) {
  mt_rng_key_t key = mt_rng_key(seed, name, s, p);
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t j = pick(key, i);
    int64_t t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

int mt_gpt_index_build(mt_gpt_index *ix, const int32_t *doc_len, int64_t doc_begin,
                       int64_t doc_end, int seq_length, int64_t num_samples, uint64_t seed,
                       int split, char *err, size_t errlen) {
  memset(ix, 0, sizeof(*ix));
  int64_t nd = doc_end - doc_begin, tpe = 0;
  for (int64_t d = doc_begin; d < doc_end; d++) tpe += doc_len[d];
  if (nd <= 0 || tpe < 2) {
    snprintf(err, errlen, "split has %lld documents and %lld tokens: cannot form samples",
             (long long)nd, (long long)tpe);
    return -1;
  }
  if (num_samples < 1) num_samples = 1;
  int64_t epochs = mt_gpt_num_epochs(tpe, seq_length, num_samples);
  if (epochs * nd > INT32_MAX) {
    snprintf(err, errlen, "%lld epochs of %lld documents exceed the int32 document index",
             (long long)epochs, (long long)nd);
    return -1;
  }
  int sep = 0;
  int64_t ns_sans = 0;
  if (epochs > 1) {
    ns_sans = ((epochs - 1) * tpe - 1) / seq_length;
    int64_t from_final = num_samples - ns_sans, per_epoch = (tpe - 1) / seq_length;
    sep = from_final < (int64_t)(0.80 * (double)per_epoch);
  }
  ix->num_epochs = epochs;
  ix->separate_final_epoch = sep;
  /* document index: epochs of the split's documents, shuffled (the last
   * epoch on its own when it is used for less than 80%) */
  ix->n_doc_idx = epochs * nd;
  ix->doc_idx = mt_xmalloc((size_t)ix->n_doc_idx * sizeof(int32_t));
  for (int64_t e = 0; e < epochs; e++)
    for (int64_t d = 0; d < nd; d++) ix->doc_idx[e * nd + d] = (int32_t)(doc_begin + d);
  if (!sep) {
    mt_shuffle_i32(ix->doc_idx, ix->n_doc_idx, seed, "data.document_index", (uint64_t)split, 0);
  } else {
    mt_shuffle_i32(ix->doc_idx, (epochs - 1) * nd, seed, "data.document_index", (uint64_t)split, 0);
    mt_shuffle_i32(ix->doc_idx + (epochs - 1) * nd, nd, seed, "data.document_index",
                   (uint64_t)split, 1);
  }
  /* sample index (helpers.cpp build_sample_idx, add_extra_token = 1) */
  int64_t ns = (epochs * tpe - 1) / seq_length;
  ix->n_samples = ns;
  ix->sample_idx = mt_xmalloc((size_t)(ns + 1) * 2 * sizeof(int64_t));
  int64_t di = 0, off = 0;
  ix->sample_idx[0] = 0;
  ix->sample_idx[1] = 0;
  for (int64_t s = 1; s <= ns; s++) {
    int64_t remaining = (int64_t)seq_length + 1;
    while (remaining != 0) {
      int64_t len = doc_len[ix->doc_idx[di]] - off;
      remaining -= len;
      if (remaining <= 0) {
        off += remaining + len - 1;
        remaining = 0;
      } else {
        di++;
        off = 0;
        MT_ASSERT(di < ix->n_doc_idx);
      }
    }
    ix->sample_idx[2 * s] = di;
    ix->sample_idx[2 * s + 1] = off;
  }
  /* shuffle index */
  ix->shuffle_idx = mt_xmalloc((size_t)(ns ? ns : 1) * sizeof(int64_t));
  for (int64_t s = 0; s < ns; s++) ix->shuffle_idx[s] = s;
  int64_t first = sep ? ns_sans : ns;
  if (first > ns) first = ns;
  mt_shuffle_i64(ix->shuffle_idx, first, seed, "data.shuffle_index", (uint64_t)split, 0);
  mt_shuffle_i64(ix->shuffle_idx + first, ns - first, seed, "data.shuffle_index", (uint64_t)split, 1);
  return 0;
}

void mt_gpt_index_free(mt_gpt_index *ix) {
  free(ix->doc_idx);
  free(ix->sample_idx);
  free(ix->shuffle_idx);
  memset(ix, 0, sizeof(*ix));
}

void mt_blend_build(const double *w, int n, int64_t size, int16_t *ds_index, int64_t *ds_sample) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += w[i];
  int64_t *count = mt_xcalloc((size_t)n, sizeof(int64_t));
  for (int64_t s = 0; s < size; s++) {
    double sd = s > 1 ? (double)s : 1.0;
    int best = -1;
    double best_err = 0;
    for (int i = 0; i < n; i++) {
      if (!(w[i] > 0)) continue; /* weight 0: never sampled */
      double e = w[i] / sum * sd - (double)count[i];
      if (best < 0 || e > best_err) {
        best_err = e;
        best = i;
      }
    }
    MT_ASSERT(best >= 0);
    ds_index[s] = (int16_t)best;
    ds_sample[s] = count[best]++;
  }
  free(count);
}

int64_t mt_blend_dataset_size(double w_normalised, int64_t size) {
  return (int64_t)ceil(w_normalised * (double)size * 1.005);
}
