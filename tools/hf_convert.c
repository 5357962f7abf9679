/* tools/hf_convert.c — Hugging Face export and import of layout-free
 * checkpoints (see tools/hf_convert.h). */
#include "tools/hf_convert.h"
#include "tools/hf_tokenizer_files.h"
#include "checkpoint/fp8_meta.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "core/dtype.h"
#include "core/fileio.h"
#include "core/safetensors.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint.h"
#include "tools/hf_map.h"

/* ---- element conversions (little-endian hosts, as the formats are) ---- */
static float f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0x1f) u = s | 0x7f800000u | (m << 13);
  else if (e) u = s | ((e + 112) << 23) | (m << 13);
  else if (!m) u = s;
  else { /* subnormal: normalise */
    e = 113;
    while (!(m & 0x400)) m <<= 1, e--;
    u = s | (e << 23) | ((m & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The config of a checkpoint or a file, read for one process: the parallel
 * section does not shape any tensor, so it is reset (a checkpoint has no
 * layout; the run that loads it brings its own). */
static int load_config_x(mt_config *cfg, const char *path, const char *json, const char *x1,
                         const char *x2, char *err, size_t errlen) {
  /* null: the key left out (derived or default), so that none is given where
   * it has no effect */
  const char *ov[] = {
      "parallel.tensor_model_parallel_size=1",  "parallel.pipeline_model_parallel_size=1",
      "parallel.virtual_pipeline_model_parallel_size=null",
      "parallel.num_layers_in_first_pipeline_stage=null",
      "parallel.num_layers_in_last_pipeline_stage=null", "parallel.sequence_parallel=false",
      "parallel.expert_model_parallel_size=null", "parallel.expert_tensor_parallel_size=null",
      "parallel.context_parallel_size=1",       "parallel.zero_stage=0", x1, x2};
  const int n = (int)(sizeof ov / sizeof *ov) - (x1 ? 0 : 2);
  return json ? mt_config_load_saved(cfg, json, path, ov, n, 1, err, errlen)
              : mt_config_load(cfg, path, ov, n, 1, err, errlen);
}

static int load_config(mt_config *cfg, const char *path, const char *json, char *err,
                       size_t errlen) {
  return load_config_x(cfg, path, json, NULL, NULL, err, errlen);
}

/* 0 when `dir` does not exist or is an empty directory (*existed tells) */
static int check_output(const char *dir, int *existed, char *err, size_t errlen) {
  struct stat st;
  *existed = 0;
  if (stat(dir, &st)) return 0;
  *existed = 1;
  DIR *d = S_ISDIR(st.st_mode) ? opendir(dir) : NULL;
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  if (!S_ISDIR(st.st_mode) || n) {
    snprintf(err, errlen, "output '%s' exists and is not an empty directory (convert does not "
             "overwrite)", dir);
    return -1;
  }
  return 0;
}

/* remove the files of `dir` (no subdirectories) and the directory */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* Remove the sibling temporary directories `out_dir`.tmp.PID that an
 * export killed before its rename left behind: those whose PID is not a
 * live process on this host (a live one may be an export still running). */
static void remove_stale_tmp(const char *out_dir) {
  char parent[2048], base[512];
  size_t n = strlen(out_dir);
  while (n > 1 && out_dir[n - 1] == '/') n--;
  const char *slash = NULL;
  for (size_t i = 0; i < n; i++)
    if (out_dir[i] == '/') slash = out_dir + i;
  size_t plen = slash ? (size_t)(slash - out_dir) : 0, blen = slash ? n - plen - 1 : n;
  if (blen + 6 >= sizeof base || plen + 1 >= sizeof parent) return;
  snprintf(parent, sizeof parent, "%.*s", slash ? (int)(plen ? plen : 1) : 1, slash ? out_dir : ".");
  snprintf(base, sizeof base, "%.*s.tmp.", (int)blen, slash ? slash + 1 : out_dir);
  DIR *d = opendir(parent);
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t bl = strlen(base);
    if (strncmp(e->d_name, base, bl)) continue;
    char *end;
    long pid = strtol(e->d_name + bl, &end, 10);
    if (end == e->d_name + bl || *end || pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
    char p[2600];
    snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
    fprintf(stderr, "megatrain convert: removing '%s' (left by an export, process %ld, that "
            "did not finish)\n", p, pid);
    remove_dir(p);
  }
  if (d) closedir(d);
}

/* ---------------------------------------------------------------- export */

int mt_hf_export_dir(const char *load_dir, const char *out_dir, int bf16, uint64_t max_shard_bytes,
                     char *err, size_t errlen) {
  int existed, rc = 1, n_e = 0;
  if (check_output(out_dir, &existed, err, errlen)) return 2;
  remove_stale_tmp(out_dir);
  mt_dckpt *ck = NULL;
  mt_config cfg;
  int have_cfg = 0;
  mt_hf_entry *e = NULL;
  mt_st_tensor *t = NULL;
  void **bufs = NULL;
  float *cur = NULL;
  char *used = NULL;
  char tmp[2048] = "", path[2100];
  int o = mt_dckpt_open(load_dir, -1, &ck, err, errlen);
  if (o == 1)
    snprintf(err, errlen, "'%s' holds a checkpoint of the per-layout format (mp_rank_*); the "
             "export reads the layout-free format (%s): rewrite it first with `megatrain "
             "convert --upgrade --load %s --output NEW`", load_dir, MT_DCKPT_FORMAT, load_dir);
  if (o) goto out;
  const char *cj = mt_dckpt_config_json(ck);
  if (!cj || !strcmp(cj, "null")) {
    snprintf(err, errlen, "checkpoint '%s' has no saved config (metadata.json \"config\"): its "
             "model is unknown", mt_dckpt_dir(ck));
    goto out;
  }
  char src[2100], cerr[1024];
  snprintf(src, sizeof src, "%s/metadata.json", mt_dckpt_dir(ck));
  if (load_config(&cfg, src, cj, cerr, sizeof cerr)) {
    snprintf(err, errlen, "config saved in checkpoint '%s': %s", mt_dckpt_dir(ck), cerr);
    goto out;
  }
  have_cfg = 1;
  mt_hf_model m;
  if (mt_hf_model_of(&cfg, &m, cerr, sizeof cerr)) {
    snprintf(err, errlen, "checkpoint '%s': %s", mt_dckpt_dir(ck), cerr);
    goto out;
  }
  n_e = mt_hf_entries(&m, &e);
  t = mt_xcalloc((size_t)n_e, sizeof *t);
  bufs = mt_xcalloc((size_t)n_e, sizeof *bufs);
  used = mt_xcalloc((size_t)mt_dckpt_n_tensors(ck) + 1, 1);
  for (int i = 0; i < n_e; i++) {
    if (i == 0 || strcmp(e[i].mt, e[i - 1].mt)) { /* a new megatrain tensor */
      free(cur);
      cur = NULL;
      int k = mt_dckpt_find(ck, e[i].mt);
      if (k < 0) {
        snprintf(err, errlen, "checkpoint '%s' has no tensor '%s' (the model of its config, %s "
                 "naming, has it with shape [%lld, %lld])", mt_dckpt_dir(ck), e[i].mt,
                 mt_hf_family_name(m.family), (long long)e[i].mt_rows, (long long)e[i].mt_cols);
        goto out;
      }
      int64_t r, c;
      mt_dtype dt;
      mt_dckpt_tensor_shape(ck, k, &r, &c, &dt);
      if (r != e[i].mt_rows || c != e[i].mt_cols) {
        snprintf(err, errlen, "checkpoint tensor '%s' is [%lld, %lld] but the model of its saved "
                 "config has [%lld, %lld]", e[i].mt, (long long)r, (long long)c,
                 (long long)e[i].mt_rows, (long long)e[i].mt_cols);
        goto out;
      }
      used[k] = 1;
      char master[MT_DCKPT_NAME_MAX + 40];
      snprintf(master, sizeof master, "optimizer.state.fp32_param.%s", e[i].mt);
      int km = mt_dckpt_find(ck, master);
      cur = mt_dckpt_read_tensor(ck, km >= 0 ? master : e[i].mt, MT_F32, err, errlen);
      if (!cur) {
        goto out;
      }
    }
    const int64_t n = e[i].hf_rows * e[i].hf_cols;
    float *hf = mt_xmalloc((size_t)n * sizeof(float));
    mt_hf_export(&m, &e[i], cur, hf);
    if (bf16) {
      uint16_t *b = mt_xmalloc((size_t)n * sizeof(uint16_t));
      for (int64_t j = 0; j < n; j++) b[j] = mt_f32_to_bf16(hf[j]);
      free(hf);
      bufs[i] = b;
    } else {
      bufs[i] = hf;
    }
    t[i].name = e[i].hf;
    t[i].dtype = bf16 ? MT_ST_BF16 : MT_ST_F32;
    t[i].ndim = e[i].ndim;
    t[i].shape[0] = e[i].hf_rows;
    t[i].shape[1] = e[i].hf_cols;
    t[i].data = bufs[i];
  }
  /* a model tensor the naming would drop (optimizer state, the routers'
   * token counts of the last batch and the FP8 delayed-scaling state,
   * training state, are not exported) */
  for (int k = 0; k < mt_dckpt_n_tensors(ck); k++) {
    const char *nm = mt_dckpt_tensor_name(ck, k);
    const size_t nl = strlen(nm), tl = strlen(".mlp.router.tokens_per_expert");
    if (!used[k] && strncmp(nm, "optimizer.", 10) && !mt_ckpt_fp8_is_meta(nm) &&
        !(nl > tl && !strcmp(nm + nl - tl, ".mlp.router.tokens_per_expert"))) {
      snprintf(err, errlen, "checkpoint tensor '%s' has no place in the %s naming (the export "
               "would drop it)", nm, mt_hf_family_name(m.family));
      goto out;
    }
  }
  /* write into a sibling temporary directory, renamed at the end */
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out_dir, (long)getpid());
  if (mt_mkdirs(tmp)) {
    snprintf(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));
    tmp[0] = 0;
    goto out;
  }
  static const char *const meta[] = {"format", "pt"};
  if (mt_st_dir_write(tmp, t, n_e, max_shard_bytes, meta, 1, err, errlen)) goto out;
  char *cjson = mt_hf_config_json(&m, bf16 ? "bfloat16" : "float32");
  snprintf(path, sizeof path, "%s/config.json", tmp);
  int w = mt_write_file_synced(path, cjson, strlen(cjson), err, errlen);
  free(cjson);
  if (w) goto out;
  if (m.V > 50256 && !strcmp(cfg.data.tokenizer_type, "GPT2BPETokenizer")) {
    static const char gen[] = "{\n  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256\n}\n";
    snprintf(path, sizeof path, "%s/generation_config.json", tmp);
    if (mt_write_file_synced(path, gen, strlen(gen), err, errlen)) goto out;
  }
  if (strcmp(cfg.data.tokenizer_type, "GPT2BPETokenizer")) { /* the tokenizer travels along */
    char tdir[4200];
    mt_hf_tokenizer_dir(cfg.data.tokenizer_model, tdir, sizeof tdir);
    if (mt_hf_tokenizer_copy(tdir, tmp, err, errlen) < 0) goto out;
  }
  if (existed) rmdir(out_dir);
  if (rename(tmp, out_dir)) {
    snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, out_dir, strerror(errno));
    goto out;
  }
  tmp[0] = 0;
  rc = 0;
out:
  if (tmp[0]) remove_dir(tmp);
  for (int i = 0; bufs && i < n_e; i++) free(bufs[i]);
  free(bufs);
  free(used);
  free(t);
  free(e);
  free(cur);
  if (have_cfg) mt_config_free(&cfg);
  mt_dckpt_close(ck);
  return rc;
}

