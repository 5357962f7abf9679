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
  mt_token_source *src;
  int seq_length;
  int64_t max_token;
  split_data split[MT_NUM_SPLITS];
};

static const char k_cache_magic[8] = {'M', 'T', 'G', 'P', 'T', 'I', 'X', '1'};

static uint64_t index_key(const mt_token_source *s, int64_t b, int64_t e, int seq, uint64_t seed,
                          int64_t ns, int split) {
  uint64_t h = mt_hash_bytes(k_cache_magic, 8, 0);
  h = mt_hash_bytes(s->doc_len, (size_t)s->n_docs * sizeof(int32_t), h);
  int64_t v[6] = {b, e, seq, (int64_t)seed, ns, split};
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
           h[1] > 0 && h[0] < ((int64_t)1 << 40) && h[1] < ((int64_t)1 << 40);
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

static int build_split(mt_gpt_dataset *ds, const mt_gpt_dataset_options *opt, const double *w,
                       const double split_w[3], int split, char *err, size_t errlen) {
  split_data *sp = &ds->split[split];
  int64_t want = opt->num_samples[split];
  sp->ix = mt_xcalloc((size_t)ds->n_src, sizeof(mt_gpt_index));
  int blend = ds->n_src > 1;
  for (int k = 0; k < ds->n_src; k++) {
    const mt_token_source *s = &ds->src[k];
    int64_t b[4];
    mt_split_bounds(split_w, s->n_docs, b);
    int64_t ns = blend ? mt_blend_dataset_size(w[k], want) : want;
    if (ns == 0) continue;
    int64_t tokens = 0;
    for (int64_t d = b[split]; d < b[split + 1]; d++) tokens += s->doc_len[d];
    if (tokens < 2) {
      if (split == MT_SPLIT_TRAIN) {
        snprintf(err, errlen,
                 "%s: the train split (documents %lld..%lld of %lld, split \"%s\") has %lld "
                 "tokens; need at least 2",
                 s->path, (long long)b[0], (long long)b[1], (long long)s->n_docs, opt->split,
                 (long long)tokens);
        return -1;
      }
      fprintf(stderr,
              "data: the %s split of '%s' (documents %lld..%lld of %lld, split \"%s\") has %s; "
              "it supplies no samples\n",
              split == MT_SPLIT_VALID ? "validation" : k_split_name[split], s->path,
              (long long)b[split], (long long)b[split + 1], (long long)s->n_docs,
              opt->split ? opt->split : "969,30,1", b[split] == b[split + 1] ? "no documents" : "fewer than 2 tokens");
      sp->size = 0;
      return 0;
    }
    uint64_t key = index_key(s, b[split], b[split + 1], opt->seq_length, opt->seed, ns, split);
    if (opt->cache_dir && cache_load(&sp->ix[k], opt->cache_dir, key) == 0) continue;
    char e2[512];
    if (mt_gpt_index_build(&sp->ix[k], s->doc_len, b[split], b[split + 1], opt->seq_length, ns,
                           opt->seed, split, e2, sizeof(e2)) != 0) {
      snprintf(err, errlen, "%s: %s split: %s", s->path, k_split_name[split], e2);
      return -1;
    }
    if (opt->cache_dir) cache_save(&sp->ix[k], opt->cache_dir, key);
  }
  if (!blend) {
    sp->size = sp->ix[0].n_samples;
  } else {
    sp->size = want;
    sp->ds_index = mt_xmalloc((size_t)want * sizeof(int16_t));
    sp->ds_sample = mt_xmalloc((size_t)want * sizeof(int64_t));
    mt_blend_build(w, ds->n_src, want, sp->ds_index, sp->ds_sample);
  }
  return 0;
}

mt_gpt_dataset *mt_gpt_dataset_open(const mt_gpt_dataset_options *opt, char *err, size_t errlen) {
  if (opt->n_paths < 1 || opt->n_paths > 32767 || opt->seq_length < 1) {
    snprintf(err, errlen, "data: need 1..32767 data paths and seq_length >= 1");
    return NULL;
  }
  double split_w[3];
  if (mt_parse_split(opt->split ? opt->split : "969,30,1", split_w, err, errlen) != 0) return NULL;
  double *w = mt_xmalloc((size_t)opt->n_paths * sizeof(double)), wsum = 0;
  for (int k = 0; k < opt->n_paths; k++) {
    w[k] = opt->weights ? opt->weights[k] : 1.0;
    if (!(w[k] >= 0)) {
      snprintf(err, errlen, "data: weight %g of %s must be >= 0", w[k], opt->paths[k]);
      free(w);
      return NULL;
    }
    wsum += w[k];
  }
  if (!(wsum > 0)) {
    snprintf(err, errlen, "data: blend weights sum to 0");
    free(w);
    return NULL;
  }
  for (int k = 0; k < opt->n_paths; k++) w[k] /= wsum;
  mt_gpt_dataset *ds = mt_xcalloc(1, sizeof(*ds));
  ds->seq_length = opt->seq_length;
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
    mt_token_source_read(s, ix->doc_idx[b], ob, oe - ob + 1, out);
    n = oe - ob + 1;
  } else {
    int32_t d = ix->doc_idx[b];
    mt_token_source_read(s, d, ob, s->doc_len[d] - ob, out);
    n = s->doc_len[d] - ob;
    for (int64_t i = b + 1; i < e; i++) {
      d = ix->doc_idx[i];
      mt_token_source_read(s, d, 0, s->doc_len[d], out + n);
      n += s->doc_len[d];
    }
    mt_token_source_read(s, ix->doc_idx[e], 0, oe + 1, out + n);
    n += oe + 1;
  }
  MT_ASSERT(n == ds->seq_length + 1);
}

void mt_gpt_dataset_get(const mt_gpt_dataset *ds, int split, int64_t idx, int32_t *tokens_out) {
  MT_ASSERT(split >= 0 && split < MT_NUM_SPLITS);
  const split_data *sp = &ds->split[split];
  MT_ASSERT(sp->size > 0);
  idx %= sp->size;
  if (idx < 0) idx += sp->size;
  if (ds->n_src == 1) {
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
