/* data/preprocess.c — `megatrain preprocess` (see preprocess.h).
 *
 * The input is memory-mapped and cut into batches of documents (~8 MB); the
 * documents of a batch are tokenized in parallel by `--workers` OpenMP
 * threads, each with its own encoder (regex match data + BPE cache), and then
 * written in input order, so the output does not depend on the worker count.
 */
#include "data/preprocess.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/tokenizer.h"
#include "data/data_util.h"
#include "data/indexed_dataset.h"
#include "data/jsonl.h"

enum { FMT_AUTO, FMT_JSONL, FMT_TEXT };
enum { SEP_BLANK, SEP_LINE, SEP_NONE };

typedef struct {
  const char *input, *prefix, *vocab, *merges, *key, *tok_type, *tok_model;
  int format, sep, append_eod, workers, quiet, no_special;
} pp_opts;

typedef struct {
  const char *p;
  size_t n;
  long line; /* first line number (1-based) */
} span;

typedef struct {
  pp_opts o;
  mt_mmap in;
  mt_tokenizer *tok;
  mt_tok_encoder **enc;
  mt_tokvec *out;      /* [workers] tokens of the current batch */
  span *docs;          /* current batch */
  int *doc_thread;
  size_t *doc_off, *doc_n;
  char **doc_err;      /* NULL or malloc'ed message */
  size_t nb, capb;
  size_t pos;          /* next input byte */
  long line;           /* line number at pos */
  int eod;             /* id appended to every document, -1 = none */
} pp_ctx;

static int usage(const char *msg) {
  fprintf(stderr,
          "megatrain preprocess: %s\n"
          "usage: megatrain preprocess --input FILE --output-prefix PREFIX\n"
          "         [--tokenizer-type GPT2BPETokenizer|HuggingFaceTokenizer|SentencePieceTokenizer]\n"
          "         [--vocab-file VOCAB.json --merge-file MERGES.txt | --tokenizer-model PATH]\n"
          "         [--tokenizer-hf-no-include-special-tokens] [--json-keys KEY]\n"
          "         [--input-format auto|jsonl|text] [--doc-sep blank|line|none] [--append-eod]\n"
          "         [--workers N] [--quiet]\n",
          msg);
  return 2;
}

static int parse_args(pp_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof(*o));
  o->workers = 1;
  o->key = "text";
  int key_given = 0;
  char msg[256];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV()                                                  \
  do {                                                           \
    if (!v) {                                                    \
      snprintf(msg, sizeof(msg), "option %s needs a value", a);  \
      return usage(msg);                                         \
    }                                                            \
    i++;                                                         \
  } while (0)
    if (!strcmp(a, "--input")) { NEEDV(); o->input = v; }
    else if (!strcmp(a, "--output-prefix")) { NEEDV(); o->prefix = v; }
    else if (!strcmp(a, "--vocab-file")) { NEEDV(); o->vocab = v; }
    else if (!strcmp(a, "--merge-file")) { NEEDV(); o->merges = v; }
    else if (!strcmp(a, "--tokenizer-type")) { NEEDV(); o->tok_type = v; }
    else if (!strcmp(a, "--tokenizer-model")) { NEEDV(); o->tok_model = v; }
    else if (!strcmp(a, "--tokenizer-hf-no-include-special-tokens")) o->no_special = 1;
    else if (!strcmp(a, "--json-keys")) {
      NEEDV();
      o->key = v;
      key_given = 1;
      if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
        return usage("only one --json-keys key is supported");
    } else if (!strcmp(a, "--input-format")) {
      NEEDV();
      if (!strcmp(v, "auto")) o->format = FMT_AUTO;
      else if (!strcmp(v, "jsonl")) o->format = FMT_JSONL;
      else if (!strcmp(v, "text")) o->format = FMT_TEXT;
      else return usage("--input-format must be auto, jsonl or text");
    } else if (!strcmp(a, "--doc-sep")) {
      NEEDV();
      if (!strcmp(v, "blank")) o->sep = SEP_BLANK;
      else if (!strcmp(v, "line")) o->sep = SEP_LINE;
      else if (!strcmp(v, "none")) o->sep = SEP_NONE;
      else return usage("--doc-sep must be blank, line or none");
    } else if (!strcmp(a, "--workers")) {
      NEEDV();
      char *end;
      long w = strtol(v, &end, 10);
      if (*end || w < 1 || w > 256) return usage("--workers must be an integer in [1, 256]");
      o->workers = (int)w;
    } else if (!strcmp(a, "--append-eod")) o->append_eod = 1;
    else if (!strcmp(a, "--quiet")) o->quiet = 1;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage("help"); return 3; }
    else {
      snprintf(msg, sizeof(msg), "unknown option %s", a);
      return usage(msg);
    }
