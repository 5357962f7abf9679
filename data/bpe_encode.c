/* data/bpe_encode.c — the byte-level BPE encoder (see bpe.h): added tokens
 * split out leftmost-longest, NFC when the model has it, the pre-tokenizer
 * regex stages, then per piece the merge loop (lowest rank first, ties
 * leftmost; linked list + min-heap, O(n log n)) behind a per-encoder cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/util.h"
#include "data/bpe_internal.h"
#include "data/data_util.h"

static size_t pair_slot(const mt_bpe *b, uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h ^ (h >> 29)) & b->pmask;
  while (b->pkey[i] != 0 && b->pkey[i] != key) i = (i + 1) & b->pmask;
  return i;
}

/* ---- encoding ------------------------------------------------------- */

typedef struct {
  uint32_t rank, pos;
  int32_t a, b;
} heap_ent;

struct mt_bpe_encoder {
  const mt_bpe *bpe;
  pcre2_match_data *md[MT_BPE_MAX_STAGES];
  pcre2_match_context *mctx;
  pcre2_jit_stack *js;
  char *scratch; /* NFC output */
  size_t scratch_cap;
  /* cache: open addressing over entries; keys and values in arenas */
  uint64_t *c_hash; /* 0 = empty */
  uint32_t *c_koff, *c_klen, *c_voff, *c_vlen;
  size_t c_mask, c_count, c_max;
  char *karena;
  size_t klen, kcap;
  int32_t *varena;
  size_t vlen, vcap;
  uint64_t lookups, hits;
  /* merge scratch */
  int32_t *ids, *nxt, *prv;
  heap_ent *heap;
  size_t scap, hcap;
};

mt_bpe_encoder *mt_bpe_encoder_new(const mt_bpe *bpe, size_t cache_entries) {
  mt_bpe_encoder *e = mt_xcalloc(1, sizeof(*e));
  e->bpe = bpe;
  for (int k = 0; k < bpe->n_stages; k++) {
    e->md[k] = pcre2_match_data_create(1, NULL);
    if (!e->md[k]) mt_fatal("PCRE2 allocation failed");
  }
  e->mctx = pcre2_match_context_create(NULL);
  e->js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
  if (!e->mctx || !e->js) mt_fatal("PCRE2 allocation failed");
  pcre2_jit_stack_assign(e->mctx, NULL, e->js);
  e->c_max = cache_entries ? cache_entries : (1u << 18);
  size_t cap = 16;
  while (cap < 2 * e->c_max) cap *= 2;
  e->c_mask = cap - 1;
  e->c_hash = mt_xcalloc(cap, sizeof(uint64_t));
  e->c_koff = mt_xmalloc(cap * sizeof(uint32_t));
  e->c_klen = mt_xmalloc(cap * sizeof(uint32_t));
  e->c_voff = mt_xmalloc(cap * sizeof(uint32_t));
  e->c_vlen = mt_xmalloc(cap * sizeof(uint32_t));
  return e;
}

void mt_bpe_encoder_free(mt_bpe_encoder *e) {
  if (!e) return;
  for (int k = 0; k < e->bpe->n_stages; k++) pcre2_match_data_free(e->md[k]);
  free(e->scratch);
  pcre2_match_context_free(e->mctx);
  pcre2_jit_stack_free(e->js);
  free(e->c_hash);
  free(e->c_koff);
  free(e->c_klen);
  free(e->c_voff);
  free(e->c_vlen);
  free(e->karena);
  free(e->varena);
  free(e->ids);
  free(e->nxt);
  free(e->prv);
  free(e->heap);
  free(e);
}

void mt_bpe_encoder_stats(const mt_bpe_encoder *e, uint64_t *lookups, uint64_t *hits) {
  *lookups = e->lookups;
  *hits = e->hits;
}

