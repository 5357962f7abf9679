/* data/bpe.c — GPT-2 byte-level BPE tokenizer (see bpe.h).
 *
 * Load: encoder.json keys are strings over GPT-2's byte→unicode alphabet
 * (printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100..);
 * they are mapped back to raw bytes. Merge line k ("a b") gives the token a+b
 * rank k. The pair table maps (left id, right id) -> (rank, merged id) for
 * every split of every merged token into two vocabulary tokens, which is
 * tiktoken's rule (a pair merges when its concatenation is a ranked token).
 * Encode: regex pre-tokens, a per-encoder cache piece -> ids, and for misses a
 * merge loop over a linked list with a min-heap of (rank, position), so long
 * pieces cost O(n log n).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/bpe.h"

#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "data/data_util.h"

/* GPT-2 pre-tokenizer. \s and \S are spelled as the Unicode White_Space set
 * (what tiktoken's regex engine uses): Z plus TAB..CR and U+0085. */
#define WS_SET "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}"
static const char *k_gpt2_pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS_SET "\\p{L}\\p{N}]+"
    "|[" WS_SET "]+(?![^" WS_SET "])|[" WS_SET "]+";

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

struct mt_bpe {
  int n_ids;
  char *bytes;      /* all token bytes */
  int64_t *off;     /* [n_ids] offset into bytes, -1 = id unused */
  int32_t *len;     /* [n_ids] */
  int32_t byte_id[256];
  int eod;
  uint64_t *pkey;   /* pair table: (a << 32 | b) + 1, 0 = empty */
  uint32_t *prank;
  int32_t *pres;
  size_t pmask;
  pcre2_code *re;
  int jit;
};

/* ---- loading --------------------------------------------------------- */

/* byte -> unicode code point of GPT-2's bytes_to_unicode(). */
static void byte_to_cp(uint32_t b2u[256]) {
  int n = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    b2u[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
  }
}

/* Decode a UTF-8 string of the byte alphabet into raw bytes (in place into
 * out, at most strlen(s) bytes). Returns the length, or -1 when a code point
 * is outside the alphabet. */
static long alphabet_to_bytes(const char *s, const int16_t *u2b, char *out) {
  const unsigned char *p = (const unsigned char *)s;
  long n = 0;
  while (*p) {
    uint32_t cp;
    if (p[0] < 0x80) {
      cp = p[0];
      p += 1;
    } else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
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

typedef struct { /* temporary bytes -> id map used while loading */
  int32_t *slot;
  size_t mask;
} vmap;

static int vmap_find(const mt_bpe *b, const vmap *m, const char *s, size_t n) {
  size_t i = mt_hash_bytes(s, n, 0) & m->mask;
  for (;; i = (i + 1) & m->mask) {
    int32_t id = m->slot[i];
    if (id < 0) return -1;
    if ((size_t)b->len[id] == n && memcmp(b->bytes + b->off[id], s, n) == 0) return id;
  }
}

static void vmap_insert(const mt_bpe *b, vmap *m, int32_t id) {
  size_t i = mt_hash_bytes(b->bytes + b->off[id], (size_t)b->len[id], 0) & m->mask;
  while (m->slot[i] >= 0) i = (i + 1) & m->mask;
  m->slot[i] = id;
}

static size_t pair_slot(const mt_bpe *b, uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h ^ (h >> 29)) & b->pmask;
  while (b->pkey[i] != 0 && b->pkey[i] != key) i = (i + 1) & b->pmask;
  return i;
}

static int load_vocab(mt_bpe *b, const char *path, char *err, size_t errlen) {
  size_t n;
  char *text = mt_data_read_file(path, &n, err, errlen);
  if (!text) return -1;
  mt_json_error je;
  if (mt_json_check(text, n, MT_JSON_INT53, &je)) {
    free(text);
    snprintf(err, errlen, "%s: not a JSON object of token -> id (GPT-2 encoder.json expected): "
             "line %d, column %d: %s%s%s", path, je.line, je.col, je.what,
             je.path[0] ? " at " : "", je.path);
    return -1;
  }
  cJSON *root = cJSON_ParseWithLength(text, n);
  free(text);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "%s: not a JSON object of token -> id (GPT-2 encoder.json expected)", path);
    cJSON_Delete(root);
    return -1;
  }
  int count = 0, max_id = -1;
  size_t total = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 16777215 ||
        it->valuedouble != (double)(int)it->valuedouble || !it->string) {
      snprintf(err, errlen, "%s: entry \"%.40s\" is not a token id in [0, 2^24)", path,
               it->string ? it->string : "?");
      cJSON_Delete(root);
      return -1;
    }
    if (it->valueint > max_id) max_id = it->valueint;
    total += strlen(it->string);
    count++;
  }
  if (count == 0) {
    snprintf(err, errlen, "%s: empty vocabulary", path);
    cJSON_Delete(root);
    return -1;
  }
  uint32_t b2u[256];
  int16_t u2b[512];
  byte_to_cp(b2u);
  for (int i = 0; i < 512; i++) u2b[i] = -1;
  for (int i = 0; i < 256; i++) u2b[b2u[i]] = (int16_t)i;
  b->n_ids = max_id + 1;
  b->bytes = mt_xmalloc(total + 1);
  b->off = mt_xmalloc(sizeof(int64_t) * (size_t)b->n_ids);
  b->len = mt_xcalloc((size_t)b->n_ids, sizeof(int32_t));
  for (int i = 0; i < b->n_ids; i++) b->off[i] = -1;
  b->eod = -1;
  size_t pos = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    int id = it->valueint;
    long len = alphabet_to_bytes(it->string, u2b, b->bytes + pos);
    if (len < 0) {
      /* not in the byte alphabet: keep the literal text (special tokens) */
      len = (long)strlen(it->string);
      memcpy(b->bytes + pos, it->string, (size_t)len);
    }
    if (b->off[id] >= 0) {
      snprintf(err, errlen, "%s: id %d appears twice", path, id);
      cJSON_Delete(root);
      return -1;
    }
    b->off[id] = (int64_t)pos;
    b->len[id] = (int32_t)len;
    pos += (size_t)len;
    if (strcmp(it->string, "<|endoftext|>") == 0) b->eod = id;
  }
  cJSON_Delete(root);
  return 0;
}