#undef NEEDV
  }
  int kind = mt_tokenizer_type_parse(o->tok_type);
  if (kind < 0)
    return usage("--tokenizer-type must be GPT2BPETokenizer, HuggingFaceTokenizer or "
                 "SentencePieceTokenizer");
  if (!o->input || !o->prefix) return usage("--input and --output-prefix are required");
  if (kind == MT_TOK_GPT2BPE && (!o->vocab || !o->merges))
    return usage("GPT2BPETokenizer (the default --tokenizer-type) needs --vocab-file and "
                 "--merge-file");
  if (kind == MT_TOK_GPT2BPE && o->tok_model)
    return usage("--tokenizer-model has no effect with GPT2BPETokenizer (expected "
                 "--tokenizer-type HuggingFaceTokenizer or SentencePieceTokenizer)");
  if (kind != MT_TOK_GPT2BPE && (o->vocab || o->merges))
    return usage("--vocab-file/--merge-file have no effect with this --tokenizer-type "
                 "(expected --tokenizer-model)");
  if (kind != MT_TOK_GPT2BPE && !o->tok_model)
    return usage("--tokenizer-type HuggingFaceTokenizer/SentencePieceTokenizer needs "
                 "--tokenizer-model");
  if (kind != MT_TOK_HF && o->no_special)
    return usage("--tokenizer-hf-no-include-special-tokens needs --tokenizer-type "
                 "HuggingFaceTokenizer");
  if (o->format == FMT_AUTO) {
    size_t l = strlen(o->input);
    int ext = (l > 5 && !strcmp(o->input + l - 5, ".json")) ||
              (l > 6 && !strcmp(o->input + l - 6, ".jsonl"));
    o->format = (key_given || ext) ? FMT_JSONL : FMT_TEXT;
  }
  return 0;
}

static int blank_line(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
  return 1;
}

static void push_doc(pp_ctx *c, const char *p, size_t n, long line) {
  if (c->nb == c->capb) {
    c->capb = c->capb ? 2 * c->capb : 4096;
    c->docs = mt_xrealloc(c->docs, c->capb * sizeof(span));
    c->doc_thread = mt_xrealloc(c->doc_thread, c->capb * sizeof(int));
    c->doc_off = mt_xrealloc(c->doc_off, c->capb * sizeof(size_t));
    c->doc_n = mt_xrealloc(c->doc_n, c->capb * sizeof(size_t));
    c->doc_err = mt_xrealloc(c->doc_err, c->capb * sizeof(char *));
  }
  span s = {p, n, line};
  c->docs[c->nb++] = s;
}