static int heap_less(const heap_ent *x, const heap_ent *y) {
  return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(mt_bpe_encoder *e, size_t *n, heap_ent v) {
  if (*n == e->hcap) {
    e->hcap = e->hcap ? 2 * e->hcap : 64;
    e->heap = mt_xrealloc(e->heap, e->hcap * sizeof(heap_ent));
  }
  size_t i = (*n)++;
  while (i > 0 && heap_less(&v, &e->heap[(i - 1) / 2])) {
    e->heap[i] = e->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  e->heap[i] = v;
}

static heap_ent heap_pop(mt_bpe_encoder *e, size_t *n) {
  heap_ent top = e->heap[0], last = e->heap[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && heap_less(&e->heap[c + 1], &e->heap[c])) c++;
    if (!heap_less(&e->heap[c], &last)) break;
    e->heap[i] = e->heap[c];
    i = c;
  }
  if (*n > 0) e->heap[i] = last;
  return top;
}

/* Push the pair starting at node i (if it merges). */
static void push_pair(mt_bpe_encoder *e, size_t *hn, int32_t i) {
  const mt_bpe *b = e->bpe;
  int32_t j = e->nxt[i];
  if (i < 0 || j < 0) return;
  uint64_t key = ((uint64_t)(uint32_t)e->ids[i] << 32 | (uint32_t)e->ids[j]) + 1;
  size_t s = pair_slot(b, key);
  if (b->pkey[s] == 0) return;
  heap_ent h = {b->prank[s], (uint32_t)i, e->ids[i], e->ids[j]};
  heap_push(e, hn, h);
}

/* BPE of one piece of n bytes; appends ids to out. */
static void bpe_piece(mt_bpe_encoder *e, const unsigned char *s, size_t n, mt_tokvec *out) {
  const mt_bpe *b = e->bpe;
  if (n == 1) {
    mt_tokvec_push(out, b->byte_id[s[0]]);
    return;
  }
  if (b->ignore_merges) { /* Hugging Face BPE ignore_merges: a whole-word token wins */
    int id = mt_bpe_vmap_find(b, (const char *)s, n);
    if (id >= 0) {
      mt_tokvec_push(out, id);
      return;
    }
  }
  if (n > e->scap) {
    e->scap = n;
    e->ids = mt_xrealloc(e->ids, n * sizeof(int32_t));
    e->nxt = mt_xrealloc(e->nxt, n * sizeof(int32_t));
    e->prv = mt_xrealloc(e->prv, n * sizeof(int32_t));
  }
  for (size_t i = 0; i < n; i++) {
    e->ids[i] = b->byte_id[s[i]];
    e->nxt[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
    e->prv[i] = (int32_t)i - 1;
  }
  size_t hn = 0;
  for (size_t i = 0; i + 1 < n; i++) push_pair(e, &hn, (int32_t)i);
  while (hn > 0) {
    heap_ent h = heap_pop(e, &hn);
    int32_t i = (int32_t)h.pos, j = e->nxt[i];
    if (e->ids[i] != h.a || j < 0 || e->ids[j] != h.b) continue; /* stale */
    uint64_t key = ((uint64_t)(uint32_t)h.a << 32 | (uint32_t)h.b) + 1;
    e->ids[i] = b->pres[pair_slot(b, key)];
    e->ids[j] = -1;
    int32_t k = e->nxt[j];
    e->nxt[i] = k;
    if (k >= 0) e->prv[k] = i;
    if (e->prv[i] >= 0) push_pair(e, &hn, e->prv[i]);
    push_pair(e, &hn, i);
  }
  for (int32_t i = 0; i >= 0; i = e->nxt[i]) mt_tokvec_push(out, e->ids[i]);
}

static void cache_clear(mt_bpe_encoder *e) {
  memset(e->c_hash, 0, (e->c_mask + 1) * sizeof(uint64_t));
  e->c_count = e->klen = e->vlen = 0;
}

static void encode_piece(mt_bpe_encoder *e, const char *s, size_t n, mt_tokvec *out) {
  if (n == 0) return;
  if (n > 256) { /* long pieces are rare: no caching */
    bpe_piece(e, (const unsigned char *)s, n, out);
    return;
  }
  e->lookups++;
  uint64_t h = mt_hash_bytes(s, n, 0) | 1;
  size_t i = (size_t)h & e->c_mask;
  for (; e->c_hash[i]; i = (i + 1) & e->c_mask) {
    if (e->c_hash[i] == h && e->c_klen[i] == n && memcmp(e->karena + e->c_koff[i], s, n) == 0) {
      e->hits++;
      const int32_t *v = e->varena + e->c_voff[i];
      for (uint32_t k = 0; k < e->c_vlen[i]; k++) mt_tokvec_push(out, v[k]);
      return;
    }
  }
  size_t before = out->n;
  bpe_piece(e, (const unsigned char *)s, n, out);
  size_t nv = out->n - before;
  if (e->c_count >= e->c_max || e->klen + n > (1u << 30)) {
    cache_clear(e);
    i = (size_t)h & e->c_mask;
  }
  if (e->klen + n > e->kcap) {
    e->kcap = e->kcap ? 2 * e->kcap : (1u << 20);
    while (e->klen + n > e->kcap) e->kcap *= 2;
    e->karena = mt_xrealloc(e->karena, e->kcap);
  }
  if (e->vlen + nv > e->vcap) {
    e->vcap = e->vcap ? 2 * e->vcap : (1u << 18);
    while (e->vlen + nv > e->vcap) e->vcap *= 2;
    e->varena = mt_xrealloc(e->varena, e->vcap * sizeof(int32_t));
  }
  memcpy(e->karena + e->klen, s, n);
  memcpy(e->varena + e->vlen, out->data + before, nv * sizeof(int32_t));
  e->c_hash[i] = h;
  e->c_koff[i] = (uint32_t)e->klen;
  e->c_klen[i] = (uint32_t)n;
  e->c_voff[i] = (uint32_t)e->vlen;
  e->c_vlen[i] = (uint32_t)nv;
  e->klen += n;
  e->vlen += nv;
  e->c_count++;
}

static char *scratch(mt_bpe_encoder *e, size_t n) {
  if (n > e->scratch_cap) {
    e->scratch_cap = n > 2 * e->scratch_cap ? n : 2 * e->scratch_cap;
    e->scratch = mt_xrealloc(e->scratch, e->scratch_cap);
  }
  return e->scratch;
}

/* Pre-tokenizer stage k over text[0, len): its matches and the gaps between
 * them go to stage k + 1; after the last stage each piece is merged. Bytes
 * the regex cannot match (invalid UTF-8, PCRE2_MATCH_INVALID_UTF) form gaps,
 * so every byte reaches the model. */
static void stage(mt_bpe_encoder *e, int k, const char *text, size_t len, mt_tokvec *out) {
  const mt_bpe *b = e->bpe;
  if (len == 0) return;
  if (k == b->n_stages) {
    if (b->prefix_space && text[0] != ' ') { /* ByteLevel add_prefix_space */
      char *p = mt_xmalloc(len + 1);
      p[0] = ' ';
      memcpy(p + 1, text, len);
      encode_piece(e, p, len + 1, out);
      free(p);
    } else {
      encode_piece(e, text, len, out);
    }
    return;
  }
  size_t start = 0;
  while (start < len) {
    int rc = b->jit[k] ? pcre2_jit_match(b->re[k], (PCRE2_SPTR)text, len, start, 0, e->md[k], e->mctx)
                       : pcre2_match(b->re[k], (PCRE2_SPTR)text, len, start, 0, e->md[k], e->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) {
      stage(e, k + 1, text + start, len - start, out);
      break;
    }
    if (rc < 0) mt_fatal("PCRE2 match failed with code %d at byte %zu", rc, start);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md[k]);
    size_t m0 = ov[0], m1 = ov[1];
    if (m0 < start) mt_fatal("pre-tokenizer regex matched before its start");
    if (m1 == m0) { /* an empty match splits nothing (Hugging Face skips it) */
      if (m0 >= len) {
        stage(e, k + 1, text + start, len - start, out);
        break;
      }
      size_t step = 1; /* resume after the next character */
      while (m0 + step < len && ((unsigned char)text[m0 + step] & 0xC0) == 0x80) step++;
      stage(e, k + 1, text + start, m0 + step - start, out);
      start = m0 + step;
      continue;
    }
    if (m0 > start) stage(e, k + 1, text + start, m0 - start, out);
    stage(e, k + 1, text + m0, m1 - m0, out);
    start = m1;
  }
}

/* NFC of text[0, len) into the encoder's scratch (valid UTF-8 runs
 * normalised, invalid bytes kept); returns the new length. */
static size_t nfc(mt_bpe_encoder *e, const char *text, size_t len) {
  size_t cap = len + 16, n = 0;
  char *outb = mt_xmalloc(cap);
  size_t i = 0;
  while (i < len) {
    size_t j = i; /* the valid run [i, j) */
    while (j < len) {
      utf8proc_int32_t cp;
      utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)text + j,
                                            (utf8proc_ssize_t)(len - j), &cp);
      if (r <= 0) break;
      j += (size_t)r;
    }
    if (j > i) {
      utf8proc_uint8_t *d = NULL;
      utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(j - i),
                                        &d, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
      if (r < 0) mt_fatal("utf8proc NFC failed: %s", utf8proc_errmsg(r));
      if (n + (size_t)r > cap) {
        while (n + (size_t)r > cap) cap *= 2;
        outb = mt_xrealloc(outb, cap);
      }
      memcpy(outb + n, d, (size_t)r);
      n += (size_t)r;
      free(d);
      i = j;
    }
    if (i < len && j == i) { /* one invalid byte */
      if (n + 1 > cap) outb = mt_xrealloc(outb, cap *= 2);
      outb[n++] = text[i++];
    }
  }
  char *s = scratch(e, n + 1);
  memcpy(s, outb, n);
  free(outb);
  return n;
}

