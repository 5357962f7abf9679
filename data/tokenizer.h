/* data/tokenizer.h — the tokenizer a config names, under Megatron's
 * `tokenizer_type` values (megatron/core/tokenizers, build_tokenizer):
 *   GPT2BPETokenizer        GPT-2 encoder.json + vocab.bpe (data/bpe.h)
 *   HuggingFaceTokenizer    a tokenizer.json byte-level BPE (data/bpe.h)
 *   SentencePieceTokenizer  a SentencePiece tokenizer.model (data/sp_shim.h)
 * Encoding follows Megatron's text_to_ids for each: GPT-2 and SentencePiece
 * give the plain ids; HuggingFaceTokenizer adds the post-processor's
 * template (BOS for Llama 3 / DeepSeek-V3) unless include_special_tokens is
 * off (Megatron's --tokenizer-hf-no-include-special-tokens). The EOD id is
 * Megatron's `eod`: <|endoftext|> for GPT-2, the EOS token otherwise.
 * Read-only after loading; each thread encodes with its own encoder. */
#ifndef MT_DATA_TOKENIZER_H
#define MT_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "data/bpe.h"

typedef enum { MT_TOK_GPT2BPE = 0, MT_TOK_HF = 1, MT_TOK_SENTENCEPIECE = 2 } mt_tokenizer_type;

typedef struct {
  const char *type;       /* Megatron's name, NULL = GPT2BPETokenizer */
  const char *model;      /* tokenizer_model: tokenizer.json / its folder / tokenizer.model */
  const char *vocab_file; /* GPT-2 files */
  const char *merge_file;
} mt_tokenizer_spec;

typedef struct mt_tokenizer mt_tokenizer;
typedef struct mt_tok_encoder mt_tok_encoder;

/* Parse a type name; -1 for an unknown one. */
int mt_tokenizer_type_parse(const char *name);

/* Load; NULL and a one-line message naming the file or the missing option. */
mt_tokenizer *mt_tokenizer_load(const mt_tokenizer_spec *spec, char *err, size_t errlen);
void mt_tokenizer_free(mt_tokenizer *t);

mt_tokenizer_type mt_tokenizer_kind(const mt_tokenizer *t);
const char *mt_tokenizer_name(const mt_tokenizer *t);
int mt_tokenizer_vocab_size(const mt_tokenizer *t);
int mt_tokenizer_eod(const mt_tokenizer *t); /* -1 when the tokenizer has none */

/* The byte-level BPE of GPT2BPETokenizer / HuggingFaceTokenizer, NULL for
 * SentencePiece. */
const mt_bpe *mt_tokenizer_bpe(const mt_tokenizer *t);

mt_tok_encoder *mt_tok_encoder_new(const mt_tokenizer *t);
void mt_tok_encoder_free(mt_tok_encoder *e);

/* Append the ids of text[0, len) (any bytes) to out, without template;
 * returns how many. */
size_t mt_tok_encode(mt_tok_encoder *e, const char *text, size_t len, mt_tokvec *out);
/* Megatron's text_to_ids for a document: the template around the text for
 * HuggingFaceTokenizer when with_template, plain ids otherwise. */
size_t mt_tok_encode_doc(mt_tok_encoder *e, const char *text, size_t len, int with_template,
                         mt_tokvec *out);

/* Piece-cache lookups and hits (byte-level BPE; 0 for SentencePiece). */
void mt_tok_encoder_stats(const mt_tok_encoder *e, uint64_t *lookups, uint64_t *hits);

/* Decode ids into a malloc'ed NUL-terminated string (length in *len). Ids
 * outside the vocabulary decode as "<|bad:ID|>". */
char *mt_tokenizer_decode(const mt_tokenizer *t, const int32_t *ids, size_t n, size_t *len);

#endif