/* Collect the next batch of documents (about 8 MB of input). */
static void next_batch(pp_ctx *c) {
  const char *base = (const char *)c->in.data;
  size_t size = c->in.size, budget = 8u << 20, used = 0;
  c->nb = 0;
  if (c->o.format == FMT_TEXT && c->o.sep == SEP_NONE) {
    if (c->pos < size) push_doc(c, base, size, 1);
    c->pos = size;
    return;
  }
  const char *dstart = NULL;
  long dline = 0;
  while (c->pos < size && (used < budget || dstart)) {
    const char *p = base + c->pos;
    const char *nl = memchr(p, '\n', size - c->pos);
    size_t n = nl ? (size_t)(nl - p) : size - c->pos;
    size_t adv = nl ? n + 1 : n;
    long ln = c->line;
    c->pos += adv;
    c->line++;
    used += adv;
    if (c->o.format == FMT_JSONL || c->o.sep == SEP_LINE) {
      if (c->o.format == FMT_TEXT || !blank_line(p, n)) push_doc(c, p, n, ln);
      continue;
    }
    /* blank-line separated: a document is a run of non-blank lines */
    if (blank_line(p, n)) {
      if (dstart) push_doc(c, dstart, (size_t)(p - dstart) - 1, dline);
      dstart = NULL;
    } else if (!dstart) {
      dstart = p;
      dline = ln;
    }
    if (c->pos >= size && dstart) {
      push_doc(c, dstart, (size_t)(p + n - dstart), dline);
      dstart = NULL;
    }
  }
}

static void tokenize_batch(pp_ctx *c) {
  for (int t = 0; t < c->o.workers; t++) c->out[t].n = 0;
#pragma omp parallel num_threads(c->o.workers)
  {
    int t = omp_get_thread_num();
    mt_tokvec out = c->out[t]; /* thread-local copy: no false sharing */
#pragma omp for schedule(dynamic, 4)
    for (size_t i = 0; i < c->nb; i++) {
      const span *d = &c->docs[i];
      c->doc_err[i] = NULL;
      c->doc_thread[i] = t;
      c->doc_off[i] = out.n;
      if (c->o.format == FMT_JSONL) {
        char err[256];
        size_t tl = 0;
        char *text = mt_jsonl_extract(d->p, d->n, c->o.key, &tl, err, sizeof(err));
        if (!text) {
          c->doc_err[i] = mt_xstrdup(err);
          c->doc_n[i] = 0;
          continue;
        }
        mt_tok_encode_doc(c->enc[t], text, tl, !c->o.no_special, &out);
        free(text);
      } else {
        mt_tok_encode_doc(c->enc[t], d->p, d->n, !c->o.no_special, &out);
      }
      if (c->eod >= 0 && out.n > c->doc_off[i]) mt_tokvec_push(&out, c->eod);
      c->doc_n[i] = out.n - c->doc_off[i];
    }
    c->out[t] = out;
  }
}

static void ctx_free(pp_ctx *c) {
  for (int t = 0; t < c->o.workers && c->enc; t++) {
    mt_tok_encoder_free(c->enc[t]);
    mt_tokvec_free(&c->out[t]);
  }
  free(c->enc);
  free(c->out);
  free(c->docs);
  free(c->doc_thread);
  free(c->doc_off);
  free(c->doc_n);
  free(c->doc_err);
  mt_tokenizer_free(c->tok);
  mt_mmap_close(&c->in);
}

static int fail(pp_ctx *c, mt_mmidx_writer *w, const char *msg) {
  fprintf(stderr, "megatrain preprocess: error: %s\n", msg);
  if (w) mt_mmidx_writer_abort(w);
  ctx_free(c);
  return 1;
}