/* A stretch of valid UTF-8 (or ASCII only). */
static void valid_run(mt_bpe_encoder *e, const char *text, size_t len, mt_tokvec *out) {
  if (len == 0) return;
  if (e->bpe->nfc) {
    size_t i = 0;
    while (i < len && (unsigned char)text[i] < 0x80) i++;
    if (i < len) { /* not all ASCII (ASCII is NFC) */
      size_t n = nfc(e, text, len);
      char *copy = mt_xmalloc(n ? n : 1); /* the stages may reuse the scratch */
      memcpy(copy, e->scratch, n);
      stage(e, 0, copy, n, out);
      free(copy);
      return;
    }
  }
  stage(e, 0, text, len, out);
}

/* Text between added tokens: valid UTF-8 stretches are normalised and
 * pre-tokenized as the reference does; a byte that does not start a valid
 * UTF-8 sequence (utf8proc's rules: no overlongs, surrogates or code points
 * past U+10FFFF) is its own piece, its byte token. Hugging Face only sees
 * valid text, so this is megatrain's extension: decode(encode(x)) == x. */
static void segment(mt_bpe_encoder *e, const char *text, size_t len, mt_tokvec *out) {
  size_t start = 0, i = 0;
  while (i < len) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    utf8proc_int32_t cp;
    utf8proc_ssize_t r =
        utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &cp);
    if (r > 0) {
      i += (size_t)r;
      continue;
    }
    valid_run(e, text + start, i - start, out);
    mt_tokvec_push(out, e->bpe->byte_id[c]);
    start = ++i;
  }
  valid_run(e, text + start, len - start, out);
}

