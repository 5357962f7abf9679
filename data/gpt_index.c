/* data/gpt_index.c — Megatron-core's GPTDataset/BlendedDataset indices (see
 * gpt_index.h). */
#include "data/gpt_index.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/np_random.h"

int mt_parse_split(const char *s, double w[3], char *err, size_t errlen) {
  int n = 0;
  w[0] = w[1] = w[2] = 0;
  for (const char *p = s; *p;) {
    if ((*p >= '0' && *p <= '9') || *p == '.') { /* re.findall(r"[.0-9]+") */
      char num[64];
      size_t k = 0;
      while (((*p >= '0' && *p <= '9') || *p == '.') && k + 1 < sizeof num) num[k++] = *p++;
      num[k] = 0;
      char *end;
      double v = strtod(num, &end);
      if (*end || end == num) {
        snprintf(err, errlen, "split \"%s\": \"%s\" is not a number", s, num);
        return -1;
      }
      if (n == 3) {
        snprintf(err, errlen, "split \"%s\": more than 3 weights (train,valid,test)", s);
        return -1;
      }
      w[n++] = v;
    } else if (*p == ',' || *p == '/' || *p == ' ') {
      p++;
    } else {
      snprintf(err, errlen, "split \"%s\": expected weights like \"969,30,1\"", s);
      return -1;
    }
  }
  double sum = mt_np_sum(w, 3);
  if (n == 0 || !(sum > 0) || !isfinite(sum)) {
    snprintf(err, errlen, "split \"%s\": weights must be >= 0 with a positive sum", s);
    return -1;
  }
  for (int i = 0; i < 3; i++) w[i] /= sum;
  return 0;
}

void mt_split_bounds(const double w[3], int64_t n_docs, int64_t bounds[3][2], int present[3]) {
  double c[4] = {0, 0, 0, 0};
  for (int i = 0; i < 3; i++) c[i + 1] = c[i] + w[i];
  for (int i = 0; i < 3; i++) {
    present[i] = c[i + 1] > c[i];
    bounds[i][0] = (int64_t)nearbyint(c[i] * (double)n_docs);
    bounds[i][1] = (int64_t)nearbyint(c[i + 1] * (double)n_docs);
    if (!present[i]) bounds[i][1] = bounds[i][0];
  }
}

int64_t mt_gpt_num_epochs(int64_t tokens_per_epoch, int seq_length, int64_t num_samples,
                          int add_extra) {
  if (tokens_per_epoch <= 0) return 0;
  if (num_samples < 0) return 1;
  int64_t need = num_samples * (int64_t)seq_length + add_extra;
  if (need <= tokens_per_epoch) return 1;
  return (need + tokens_per_epoch - 1) / tokens_per_epoch;
}

/* helpers.cpp build_sample_idx (drop_last_partial_sequence = true) */
static void build_sample_idx(mt_gpt_index *ix, const int32_t *doc_len, int seq_length,
                             int add_extra) {
  const int64_t ns = ix->n_samples;
  int64_t *si = ix->sample_idx;
  int64_t di = 0, off = 0;
  si[0] = 0;
  si[1] = 0;
  for (int64_t s = 1; s <= ns; s++) {
    int64_t remaining = (int64_t)seq_length + add_extra;
    while (remaining != 0) {
      int64_t len = doc_len[ix->doc_idx[di]] - off;
      remaining -= len;
      if (remaining <= 0) {
        off += remaining + len - add_extra;
        remaining = 0;
      } else {
        if (di == ix->n_doc_idx - 1) { /* end of the documents (only at the last sample) */
          MT_ASSERT(s == ns);
          off = doc_len[ix->doc_idx[di]] - add_extra;
          break;
        }
        di++;
        off = 0;
      }
    }
    si[2 * s] = di;
    si[2 * s + 1] = off;
  }
}

