/* checkpoint/fp8_meta.c — see fp8_meta.h. */
#include "checkpoint/fp8_meta.h"

#include <stdio.h>
#include <string.h>

#include "core/util.h"

int mt_ckpt_fp8_buffers(mt_gpt *m, int experts, mt_ckpt_buffer **out) {
  *out = NULL;
  char name[MT_PARAM_NAME_MAX];
  float *d;
  int64_t len;
  int n = 0, nall = 0, ex;
  while (mt_gpt_fp8_meta(m, nall, name, sizeof name, &d, &len, &ex)) n += ex == experts, nall++;
  if (n == 0) return 0;
  mt_ckpt_buffer *b = mt_xcalloc((size_t)n, sizeof *b);
  for (int i = 0, k = 0; i < nall; i++) {
    mt_gpt_fp8_meta(m, i, name, sizeof name, &d, &len, &ex);
    if (ex != experts) continue;
    snprintf(b[k].name, sizeof b[k].name, "%s", name);
    b[k].data = d;
    b[k].numel = len;
    b[k].dtype = MT_F32;
    k++;
  }
  *out = b;
  return n;
}

int mt_ckpt_fp8_is_meta(const char *name) { return strstr(name, ".fp8_meta.") != NULL; }

int mt_ckpt_fp8_resolve(const mt_dckpt *c, mt_dckpt_view *v, int n, int *fresh, char *err,
                        size_t errlen) {
  int k = 0;
  *fresh = 0;
  for (int i = 0; i < n; i++) {
    if (!mt_ckpt_fp8_is_meta(v[i].name)) {
      v[k++] = v[i];
      continue;
    }
    const int t = mt_dckpt_find(c, v[i].name);
    if (t < 0) {
      ++*fresh;
      continue;
    }
    int64_t rows, cols;
    mt_dtype dt;
    mt_dckpt_tensor_shape(c, t, &rows, &cols, &dt);
    if (rows != 1 || cols != v[i].cols || dt != MT_F32) {
      snprintf(err, errlen,
               "checkpoint '%s' holds FP8 state '%s' with an amax history of length %lld "
               "(tensor [%lld, %lld] %s) but training.fp8_amax_history_len is %lld (expected "
               "fp8_amax_history_len %lld, the length it was saved with)",
               mt_dckpt_dir(c), v[i].name, (long long)(rows * cols - 1), (long long)rows,
               (long long)cols, mt_dtype_name(dt), (long long)(v[i].cols - 1),
               (long long)(rows * cols - 1));
      return -1;
    }
    v[k++] = v[i];
  }
  return k;
}
