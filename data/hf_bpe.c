/* data/hf_bpe.c — load a Hugging Face `tokenizer.json` byte-level BPE into
 * the model of data/bpe_internal.h (see bpe.h, docs/data.md "Tokenizers").
 *
 * Read: model (type BPE; vocab over GPT-2's byte alphabet; merges as
 * "a b" strings or ["a", "b"] pairs, rank = position; ignore_merges),
 * normalizer (none, NFC, or a Sequence of those), pre_tokenizer (Split
 * regexes with behavior Isolated, then ByteLevel; a Sequence of them),
 * added_tokens (matched in the raw text, leftmost-longest; lstrip/rstrip),
 * post_processor (TemplateProcessing's single template; ByteLevel is a
 * no-op for ids), and beside it tokenizer_config.json (bos/eos tokens;
 * LlamaTokenizer(Fast) builds its template from add_bos_token/add_eos_token,
 * as transformers does). Everything else is refused with a message naming
 * the field: a file that loads is encoded the way the reference does.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/util.h"
#include "data/bpe_internal.h"
#include "data/data_util.h"

/* Unicode White_Space, what Oniguruma's \s means in Hugging Face's regexes */
#define WS_BODY "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}"

typedef struct {
  const char *path;
  char *err;
  size_t errlen;
  int16_t u2b[512];
} ctx;

static int fail(ctx *c, const char *fmt, const char *a) {
  char m[512];
  snprintf(m, sizeof m, fmt, a ? a : "");
  snprintf(c->err, c->errlen, "%s: %s", c->path, m);
  return -1;
}

static const char *type_of(const cJSON *o) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
  return cJSON_IsString(t) ? t->valuestring : "?";
}

/* Oniguruma pattern -> PCRE2: \s and \S as Unicode White_Space (in and out
 * of character classes); the rest is common syntax. */
static char *translate(const char *p, ctx *c) {
  size_t n = strlen(p), cap = 4 * n + 64, o = 0;
  char *out = mt_xmalloc(cap);
  int in_class = 0;
  for (size_t i = 0; i < n; i++) {
    if (o + 64 > cap) out = mt_xrealloc(out, cap *= 2);
    char ch = p[i];
    if (ch == '\\' && i + 1 < n) {
      char e = p[++i];
      if (e == 's') {
        o += (size_t)sprintf(out + o, in_class ? "%s" : "[%s]", WS_BODY);
      } else if (e == 'S') {
        if (in_class) {
          free(out);
          fail(c, "pre_tokenizer regex uses \\S inside a character class (not supported)", NULL);
          return NULL;
        }
        o += (size_t)sprintf(out + o, "[^%s]", WS_BODY);
      } else {
        out[o++] = '\\';
        out[o++] = e;
      }
      continue;
    }
    if (ch == '[' && !in_class) {
      in_class = 1;
      out[o++] = ch;
      if (p[i + 1] == '^') out[o++] = p[++i];
      if (p[i + 1] == ']') out[o++] = p[++i]; /* a literal ] first in the class */
      continue;
    }
    if (ch == ']' && in_class) in_class = 0;
    out[o++] = ch;
  }
  out[o] = 0;
  return out;
}

/* One pre-tokenizer (not a Sequence). */
static int add_pretok(mt_bpe *b, const cJSON *pt, ctx *c, int *byte_level) {
  const char *t = type_of(pt);
  if (!strcmp(t, "ByteLevel")) {
    if (*byte_level) return fail(c, "pre_tokenizer has two ByteLevel steps", NULL);
    *byte_level = 1;
    b->prefix_space = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "add_prefix_space"));
    const cJSON *ur = cJSON_GetObjectItemCaseSensitive(pt, "use_regex");
    if (!ur || cJSON_IsTrue(ur)) { /* ByteLevel's own GPT-2 regex */
      extern const char *mt_bpe_gpt2_pattern(void);
      if (mt_bpe_add_stage(b, mt_bpe_gpt2_pattern(), c->err, c->errlen) != 0) return -1;
    }
    return 0;
  }
  if (strcmp(t, "Split")) return fail(c, "pre_tokenizer type \"%s\" is not supported "
                                          "(byte-level BPE: Split and ByteLevel)", t);
  if (*byte_level) return fail(c, "pre_tokenizer Split after ByteLevel is not supported", NULL);
  const cJSON *beh = cJSON_GetObjectItemCaseSensitive(pt, "behavior");
  if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated"))
    return fail(c, "pre_tokenizer Split behavior \"%s\" is not supported (expected Isolated)",
                cJSON_IsString(beh) ? beh->valuestring : "?");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "invert")))
    return fail(c, "pre_tokenizer Split with invert true is not supported", NULL);
  const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
  const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
  const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
  char *pcre;
  if (cJSON_IsString(re)) {
    pcre = translate(re->valuestring, c);
    if (!pcre) return -1;
  } else if (cJSON_IsString(str)) {
    pcre = mt_xmalloc(strlen(str->valuestring) + 8);
    sprintf(pcre, "\\Q%s\\E", str->valuestring);
  } else {
    return fail(c, "pre_tokenizer Split has no pattern Regex or String", NULL);
  }
  char e2[400];
  int rc = mt_bpe_add_stage(b, pcre, e2, sizeof e2);
  free(pcre);
  if (rc != 0) return fail(c, "pre_tokenizer Split: %s", e2);
  return 0;
}

