/* data/indexed_dataset.c — MMIDIDX writer/reader and llm.c shard reader (see
 * indexed_dataset.h for the byte layouts). */
#include "data/indexed_dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"

static const char k_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

int mt_mmidx_optimal_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? MT_DTYPE_UINT16 : MT_DTYPE_INT32;
}

static size_t dtype_size(int code) {
  switch (code) {
    case MT_DTYPE_UINT8: case MT_DTYPE_INT8: return 1;
    case MT_DTYPE_INT16: case MT_DTYPE_UINT16: return 2;
    case MT_DTYPE_INT32: case MT_DTYPE_FLOAT32: return 4;
    case MT_DTYPE_INT64: case MT_DTYPE_FLOAT64: return 8;
    default: return 0;
  }
}

/* ---- writer --------------------------------------------------------- */

struct mt_mmidx_writer {
  char prefix[1024];
  char tmp_bin[1100], tmp_idx[1100];
  FILE *bin;
  int dtype;
  int32_t *lens;
  size_t n, cap;
  int64_t tokens;
  void *buf;
  size_t bufcap;
};

mt_mmidx_writer *mt_mmidx_writer_open(const char *prefix, int dtype, char *err, size_t errlen) {
  if (dtype != MT_DTYPE_UINT16 && dtype != MT_DTYPE_INT32) {
    snprintf(err, errlen, "%s: token dtype code %d not supported for writing", prefix, dtype);
    return NULL;
  }
  if (strlen(prefix) >= 1024) {
    snprintf(err, errlen, "output prefix too long");
    return NULL;
  }
  mt_mmidx_writer *w = mt_xcalloc(1, sizeof(*w));
  snprintf(w->prefix, sizeof(w->prefix), "%s", prefix);
  snprintf(w->tmp_bin, sizeof(w->tmp_bin), "%s.bin.tmp", prefix);
  snprintf(w->tmp_idx, sizeof(w->tmp_idx), "%s.idx.tmp", prefix);
  w->dtype = dtype;
  w->bin = fopen(w->tmp_bin, "wb");
  if (!w->bin) {
    snprintf(err, errlen, "cannot write %s: %s", w->tmp_bin, strerror(errno));
    free(w);
    return NULL;
  }
  setvbuf(w->bin, NULL, _IOFBF, 1 << 20);
  return w;
}

int mt_mmidx_writer_add(mt_mmidx_writer *w, const int32_t *ids, size_t n, char *err,
                        size_t errlen) {
  if (n > INT32_MAX) {
    snprintf(err, errlen, "%s: document of %zu tokens exceeds int32 sequence length", w->prefix, n);
    return -1;
  }
  size_t isz = dtype_size(w->dtype);
  if (n * isz > w->bufcap) {
    w->bufcap = n * isz * 2;
    w->buf = mt_xrealloc(w->buf, w->bufcap);
  }
  if (w->dtype == MT_DTYPE_UINT16) {
    uint16_t *o = w->buf;
    for (size_t i = 0; i < n; i++) {
      if (ids[i] < 0 || ids[i] > 65535) {
        snprintf(err, errlen, "%s: token id %d does not fit uint16", w->prefix, ids[i]);
        return -1;
      }
      o[i] = (uint16_t)ids[i];
    }
  } else {
    memcpy(w->buf, ids, n * 4);
  }
  if (fwrite(w->buf, isz, n, w->bin) != n) {
    snprintf(err, errlen, "cannot write %s: %s", w->tmp_bin, strerror(errno));
    return -1;
  }
  if (w->n == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 4096;
    w->lens = mt_xrealloc(w->lens, w->cap * sizeof(int32_t));
  }
  w->lens[w->n++] = (int32_t)n;
  w->tokens += (int64_t)n;
  return 0;
}

void mt_mmidx_writer_counts(const mt_mmidx_writer *w, int64_t *docs, int64_t *tokens) {
  *docs = (int64_t)w->n;
  *tokens = w->tokens;
}

static void writer_free(mt_mmidx_writer *w) {
  if (w->bin) fclose(w->bin);
  free(w->lens);
  free(w->buf);
  free(w);
}

void mt_mmidx_writer_abort(mt_mmidx_writer *w) {
  if (!w) return;
  if (w->bin) fclose(w->bin);
  w->bin = NULL;
  unlink(w->tmp_bin);
  unlink(w->tmp_idx);
  writer_free(w);
}

