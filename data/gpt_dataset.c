/* data/gpt_dataset.c — GPT samples over one or several token sources (see
 * gpt_dataset.h, gpt_index.h).
 *
 * Per source and split an mt_gpt_index (document, sample and shuffle index);
 * with several sources a blend (Megatron's BlendedDataset) whose per-source
 * sizes are ceil(w * n * 1.005). Index arrays may be cached in cache_dir under
 * a key hashed from (document lengths, split bounds, seq_length, seed,
 * requested samples, split id, format version); a cache file that does not
 * match is rebuilt.
 */
#include "data/gpt_dataset.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "data/gpt_index.h"
#include "data/indexed_dataset.h"

typedef struct {
  int64_t size;       /* samples of this split (0 = not built) */
  mt_gpt_index *ix;   /* [n_src] (ix[k].n_samples == 0: source k unused) */
  int16_t *ds_index;  /* blend: [size] */
  int64_t *ds_sample; /* blend: [size] */
} split_data;

struct mt_gpt_dataset {
  int n_src;
  int add_extra; /* Megatron's add_extra_token_to_sequence (0 or 1) */
  mt_token_source *src;
  int seq_length;
  int64_t max_token;
  split_data split[MT_NUM_SPLITS];
};

static const char k_cache_magic[8] = {'M', 'T', 'G', 'P', 'T', 'I', 'X', '2'};

static uint64_t index_key(const mt_token_source *s, int64_t b, int64_t e, int seq, uint64_t seed,
                          int64_t ns, int split, int add_extra) {
  uint64_t h = mt_hash_bytes(k_cache_magic, 8, 0);
  h = mt_hash_bytes(s->doc_len, (size_t)s->n_docs * sizeof(int32_t), h);
  int64_t v[7] = {b, e, seq, (int64_t)seed, ns, split, add_extra};
  return mt_hash_bytes(v, sizeof(v), h);
}

static void cache_path(char *out, size_t n, const char *dir, uint64_t key) {
  snprintf(out, n, "%s/gpt_index_%016" PRIx64 ".bin", dir, key);
}

static int cache_load(mt_gpt_index *ix, const char *dir, uint64_t key) {
  char path[1200];
  cache_path(path, sizeof(path), dir, key);
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char magic[8];
  uint64_t k;
  int64_t h[4];
  int ok = fread(magic, 8, 1, f) == 1 && memcmp(magic, k_cache_magic, 8) == 0 &&
           fread(&k, 8, 1, f) == 1 && k == key && fread(h, 8, 4, f) == 4 && h[0] > 0 &&
           h[1] >= 0 && h[0] < ((int64_t)1 << 40) && h[1] < ((int64_t)1 << 40);
  if (ok) {
    memset(ix, 0, sizeof(*ix));
    ix->n_doc_idx = h[0];
    ix->n_samples = h[1];
    ix->num_epochs = h[2];
    ix->separate_final_epoch = (int)h[3];
    ix->doc_idx = mt_xmalloc((size_t)h[0] * sizeof(int32_t));
    ix->sample_idx = mt_xmalloc((size_t)(h[1] + 1) * 2 * sizeof(int64_t));
    ix->shuffle_idx = mt_xmalloc((size_t)h[1] * sizeof(int64_t));
    ok = fread(ix->doc_idx, 4, (size_t)h[0], f) == (size_t)h[0] &&
         fread(ix->sample_idx, 16, (size_t)h[1] + 1, f) == (size_t)h[1] + 1 &&
         fread(ix->shuffle_idx, 8, (size_t)h[1], f) == (size_t)h[1] && fgetc(f) == EOF;
    if (!ok) mt_gpt_index_free(ix);
  }
  fclose(f);
  return ok ? 0 : -1;
}