static int load_pretok(mt_bpe *b, const cJSON *root, ctx *c) {
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  int byte_level = 0;
  if (cJSON_IsObject(pt) && !strcmp(type_of(pt), "Sequence")) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"), *it;
    cJSON_ArrayForEach(it, l) if (add_pretok(b, it, c, &byte_level) != 0) return -1;
  } else if (cJSON_IsObject(pt)) {
    if (add_pretok(b, pt, c, &byte_level) != 0) return -1;
  }
  if (!byte_level)
    return fail(c, "not a byte-level BPE tokenizer (no ByteLevel pre_tokenizer; a SentencePiece "
                   "model converted to tokenizer.json is read from its tokenizer.model with "
                   "tokenizer_type SentencePieceTokenizer)", NULL);
  return 0;
}

static int load_normalizer(mt_bpe *b, const cJSON *root, ctx *c) {
  const cJSON *nz = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
  if (!nz || cJSON_IsNull(nz)) return 0;
  const cJSON *one = nz, *list = NULL;
  if (!strcmp(type_of(nz), "Sequence")) list = cJSON_GetObjectItemCaseSensitive(nz, "normalizers");
  for (const cJSON *it = list ? list->child : one; it; it = list ? it->next : NULL) {
    if (strcmp(type_of(it), "NFC"))
      return fail(c, "normalizer \"%s\" is not supported (byte-level BPE: none or NFC)",
                  type_of(it));
    b->nfc = 1;
  }
  return 0;
}

/* id of a token's text: an added token or a vocabulary entry; -1 if none */
static int token_id(const mt_bpe *b, const cJSON *added, const char *s, const int16_t *u2b) {
  const cJSON *it;
  cJSON_ArrayForEach(it, added) {
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (cJSON_IsString(ct) && !strcmp(ct->valuestring, s))
      return cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
  }
  char *buf = mt_xmalloc(strlen(s) + 1);
  long n = mt_bpe_alphabet_to_bytes(s, strlen(s), u2b, buf);
  int id = n > 0 ? mt_bpe_vmap_find(b, buf, (size_t)n) : -1;
  free(buf);
  return id;
}

static int load_vocab(mt_bpe *b, const cJSON *model, const cJSON *added, ctx *c) {
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *it;
  if (!cJSON_IsObject(vocab) || !vocab->child) return fail(c, "model.vocab missing or empty", NULL);
  int max_id = -1;
  size_t total = 0;
  cJSON_ArrayForEach(it, vocab) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 16777215)
      return fail(c, "model.vocab entry \"%.40s\" is not an id in [0, 2^24)", it->string);
    if (it->valueint > max_id) max_id = it->valueint;
    total += strlen(it->string);
  }
  cJSON_ArrayForEach(it, added) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 16777215 ||
        !cJSON_IsString(ct) || !ct->valuestring[0])
      return fail(c, "an added_tokens entry lacks an id in [0, 2^24) or a content string", NULL);
    if (id->valueint > max_id) max_id = id->valueint;
    total += strlen(ct->valuestring);
  }
  mt_bpe_alloc_ids(b, max_id + 1, total);
  size_t pos = 0;
  cJSON_ArrayForEach(it, vocab) {
    int id = it->valueint;
    if (b->off[id] >= 0) return fail(c, "model.vocab gives id %s twice", it->string);
    long len = mt_bpe_alphabet_to_bytes(it->string, strlen(it->string), c->u2b, b->bytes + pos);
    if (len < 0) { /* outside the byte alphabet: the literal text */
      len = (long)strlen(it->string);
      memcpy(b->bytes + pos, it->string, (size_t)len);
    }
    b->off[id] = (int64_t)pos;
    b->len[id] = (int32_t)len;
    pos += (size_t)len;
  }
  mt_bpe_vmap_build(b); /* the model vocabulary only */
  cJSON_ArrayForEach(it, added) {
    int id = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
    const char *s = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "single_word")))
      return fail(c, "added token \"%.60s\" has single_word true (not supported)", s);
    size_t len = strlen(s);
    memcpy(b->bytes + pos, s, len); /* an added token decodes to its text */
    b->off[id] = (int64_t)pos;
    b->len[id] = (int32_t)len;
    pos += len;
    mt_bpe_add_token(b, id, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "lstrip")),
                     cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "rstrip")));
  }
  return mt_bpe_bytes_init(b, c->path, c->err, c->errlen);
}

