/* data/tokenizer.c — Megatron's tokenizer types over data/bpe.h and
 * data/sp_shim.h (see tokenizer.h). */
#include "data/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/sp_shim.h"

static const char *k_names[3] = {"GPT2BPETokenizer", "HuggingFaceTokenizer",
                                 "SentencePieceTokenizer"};

struct mt_tokenizer {
  mt_tokenizer_type kind;
  mt_bpe *bpe;
  mt_sp *sp;
};

struct mt_tok_encoder {
  const mt_tokenizer *t;
  mt_bpe_encoder *bpe;
  int32_t *ids; /* SentencePiece output */
  size_t n, cap;
};

int mt_tokenizer_type_parse(const char *name) {
  if (!name || !name[0]) return MT_TOK_GPT2BPE;
  for (int i = 0; i < 3; i++)
    if (!strcmp(name, k_names[i])) return i;
  return -1;
}

mt_tokenizer *mt_tokenizer_load(const mt_tokenizer_spec *s, char *err, size_t errlen) {
  int kind = mt_tokenizer_type_parse(s->type);
  if (kind < 0) {
    snprintf(err, errlen,
             "tokenizer_type \"%s\" is not supported (expected GPT2BPETokenizer, "
             "HuggingFaceTokenizer or SentencePieceTokenizer)",
             s->type);
    return NULL;
  }
  mt_tokenizer *t = mt_xcalloc(1, sizeof(*t));
  t->kind = (mt_tokenizer_type)kind;
  if (kind == MT_TOK_GPT2BPE) {
    if (!s->vocab_file || !s->vocab_file[0] || !s->merge_file || !s->merge_file[0]) {
      snprintf(err, errlen,
               "GPT2BPETokenizer needs the vocab file (encoder.json) and the merge file "
               "(vocab.bpe)");
      free(t);
      return NULL;
    }
    t->bpe = mt_bpe_load(s->vocab_file, s->merge_file, err, errlen);
  } else if (!s->model || !s->model[0]) {
    snprintf(err, errlen, "%s needs tokenizer_model (%s)", k_names[kind],
             kind == MT_TOK_HF ? "a tokenizer.json or the folder holding it"
                               : "a SentencePiece tokenizer.model");
    free(t);
    return NULL;
  } else if (kind == MT_TOK_HF) {
    t->bpe = mt_bpe_load_hf(s->model, err, errlen);
  } else {
    t->sp = mt_sp_load(s->model, err, errlen);
  }
  if (!t->bpe && !t->sp) {
    free(t);
    return NULL;
  }
  return t;
}

void mt_tokenizer_free(mt_tokenizer *t) {
  if (!t) return;
  mt_bpe_free(t->bpe);
  if (t->sp) mt_sp_free(t->sp);
  free(t);
}

mt_tokenizer_type mt_tokenizer_kind(const mt_tokenizer *t) { return t->kind; }
const char *mt_tokenizer_name(const mt_tokenizer *t) { return k_names[t->kind]; }

int mt_tokenizer_vocab_size(const mt_tokenizer *t) {
  return t->sp ? mt_sp_vocab_size(t->sp) : mt_bpe_vocab_size(t->bpe);
}

int mt_tokenizer_eod(const mt_tokenizer *t) {
  return t->sp ? mt_sp_eos(t->sp) : mt_bpe_eod(t->bpe);
}

const mt_bpe *mt_tokenizer_bpe(const mt_tokenizer *t) { return t->bpe; }

mt_tok_encoder *mt_tok_encoder_new(const mt_tokenizer *t) {
  mt_tok_encoder *e = mt_xcalloc(1, sizeof(*e));
  e->t = t;
  if (t->bpe) e->bpe = mt_bpe_encoder_new(t->bpe, 0);
  return e;
}

void mt_tok_encoder_free(mt_tok_encoder *e) {
  if (!e) return;
  mt_bpe_encoder_free(e->bpe);
  free(e->ids);
  free(e);
}

void mt_tok_encoder_stats(const mt_tok_encoder *e, uint64_t *lookups, uint64_t *hits) {
  *lookups = *hits = 0;
  if (e->bpe) mt_bpe_encoder_stats(e->bpe, lookups, hits);
}

size_t mt_tok_encode(mt_tok_encoder *e, const char *text, size_t len, mt_tokvec *out) {
  if (e->bpe) return mt_bpe_encode(e->bpe, text, len, out);
  char err[256];
  e->n = 0;
  if (mt_sp_encode(e->t->sp, text, len, &e->ids, &e->n, &e->cap, err, sizeof err) < 0)
    mt_fatal("%s", err); /* only allocation failures: SentencePiece accepts any bytes */
  for (size_t i = 0; i < e->n; i++) mt_tokvec_push(out, e->ids[i]);
  return e->n;
}

size_t mt_tok_encode_doc(mt_tok_encoder *e, const char *text, size_t len, int with_template,
                         mt_tokvec *out) {
  if (!with_template || e->t->kind != MT_TOK_HF) return mt_tok_encode(e, text, len, out);
  const int32_t *pre, *suf;
  int np, ns;
  mt_bpe_template(e->t->bpe, &pre, &np, &suf, &ns);
  size_t n0 = out->n;
  for (int i = 0; i < np; i++) mt_tokvec_push(out, pre[i]);
  mt_tok_encode(e, text, len, out);
  for (int i = 0; i < ns; i++) mt_tokvec_push(out, suf[i]);
  return out->n - n0;
}

char *mt_tokenizer_decode(const mt_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
  if (t->bpe) return mt_bpe_decode(t->bpe, ids, n, len);
  /* SentencePiece: decode runs of valid ids, mark the others */
  size_t cap = 64, pos = 0, i = 0;
  char *out = mt_xmalloc(cap);
  const int size = mt_sp_vocab_size(t->sp);
  while (i < n) {
    size_t j = i;
    while (j < n && ids[j] >= 0 && ids[j] < size) j++;
    char piece[32], err[256];
    size_t l = 0;
    char *s = NULL;
    if (j > i) {
      s = mt_sp_decode(t->sp, ids + i, j - i, &l, err, sizeof err);
      if (!s) mt_fatal("%s", err);
      i = j;
    } else {
      l = (size_t)snprintf(piece, sizeof piece, "<|bad:%d|>", ids[i++]);
    }
    if (pos + l + 1 > cap) {
      while (pos + l + 1 > cap) cap *= 2;
      out = mt_xrealloc(out, cap);
    }
    memcpy(out + pos, s ? s : piece, l);
    pos += l;
    free(s);
  }
  out[pos] = 0;
  if (len) *len = pos;
  return out;
}
