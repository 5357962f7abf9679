/* core/safetensors.c — one safetensors file: validation, reading (pread)
 * and writing (see core/safetensors.h). */
#include "core/safetensors.h"
#include "core/safetensors_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/util.h"

static const struct {
  const char *name;
  size_t size;
} k_dtypes[MT_ST_N_DTYPES] = {
    {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2},  {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4},  {"F64", 8}, {"I64", 8},     {"U64", 8},
};

const char *mt_st_dtype_name(mt_st_dtype t) {
  return (unsigned)t < MT_ST_N_DTYPES ? k_dtypes[t].name : NULL;
}

size_t mt_st_dtype_size(mt_st_dtype t) {
  return (unsigned)t < MT_ST_N_DTYPES ? k_dtypes[t].size : 0;
}

int mt_st_dtype_parse(const char *s) {
  for (int i = 0; i < MT_ST_N_DTYPES; i++)
    if (!strcmp(s, k_dtypes[i].name)) return i;
  return -1;
}

#define FAIL(...)                                             \
  do {                                                        \
    int k_ = snprintf(err, errlen, "safetensors file '%s': ", path); \
    if (k_ >= 0 && (size_t)k_ < errlen) snprintf(err + k_, errlen - (size_t)k_, __VA_ARGS__); \
    goto fail;                                                \
  } while (0)

/* A JSON number that is an integer in [0, 2^53]. */
static int json_uint(const cJSON *j, uint64_t *v) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return 0;
  *v = (uint64_t)d;
  return 1;
}

static int by_begin(const void *a, const void *b) {
  const mt_st_info *x = *(const mt_st_info *const *)a, *y = *(const mt_st_info *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const mt_st_info *const *)a)->name, (*(const mt_st_info *const *)b)->name);
}

/* Fill f->t from the parsed header; buf_size is the byte buffer's length. */
static int parse_header(mt_st_file *f, const cJSON *root, uint64_t buf_size, const char *path,
                        char *err, size_t errlen) {
  mt_st_info **order = NULL;
  int n = 0, n_kv = 0, seen_meta = 0;
  for (const cJSON *e = root->child; e; e = e->next) {
    n++;
    if (e->string && !strcmp(e->string, "__metadata__"))
      for (const cJSON *m = e->child; m; m = m->next) n_kv++;
  }
  f->t = mt_xcalloc((size_t)n + 1, sizeof(mt_st_info));
  f->meta = mt_xcalloc(2 * (size_t)n_kv + 2, sizeof(char *)); /* key, value per entry */
  for (const cJSON *e = root->child; e; e = e->next) {
    if (!e->string) FAIL("header entry without a name");
    if (!strcmp(e->string, "__metadata__")) {
      if (seen_meta++) FAIL("__metadata__ is given twice");
      if (!cJSON_IsObject(e)) FAIL("__metadata__ is not an object of strings");
      for (const cJSON *m = e->child; m; m = m->next) {
        if (!cJSON_IsString(m))
          FAIL("__metadata__ value of '%s' is not a string (the format allows only strings)",
               m->string);
        f->meta[2 * f->n_meta] = mt_xstrdup(m->string);
        f->meta[2 * f->n_meta + 1] = mt_xstrdup(m->valuestring);
        f->n_meta++;
      }
      continue;
    }
    mt_st_info *t = &f->t[f->n];
    if (strlen(e->string) >= sizeof t->name)
      FAIL("tensor name '%.60s...' is longer than %d bytes", e->string, MT_ST_NAME_MAX - 1);
    snprintf(t->name, sizeof t->name, "%s", e->string);
    if (!cJSON_IsObject(e)) FAIL("tensor '%s': entry is not an object", t->name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd)) FAIL("tensor '%s': \"dtype\" missing or not a string", t->name);
    int dt = mt_st_dtype_parse(jd->valuestring);
    if (dt < 0)
      FAIL("tensor '%s': unknown dtype \"%.32s\" (expected one of BOOL, U8, I8, F8_E5M2, "
           "F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64)",
           t->name, jd->valuestring);
    t->dtype = (mt_st_dtype)dt;
    if (!cJSON_IsArray(js) || cJSON_GetArraySize(js) > MT_ST_MAX_DIMS)
      FAIL("tensor '%s': \"shape\" is not a list of at most %d non-negative integers", t->name,
           MT_ST_MAX_DIMS);
    t->numel = 1;
    int overflow = 0;
    for (const cJSON *d = js->child; d; d = d->next) {
      uint64_t v;
      if (!json_uint(d, &v))
        FAIL("tensor '%s': \"shape\" is not a list of non-negative integers", t->name);
      t->shape[t->ndim++] = (int64_t)v;
      if (v && (uint64_t)t->numel > UINT64_MAX / 16 / v) overflow = 1;
      else t->numel *= (int64_t)v;
    }
    uint64_t b, en;
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || !json_uint(jo->child, &b) ||
        !json_uint(jo->child->next, &en))
      FAIL("tensor '%s': \"data_offsets\" is not [begin, end] (non-negative integers)", t->name);
    if (b > en) FAIL("tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are reversed", t->name, b, en);
    if (en > buf_size)
      FAIL("tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] reach beyond the data buffer "
           "of %" PRIu64 " bytes (file truncated?)",
           t->name, b, en, buf_size);
    uint64_t want = overflow ? UINT64_MAX : (uint64_t)t->numel * mt_st_dtype_size(t->dtype);
    if (en - b != want)
      FAIL("tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
           " bytes but shape x %s needs %" PRIu64,
           t->name, b, en, en - b, k_dtypes[t->dtype].name, want);
    t->begin = b;
    t->end = en;
    f->n++;
  }
  order = mt_xmalloc(((size_t)f->n + 1) * sizeof *order);
  for (int i = 0; i < f->n; i++) order[i] = &f->t[i];
  qsort(order, (size_t)f->n, sizeof *order, by_name);
  for (int i = 1; i < f->n; i++)
    if (!strcmp(order[i]->name, order[i - 1]->name))
      FAIL("tensor '%s' is listed twice in the header", order[i]->name);
  qsort(order, (size_t)f->n, sizeof *order, by_begin);
  uint64_t pos = 0;
  for (int i = 0; i < f->n; i++) {
    if (order[i]->begin < pos)
      FAIL("tensors '%s' and '%s' overlap (data_offsets [%" PRIu64 ", %" PRIu64 "] and [%" PRIu64
           ", %" PRIu64 "])",
           order[i - 1]->name, order[i]->name, order[i - 1]->begin, order[i - 1]->end,
           order[i]->begin, order[i]->end);
    if (order[i]->begin > pos)
      FAIL("bytes [%" PRIu64 ", %" PRIu64 ") of the data buffer belong to no tensor (the format "
           "has no holes); next tensor '%s'",
           pos, order[i]->begin, order[i]->name);
    pos = order[i]->end;
  }
  if (pos != buf_size)
    FAIL("the data buffer has %" PRIu64 " bytes but the tensors cover %" PRIu64
         " (trailing bytes)", buf_size, pos);
  free(order);
  return 0;
