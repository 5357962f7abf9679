/* core/safetensors_dir.c — a Hugging Face model directory: model.safetensors
 * or shards with model.safetensors.index.json (see core/safetensors.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "core/util.h"

#define INDEX_NAME "model.safetensors.index.json"

struct mt_st_dir {
  int n_files;
  mt_st_file **files;
  char **file_names;
  int n;
  int *file_of; /* per tensor: its file */
  int *idx_in;  /* per tensor: its index in that file */
};

void mt_st_dir_close(mt_st_dir *d) {
  if (!d) return;
  for (int i = 0; i < d->n_files; i++) {
    mt_st_close(d->files[i]);
    free(d->file_names[i]);
  }
  free(d->files);
  free(d->file_names);
  free(d->file_of);
  free(d->idx_in);
  free(d);
}

static int add_file(mt_st_dir *d, const char *dir, const char *name, char *err, size_t errlen) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  mt_st_file *f;
  if (mt_st_open(path, &f, err, errlen)) return -1;
  d->files = mt_xrealloc(d->files, (size_t)(d->n_files + 1) * sizeof *d->files);
  d->file_names = mt_xrealloc(d->file_names, (size_t)(d->n_files + 1) * sizeof(char *));
  d->files[d->n_files] = f;
  d->file_names[d->n_files] = mt_xstrdup(path);
  int k = mt_st_count(f);
  d->file_of = mt_xrealloc(d->file_of, (size_t)(d->n + k + 1) * sizeof(int));
  d->idx_in = mt_xrealloc(d->idx_in, (size_t)(d->n + k + 1) * sizeof(int));
  for (int i = 0; i < k; i++) {
    d->file_of[d->n] = d->n_files;
    d->idx_in[d->n++] = i;
  }
  d->n_files++;
  return 0;
}

static int file_index(const mt_st_dir *d, const char *dir, const char *name) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  for (int i = 0; i < d->n_files; i++)
    if (!strcmp(d->file_names[i], path)) return i;
  return -1;
}

static int open_index(mt_st_dir *d, const char *dir, const char *ipath, char *err,
                      size_t errlen) {
  size_t len;
  int e;
  char *text = mt_read_file(ipath, 64u << 20, &len, &e);
  if (!text) {
    snprintf(err, errlen, "cannot read '%s': %s", ipath, strerror(e));
    return -1;
  }
  char what[4200];
  snprintf(what, sizeof what, "'%s' is not valid JSON", ipath);
  cJSON *root = mt_json_parse(text, len, MT_JSON_INT53, what, err, errlen);
  free(text);
  if (!root) return -1;
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  int rc = -1;
  if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
    snprintf(err, errlen, "'%s' is not a JSON object with a \"weight_map\" object", ipath);
    goto out;
  }
  if (!wm->child) {
    snprintf(err, errlen, "'%s': \"weight_map\" lists no tensors", ipath);
    goto out;
  }
  for (const cJSON *e2 = wm->child; e2; e2 = e2->next) {
    if (!cJSON_IsString(e2) || !e2->valuestring[0] || strchr(e2->valuestring, '/')) {
      snprintf(err, errlen,
               "'%s': weight_map entry '%s' is not a file name of this directory", ipath,
               e2->string);
      goto out;
    }
    if (file_index(d, dir, e2->valuestring) < 0 &&
        add_file(d, dir, e2->valuestring, err, errlen))
      goto out;
  }
  /* every listed tensor is in its file, and every tensor of the files is listed */
  for (const cJSON *e2 = wm->child; e2; e2 = e2->next) {
    int fi = file_index(d, dir, e2->valuestring);
    if (mt_st_find(d->files[fi], e2->string) < 0) {
      snprintf(err, errlen, "'%s' maps tensor '%s' to '%s', which does not hold it", ipath,
               e2->string, e2->valuestring);
      goto out;
    }
  }
  for (int i = 0; i < d->n; i++) {
    const mt_st_info *t = mt_st_dir_info(d, i);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(wm, t->name);
    if (!m || file_index(d, dir, m->valuestring) != d->file_of[i]) {
      snprintf(err, errlen, "tensor '%s' of '%s' is not mapped to that file by '%s'", t->name,
               d->file_names[d->file_of[i]], ipath);
      goto out;
    }
  }
  rc = 0;