static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

size_t mt_bpe_encode(mt_bpe_encoder *e, const char *text, size_t len, mt_tokvec *out) {
  const mt_bpe *b = e->bpe;
  size_t n0 = out->n;
  if (b->n_added == 0) {
    segment(e, text, len, out);
    return out->n - n0;
  }
  const unsigned char *t = (const unsigned char *)text;
  size_t seg = 0, i = 0;
  while (i < len) {
    int32_t best = -1;
    size_t best_end = 0;
    if (b->first[t[i]]) { /* the longest added token starting at i */
      int32_t k = 0;
      for (size_t j = i; j < len; j++) {
        int32_t c = b->trie[k].child;
        while (c >= 0 && b->trie[c].c != t[j]) c = b->trie[c].sib;
        if (c < 0) break;
        k = c;
        if (b->trie[k].id >= 0) {
          best = b->trie[k].id;
          best_end = j + 1;
        }
      }
    }
    if (best < 0) {
      i++;
      continue;
    }
    size_t seg_end = i;
    if (b->strip[best] & 1)
      while (seg_end > seg && is_ws(t[seg_end - 1])) seg_end--;
    segment(e, text + seg, seg_end - seg, out);
    mt_tokvec_push(out, best);
    i = best_end;
    if (b->strip[best] & 2)
      while (i < len && is_ws(t[i])) i++;
    seg = i;
  }
  segment(e, text + seg, len - seg, out);
  return out->n - n0;
}