static int load_merges(mt_bpe *b, const cJSON *model, ctx *c) {
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges"), *it;
  if (!cJSON_IsArray(merges)) return fail(c, "model.merges missing", NULL);
  mt_bpe_pairs_init(b, (size_t)cJSON_GetArraySize(merges));
  uint32_t rank = 0;
  char *buf = NULL;
  size_t cap = 0;
  cJSON_ArrayForEach(it, merges) {
    const char *l, *r;
    size_t ll, rl;
    if (cJSON_IsString(it)) { /* "a b" */
      const char *sp = strchr(it->valuestring, ' ');
      if (!sp || sp == it->valuestring || !sp[1]) {
        free(buf);
        return fail(c, "model.merges entry \"%.60s\" is not \"left right\"", it->valuestring);
      }
      l = it->valuestring;
      ll = (size_t)(sp - l);
      r = sp + 1;
      rl = strlen(r);
    } else if (cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
               cJSON_IsString(it->child->next)) { /* ["a", "b"] */
      l = it->child->valuestring;
      ll = strlen(l);
      r = it->child->next->valuestring;
      rl = strlen(r);
    } else {
      free(buf);
      return fail(c, "model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]",
                  NULL);
    }
    if (ll + rl + 1 > cap) buf = mt_xrealloc(buf, cap = 2 * (ll + rl + 1));
    long a = mt_bpe_alphabet_to_bytes(l, ll, c->u2b, buf);
    long bb = a < 0 ? -1 : mt_bpe_alphabet_to_bytes(r, rl, c->u2b, buf + a);
    int ia = a < 0 ? -1 : mt_bpe_vmap_find(b, buf, (size_t)a);
    int ib = bb < 0 ? -1 : mt_bpe_vmap_find(b, buf + a, (size_t)bb);
    int im = bb < 0 ? -1 : mt_bpe_vmap_find(b, buf, (size_t)(a + bb));
    if (ia < 0 || ib < 0 || im < 0) {
      char what[160];
      snprintf(what, sizeof what, "%.*s %.*s", (int)(ll > 60 ? 60 : ll), l,
               (int)(rl > 60 ? 60 : rl), r);
      free(buf);
      return fail(c, "model.merges entry \"%s\": a part or the merged token is not in model.vocab",
                  what);
    }
    mt_bpe_pairs_add(b, ia, ib, rank++, im);
  }
  free(buf);
  return 0;
}

static int load_model(mt_bpe *b, const cJSON *root, ctx *c) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (!cJSON_IsObject(m)) return fail(c, "no \"model\" object (not a tokenizer.json)", NULL);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type");
  if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "BPE")))
    return fail(c, "model type \"%s\" is not supported (expected BPE)",
                cJSON_IsString(t) ? t->valuestring : "?");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "byte_fallback")))
    return fail(c, "model.byte_fallback true: a SentencePiece conversion (read its "
                   "tokenizer.model with tokenizer_type SentencePieceTokenizer)", NULL);
  const char *fields[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(m, fields[i]);
    if (cJSON_IsString(f) && f->valuestring[0])
      return fail(c, "model.%s is set (not supported for byte-level BPE)", fields[i]);
  }
  const cJSON *dr = cJSON_GetObjectItemCaseSensitive(m, "dropout");
  if (cJSON_IsNumber(dr) && dr->valuedouble > 0)
    return fail(c, "model.dropout is set (BPE dropout is not supported)", NULL);
  b->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ignore_merges"));
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (load_vocab(b, m, added, c) != 0 || load_merges(b, m, c) != 0) return -1;
  return 0;
}

/* TemplateProcessing "single": special tokens before and after sequence A. */
static int load_template(mt_bpe *b, const cJSON *pp, ctx *c) {
  const char *t = type_of(pp);
  if (!strcmp(t, "Sequence")) {
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
      if (load_template(b, it, c) != 0) return -1;
    return 0;
  }
  if (!strcmp(t, "ByteLevel")) return 0; /* offsets only */
  if (strcmp(t, "TemplateProcessing"))
    return fail(c, "post_processor \"%s\" is not supported (TemplateProcessing, ByteLevel)", t);
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens"), *it;
  int seen_a = 0;
  b->n_prefix = b->n_suffix = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pp, "single")) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
    if (!st) {
      seen_a = 1;
      continue;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(st, "id");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(sp, cJSON_IsString(name) ? name->valuestring : "");
    const cJSON *id;
    cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(def, "ids")) {
      int32_t *dst = seen_a ? b->suffix : b->prefix;
      int *n = seen_a ? &b->n_suffix : &b->n_prefix;
      if (*n == 4 || !cJSON_IsNumber(id) || id->valueint < 0 || id->valueint >= b->n_ids)
        return fail(c, "post_processor template token \"%s\" is not a valid id (or more than 4)",
                    cJSON_IsString(name) ? name->valuestring : "?");
      dst[(*n)++] = id->valueint;
    }
  }
  return 0;
}