/* Best effort: a cache that cannot be written is only slower next time. */
static void cache_save(const mt_gpt_index *ix, const char *dir, uint64_t key) {
  char path[1200], tmp[1300];
  cache_path(path, sizeof(path), dir, key);
  snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  int64_t h[4] = {ix->n_doc_idx, ix->n_samples, ix->num_epochs, ix->separate_final_epoch};
  fwrite(k_cache_magic, 8, 1, f);
  fwrite(&key, 8, 1, f);
  fwrite(h, 8, 4, f);
  fwrite(ix->doc_idx, 4, (size_t)ix->n_doc_idx, f);
  fwrite(ix->sample_idx, 16, (size_t)ix->n_samples + 1, f);
  fwrite(ix->shuffle_idx, 8, (size_t)ix->n_samples, f);
  int bad = ferror(f) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) unlink(tmp);
}

static const char *k_split_name[MT_NUM_SPLITS] = {"train", "valid", "test"};

/* One source's GPTDataset of a split: from the cache or built. */
static int build_source(mt_gpt_dataset *ds, const mt_gpt_dataset_options *opt, int k,
                        const int64_t b[2], int split, int64_t ns, mt_gpt_index *ix, char *err,
                        size_t errlen) {
  const mt_token_source *s = &ds->src[k];
  uint64_t key = index_key(s, b[0], b[1], opt->seq_length, opt->seed, ns, split, ds->add_extra);
  if (opt->cache_dir && cache_load(ix, opt->cache_dir, key) == 0) return 0;
  char e2[512];
  if (mt_gpt_index_build(ix, s->doc_len, b[0], b[1], opt->seq_length, ns, (uint32_t)opt->seed,
                         ds->add_extra, e2, sizeof(e2)) != 0) {
    snprintf(err, errlen, "%s: %s split: %s", s->path, k_split_name[split], e2);
    return -1;
  }
  if (opt->cache_dir) cache_save(ix, opt->cache_dir, key);
  return 0;
}

/* Megatron's BlendedMegatronDatasetBuilder for one split: a single
 * unweighted prefix is a GPTDataset of `want` samples; weighted prefixes
 * each build ceil(ceil(want·w)·(1 + surplus)) samples and the blend draws
 * sum(ceil(want·w)) of them; unweighted prefixes build one epoch each and
 * the blend draws min(want, their total) in proportion to their sizes. */
static int build_split(mt_gpt_dataset *ds, const mt_gpt_dataset_options *opt, const double *w,
                       const double split_w[3], int split, char *err, size_t errlen) {
  split_data *sp = &ds->split[split];
  int64_t want = opt->num_samples[split];
  sp->ix = mt_xcalloc((size_t)ds->n_src, sizeof(mt_gpt_index));
  int blend = ds->n_src > 1 || opt->weighted;
  int64_t target_sum = 0;
  for (int k = 0; k < ds->n_src; k++) {
    const mt_token_source *s = &ds->src[k];
    int64_t b[3][2];
    int present[3];
    mt_split_bounds(split_w, s->n_docs, b, present);
    int64_t ns = want;
    if (blend && opt->weighted) {
      ns = mt_blend_buffer_size(w[k], want, opt->mid_level_dataset_surplus);
      target_sum += mt_blend_target_size(w[k], want);
    } else if (blend) {
      ns = -1; /* None: one epoch */
    }
    int64_t tokens = 0;
    for (int64_t d = b[split][0]; d < b[split][1]; d++) tokens += s->doc_len[d];
    if (!present[split] || tokens < 2) {
      if (split == MT_SPLIT_TRAIN) {
        snprintf(err, errlen,
                 "%s: the train split (documents %lld..%lld of %lld, split \"%s\") has %lld "
                 "tokens; need at least 2",
                 s->path, (long long)b[0][0], (long long)b[0][1], (long long)s->n_docs,
                 opt->split ? opt->split : "969,30,1", (long long)tokens);
        return -1;
      }
      fprintf(stderr,
              "data: the %s split of '%s' (documents %lld..%lld of %lld, split \"%s\") has %s; "
              "it supplies no samples\n",
              split == MT_SPLIT_VALID ? "validation" : k_split_name[split], s->path,
              (long long)b[split][0], (long long)b[split][1], (long long)s->n_docs,
              opt->split ? opt->split : "969,30,1",
              b[split][0] == b[split][1] ? "no documents" : "fewer than 2 tokens");
      sp->size = 0;
      return 0;
    }
    if (build_source(ds, opt, k, b[split], split, ns, &sp->ix[k], err, errlen) != 0) return -1;
  }
  if (!blend) {
    sp->size = sp->ix[0].n_samples;
    return 0;
  }
  double *bw = mt_xmalloc((size_t)ds->n_src * sizeof(double));
  int64_t total = 0;
  for (int k = 0; k < ds->n_src; k++) {
    bw[k] = opt->weighted ? w[k] : (double)sp->ix[k].n_samples;
    total += sp->ix[k].n_samples;
  }
  sp->size = opt->weighted ? target_sum : (want < total ? want : total);
  mt_np_normalize(bw, ds->n_src); /* BlendedDataset normalises (again) */
  sp->ds_index = mt_xmalloc((size_t)(sp->size ? sp->size : 1) * sizeof(int16_t));
  sp->ds_sample = mt_xmalloc((size_t)(sp->size ? sp->size : 1) * sizeof(int64_t));
  mt_blend_build(bw, ds->n_src, sp->size, sp->ds_index, sp->ds_sample);
  free(bw);
  return 0;
}