static int load_merges(mt_bpe *b, const vmap *vm, const char *path, char *err, size_t errlen) {
  size_t n;
  char *text = mt_data_read_file(path, &n, err, errlen);
  if (!text) return -1;
  uint32_t b2u[256];
  int16_t u2b[512];
  byte_to_cp(b2u);
  for (int i = 0; i < 512; i++) u2b[i] = -1;
  for (int i = 0; i < 256; i++) u2b[b2u[i]] = (int16_t)i;
  uint32_t *rank_of = mt_xmalloc(sizeof(uint32_t) * (size_t)b->n_ids);
  for (int i = 0; i < b->n_ids; i++) rank_of[i] = UINT32_MAX;
  char *buf = mt_xmalloc(n + 2);
  uint32_t rank = 0;
  long lineno = 0;
  int rc = 0;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    lineno++;
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r') line[--ll] = 0;
    if (ll == 0 || (lineno == 1 && strncmp(line, "#version", 8) == 0)) {
      line = nl ? nl + 1 : NULL;
      continue;
    }
    char *sp = strchr(line, ' ');
    if (!sp || sp == line || sp[1] == 0 || strchr(sp + 1, ' ')) {
      snprintf(err, errlen, "%s:%ld: expected a merge \"left right\", got \"%.60s\"", path,
               lineno, line);
      rc = -1;
      break;
    }
    *sp = 0;
    long la = alphabet_to_bytes(line, u2b, buf);
    long lb = la < 0 ? -1 : alphabet_to_bytes(sp + 1, u2b, buf + la);
    if (la < 0 || lb < 0) {
      snprintf(err, errlen, "%s:%ld: merge uses characters outside GPT-2's byte alphabet", path,
               lineno);
      rc = -1;
      break;
    }
    int t = vmap_find(b, vm, buf, (size_t)(la + lb));
    if (t >= 0 && rank_of[t] == UINT32_MAX) rank_of[t] = rank;
    rank++;
    line = nl ? nl + 1 : NULL;
  }
  free(buf);
  free(text);
  if (rc == 0 && rank == 0) {
    snprintf(err, errlen, "%s: no merges found", path);
    rc = -1;
  }
  if (rc == 0) {
    size_t npairs = 0;
    for (int t = 0; t < b->n_ids; t++)
      if (rank_of[t] != UINT32_MAX) npairs += (size_t)b->len[t];
    size_t cap = 1024;
    while (cap < 2 * npairs + 2) cap *= 2;
    b->pmask = cap - 1;
    b->pkey = mt_xcalloc(cap, sizeof(uint64_t));
    b->prank = mt_xmalloc(cap * sizeof(uint32_t));
    b->pres = mt_xmalloc(cap * sizeof(int32_t));
    for (int t = 0; t < b->n_ids; t++) {
      if (rank_of[t] == UINT32_MAX) continue;
      const char *s = b->bytes + b->off[t];
      for (int k = 1; k < b->len[t]; k++) {
        int p = vmap_find(b, vm, s, (size_t)k), q = vmap_find(b, vm, s + k, (size_t)(b->len[t] - k));
        if (p < 0 || q < 0 || p == b->eod || q == b->eod) continue;
        uint64_t key = ((uint64_t)(uint32_t)p << 32 | (uint32_t)q) + 1;
        size_t i = pair_slot(b, key);
        b->pkey[i] = key;
        b->prank[i] = rank_of[t];
        b->pres[i] = t;
      }
    }
  }
  free(rank_of);
  return rc;
}

