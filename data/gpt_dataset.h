/* data/gpt_dataset.h — Megatron-core's GPTDataset and BlendedDataset over
 * indexed data, sample for sample (data/gpt_index.h).
 *
 * Documents of each source are split train/valid/test by the `split`
 * weights ("969,30,1", by documents, Megatron's split matrix); within a
 * split documents are concatenated (each already ends with EOD when
 * preprocessed with --append-eod) and cut into samples of seq_length + 1
 * tokens that cross document boundaries; NumPy's RandomState(seed) shuffles
 * them as Megatron does and epochs repeat until num_samples[split] samples
 * exist. Several sources (or one given with a weight) form Megatron's
 * BlendedDataset. The samples are a pure function of (data files, split,
 * seq_length, seed, num_samples, weights).
 *
 * A global batch of iteration `it` is samples [it * gbs, (it + 1) * gbs) of
 * the split; data-parallel rank r takes the contiguous slice
 * [r * gbs / dp, (r + 1) * gbs / dp) of it, so dp never changes which samples
 * form a global batch (Megatron's MegatronPretrainingSampler).
 */
#ifndef MT_DATA_GPT_DATASET_H
#define MT_DATA_GPT_DATASET_H

#include <stddef.h>
#include <stdint.h>

enum { MT_SPLIT_TRAIN = 0, MT_SPLIT_VALID = 1, MT_SPLIT_TEST = 2, MT_NUM_SPLITS = 3 };

typedef struct mt_gpt_dataset mt_gpt_dataset;

typedef struct {
  int n_paths;
  const char *const *paths;  /* prefixes of .bin/.idx pairs, or llm.c .bin shards */
  const double *weights;     /* blend weights, n_paths entries (used when weighted) */
  int weighted;              /* Megatron's weighted --data-path form: BlendedDataset of
                                ceil(n·w) samples per source; 0 = unweighted: one source is
                                a plain GPTDataset, several build one epoch each and blend
                                by their sizes */
  double mid_level_dataset_surplus; /* Megatron's --mid-level-dataset-surplus (0.005) */
  int no_extra_token;        /* 1 = add_extra_token_to_sequence False: samples of
                                seq_length tokens (Megatron's default True: seq_length + 1) */
  const char *split;         /* "969,30,1" */
  int seq_length;
  uint64_t seed;             /* RandomState seed: < 2^32 */
  int64_t num_samples[MT_NUM_SPLITS]; /* samples each split must supply */
  const char *cache_dir;     /* where to cache index files (NULL = no cache) */
  int64_t vocab_size;        /* > 0: open fails when a token id >= vocab_size */
} mt_gpt_dataset_options;

/* Open the data, build (or load from cache) the sample index of every split
 * with num_samples > 0. Returns NULL and writes a one-line message naming the
 * file into err on bad input (missing/truncated/corrupt files, token id >=
 * vocab_size, an empty train split). An empty valid/test split is not an
 * error: its num_samples is then 0. Single-threaded; docs/data.md describes
 * the index and the cache files (cache_dir/gpt_index_<key>.bin). */
mt_gpt_dataset *mt_gpt_dataset_open(const mt_gpt_dataset_options *opt, char *err, size_t errlen);

/* Samples available in a split (>= requested num_samples for that split). */
int64_t mt_gpt_dataset_num_samples(const mt_gpt_dataset *ds, int split);

/* Vocabulary bound check helper: largest token id in the data (or -1). */
int64_t mt_gpt_dataset_max_token(const mt_gpt_dataset *ds);

/* Copy sample `idx` (0-based within the split, taken modulo its size) as
 * seq_length + 1 int32 token ids (seq_length with no_extra_token) into
 * tokens_out. Thread-safe (read-only). */
void mt_gpt_dataset_get(const mt_gpt_dataset *ds, int split, int64_t idx, int32_t *tokens_out);

void mt_gpt_dataset_close(mt_gpt_dataset *ds);

/* Sample id (within the split) of micro-sample j of data-parallel rank r at
 * iteration `it`: it * gbs + r * (gbs / dp) + j, 0 <= j < gbs / dp. After
 * resuming from a checkpoint with consumed_samples = it * gbs the same ids
 * follow, whatever dp is. */
static inline int64_t mt_gpt_sample_id(int64_t it, int64_t gbs, int dp, int r, int64_t j) {
  return it * gbs + (int64_t)r * (gbs / dp) + j;
}

#endif