fail:
  free(order);
  return -1;
}

int mt_st_open(const char *path, mt_st_file **out, char *err, size_t errlen) {
  *out = NULL;
  mt_st_file *f = mt_xcalloc(1, sizeof *f);
  char *hdr = NULL;
  cJSON *root = NULL;
  snprintf(f->path, sizeof f->path, "%s", path);
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) FAIL("cannot open: %s", strerror(errno));
  struct stat st;
  if (fstat(f->fd, &st) || !S_ISREG(st.st_mode)) FAIL("not a regular file");
  uint64_t size = (uint64_t)st.st_size;
  unsigned char lenb[8];
  if (size < 8 || pread(f->fd, lenb, 8, 0) != 8)
    FAIL("%" PRIu64 " bytes: too short for the 8-byte header length (truncated?)", size);
  uint64_t hn = 0;
  for (int i = 7; i >= 0; i--) hn = hn << 8 | lenb[i];
  if (hn > MT_ST_HEADER_MAX)
    FAIL("header length %" PRIu64 " is above the format's limit of %u bytes (not a "
         "safetensors file?)", hn, MT_ST_HEADER_MAX);
  if (hn > size - 8)
    FAIL("header length %" PRIu64 " reaches beyond the end of the file (%" PRIu64
         " bytes; truncated?)", hn, size);
  hdr = mt_xmalloc(hn + 1);
  if (pread(f->fd, hdr, hn, 8) != (ssize_t)hn) FAIL("cannot read the header: %s", strerror(errno));
  hdr[hn] = 0;
  mt_json_error je;
  if (mt_json_check(hdr, hn, MT_JSON_INT53, &je)) {
    if (strstr(je.what, "after the JSON value")) /* only the padding may follow the object */
      FAIL("the header has bytes after its JSON object (at header byte %ld)", (long)je.offset);
    FAIL("the header is not valid JSON: line %d, column %d: %s%s%s", je.line, je.col, je.what,
         je.path[0] ? " at " : "", je.path);
  }
  root = cJSON_ParseWithLength(hdr, hn);
  if (!root) FAIL("the header cannot be parsed (out of memory)");
  if (!cJSON_IsObject(root)) FAIL("the header is not a JSON object");
  f->data_start = 8 + hn;
  if (parse_header(f, root, size - 8 - hn, path, err, errlen)) goto fail;
  cJSON_Delete(root);
  free(hdr);
  *out = f;
  return 0;
