/* data/bpe.c — byte-level BPE: the model tables, the pre-tokenizer stages,
 * added tokens, and the encoder (see bpe.h, bpe_internal.h). Loaders:
 * bpe_gpt2.c (GPT-2 files), hf_bpe.c (tokenizer.json).
 *
 * The encoder is data/bpe_encode.c.
 */
#include "data/bpe_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/data_util.h"

void mt_tokvec_push(mt_tokvec *v, int32_t x) {
  if (v->n == v->cap) {
    v->cap = v->cap ? v->cap * 2 : 1024;
    v->data = mt_xrealloc(v->data, v->cap * sizeof(int32_t));
  }
  v->data[v->n++] = x;
}

void mt_tokvec_free(mt_tokvec *v) {
  free(v->data);
  v->data = NULL;
  v->n = v->cap = 0;
}

/* ---- model tables ------------------------------------------------------ */

void mt_bpe_alloc_ids(mt_bpe *b, int n_ids, size_t total) {
  b->n_ids = n_ids;
  b->bytes = mt_xmalloc(total + 1);
  b->off = mt_xmalloc(sizeof(int64_t) * (size_t)n_ids);
  b->len = mt_xcalloc((size_t)n_ids, sizeof(int32_t));
  b->strip = mt_xcalloc((size_t)n_ids, 1);
  for (int i = 0; i < n_ids; i++) b->off[i] = -1;
  b->eod = b->bos = -1;
}

int mt_bpe_vmap_find(const mt_bpe *b, const char *s, size_t n) {
  size_t i = mt_hash_bytes(s, n, 0) & b->vm.mask;
  for (;; i = (i + 1) & b->vm.mask) {
    int32_t id = b->vm.slot[i];
    if (id < 0) return -1;
    if ((size_t)b->len[id] == n && memcmp(b->bytes + b->off[id], s, n) == 0) return id;
  }
}

void mt_bpe_vmap_build(mt_bpe *b) {
  size_t cap = 1024;
  while (cap < 2 * (size_t)b->n_ids) cap *= 2;
  free(b->vm.slot);
  b->vm.mask = cap - 1;
  b->vm.slot = mt_xmalloc(cap * sizeof(int32_t));
  for (size_t i = 0; i < cap; i++) b->vm.slot[i] = -1;
  for (int id = 0; id < b->n_ids; id++) {
    if (b->off[id] < 0) continue;
    const char *s = b->bytes + b->off[id];
    size_t n = (size_t)b->len[id];
    if (mt_bpe_vmap_find(b, s, n) >= 0) continue;
    size_t i = mt_hash_bytes(s, n, 0) & b->vm.mask;
    while (b->vm.slot[i] >= 0) i = (i + 1) & b->vm.mask;
    b->vm.slot[i] = id;
  }
}

static size_t pair_slot(const mt_bpe *b, uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h ^ (h >> 29)) & b->pmask;
  while (b->pkey[i] != 0 && b->pkey[i] != key) i = (i + 1) & b->pmask;
  return i;
}

void mt_bpe_pairs_init(mt_bpe *b, size_t npairs) {
  size_t cap = 1024;
  while (cap < 2 * npairs + 2) cap *= 2;
  b->pmask = cap - 1;
  b->pkey = mt_xcalloc(cap, sizeof(uint64_t));
  b->prank = mt_xmalloc(cap * sizeof(uint32_t));
  b->pres = mt_xmalloc(cap * sizeof(int32_t));
}

void mt_bpe_pairs_add(mt_bpe *b, int32_t a, int32_t bb, uint32_t rank, int32_t merged) {
  uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)bb) + 1;
  size_t i = pair_slot(b, key);
  if (b->pkey[i] == key && b->prank[i] <= rank) return;
  b->pkey[i] = key;
  b->prank[i] = rank;
  b->pres[i] = merged;
}

int mt_bpe_bytes_init(mt_bpe *b, const char *what, char *err, size_t errlen) {
  for (int c = 0; c < 256; c++) {
    char ch = (char)c;
    b->byte_id[c] = mt_bpe_vmap_find(b, &ch, 1);
    if (b->byte_id[c] < 0) {
      snprintf(err, errlen, "%s: byte 0x%02x has no token (not a byte-level BPE vocabulary)",
               what, c);
      return -1;
    }
  }
  return 0;
}

int mt_bpe_add_stage(mt_bpe *b, const char *pattern, char *err, size_t errlen) {
  if (b->n_stages == MT_BPE_MAX_STAGES) {
    snprintf(err, errlen, "more than %d pre-tokenizer regexes", MT_BPE_MAX_STAGES);
    return -1;
  }
  int ec;
  PCRE2_SIZE eo;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(ec, msg, sizeof(msg));
    snprintf(err, errlen, "regex does not compile at offset %zu: %s", (size_t)eo, (char *)msg);
    return -1;
  }
  b->jit[b->n_stages] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
  b->re[b->n_stages++] = re;
  return 0;
}