mt_gpt_dataset *mt_gpt_dataset_open(const mt_gpt_dataset_options *opt, char *err, size_t errlen) {
  if (opt->n_paths < 1 || opt->n_paths > 32767 || opt->seq_length < 1) {
    snprintf(err, errlen, "data: need 1..32767 data paths and seq_length >= 1");
    return NULL;
  }
  double split_w[3];
  if (mt_parse_split(opt->split ? opt->split : "969,30,1", split_w, err, errlen) != 0) return NULL;
  if (opt->seed > UINT32_MAX) { /* numpy.random.RandomState(seed) */
    snprintf(err, errlen,
             "training.seed %llu: the data order uses NumPy's RandomState(seed), as Megatron "
             "does, which takes seeds in [0, 2^32 - 1]",
             (unsigned long long)opt->seed);
    return NULL;
  }
  if (opt->weighted && !(opt->mid_level_dataset_surplus >= 0)) {
    snprintf(err, errlen, "data: mid_level_dataset_surplus %g must be >= 0",
             opt->mid_level_dataset_surplus);
    return NULL;
  }
  double *w = mt_xmalloc((size_t)opt->n_paths * sizeof(double));
  for (int k = 0; k < opt->n_paths; k++) {
    w[k] = opt->weights && opt->weighted ? opt->weights[k] : 1.0;
    if (!(w[k] > 0) || !isfinite(w[k])) { /* BlendedDataset asserts weights > 0 */
      snprintf(err, errlen, "data: weight %g of %s must be > 0", w[k], opt->paths[k]);
      free(w);
      return NULL;
    }
  }
  mt_np_normalize(w, opt->n_paths); /* the builder's normalize(weights) */
  mt_gpt_dataset *ds = mt_xcalloc(1, sizeof(*ds));
  ds->seq_length = opt->seq_length;
  ds->add_extra = opt->no_extra_token ? 0 : 1;
  ds->src = mt_xcalloc((size_t)opt->n_paths, sizeof(mt_token_source));
  ds->max_token = -1;
  for (int k = 0; k < opt->n_paths; k++) {
    if (mt_token_source_open(&ds->src[k], opt->paths[k], err, errlen) != 0) goto fail;
    ds->n_src = k + 1;
    int64_t lo, hi;
    mt_token_source_minmax(&ds->src[k], &lo, &hi);
    if (hi < 0) { /* no token at all: lo/hi are the empty-range sentinels, not token ids */
      snprintf(err, errlen,
               "data.data_path '%s': the dataset has 0 tokens (%lld documents); expected at "
               "least 2 tokens in its train split",
               ds->src[k].path, (long long)ds->src[k].n_docs);
      goto fail;
    }
    if (lo < 0) {
      snprintf(err, errlen, "%s: negative token id %lld", ds->src[k].path, (long long)lo);
      goto fail;
    }
    if (opt->vocab_size > 0 && hi >= opt->vocab_size) {
      snprintf(err, errlen, "%s: token id %lld >= vocabulary size %lld", ds->src[k].path,
               (long long)hi, (long long)opt->vocab_size);
      goto fail;
    }
    if (hi > ds->max_token) ds->max_token = hi;
  }
  for (int s = 0; s < MT_NUM_SPLITS; s++) {
    if (opt->num_samples[s] <= 0) continue;
    if (build_split(ds, opt, w, split_w, s, err, errlen) != 0) goto fail;
  }
  free(w);
  return ds;
fail:
  free(w);
  mt_gpt_dataset_close(ds);
  return NULL;
}