fail:
  cJSON_Delete(root);
  free(hdr);
  mt_st_close(f);
  return -1;
}

void mt_st_close(mt_st_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  for (int i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
  free(f->meta);
  free(f->t);
  free(f);
}

int mt_st_count(const mt_st_file *f) { return f->n; }
const mt_st_info *mt_st_info_at(const mt_st_file *f, int i) { return &f->t[i]; }

int mt_st_find(const mt_st_file *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->t[i].name, name)) return i;
  return -1;
}

int mt_st_read(mt_st_file *f, int i, void *dst, char *err, size_t errlen) {
  const mt_st_info *t = &f->t[i];
  uint64_t n = t->end - t->begin, done = 0;
  while (done < n) {
    ssize_t r = pread(f->fd, (char *)dst + done, n - done, (off_t)(f->data_start + t->begin + done));
    if (r <= 0) {
      snprintf(err, errlen, "safetensors file '%s': tensor '%s': %s", f->path, t->name,
               r < 0 ? strerror(errno) : "file ends before its data (truncated?)");
      return -1;
    }
    done += (uint64_t)r;
  }
  return 0;
}

uint64_t mt_st_tensor_bytes(const mt_st_tensor *t) {
  uint64_t n = mt_st_dtype_size(t->dtype);
  for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
  return n;
}

static int write_all(FILE *fp, const void *p, size_t n) { return fwrite(p, 1, n, fp) == n ? 0 : -1; }

int mt_st_write(const char *path, const mt_st_tensor *t, int n, const char *const *meta_kv,
                int n_meta, char *err, size_t errlen) {
  cJSON *root = cJSON_CreateObject();
  char *hdr = NULL;
  FILE *fp = NULL;
  if (n_meta > 0) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta_kv[2 * i], meta_kv[2 * i + 1]);
  }
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    if (cJSON_GetObjectItemCaseSensitive(root, t[i].name))
      FAIL("tensor '%s' given twice", t[i].name);
    cJSON *o = cJSON_AddObjectToObject(root, t[i].name);
    cJSON_AddStringToObject(o, "dtype", mt_st_dtype_name(t[i].dtype));
    cJSON *s = cJSON_AddArrayToObject(o, "shape");
    for (int d = 0; d < t[i].ndim; d++) cJSON_AddItemToArray(s, mt_json_int((int64_t)t[i].shape[d]));
    uint64_t nb = mt_st_tensor_bytes(&t[i]);
    cJSON *jo = cJSON_AddArrayToObject(o, "data_offsets");
    cJSON_AddItemToArray(jo, mt_json_uint(off));
    cJSON_AddItemToArray(jo, mt_json_uint(off + nb));
    off += nb;
  }
  hdr = cJSON_PrintUnformatted(root);
  size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
  unsigned char lenb[8];
  for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  fp = fopen(path, "wb");
  if (!fp) FAIL("cannot create: %s", strerror(errno));
  if (write_all(fp, lenb, 8) || write_all(fp, hdr, hl) ||
      write_all(fp, "        ", padded - hl))
    FAIL("write failed: %s", strerror(errno));
  for (int i = 0; i < n; i++)
    if (write_all(fp, t[i].data, (size_t)mt_st_tensor_bytes(&t[i])))
      FAIL("write of tensor '%s' failed: %s", t[i].name, strerror(errno));
  if (fflush(fp) || fsync(fileno(fp))) FAIL("write failed: %s", strerror(errno));
  int rc = fclose(fp);
  fp = NULL;
  if (rc) FAIL("close failed: %s", strerror(errno));
  cJSON_free(hdr);
  cJSON_Delete(root);
  return 0;
fail:
  if (fp) fclose(fp);
  cJSON_free(hdr);
  cJSON_Delete(root);
  return -1;
}

int mt_st_parse_size(const char *s, uint64_t *bytes) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !(v >= 0)) return -1;
  static const struct {
    const char *u;
    double m;
  } units[] = {{"", 1},       {"B", 1},          {"KB", 1e3},          {"MB", 1e6},
               {"GB", 1e9},   {"TB", 1e12},      {"KiB", 1024.0},      {"MiB", 1048576.0},
               {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (!strcmp(end, units[i].u)) {
      double b = v * units[i].m;
      if (b > 1.8e19) return -1;
      *bytes = (uint64_t)b;
      return 0;
    }
  return -1;
}
