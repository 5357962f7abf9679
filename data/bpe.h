/* data/bpe.h — byte-level BPE tokenizers (Radford et al. 2019, §2.2): GPT-2's
 * files (mt_bpe_load) and Hugging Face tokenizer.json files of the Llama 3,
 * Qwen2/3, DeepSeek-V3, GPT-NeoX kind (mt_bpe_load_hf, data/hf_bpe.c).
 *
 * Text is cut into pre-tokens by regexes (PCRE2, UTF + Unicode properties,
 * JIT), each pre-token's bytes start as single-byte tokens and the adjacent
 * pair of lowest merge rank is merged until none is left (ties: leftmost).
 * GPT-2: one regex, tiktoken's rule (a pair merges when its concatenation is
 * a ranked token), tested identical to tiktoken `gpt2`; "<|endoftext|>" in
 * text is ordinary text (encode_ordinary). tokenizer.json: its added tokens
 * are matched in the text first (leftmost-longest), the rest NFC-normalised
 * when the file says so and cut by its Split regexes in sequence; merges are
 * the listed pairs (Hugging Face's rule), `ignore_merges` honoured. Invalid
 * UTF-8 never aborts: bytes the regex cannot match (PCRE2_MATCH_INVALID_UTF)
 * form their own pre-token and are encoded byte-level, so decode(encode(x))
 * == x for any bytes (NFC(x) with an NFC normalizer).
 *
 * mt_bpe is read-only after loading and may be shared by threads; each thread
 * uses its own mt_bpe_encoder (regex match data + pre-token cache).
 */
#ifndef MT_DATA_BPE_H
#define MT_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_bpe mt_bpe;
typedef struct mt_bpe_encoder mt_bpe_encoder;

/* Growable vector of int32 token ids (owned by the caller; free with
 * mt_tokvec_free). */
typedef struct {
  int32_t *data;
  size_t n, cap;
} mt_tokvec;

void mt_tokvec_push(mt_tokvec *v, int32_t x);
void mt_tokvec_free(mt_tokvec *v);

/* Load the vocabulary (GPT-2 encoder.json: {"token": id}, parsed with cJSON)
 * and the merges (vocab.bpe: "#version" line then "a b" per line, rank = line
 * order). Returns NULL and a one-line message naming the file in err on
 * missing/unreadable/malformed files. */
mt_bpe *mt_bpe_load(const char *vocab_path, const char *merges_path, char *err, size_t errlen);
void mt_bpe_free(mt_bpe *bpe);

/* Load a Hugging Face tokenizer.json (path to the file or to a folder
 * holding it; tokenizer_config.json beside it gives bos/eos and, for
 * LlamaTokenizer(Fast), add_bos_token/add_eos_token). Byte-level BPE only;
 * anything else is refused with a message naming the field. */
mt_bpe *mt_bpe_load_hf(const char *path, char *err, size_t errlen);

/* Number of ids (max id + 1; 50257 for GPT-2; added tokens included). */
int mt_bpe_vocab_size(const mt_bpe *bpe);
/* End-of-document id: "<|endoftext|>" for GPT-2 (50256), the eos_token of
 * tokenizer_config.json for tokenizer.json; -1 when unknown. */
int mt_bpe_eod(const mt_bpe *bpe);
/* The post-processor template for one sequence (Hugging Face
 * TemplateProcessing, or LlamaTokenizerFast's add_bos/add_eos): ids before
 * and after the text. Returns n_prefix + n_suffix. */
int mt_bpe_template(const mt_bpe *bpe, const int32_t **prefix, int *n_prefix,
                    const int32_t **suffix, int *n_suffix);

/* Bytes of token `id` (not NUL-terminated) and their count in *len; NULL for
 * ids outside the vocabulary. */
const char *mt_bpe_token_bytes(const mt_bpe *bpe, int32_t id, size_t *len);

/* Per-thread encoder. cache_entries bounds the pre-token cache (0 = default
 * 1<<18); the cache is cleared when full. */
mt_bpe_encoder *mt_bpe_encoder_new(const mt_bpe *bpe, size_t cache_entries);
void mt_bpe_encoder_free(mt_bpe_encoder *enc);

/* Append the ids of text[0, len) (any bytes) to out; returns the number of ids
 * appended. */
size_t mt_bpe_encode(mt_bpe_encoder *enc, const char *text, size_t len, mt_tokvec *out);

/* Cache statistics since creation: lookups and hits. */
void mt_bpe_encoder_stats(const mt_bpe_encoder *enc, uint64_t *lookups, uint64_t *hits);

/* Decode ids into a malloc'ed byte string (NUL-terminated; length in *len).
 * Ids outside the vocabulary are written as "<|bad:ID|>". */
char *mt_bpe_decode(const mt_bpe *bpe, const int32_t *ids, size_t n, size_t *len);

#endif
