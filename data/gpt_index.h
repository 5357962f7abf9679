/* data/gpt_index.h — the index arrays of Megatron-core's GPTDataset and
 * BlendedDataset (megatron/core/datasets/gpt_dataset.py, blended_dataset.py,
 * blended_megatron_dataset_builder.py, blended_megatron_dataset_config.py,
 * helpers.cpp), as pure functions of document lengths, split, seq_length,
 * seed and the requested sample count — sample for sample Megatron's.
 *
 * Randomness is NumPy's legacy RandomState (data/np_random.h): one
 * RandomState(seed) per dataset and split, drawn in Megatron's order — the
 * document index shuffle (two when the last epoch is separate), then the
 * shuffle index (two likewise).
 */
#ifndef MT_DATA_GPT_INDEX_H
#define MT_DATA_GPT_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Megatron's parse_and_normalize_split: the numbers ([.0-9]+) found in the
 * string, missing ones 0, divided by their (NumPy) sum. 0, or -1 with a
 * message. */
int mt_parse_split(const char *s, double w[3], char *err, size_t errlen);

/* Megatron's split matrix (convert_split_vector_to_split_matrix) applied to
 * n_docs documents: split i exists when its book-ends [c_i, c_{i+1}) (c the
 * running float sum of w) are not empty, and holds documents
 * [round(c_i · n), round(c_{i+1} · n)) (round half to even, as Python).
 * present[i] = 0 for a split Megatron builds no dataset for. */
void mt_split_bounds(const double w[3], int64_t n_docs, int64_t bounds[3][2], int present[3]);

/* Megatron's _get_num_epochs: 1 for num_samples < 0 (None: one epoch), else
 * the smallest e >= 1 with e · tokens_per_epoch >= num_samples · seq_length
 * + add_extra. 0 when tokens_per_epoch <= 0. */
int64_t mt_gpt_num_epochs(int64_t tokens_per_epoch, int seq_length, int64_t num_samples,
                          int add_extra);

typedef struct {
  int64_t n_doc_idx;
  int32_t *doc_idx;     /* [n_doc_idx] document ids (source-global), epochs shuffled */
  int64_t n_samples;    /* samples available (>= requested) = sample_index rows - 1 */
  int64_t *sample_idx;  /* [(n_samples + 1) * 2] (position in doc_idx, token offset) */
  int64_t *shuffle_idx; /* [n_samples] */
  int64_t num_epochs;
  int separate_final_epoch;
} mt_gpt_index;

/* Build Megatron's document, sample and shuffle index of documents
 * [doc_begin, doc_end) of a source with token lengths doc_len[]:
 * num_samples < 0 = None (one epoch), add_extra = add_extra_token_to_sequence
 * (samples of seq_length + add_extra tokens, consecutive samples sharing
 * add_extra tokens), seed = the RandomState seed. 0, or -1 with a message
 * (fewer than 2 tokens, seq_length < 2, index too large). */
int mt_gpt_index_build(mt_gpt_index *ix, const int32_t *doc_len, int64_t doc_begin,
                       int64_t doc_end, int seq_length, int64_t num_samples, uint32_t seed,
                       int add_extra, char *err, size_t errlen);
void mt_gpt_index_free(mt_gpt_index *ix);

/* numpy.sum of a float64 array (pairwise summation, blocks of 8) and
 * Megatron's normalize (w / numpy.sum(w)). */
double mt_np_sum(const double *a, int64_t n);
void mt_np_normalize(double *w, int n);

/* Megatron's build_blending_indices: for s in [0, size) pick the dataset i
 * with the largest w[i] · max(s, 1) − count[i] (first on ties), w as given
 * (normalised by the caller); ds_index[s] = i, ds_sample[s] = count[i]++. */
void mt_blend_build(const double *w, int n, int64_t size, int16_t *ds_index, int64_t *ds_sample);

/* _get_size_per_split_per_dataset: samples a weighted blend of `size`
 * samples takes from a dataset of normalised weight w, ceil(size · w), and
 * what it builds for it, ceil(ceil(size · w) · (1 + surplus)). */
int64_t mt_blend_target_size(double w, int64_t size);
int64_t mt_blend_buffer_size(double w, int64_t size, double surplus);

#endif