/* ---------------------------------------------------------------- import */

/* buffers of older exports, no parameters */
static int ignorable(const char *name) {
  static const char *const suffix[] = {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"};
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    size_t k = strlen(suffix[i]);
    if (n > k && !strcmp(name + n - k, suffix[i])) return 1;
  }
  return 0;
}

/* index of Hugging Face tensor `name` in d (GPT-2 also without the
 * "transformer." prefix, as the base model GPT2Model saves it) */
static int find_hf(const mt_st_dir *d, const char *name) {
  int i = mt_st_dir_find(d, name);
  if (i < 0 && !strncmp(name, "transformer.", 12)) i = mt_st_dir_find(d, name + 12);
  return i;
}

/* tensor i of d as n fp32 values */
static float *read_f32(mt_st_dir *d, int i, char *err, size_t errlen) {
  const mt_st_info *in = mt_st_dir_info(d, i);
  size_t n = (size_t)in->numel;
  float *f = mt_xmalloc(n * sizeof(float) + 1);
  if (in->dtype == MT_ST_F32) {
    if (mt_st_dir_read(d, i, f, err, errlen)) goto fail;
    return f;
  }
  uint16_t *h = mt_xmalloc(n * sizeof(uint16_t) + 1);
  if (mt_st_dir_read(d, i, h, err, errlen)) {
    free(h);
    goto fail;
  }
  for (size_t j = 0; j < n; j++) f[j] = in->dtype == MT_ST_BF16 ? mt_bf16_to_f32(h[j]) : f16_to_f32(h[j]);
  free(h);
  return f;
fail:
  free(f);
  return NULL;
}

