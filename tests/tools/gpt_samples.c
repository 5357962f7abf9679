/* tests/tools/gpt_samples.c — dump the token ids of GPT samples as megatrain's
 * data/gpt_dataset.h builds them, in the format of
 * tests/reference/megatron_order.py (Megatron-core's dataset code) and
 * tests/reference/gpt_order_numpy.py:
 *   for train, valid, test: int64 n, then n samples of seq + 1 int32 ids.
 * gpt_samples --seq N --seed S --split "969,30,1" --num-samples T V X
 *             [--first-train K] [--surplus F] [--no-extra-token] --out FILE
 *             PREFIX... | W1 PREFIX1 W2 PREFIX2 ... (weighted: numbers first)
 * --first-train K dumps only the first K train samples (all of valid/test).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/gpt_dataset.h"

static int usage(void) {
  fprintf(stderr, "usage: gpt_samples --seq N --seed S --split W --num-samples T V X "
                  "[--first-train K] [--surplus F] [--no-extra-token] --out FILE PATH...\n");
  return 2;
}

int main(int argc, char **argv) {
  mt_gpt_dataset_options o = {0};
  o.split = "969,30,1";
  o.mid_level_dataset_surplus = 0.005;
  const char *out = NULL;
  int64_t first_train = -1;
  int i = 1;
  for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
    if (!strcmp(argv[i], "--seq") && i + 1 < argc) o.seq_length = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) o.seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--split") && i + 1 < argc) o.split = argv[++i];
    else if (!strcmp(argv[i], "--surplus") && i + 1 < argc) o.mid_level_dataset_surplus = atof(argv[++i]);
    else if (!strcmp(argv[i], "--first-train") && i + 1 < argc) first_train = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--no-extra-token")) o.no_extra_token = 1;
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--num-samples") && i + 3 < argc)
      for (int s = 0; s < 3; s++) o.num_samples[s] = atoll(argv[++i]);
    else return usage();
  }
  int n = argc - i;
  if (!out || n < 1 || o.seq_length < 1) return usage();
  char *end;
  strtod(argv[i], &end);
  o.weighted = *end == 0;
  const char **paths = calloc((size_t)n, sizeof(char *));
  double *w = calloc((size_t)n, sizeof(double));
  for (int k = 0; k < n; k++) {
    if (o.weighted) {
      if (k % 2 == 0) w[k / 2] = atof(argv[i + k]);
      else paths[k / 2] = argv[i + k];
    } else {
      paths[k] = argv[i + k];
    }
  }
  o.n_paths = o.weighted ? n / 2 : n;
  o.paths = paths;
  o.weights = w;
  char err[1024];
  mt_gpt_dataset *ds = mt_gpt_dataset_open(&o, err, sizeof(err));
  if (!ds) {
    fprintf(stderr, "gpt_samples: %s\n", err);
    return 1;
  }
  FILE *f = fopen(out, "wb");
  if (!f) return 1;
  const int len = o.seq_length + (o.no_extra_token ? 0 : 1);
  int32_t *buf = malloc((size_t)len * sizeof(int32_t));
  for (int s = 0; s < 3; s++) {
    int64_t ns = o.num_samples[s] > 0 ? mt_gpt_dataset_num_samples(ds, s) : 0;
    if (s == 0 && first_train >= 0 && first_train < ns) ns = first_train;
    fwrite(&ns, 8, 1, f);
    for (int64_t j = 0; j < ns; j++) {
      mt_gpt_dataset_get(ds, s, j, buf);
      fwrite(buf, 4, (size_t)len, f);
    }
    printf("%s: %lld samples\n", s == 0 ? "train" : s == 1 ? "valid" : "test", (long long)ns);
  }
  int bad = fclose(f) != 0;
  free(buf);
  free(paths);
  free(w);
  mt_gpt_dataset_close(ds);
  return bad;
}