int mt_preprocess_main(int argc, char **argv) {
  pp_ctx c;
  memset(&c, 0, sizeof(c));
  int rc = parse_args(&c.o, argc, argv);
  if (rc == 3) return 0;
  if (rc) return rc;
  char err[1200];
  double t0 = mt_now();
  if (mt_mmap_open(&c.in, c.o.input, err, sizeof(err)) != 0) return fail(&c, NULL, err);
  if (c.in.size == 0) {
    snprintf(err, sizeof(err), "%s: empty input (no documents)", c.o.input);
    return fail(&c, NULL, err);
  }
  mt_tokenizer_spec spec = {.type = c.o.tok_type, .model = c.o.tok_model,
                           .vocab_file = c.o.vocab, .merge_file = c.o.merges};
  c.tok = mt_tokenizer_load(&spec, err, sizeof(err));
  if (!c.tok) return fail(&c, NULL, err);
  int eod = mt_tokenizer_eod(c.tok);
  if (c.o.append_eod && eod < 0) {
    snprintf(err, sizeof(err), "%s: --append-eod needs an end-of-document token (%s)",
             c.o.tok_model ? c.o.tok_model : c.o.vocab,
             mt_tokenizer_kind(c.tok) == MT_TOK_GPT2BPE ? "<|endoftext|> in the vocabulary"
             : mt_tokenizer_kind(c.tok) == MT_TOK_HF
                 ? "eos_token in tokenizer_config.json beside tokenizer.json"
                 : "the model's eos piece");
    return fail(&c, NULL, err);
  }
  c.line = 1;
  c.eod = c.o.append_eod ? eod : -1;
  c.enc = mt_xcalloc((size_t)c.o.workers, sizeof(*c.enc));
  c.out = mt_xcalloc((size_t)c.o.workers, sizeof(*c.out));
  for (int t = 0; t < c.o.workers; t++) c.enc[t] = mt_tok_encoder_new(c.tok);
  double t_load = mt_now() - t0;
  t0 = mt_now();
  int dtype = mt_mmidx_optimal_dtype(mt_tokenizer_vocab_size(c.tok));
  mt_mmidx_writer *w = mt_mmidx_writer_open(c.o.prefix, dtype, err, sizeof(err));
  if (!w) return fail(&c, NULL, err);
  int64_t n_empty = 0;
  double last = t0;
  for (;;) {
    next_batch(&c);
    if (c.nb == 0) break;
    tokenize_batch(&c);
    for (size_t i = 0; i < c.nb; i++) {
      if (c.doc_err[i]) {
        snprintf(err, sizeof(err), "%s:%ld: %s", c.o.input, c.docs[i].line, c.doc_err[i]);
        for (size_t j = i; j < c.nb; j++) free(c.doc_err[j]);
        return fail(&c, w, err);
      }
      if (c.doc_n[i] == 0) {
        n_empty++;
        continue;
      }
      const int32_t *ids = c.out[c.doc_thread[i]].data + c.doc_off[i];
      if (mt_mmidx_writer_add(w, ids, c.doc_n[i], err, sizeof(err)) != 0) return fail(&c, w, err);
    }
    double now = mt_now();
    if (!c.o.quiet && now - last >= 1.0) {
      int64_t d, t;
      mt_mmidx_writer_counts(w, &d, &t);
      fprintf(stderr, "preprocess: %.1f / %.1f MB, %lld documents, %lld tokens, %.2f MB/s\n",
              c.pos / 1e6, c.in.size / 1e6, (long long)d, (long long)t, c.pos / 1e6 / (now - t0));
      last = now;
    }
  }
  int64_t docs, toks;
  mt_mmidx_writer_counts(w, &docs, &toks);
  if (docs == 0) {
    snprintf(err, sizeof(err), "%s: empty input (no non-empty documents)", c.o.input);
    return fail(&c, w, err);
  }
  if (mt_mmidx_writer_finish(w, err, sizeof(err)) != 0) return fail(&c, NULL, err);
  double dt = mt_now() - t0;
  uint64_t lk = 0, hit = 0;
  for (int t = 0; t < c.o.workers; t++) {
    uint64_t a, b;
    mt_tok_encoder_stats(c.enc[t], &a, &b);
    lk += a;
    hit += b;
  }
  if (!c.o.quiet)
    printf("preprocess: wrote %s.bin/.idx: %lld documents (%lld empty skipped), %lld tokens "
           "(%s, %s); %.2f MB tokenized in %.2f s = %.2f MB/s with %d worker%s (+%.2f s loading "
           "the tokenizer), cache hit rate %.1f%%\n",
           c.o.prefix, (long long)docs, (long long)n_empty, (long long)toks,
           mt_tokenizer_name(c.tok),
           dtype == MT_DTYPE_UINT16 ? "uint16" : "int32", c.in.size / 1e6, dt,
           c.in.size / 1e6 / dt, c.o.workers, c.o.workers > 1 ? "s" : "", t_load,
           lk ? 100.0 * (double)hit / (double)lk : 0.0);
  ctx_free(&c);
  return 0;
}