int mt_gpt_index_build(mt_gpt_index *ix, const int32_t *doc_len, int64_t doc_begin,
                       int64_t doc_end, int seq_length, int64_t num_samples, uint32_t seed,
                       int add_extra, char *err, size_t errlen) {
  memset(ix, 0, sizeof(*ix));
  int64_t nd = doc_end - doc_begin, tpe = 0;
  for (int64_t d = doc_begin; d < doc_end; d++) tpe += doc_len[d];
  if (seq_length < 2) {
    snprintf(err, errlen, "seq_length %d: Megatron's sample index needs at least 2", seq_length);
    return -1;
  }
  if (nd <= 0 || tpe < 2) {
    snprintf(err, errlen, "split has %lld documents and %lld tokens: cannot form samples",
             (long long)nd, (long long)tpe);
    return -1;
  }
  int64_t epochs = mt_gpt_num_epochs(tpe, seq_length, num_samples, add_extra);
  if (epochs * nd > INT32_MAX) {
    snprintf(err, errlen, "%lld epochs of %lld documents exceed the int32 document index",
             (long long)epochs, (long long)nd);
    return -1;
  }
  int sep = 0;
  int64_t ns_sans = 0;
  if (epochs > 1) { /* num_samples >= 0 here */
    ns_sans = ((epochs - 1) * tpe - add_extra) / seq_length;
    int64_t from_final = num_samples - ns_sans, per_epoch = (tpe - add_extra) / seq_length;
    MT_ASSERT(from_final >= 0 && from_final <= per_epoch + 1);
    sep = from_final < (int64_t)(0.80 * (double)per_epoch);
  }
  ix->num_epochs = epochs;
  ix->separate_final_epoch = sep;
  mt_np_random rs;
  mt_np_random_seed(&rs, seed);
  /* document index: the split's documents once per epoch, shuffled (the
   * last epoch on its own when it is used for less than 80%) */
  ix->n_doc_idx = epochs * nd;
  ix->doc_idx = mt_xmalloc((size_t)ix->n_doc_idx * sizeof(int32_t));
  for (int64_t e = 0; e < epochs; e++)
    for (int64_t d = 0; d < nd; d++) ix->doc_idx[e * nd + d] = (int32_t)(doc_begin + d);
  if (!sep) {
    mt_np_shuffle_i32(&rs, ix->doc_idx, ix->n_doc_idx);
  } else {
    mt_np_shuffle_i32(&rs, ix->doc_idx, (epochs - 1) * nd);
    mt_np_shuffle_i32(&rs, ix->doc_idx + (epochs - 1) * nd, nd);
  }
  /* sample index */
  int64_t ns = (epochs * tpe - add_extra) / seq_length;
  ix->n_samples = ns;
  ix->sample_idx = mt_xmalloc((size_t)(ns + 1) * 2 * sizeof(int64_t));
  build_sample_idx(ix, doc_len, seq_length, add_extra);
  /* shuffle index: [0, ns) shuffled, or [0, ns_sans) and [ns_sans, ns) */
  ix->shuffle_idx = mt_xmalloc((size_t)(ns ? ns : 1) * sizeof(int64_t));
  for (int64_t s = 0; s < ns; s++) ix->shuffle_idx[s] = s;
  int64_t first = sep ? ns_sans : ns;
  if (first > ns) first = ns;
  mt_np_shuffle_i64(&rs, ix->shuffle_idx, first);
  if (first < ns) mt_np_shuffle_i64(&rs, ix->shuffle_idx + first, ns - first);
  return 0;
}

void mt_gpt_index_free(mt_gpt_index *ix) {
  free(ix->doc_idx);
  free(ix->sample_idx);
  free(ix->shuffle_idx);
  memset(ix, 0, sizeof(*ix));
}

/* numpy's pairwise_sum for float64 (umath loops_utils): below 8 elements a
 * plain loop, up to 128 eight accumulators, above that recursive halves. */
double mt_np_sum(const double *a, int64_t n) {
  if (n < 8) {
    double res = 0.;
    for (int64_t i = 0; i < n; i++) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    int64_t i;
    for (int k = 0; k < 8; k++) r[k] = a[k];
    for (i = 8; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; k++) r[k] += a[i + k];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return mt_np_sum(a, n2) + mt_np_sum(a + n2, n - n2);
}

void mt_np_normalize(double *w, int n) {
  double s = mt_np_sum(w, n);
  for (int i = 0; i < n; i++) w[i] /= s;
}

void mt_blend_build(const double *w, int n, int64_t size, int16_t *ds_index, int64_t *ds_sample) {
  int64_t *count = mt_xcalloc((size_t)n, sizeof(int64_t));
  for (int64_t s = 0; s < size; s++) {
    double sd = s > 1 ? (double)s : 1.0;
    int best = 0;
    double best_err = w[0] * sd - (double)count[0];
    for (int i = 1; i < n; i++) {
      double e = w[i] * sd - (double)count[i];
      if (e > best_err) {
        best_err = e;
        best = i;
      }
    }
    ds_index[s] = (int16_t)best;
    ds_sample[s] = count[best]++;
  }
  free(count);
}

int64_t mt_blend_target_size(double w, int64_t size) {
  return (int64_t)ceil((double)size * w);
}

int64_t mt_blend_buffer_size(double w, int64_t size, double surplus) {
  return (int64_t)ceil((double)mt_blend_target_size(w, size) * (1.0 + surplus));
}
