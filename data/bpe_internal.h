/* data/bpe_internal.h — the byte-level BPE model shared by its loaders:
 * data/bpe_gpt2.c (GPT-2 encoder.json + vocab.bpe) and data/hf_bpe.c
 * (Hugging Face tokenizer.json). Private to data/bpe*.c and data/hf_bpe*.c. */
#ifndef MT_DATA_BPE_INTERNAL_H
#define MT_DATA_BPE_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "data/bpe.h"

enum { MT_BPE_MAX_STAGES = 8 };

typedef struct { /* token bytes -> id, open addressing (-1 = empty) */
  int32_t *slot;
  size_t mask;
} mt_bpe_vmap;

typedef struct { /* node of the added-token trie (first-child / next-sibling) */
  int32_t child, sib, id;
  unsigned char c;
} mt_bpe_trie_node;

struct mt_bpe {
  int n_ids;
  char *bytes;      /* all token bytes (raw bytes; added tokens: their text) */
  int64_t *off;     /* [n_ids] offset into bytes, -1 = id unused */
  int32_t *len;     /* [n_ids] */
  int32_t byte_id[256];
  int eod, bos;     /* -1 when unknown */
  uint64_t *pkey;   /* pair table: (a << 32 | b) + 1, 0 = empty */
  uint32_t *prank;
  int32_t *pres;
  size_t pmask;
  mt_bpe_vmap vm;   /* model vocabulary bytes -> id (not the added tokens) */
  /* pre-tokenizer: stage k cuts each piece of stage k-1 into its matches and
   * the gaps between them (Hugging Face Split, behavior Isolated) */
  int n_stages;
  pcre2_code *re[MT_BPE_MAX_STAGES];
  int jit[MT_BPE_MAX_STAGES];
  int prefix_space;  /* ByteLevel add_prefix_space: a space before each piece */
  int ignore_merges; /* a piece that is a vocabulary token is that token */
  int nfc;           /* NFC normalizer (utf8proc) on the text between added tokens */
  /* added tokens, matched leftmost-longest in the raw text */
  int n_nodes, cap_nodes;
  mt_bpe_trie_node *trie; /* [0] = root */
  unsigned char first[256];
  unsigned char *strip;   /* [n_ids] bit 0 lstrip, bit 1 rstrip */
  int n_added;
  /* post-processor template: prefix ids + text + suffix ids */
  int n_prefix, n_suffix;
  int32_t prefix[4], suffix[4];
};

/* Allocate the id tables for n_ids ids with `total` bytes of token text. */
void mt_bpe_alloc_ids(mt_bpe *b, int n_ids, size_t total);
/* Build b->vm over the ids set so far (first id wins for equal bytes). */
void mt_bpe_vmap_build(mt_bpe *b);
int mt_bpe_vmap_find(const mt_bpe *b, const char *s, size_t n);
/* Size the pair table for `npairs` pairs; add a pair (a, b) -> merged id at
 * `rank` (an existing pair keeps its lower rank). */
void mt_bpe_pairs_init(mt_bpe *b, size_t npairs);
void mt_bpe_pairs_add(mt_bpe *b, int32_t a, int32_t bb, uint32_t rank, int32_t merged);
/* Fill byte_id[] from the vocabulary; -1 with a message naming `what` when a
 * byte has no token. */
int mt_bpe_bytes_init(mt_bpe *b, const char *what, char *err, size_t errlen);
/* Compile a pre-tokenizer stage (PCRE2, UTF + UCP + MATCH_INVALID_UTF, JIT
 * when available). -1 with PCRE2's message and offset in err. */
int mt_bpe_add_stage(mt_bpe *b, const char *pattern, char *err, size_t errlen);
/* Register added token `id` (its text already in bytes/off/len) in the trie. */
void mt_bpe_add_token(mt_bpe *b, int32_t id, int lstrip, int rstrip);

/* GPT-2's byte -> unicode alphabet (bytes_to_unicode) and its inverse;
 * mt_bpe_alphabet_to_bytes maps a UTF-8 string of that alphabet back to raw
 * bytes (-1 when a code point is outside it). */
void mt_bpe_byte_alphabet(uint32_t b2u[256], int16_t u2b[512]);
long mt_bpe_alphabet_to_bytes(const char *s, size_t n, const int16_t *u2b, char *out);

#endif
