/* tools/hf_tokenizer_files.c — tokenizer files beside Hugging Face models
 * and megatrain checkpoints (see hf_tokenizer_files.h). */
#include "tools/hf_tokenizer_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"

static const char *const k_files[] = {"tokenizer.json", "tokenizer_config.json",
                                      "special_tokens_map.json", "tokenizer.model"};

static int is_file(const char *dir, const char *name) {
  char p[4200];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int mt_hf_tokenizer_find(const char *dir, char *type, size_t type_len, char *model,
                         size_t model_len) {
  if (is_file(dir, "tokenizer.json")) {
    snprintf(type, type_len, "HuggingFaceTokenizer");
    snprintf(model, model_len, "%s", dir);
    return 1;
  }
  if (is_file(dir, "tokenizer.model")) {
    snprintf(type, type_len, "SentencePieceTokenizer");
    snprintf(model, model_len, "%s/tokenizer.model", dir);
    return 1;
  }
  return 0;
}

int mt_hf_tokenizer_copy(const char *from_dir, const char *to_dir, char *err, size_t errlen) {
  int n = 0;
  for (size_t i = 0; i < sizeof k_files / sizeof *k_files; i++) {
    if (!is_file(from_dir, k_files[i])) continue;
    char src[4200], dst[4200];
    snprintf(src, sizeof src, "%s/%s", from_dir, k_files[i]);
    snprintf(dst, sizeof dst, "%s/%s", to_dir, k_files[i]);
    size_t len;
    int en;
    char *data = mt_read_file(src, (size_t)1 << 30, &len, &en);
    if (!data) {
      snprintf(err, errlen, "cannot read tokenizer file '%s': %s", src, strerror(en));
      return -1;
    }
    int rc = mt_write_file_synced(dst, data, len, err, errlen);
    free(data);
    if (rc) return -1;
    n++;
  }
  return n;
}

void mt_hf_tokenizer_dir(const char *model, char *out, size_t out_len) {
  struct stat st;
  if (stat(model, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(out, out_len, "%s", model);
    return;
  }
  const char *slash = strrchr(model, '/');
  if (!slash) snprintf(out, out_len, ".");
  else snprintf(out, out_len, "%.*s", (int)(slash - model), model);
}