int mt_mmidx_writer_finish(mt_mmidx_writer *w, char *err, size_t errlen) {
  int bad = fflush(w->bin) != 0 || ferror(w->bin);
  bad |= fclose(w->bin) != 0;
  w->bin = NULL;
  if (bad) {
    snprintf(err, errlen, "cannot write %s: %s", w->tmp_bin, strerror(errno));
    mt_mmidx_writer_abort(w);
    return -1;
  }
  FILE *f = fopen(w->tmp_idx, "wb");
  if (!f) {
    snprintf(err, errlen, "cannot write %s: %s", w->tmp_idx, strerror(errno));
    mt_mmidx_writer_abort(w);
    return -1;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  uint64_t version = 1, s = w->n, d = w->n + 1;
  uint8_t code = (uint8_t)w->dtype;
  fwrite(k_magic, 1, 9, f);
  fwrite(&version, 8, 1, f);
  fwrite(&code, 1, 1, f);
  fwrite(&s, 8, 1, f);
  fwrite(&d, 8, 1, f);
  fwrite(w->lens, 4, w->n, f);
  int64_t ptr = 0, isz = (int64_t)dtype_size(w->dtype);
  for (size_t i = 0; i < w->n; i++) {
    fwrite(&ptr, 8, 1, f);
    ptr += (int64_t)w->lens[i] * isz;
  }
  for (uint64_t i = 0; i < d; i++) {
    int64_t v = (int64_t)i;
    fwrite(&v, 8, 1, f);
  }
  bad = ferror(f) != 0;
  bad |= fclose(f) != 0;
  char bin[1100], idx[1100];
  snprintf(bin, sizeof(bin), "%s.bin", w->prefix);
  snprintf(idx, sizeof(idx), "%s.idx", w->prefix);
  if (bad || rename(w->tmp_bin, bin) != 0 || rename(w->tmp_idx, idx) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", idx, strerror(errno));
    mt_mmidx_writer_abort(w);
    return -1;
  }
  writer_free(w);
  return 0;
}

/* ---- reader --------------------------------------------------------- */

static uint64_t rd_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

int mt_mmidx_parse(mt_token_source *s, const uint8_t *idx, size_t size, size_t bin_size,
                   const char *name, char *err, size_t errlen) {
  if (size < MT_MMIDX_HEADER_BYTES) {
    snprintf(err, errlen, "%s: truncated index (%zu bytes, header needs %d)", name, size,
             MT_MMIDX_HEADER_BYTES);
    return -1;
  }
  if (memcmp(idx, k_magic, 9) != 0) {
    snprintf(err, errlen, "%s: wrong magic (not a Megatron MMIDIDX index)", name);
    return -1;
  }
  uint64_t version = rd_u64(idx + 9);
  if (version != 1) {
    snprintf(err, errlen, "%s: unsupported MMIDIDX version %" PRIu64 " (expected 1)", name, version);
    return -1;
  }
  int code = idx[17];
  size_t isz = dtype_size(code);
  if (isz == 0 || code == MT_DTYPE_FLOAT32 || code == MT_DTYPE_FLOAT64) {
    snprintf(err, errlen, "%s: dtype code %d is not an integer token type", name, code);
    return -1;
  }
  uint64_t ns = rd_u64(idx + 18), nd = rd_u64(idx + 26);
  size_t body = size - MT_MMIDX_HEADER_BYTES;
  if (ns > body / 12 || nd > (body - ns * 12) / 8 || ns * 12 + nd * 8 != body) {
    snprintf(err, errlen,
             "%s: truncated or oversized index (%zu bytes; %" PRIu64 " sequences and %" PRIu64
             " document indices need %s)",
             name, size, ns, nd, "34 + 12*S + 8*D bytes");
    return -1;
  }
  const uint8_t *lens = idx + MT_MMIDX_HEADER_BYTES, *ptrs = lens + 4 * ns, *docs = ptrs + 8 * ns;
  s->dtype = code;
  s->itemsize = isz;
  s->n_docs = (int64_t)ns;
  s->doc_len = mt_xmalloc((ns ? ns : 1) * sizeof(int32_t));
  s->doc_off = mt_xmalloc((ns ? ns : 1) * sizeof(int64_t));
  s->n_mm_docs = (int64_t)nd;
  s->mm_doc_index = mt_xmalloc((nd ? nd : 1) * sizeof(int64_t));
  s->n_tokens = 0;
  for (uint64_t i = 0; i < ns; i++) {
    int32_t l;
    int64_t p;
    memcpy(&l, lens + 4 * i, 4);
    memcpy(&p, ptrs + 8 * i, 8);
    if (l < 0 || p < 0 || (uint64_t)p % isz != 0 || (uint64_t)p > bin_size ||
        (uint64_t)l > (bin_size - (uint64_t)p) / isz) {
      snprintf(err, errlen,
               "%s: sequence %" PRIu64 " (length %d at byte %" PRId64
               ") lies outside the .bin of %zu bytes (.bin shorter than the index says?)",
               name, i, l, p, bin_size);
      return -1;
    }
    s->doc_len[i] = l;
    s->doc_off[i] = p / (int64_t)isz;
    s->n_tokens += l;
  }
  for (uint64_t i = 0; i < nd; i++) {
    int64_t v;
    memcpy(&v, docs + 8 * i, 8);
    s->mm_doc_index[i] = v;
    if ((i == 0 && v != 0) || v < 0 || (uint64_t)v > ns || (i > 0 && v < s->mm_doc_index[i - 1])) {
      snprintf(err, errlen, "%s: document_indices[%" PRIu64 "] = %" PRId64
               " is not a non-decreasing sequence index starting at 0", name, i, v);
      return -1;
    }
  }
  if (nd > 0 && (uint64_t)s->mm_doc_index[nd - 1] != ns) {
    snprintf(err, errlen, "%s: last document index %" PRId64 " != sequence count %" PRIu64, name,
             s->mm_doc_index[nd - 1], ns);
    return -1;
  }
  return 0;
}

static int open_llmc(mt_token_source *s, const char *path, char *err, size_t errlen) {
  s->kind = MT_SOURCE_LLMC;
  if (mt_mmap_open(&s->bin, path, err, errlen) != 0) return -1;
  if (s->bin.size < 1024) {
    snprintf(err, errlen, "%s: truncated llm.c shard (header needs 1024 bytes)", path);
    return -1;
  }
  int32_t h[3];
  memcpy(h, s->bin.data, sizeof(h));
  if (h[1] != 1) {
    snprintf(err, errlen, "%s: llm.c shard version %d not supported (expected 1: uint16 tokens)",
             path, h[1]);
    return -1;
  }
  if (h[2] < 0 || (uint64_t)h[2] * 2 != s->bin.size - 1024) {
    snprintf(err, errlen, "%s: header says %d tokens but the file holds %zu bytes of tokens", path,
             h[2], s->bin.size - 1024);
    return -1;
  }
  s->dtype = MT_DTYPE_UINT16;
  s->itemsize = 2;
  s->tokens = s->bin.data + 1024;
  s->n_tokens = h[2];
  /* documents start at position 0 and at every EOT */
  const uint16_t *t = (const uint16_t *)(const void *)s->tokens;
  int64_t n = 0, cap = 1024;
  s->doc_off = mt_xmalloc((size_t)cap * sizeof(int64_t));
  for (int64_t i = 0; i < s->n_tokens; i++) {
    if (i == 0 || t[i] == MT_LLMC_EOT) {
      if (i > 0 && n > 0 && s->doc_off[n - 1] == i) continue;
      if (n == cap) s->doc_off = mt_xrealloc(s->doc_off, (size_t)(cap *= 2) * sizeof(int64_t));
      s->doc_off[n++] = i;
    }
  }
  s->n_docs = n;
  s->doc_len = mt_xmalloc((size_t)(n ? n : 1) * sizeof(int32_t));
  for (int64_t d = 0; d < n; d++) {
    int64_t end = d + 1 < n ? s->doc_off[d + 1] : s->n_tokens;
    s->doc_len[d] = (int32_t)(end - s->doc_off[d]);
  }
  return 0;
}

static int file_has_llmc_magic(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  int32_t m = 0;
  size_t r = fread(&m, 4, 1, f);
  fclose(f);
  return r == 1 && m == MT_LLMC_MAGIC;
}

int mt_token_source_open(mt_token_source *s, const char *path, char *err, size_t errlen) {
  memset(s, 0, sizeof(*s));
  snprintf(s->path, sizeof(s->path), "%s", path);
  int rc;
  if (file_has_llmc_magic(path)) {
    rc = open_llmc(s, path, err, errlen);
  } else {
    char prefix[1024], ipath[1100], bpath[1100];
    snprintf(prefix, sizeof(prefix), "%s", path);
    size_t l = strlen(prefix);
    if (l > 4 && (strcmp(prefix + l - 4, ".bin") == 0 || strcmp(prefix + l - 4, ".idx") == 0)) {
      snprintf(ipath, sizeof(ipath), "%.*s.idx", (int)(l - 4), prefix);
      if (access(ipath, F_OK) == 0) prefix[l - 4] = 0;
    }
    snprintf(s->path, sizeof(s->path), "%s", prefix);
    snprintf(ipath, sizeof(ipath), "%s.idx", prefix);
    snprintf(bpath, sizeof(bpath), "%s.bin", prefix);
    s->kind = MT_SOURCE_MMIDX;
    if (access(ipath, F_OK) != 0 && access(path, F_OK) == 0) {
      snprintf(err, errlen, "%s: neither an llm.c shard (magic %d) nor a Megatron prefix (%s missing)",
               path, MT_LLMC_MAGIC, ipath);
      rc = -1;
    } else {
      rc = mt_mmap_open(&s->idx, ipath, err, errlen);
      if (rc == 0) rc = mt_mmap_open(&s->bin, bpath, err, errlen);
      if (rc == 0)
        rc = mt_mmidx_parse(s, s->idx.data, s->idx.size, s->bin.size, ipath, err, errlen);
      if (rc == 0) s->tokens = s->bin.data;
    }
  }
  if (rc != 0) mt_token_source_close(s);
  return rc;
}

void mt_token_source_close(mt_token_source *s) {
  mt_mmap_close(&s->bin);
  mt_mmap_close(&s->idx);
  free(s->doc_len);
  free(s->doc_off);
  free(s->mm_doc_index);
  s->doc_len = NULL;
  s->doc_off = NULL;
  s->mm_doc_index = NULL;
  s->n_docs = 0;
}

void mt_token_source_read(const mt_token_source *s, int64_t doc, int64_t off, int64_t n,
                          int32_t *out) {
  const uint8_t *p = s->tokens + (size_t)(s->doc_off[doc] + off) * s->itemsize;
  switch (s->dtype) {
    case MT_DTYPE_UINT16: {
      uint16_t v;
      for (int64_t i = 0; i < n; i++) {
        memcpy(&v, p + 2 * i, 2);
        out[i] = v;
      }
      break;
    }
    case MT_DTYPE_INT32: memcpy(out, p, (size_t)n * 4); break;
    case MT_DTYPE_UINT8: for (int64_t i = 0; i < n; i++) out[i] = p[i]; break;
    case MT_DTYPE_INT8: for (int64_t i = 0; i < n; i++) out[i] = (int8_t)p[i]; break;
    case MT_DTYPE_INT16: {
      int16_t v;
      for (int64_t i = 0; i < n; i++) {
        memcpy(&v, p + 2 * i, 2);
        out[i] = v;
      }
      break;
    }
    case MT_DTYPE_INT64: {
      int64_t v;
      for (int64_t i = 0; i < n; i++) {
        memcpy(&v, p + 8 * i, 8);
        out[i] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
      }
      break;
    }
    default: mt_fatal("unreachable dtype %d", s->dtype);
  }
}

void mt_token_source_minmax(const mt_token_source *s, int64_t *min_id, int64_t *max_id) {
  int64_t lo = INT64_MAX, hi = -1;
  int32_t buf[4096];
  for (int64_t d = 0; d < s->n_docs; d++) {
    for (int64_t o = 0; o < s->doc_len[d]; o += 4096) {
      int64_t k = s->doc_len[d] - o < 4096 ? s->doc_len[d] - o : 4096;
      mt_token_source_read(s, d, o, k, buf);
      for (int64_t i = 0; i < k; i++) {
        if (buf[i] < lo) lo = buf[i];
        if (buf[i] > hi) hi = buf[i];
      }
    }
  }
  *min_id = lo == INT64_MAX ? -1 : lo;
  *max_id = hi;
}