int mt_hf_import_dir(const char *in_dir, const char *out_dir, const char *config_path, char *err,
                     size_t errlen) {
  int existed, rc = 1, n_e = 0, n_v = 0;
  mt_config cfg;
  char cerr[1024];
  if (load_config(&cfg, config_path, NULL, err, errlen)) return 2;
  /* a config naming no tokenizer takes the one the model directory ships,
   * copied beside the checkpoint below (generate and training find it) */
  char ttype[64], tmodel[4200], x1[128], x2[4300];
  int has_tok = mt_hf_tokenizer_find(in_dir, ttype, sizeof ttype, tmodel, sizeof tmodel);
  if (has_tok && !cfg.data.tokenizer_model[0] && !cfg.data.vocab_file[0]) {
    char base[4200]; /* absolute: the checkpoint is read from other directories */
    char *cwd = out_dir[0] == '/' ? NULL : getcwd(NULL, 0);
    snprintf(base, sizeof base, "%s%s%s", cwd ? cwd : "", cwd ? "/" : "", out_dir);
    free(cwd);
    snprintf(x1, sizeof x1, "data.tokenizer_type=%s", ttype);
    snprintf(x2, sizeof x2, "data.tokenizer_model=%s%s", base,
             strcmp(ttype, "HuggingFaceTokenizer") ? "/tokenizer.model" : "");
    mt_config_free(&cfg);
    if (load_config_x(&cfg, config_path, NULL, x1, x2, err, errlen)) return 2;
  }
  mt_hf_model m;
  mt_st_dir *d = NULL;
  mt_hf_entry *e = NULL;
  mt_dckpt_view *v = NULL;
  char *used = NULL;
  if (mt_hf_model_of(&cfg, &m, cerr, sizeof cerr)) {
    snprintf(err, errlen, "config '%s': %s", config_path, cerr);
    rc = 2;
    goto out;
  }
  if (check_output(out_dir, &existed, err, errlen)) {
    rc = 2;
    goto out;
  }
  if (mt_st_dir_open(in_dir, &d, err, errlen)) goto out;
  char path[2100];
  snprintf(path, sizeof path, "%s/config.json", in_dir);
  size_t len;
  int en;
  char *cj = mt_read_file(path, 16u << 20, &len, &en);
  if (cj) {
    int bad = mt_hf_config_check(&m, cj, path, err, errlen);
    free(cj);
    if (bad) goto out;
  } else {
    fprintf(stderr, "megatrain convert: warning: no '%s' (%s); only the tensor shapes are "
            "checked against the config\n", path, strerror(en));
  }
  n_e = mt_hf_entries(&m, &e);
  used = mt_xcalloc((size_t)mt_st_dir_count(d) + 1, 1);
  /* every expected tensor present, with its shape and a float dtype */
  for (int i = 0; i < n_e; i++) {
    int k = find_hf(d, e[i].hf);
    if (k < 0) {
      if (e[i].ndim == 1)
        snprintf(cerr, sizeof cerr, "[%lld]", (long long)e[i].hf_rows);
      else
        snprintf(cerr, sizeof cerr, "[%lld, %lld]", (long long)e[i].hf_rows, (long long)e[i].hf_cols);
      snprintf(err, errlen, "tensor '%s' is missing from '%s' (the %s naming of config '%s' "
               "needs it with shape %s)", e[i].hf, in_dir, mt_hf_family_name(m.family),
               config_path, cerr);
      goto out;
    }
    const mt_st_info *in = mt_st_dir_info(d, k);
    int ok = in->ndim == e[i].ndim && in->shape[0] == e[i].hf_rows &&
             (e[i].ndim == 1 || in->shape[1] == e[i].hf_cols);
    if (!ok) {
      char got[128] = "[";
      for (int j = 0; j < in->ndim; j++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", j ? ", " : "",
                 (long long)in->shape[j]);
      strcat(got, "]");
      if (e[i].ndim == 1)
        snprintf(cerr, sizeof cerr, "[%lld]", (long long)e[i].hf_rows);
      else
        snprintf(cerr, sizeof cerr, "[%lld, %lld]", (long long)e[i].hf_rows, (long long)e[i].hf_cols);
      snprintf(err, errlen, "tensor '%s' in '%s' is %s but config '%s' needs %s", in->name,
               mt_st_dir_file(d, k), got, config_path, cerr);
      goto out;
    }
    if (in->dtype != MT_ST_F32 && in->dtype != MT_ST_BF16 && in->dtype != MT_ST_F16) {
      snprintf(err, errlen, "tensor '%s' in '%s' has dtype %s; expected F32, BF16 or F16",
               in->name, mt_st_dir_file(d, k), mt_st_dtype_name(in->dtype));
      goto out;
    }
    used[k] = 1;
  }
  int k_lm = -1;
  for (int k = 0; k < mt_st_dir_count(d); k++) {
    const char *nm = mt_st_dir_info(d, k)->name;
    if (used[k] || ignorable(nm)) continue;
    if (!m.untie && !strcmp(nm, "lm_head.weight")) {
      k_lm = k; /* tied: accepted when equal to the embedding (checked below) */
      continue;
    }
    snprintf(err, errlen, "tensor '%s' in '%s' has no place in the model of config '%s' (%s "
             "naming, %lld layers%s); refusing to drop it", nm, mt_st_dir_file(d, k), config_path,
             mt_hf_family_name(m.family), (long long)m.L,
             m.untie ? ", untied output layer" : ", tied output layer");
    goto out;
  }
  /* read and map: one view per megatrain tensor */
  v = mt_xcalloc((size_t)n_e, sizeof *v);
  for (int i = 0; i < n_e; i++) {
    if (e[i].copy) continue; /* checked below, once its tensor is read */
    if (n_v == 0 || strcmp(e[i].mt, v[n_v - 1].name)) {
      mt_dckpt_view *w = &v[n_v++];
      snprintf(w->name, sizeof w->name, "%s", e[i].mt);
      w->rows = w->nr = e[i].mt_rows;
      w->cols = w->nc = e[i].mt_cols;
      w->hi = w->nr * w->nc;
      w->dtype = MT_F32;
      w->host = 1;
      w->write = 1;
      w->data = mt_xcalloc((size_t)w->hi, sizeof(float));
    }
    float *hf = read_f32(d, find_hf(d, e[i].hf), err, errlen);
    if (!hf) goto out;
    mt_hf_import(&m, &e[i], hf, v[n_v - 1].data);
    free(hf);
  }
  /* DeepSeek's MTP layers' copies of the embedding and the output head */
  for (int i = 0; i < n_e; i++) {
    if (!e[i].copy) continue;
    int j = 0;
    while (j < n_v && strcmp(v[j].name, e[i].mt)) j++;
    if (j == n_v) {
      snprintf(err, errlen, "tensor '%s' copies '%s', which the naming does not map", e[i].hf,
               e[i].mt);
      goto out;
    }
    float *hf = read_f32(d, find_hf(d, e[i].hf), err, errlen);
    if (!hf) goto out;
    int same = !memcmp(hf, v[j].data, (size_t)(e[i].hf_rows * e[i].hf_cols) * sizeof(float));
    free(hf);
    if (!same) {
      snprintf(err, errlen, "tensor '%s' in '%s' differs from the model's %s, which the "
               "multi-token prediction layer shares (megatrain keeps one copy; expected equal)",
               e[i].hf, mt_st_dir_file(d, find_hf(d, e[i].hf)),
               !strcmp(e[i].mt, "output_layer.weight") ? "'lm_head.weight'"
                                                        : "'model.embed_tokens.weight'");
      goto out;
    }
  }
  if (k_lm >= 0) {
    const mt_st_info *in = mt_st_dir_info(d, k_lm);
    float *lm = in->ndim == 2 && in->shape[0] == m.V && in->shape[1] == m.h &&
                        (in->dtype == MT_ST_F32 || in->dtype == MT_ST_BF16 || in->dtype == MT_ST_F16)
                    ? read_f32(d, k_lm, err, errlen)
                    : NULL;
    int same = lm && !memcmp(lm, v[0].data, (size_t)(m.V * m.h) * sizeof(float));
    free(lm);
    if (!same) {
      snprintf(err, errlen, "tensor 'lm_head.weight' in '%s' differs from the word embedding but "
               "config '%s' ties them (set model.untie_embeddings_and_output_weights: true)",
               mt_st_dir_file(d, k_lm), config_path);
      goto out;
    }
  }
  mt_dckpt_meta meta = {.iteration = 0, .seed = cfg.training.seed, .vocab_size = m.V,
                        .has_optimizer = 0};
  if (mt_dckpt_save(out_dir, &meta, cfg.json, NULL, v, n_v, NULL, err, errlen)) {
    if (!existed) rmdir(out_dir);
    goto out;
  }
  if (has_tok && mt_hf_tokenizer_copy(in_dir, out_dir, err, errlen) < 0) goto out;
  rc = 0;
out:
  for (int i = 0; v && i < n_v; i++) free(v[i].data);
  free(v);
  free(used);
  free(e);
  mt_st_dir_close(d);
  mt_config_free(&cfg);
  return rc;
}