static int32_t trie_node(mt_bpe *b, int32_t parent, unsigned char c) {
  for (int32_t k = b->trie[parent].child; k >= 0; k = b->trie[k].sib)
    if (b->trie[k].c == c) return k;
  if (b->n_nodes == b->cap_nodes) {
    b->cap_nodes = b->cap_nodes ? 2 * b->cap_nodes : 256;
    b->trie = mt_xrealloc(b->trie, (size_t)b->cap_nodes * sizeof(mt_bpe_trie_node));
  }
  int32_t k = b->n_nodes++;
  b->trie[k] = (mt_bpe_trie_node){.child = -1, .sib = b->trie[parent].child, .id = -1, .c = c};
  b->trie[parent].child = k;
  return k;
}

void mt_bpe_add_token(mt_bpe *b, int32_t id, int lstrip, int rstrip) {
  if (b->n_nodes == 0) {
    b->cap_nodes = 256;
    b->trie = mt_xmalloc((size_t)b->cap_nodes * sizeof(mt_bpe_trie_node));
    b->trie[0] = (mt_bpe_trie_node){.child = -1, .sib = -1, .id = -1, .c = 0};
    b->n_nodes = 1;
  }
  const unsigned char *s = (const unsigned char *)b->bytes + b->off[id];
  int32_t k = 0;
  for (int32_t i = 0; i < b->len[id]; i++) k = trie_node(b, k, s[i]);
  if (b->trie[k].id < 0) b->trie[k].id = id;
  b->first[s[0]] = 1;
  b->strip[id] = (unsigned char)((lstrip ? 1 : 0) | (rstrip ? 2 : 0));
  b->n_added++;
}

void mt_bpe_byte_alphabet(uint32_t b2u[256], int16_t u2b[512]) {
  int n = 0;
  for (int i = 0; i < 512; i++) u2b[i] = -1;
  for (int c = 0; c < 256; c++) {
    int printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
    b2u[c] = printable ? (uint32_t)c : (uint32_t)(256 + n++);
    u2b[b2u[c]] = (int16_t)c;
  }
}

long mt_bpe_alphabet_to_bytes(const char *str, size_t len, const int16_t *u2b, char *out) {
  const unsigned char *p = (const unsigned char *)str, *end = p + len;
  long n = 0;
  while (p < end) {
    uint32_t cp;
    if (p[0] < 0x80) {
      cp = p[0];
      p += 1;
    } else if ((p[0] & 0xE0) == 0xC0 && p + 1 < end && (p[1] & 0xC0) == 0x80) {
      cp = ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
      p += 2;
    } else {
      return -1;
    }
    if (cp >= 512 || u2b[cp] < 0) return -1;
    out[n++] = (char)u2b[cp];
  }
  return n;
}

void mt_bpe_free(mt_bpe *b) {
  if (!b) return;
  free(b->bytes);
  free(b->off);
  free(b->len);
  free(b->strip);
  free(b->pkey);
  free(b->prank);
  free(b->pres);
  free(b->vm.slot);
  free(b->trie);
  for (int k = 0; k < b->n_stages; k++) pcre2_code_free(b->re[k]);
  free(b);
}

int mt_bpe_vocab_size(const mt_bpe *b) { return b->n_ids; }
int mt_bpe_eod(const mt_bpe *b) { return b->eod; }

const char *mt_bpe_token_bytes(const mt_bpe *b, int32_t id, size_t *len) {
  if (id < 0 || id >= b->n_ids || b->off[id] < 0) return NULL;
  *len = (size_t)b->len[id];
  return b->bytes + b->off[id];
}

char *mt_bpe_decode(const mt_bpe *b, const int32_t *ids, size_t n, size_t *len) {
  size_t cap = 64 + n * 4, pos = 0;
  char *out = mt_xmalloc(cap);
  for (size_t i = 0; i < n; i++) {
    char tmp[32];
    size_t l;
    const char *s = mt_bpe_token_bytes(b, ids[i], &l);
    if (!s) {
      l = (size_t)snprintf(tmp, sizeof(tmp), "<|bad:%d|>", ids[i]);
      s = tmp;
    }
    if (pos + l + 1 > cap) {
      while (pos + l + 1 > cap) cap *= 2;
      out = mt_xrealloc(out, cap);
    }
    memcpy(out + pos, s, l);
    pos += l;
  }
  out[pos] = 0;
  if (len) *len = pos;
  return out;
}

int mt_bpe_template(const mt_bpe *b, const int32_t **prefix, int *n_prefix,
                    const int32_t **suffix, int *n_suffix) {
  *prefix = b->prefix;
  *n_prefix = b->n_prefix;
  *suffix = b->suffix;
  *n_suffix = b->n_suffix;
  return b->n_prefix + b->n_suffix;
}

