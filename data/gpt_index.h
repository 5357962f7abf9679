/* data/gpt_index.h — the index arrays of Megatron-LM's GPTDataset and
 * BlendedDataset (megatron/core/datasets/gpt_dataset.py, blended_dataset.py,
 * helpers.cpp), as pure functions of document lengths, split, seq_length,
 * seed and the requested sample count.
 *
 * Shuffles are Fisher–Yates driven by Philox-4x32 (core/rng.h) keyed by
 * mt_rng_key(seed, name, split, part): step i (from n-1 down to 1) swaps a[i]
 * with a[j], j = floor(r * (i + 1) / 2^64), r = the 64-bit Philox output for
 * counter {i_lo, i_hi, 2, 0}. Megatron uses numpy's RandomState; the
 * structure (which arrays are shuffled, and the separate last epoch) is the
 * same, the permutations are not.
 */
#ifndef MT_DATA_GPT_INDEX_H
#define MT_DATA_GPT_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Parse "969,30,1" (Megatron: the numbers found in the string, missing ones
 * 0, normalised to sum 1). 0, or -1 with a message. */
int mt_parse_split(const char *s, double w[3], char *err, size_t errlen);

/* Megatron's _get_split_indices: bounds[0] = 0, bounds[i+1] = bounds[i] +
 * round(w[i] * n_docs) (round half to even), then all shifted so bounds[3] =
 * n_docs. Split i is documents [bounds[i], bounds[i+1]). */
void mt_split_bounds(const double w[3], int64_t n_docs, int64_t bounds[4]);

/* Megatron's _get_num_epochs: smallest e >= 1 with
 * e * tokens_per_epoch >= num_samples * seq_length + 1. */
int64_t mt_gpt_num_epochs(int64_t tokens_per_epoch, int seq_length, int64_t num_samples);

/* Fisher–Yates shuffle of a[0, n) keyed as above. */
void mt_shuffle_i32(int32_t *a, int64_t n, uint64_t seed, const char *name, uint64_t s, uint64_t p);
void mt_shuffle_i64(int64_t *a, int64_t n, uint64_t seed, const char *name, uint64_t s, uint64_t p);

typedef struct {
  int64_t n_doc_idx;
  int32_t *doc_idx;     /* [n_doc_idx] document ids (source-global), epochs shuffled */
  int64_t n_samples;    /* samples available (>= requested) */
  int64_t *sample_idx;  /* [(n_samples + 1) * 2] (position in doc_idx, token offset) */
  int64_t *shuffle_idx; /* [n_samples] */
  int64_t num_epochs;
  int separate_final_epoch;
} mt_gpt_index;

/* Build the index of documents [doc_begin, doc_end) of a source with token
 * lengths doc_len[] so that at least num_samples samples of seq_length + 1
 * tokens exist (consecutive samples share one token, as in Megatron).
 * `split` only keys the shuffles. 0, or -1 with a message (no tokens). */
int mt_gpt_index_build(mt_gpt_index *ix, const int32_t *doc_len, int64_t doc_begin,
                       int64_t doc_end, int seq_length, int64_t num_samples, uint64_t seed,
                       int split, char *err, size_t errlen);
void mt_gpt_index_free(mt_gpt_index *ix);

/* Megatron's build_blending_indices: for s in [0, size) pick the dataset i
 * with the largest w[i] * max(s, 1) - count[i] (first on ties), w normalised;
 * ds_index[s] = i, ds_sample[s] = count[i]++. */
void mt_blend_build(const double *w, int n, int64_t size, int16_t *ds_index, int64_t *ds_sample);

/* Megatron's per-dataset sample count in a blend: ceil(w * size * 1.005). */
int64_t mt_blend_dataset_size(double w_normalised, int64_t size);

#endif