out:
  cJSON_Delete(root);
  return rc;
}

int mt_st_dir_open(const char *dir, mt_st_dir **out, char *err, size_t errlen) {
  *out = NULL;
  mt_st_dir *d = mt_xcalloc(1, sizeof *d);
  char ipath[2048];
  struct stat st;
  snprintf(ipath, sizeof ipath, "%s/" INDEX_NAME, dir);
  int rc = !stat(ipath, &st) ? open_index(d, dir, ipath, err, errlen)
                             : add_file(d, dir, "model.safetensors", err, errlen);
  if (rc) {
    mt_st_dir_close(d);
    return -1;
  }
  /* a tensor in two files (the index maps each name to one file, so only
   * possible without it being consistent; checked anyway) */
  for (int i = 0; i < d->n; i++) {
    int j = mt_st_dir_find(d, mt_st_dir_info(d, i)->name);
    if (j != i) {
      snprintf(err, errlen, "tensor '%s' is in both '%s' and '%s'", mt_st_dir_info(d, i)->name,
               d->file_names[d->file_of[j]], d->file_names[d->file_of[i]]);
      mt_st_dir_close(d);
      return -1;
    }
  }
  *out = d;
  return 0;
}

int mt_st_dir_count(const mt_st_dir *d) { return d->n; }

const mt_st_info *mt_st_dir_info(const mt_st_dir *d, int i) {
  return mt_st_info_at(d->files[d->file_of[i]], d->idx_in[i]);
}

int mt_st_dir_find(const mt_st_dir *d, const char *name) {
  for (int f = 0, base = 0; f < d->n_files; base += mt_st_count(d->files[f]), f++) {
    int i = mt_st_find(d->files[f], name);
    if (i >= 0) return base + i;
  }
  return -1;
}

const char *mt_st_dir_file(const mt_st_dir *d, int i) { return d->file_names[d->file_of[i]]; }

int mt_st_dir_read(mt_st_dir *d, int i, void *dst, char *err, size_t errlen) {
  return mt_st_read(d->files[d->file_of[i]], d->idx_in[i], dst, err, errlen);
}

int mt_st_dir_write(const char *dir, const mt_st_tensor *t, int n, uint64_t max_shard_bytes,
                    const char *const *meta_kv, int n_meta, char *err, size_t errlen) {
  uint64_t total = 0;
  for (int i = 0; i < n; i++) total += mt_st_tensor_bytes(&t[i]);
  char path[2048];
  if (max_shard_bytes == 0 || total <= max_shard_bytes) {
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return mt_st_write(path, t, n, meta_kv, n_meta, err, errlen);
  }
  /* shards: [first[k], first[k+1]) tensors each */
  int *first = mt_xmalloc(((size_t)n + 2) * sizeof(int));
  int n_shards = 0;
  uint64_t cur = 0;
  for (int i = 0; i < n; i++) {
    uint64_t b = mt_st_tensor_bytes(&t[i]);
    if (i == 0 || cur + b > max_shard_bytes) {
      first[n_shards++] = i;
      cur = 0;
    }
    cur += b;
  }
  first[n_shards] = n;
  cJSON *root = cJSON_CreateObject();
  cJSON *md = cJSON_AddObjectToObject(root, "metadata");
  cJSON_AddItemToObject(md, "total_size", mt_json_uint((uint64_t)total));
  cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
  int rc = 0;
  for (int k = 0; k < n_shards && !rc; k++) {
    char name[64];
    snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n_shards);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rc = mt_st_write(path, t + first[k], first[k + 1] - first[k], meta_kv, n_meta, err, errlen);
    for (int i = first[k]; i < first[k + 1]; i++) cJSON_AddStringToObject(wm, t[i].name, name);
  }
  if (!rc) {
    char *text = cJSON_Print(root);
    snprintf(path, sizeof path, "%s/" INDEX_NAME, dir);
    rc = mt_write_file_synced(path, text, strlen(text), err, errlen);
    cJSON_free(text);
  }
  cJSON_Delete(root);
  free(first);
  return rc;
}
