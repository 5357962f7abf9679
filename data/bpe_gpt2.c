/* data/bpe_gpt2.c — load GPT-2's BPE files into the byte-level BPE model
 * (see bpe.h): encoder.json keys are strings over GPT-2's byte→unicode
 * alphabet (printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100..), mapped back to raw bytes; merge line k ("a b") gives the token
 * a+b rank k. The pair table maps (left id, right id) -> (rank, merged id)
 * for every split of every merged token into two vocabulary tokens, which is
 * tiktoken's rule (a pair merges when its concatenation is a ranked token).
 * Pre-tokenizer: the GPT-2 regex, one stage. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "data/bpe_internal.h"
#include "data/data_util.h"

/* GPT-2 pre-tokenizer. \s and \S are spelled as the Unicode White_Space set
 * (what tiktoken's regex engine uses): Z plus TAB..CR and U+0085. */
#define WS_SET "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}"
static const char *k_gpt2_pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS_SET "\\p{L}\\p{N}]+"
    "|[" WS_SET "]+(?![^" WS_SET "])|[" WS_SET "]+";

const char *mt_bpe_gpt2_pattern(void) { return k_gpt2_pattern; }

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
  mt_bpe_byte_alphabet(b2u, u2b);
  mt_bpe_alloc_ids(b, max_id + 1, total);
  size_t pos = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    int id = it->valueint;
    long len = mt_bpe_alphabet_to_bytes(it->string, strlen(it->string), u2b, b->bytes + pos);
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

static int load_merges(mt_bpe *b, const char *path, char *err, size_t errlen) {
  size_t n;
  char *text = mt_data_read_file(path, &n, err, errlen);
  if (!text) return -1;
  uint32_t b2u[256];
  int16_t u2b[512];
  mt_bpe_byte_alphabet(b2u, u2b);
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
    long la = mt_bpe_alphabet_to_bytes(line, strlen(line), u2b, buf);
    long lb = la < 0 ? -1 : mt_bpe_alphabet_to_bytes(sp + 1, strlen(sp + 1), u2b, buf + la);
    if (la < 0 || lb < 0) {
      snprintf(err, errlen, "%s:%ld: merge uses characters outside GPT-2's byte alphabet", path,
               lineno);
      rc = -1;
      break;
    }
    int t = mt_bpe_vmap_find(b, buf, (size_t)(la + lb));
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
    mt_bpe_pairs_init(b, npairs);
    for (int t = 0; t < b->n_ids; t++) {
      if (rank_of[t] == UINT32_MAX) continue;
      const char *s = b->bytes + b->off[t];
      for (int k = 1; k < b->len[t]; k++) {
        int p = mt_bpe_vmap_find(b, s, (size_t)k), q = mt_bpe_vmap_find(b, s + k, (size_t)(b->len[t] - k));
        if (p < 0 || q < 0 || p == b->eod || q == b->eod) continue;
        mt_bpe_pairs_add(b, p, q, rank_of[t], t);
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
  mt_bpe_vmap_build(b);
  if (mt_bpe_bytes_init(b, vocab_path, err, errlen) != 0 ||
      load_merges(b, merges_path, err, errlen) != 0) {
    mt_bpe_free(b);
    return NULL;
  }
  if (mt_bpe_add_stage(b, k_gpt2_pattern, err, errlen) != 0)
    mt_fatal("GPT-2 regex: %s", err);
  return b;
}