static const char *config_token(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* tokenizer_config.json beside tokenizer.json (optional) */
static int load_config(mt_bpe *b, const cJSON *root, const char *cfg_path, ctx *c) {
  struct stat st;
  if (stat(cfg_path, &st) != 0) return 0;
  size_t n;
  char *text = mt_data_read_file(cfg_path, &n, c->err, c->errlen);
  if (!text) return -1;
  /* strict JSON; integers are not limited (transformers writes
   * model_max_length as int(1e30), a key not read here) */
  char what[4300];
  snprintf(what, sizeof what, "%s: not a JSON object", cfg_path);
  cJSON *cfg = mt_json_parse(text, n, 0, what, c->err, c->errlen);
  free(text);
  if (!cfg) return -1;
  if (!cJSON_IsObject(cfg)) {
    cJSON_Delete(cfg);
    snprintf(c->err, c->errlen, "%s: not a JSON object", cfg_path);
    return -1;
  }
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  const char *bos = config_token(cfg, "bos_token"), *eos = config_token(cfg, "eos_token");
  if (bos) b->bos = token_id(b, added, bos, c->u2b);
  if (eos) b->eod = token_id(b, added, eos, c->u2b);
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class");
  if (cJSON_IsString(cls) && (!strcmp(cls->valuestring, "LlamaTokenizerFast") ||
                              !strcmp(cls->valuestring, "LlamaTokenizer"))) {
    /* transformers' LlamaTokenizerFast.update_post_processor: bos A eos by
     * add_bos_token (default true) / add_eos_token (default false) */
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
    const cJSON *ae = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
    b->n_prefix = b->n_suffix = 0;
    if ((!ab || cJSON_IsTrue(ab)) && b->bos >= 0) b->prefix[b->n_prefix++] = b->bos;
    if (cJSON_IsTrue(ae) && b->eod >= 0) b->suffix[b->n_suffix++] = b->eod;
  }
  cJSON_Delete(cfg);
  return 0;
}

mt_bpe *mt_bpe_load_hf(const char *path, char *err, size_t errlen) {
  char file[4200], cfg_path[4200];
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(file, sizeof file, "%s/tokenizer.json", path);
    snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", path);
  } else {
    snprintf(file, sizeof file, "%s", path);
    const char *slash = strrchr(path, '/');
    snprintf(cfg_path, sizeof cfg_path, "%.*stokenizer_config.json",
             slash ? (int)(slash - path + 1) : 0, path);
  }
  size_t n;
  char *text = mt_data_read_file(file, &n, err, errlen);
  if (!text) return NULL;
  /* strict JSON first (what is not JSON is refused where it is); the ids
   * read are range-checked below */
  char what[4300];
  snprintf(what, sizeof what, "%s: not a JSON object (a Hugging Face tokenizer.json expected)",
           file);
  cJSON *root = mt_json_parse(text, n, 0, what, err, errlen);
  free(text);
  if (!root) return NULL;
  ctx c = {.path = file, .err = err, .errlen = errlen};
  uint32_t b2u[256];
  mt_bpe_byte_alphabet(b2u, c.u2b);
  mt_bpe *b = mt_xcalloc(1, sizeof(*b));
  int rc = -1;
  if (!cJSON_IsObject(root)) {
    fail(&c, "not a JSON object (a Hugging Face tokenizer.json expected)", NULL);
  } else if (load_model(b, root, &c) == 0 && load_normalizer(b, root, &c) == 0 &&
             load_pretok(b, root, &c) == 0) {
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (cJSON_IsObject(dec) && strcmp(type_of(dec), "ByteLevel"))
      fail(&c, "decoder \"%s\" is not supported (expected ByteLevel)", type_of(dec));
    else if ((!cJSON_IsObject(pp) || load_template(b, pp, &c) == 0) &&
             load_config(b, root, cfg_path, &c) == 0)
      rc = 0;
  }
  cJSON_Delete(root);
  if (rc != 0) {
    mt_bpe_free(b);
    return NULL;
  }
  return b;
}
