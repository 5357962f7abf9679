/* checkpoint/fp8_meta.c — see fp8_meta.h. */
#include "checkpoint/fp8_meta.h"

#include <stdio.h>
#include <string.h>

#include "core/util.h"

int mt_ckpt_fp8_buffers(mt_gpt *m, mt_ckpt_buffer **out) {
  *out = NULL;
  char name[MT_PARAM_NAME_MAX];
  float *d;
  int64_t len;
  int n = 0;
  while (mt_gpt_fp8_meta(m, n, name, sizeof name, &d, &len)) n++;
  if (n == 0) return 0;
  mt_ckpt_buffer *b = mt_xcalloc((size_t)n, sizeof *b);
  for (int i = 0; i < n; i++) {
    mt_gpt_fp8_meta(m, i, b[i].name, sizeof b[i].name, &d, &len);
    b[i].data = d;
    b[i].numel = len;
    b[i].dtype = MT_F32;
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