int64_t mt_gpt_dataset_num_samples(const mt_gpt_dataset *ds, int split) {
  return split >= 0 && split < MT_NUM_SPLITS ? ds->split[split].size : 0;
}

int64_t mt_gpt_dataset_max_token(const mt_gpt_dataset *ds) { return ds->max_token; }

static void get_from(const mt_gpt_dataset *ds, int k, const mt_gpt_index *ix, int64_t j,
                     int32_t *out) {
  const mt_token_source *s = &ds->src[k];
  j = ix->shuffle_idx[j % ix->n_samples];
  int64_t b = ix->sample_idx[2 * j], ob = ix->sample_idx[2 * j + 1];
  int64_t e = ix->sample_idx[2 * j + 2], oe = ix->sample_idx[2 * j + 3];
  int64_t n = 0;
  if (b == e) {
    mt_token_source_read(s, ix->doc_idx[b], ob, oe - ob + ds->add_extra, out);
    n = oe - ob + ds->add_extra;
  } else {
    int32_t d = ix->doc_idx[b];
    mt_token_source_read(s, d, ob, s->doc_len[d] - ob, out);
    n = s->doc_len[d] - ob;
    for (int64_t i = b + 1; i < e; i++) {
      d = ix->doc_idx[i];
      mt_token_source_read(s, d, 0, s->doc_len[d], out + n);
      n += s->doc_len[d];
    }
    mt_token_source_read(s, ix->doc_idx[e], 0, oe + ds->add_extra, out + n);
    n += oe + ds->add_extra;
  }
  MT_ASSERT(n == ds->seq_length + ds->add_extra);
}

void mt_gpt_dataset_get(const mt_gpt_dataset *ds, int split, int64_t idx, int32_t *tokens_out) {
  MT_ASSERT(split >= 0 && split < MT_NUM_SPLITS);
  const split_data *sp = &ds->split[split];
  MT_ASSERT(sp->size > 0);
  idx %= sp->size;
  if (idx < 0) idx += sp->size;
  if (!sp->ds_index) {
    get_from(ds, 0, &sp->ix[0], idx, tokens_out);
  } else {
    int k = sp->ds_index[idx];
    get_from(ds, k, &sp->ix[k], sp->ds_sample[idx], tokens_out);
  }
}

void mt_gpt_dataset_close(mt_gpt_dataset *ds) {
  if (!ds) return;
  for (int s = 0; s < MT_NUM_SPLITS; s++) {
    if (ds->split[s].ix)
      for (int k = 0; k < ds->n_src; k++) mt_gpt_index_free(&ds->split[s].ix[k]);
    free(ds->split[s].ix);
    free(ds->split[s].ds_index);
    free(ds->split[s].ds_sample);
  }
  for (int k = 0; k < ds->n_src; k++) mt_token_source_close(&ds->src[k]);
  free(ds->src);
  free(ds);
}