mt_bpe *mt_bpe_load(const char *vocab_path, const char *merges_path, char *err, size_t errlen) {
  mt_bpe *b = mt_xcalloc(1, sizeof(*b));
  if (load_vocab(b, vocab_path, err, errlen) != 0) {
    mt_bpe_free(b);
    return NULL;
  }
  vmap vm;
  size_t cap = 1024;
  while (cap < 2 * (size_t)b->n_ids) cap *= 2;
  vm.mask = cap - 1;
  vm.slot = mt_xmalloc(cap * sizeof(int32_t));
  for (size_t i = 0; i < cap; i++) vm.slot[i] = -1;
  for (int id = 0; id < b->n_ids; id++)
    if (b->off[id] >= 0 && vmap_find(b, &vm, b->bytes + b->off[id], (size_t)b->len[id]) < 0)
      vmap_insert(b, &vm, id);
  for (int c = 0; c < 256; c++) {
    char ch = (char)c;
    b->byte_id[c] = vmap_find(b, &vm, &ch, 1);
    if (b->byte_id[c] < 0) {
      snprintf(err, errlen, "%s: byte 0x%02x has no token (not a byte-level BPE vocabulary)",
               vocab_path, c);
      free(vm.slot);
      mt_bpe_free(b);
      return NULL;
    }
  }
  int rc = load_merges(b, &vm, merges_path, err, errlen);
  free(vm.slot);
  if (rc != 0) {
    mt_bpe_free(b);
    return NULL;
  }
  int ec;
  PCRE2_SIZE eo;
  b->re = pcre2_compile((PCRE2_SPTR)k_gpt2_pattern, PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
  if (!b->re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(ec, msg, sizeof(msg));
    mt_fatal("GPT-2 regex does not compile at %zu: %s", (size_t)eo, (char *)msg);
  }
  b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0;
  return b;
}

void mt_bpe_free(mt_bpe *b) {
  if (!b) return;
  free(b->bytes);
  free(b->off);
  free(b->len);
  free(b->pkey);
  free(b->prank);
  free(b->pres);
  if (b->re) pcre2_code_free(b->re);
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

/* ---- encoding ------------------------------------------------------- */

typedef struct {
  uint32_t rank, pos;
  int32_t a, b;
} heap_ent;

struct mt_bpe_encoder {
  const mt_bpe *bpe;
  pcre2_match_data *md;
  pcre2_match_context *mctx;
  pcre2_jit_stack *js;
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
  e->md = pcre2_match_data_create(1, NULL);
  e->mctx = pcre2_match_context_create(NULL);
  e->js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
  if (!e->md || !e->mctx || !e->js) mt_fatal("PCRE2 allocation failed");
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
  pcre2_match_data_free(e->md);
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

size_t mt_bpe_encode(mt_bpe_encoder *e, const char *text, size_t len, mt_tokvec *out) {
  const mt_bpe *b = e->bpe;
  size_t n0 = out->n, start = 0;
  while (start < len) {
    int rc = b->jit ? pcre2_jit_match(b->re, (PCRE2_SPTR)text, len, start, 0, e->md, e->mctx)
                    : pcre2_match(b->re, (PCRE2_SPTR)text, len, start, 0, e->md, e->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) {
      encode_piece(e, text + start, len - start, out);
      break;
    }
    if (rc < 0) mt_fatal("PCRE2 match failed with code %d at byte %zu", rc, start);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
    if (ov[1] <= ov[0] || ov[0] < start) mt_fatal("GPT-2 regex made an empty match");
    if (ov[0] > start) encode_piece(e, text + start, ov[0] - start, out); /* invalid UTF-8 */
    encode_piece(e, text + ov[0], ov[1] - ov[0], out);
    start = ov[1];
  }
  return out->n - n0;
}
