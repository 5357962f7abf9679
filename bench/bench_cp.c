/* bench/bench_cp.c — long-context training with context parallelism: one
 * CP group of all ranks (mpirun -np cp; -np 1 is cp = 1) trains a tiny GPT
 * at a long sequence through the model's forward+backward (no optimizer,
 * no data loader: the step the trainer would time minus AdamW), and prints
 * per rank the allocator's peak bytes by category and the throughput in
 * tokens/s of the whole CP group (b·s tokens per step / step time). Printed,
 * not asserted (bench/bench_cp.sh, docs/context_parallel.md).
 * usage: bench_cp [seq layers hidden heads micro_batch steps vocab [KEY=VALUE ...]]
 * default: seq 8192, 2 layers, hidden 64, 4 heads, micro-batch 1, 2 steps,
 * vocabulary 512 (so the logits do not dominate the activations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "parallel/comm.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  const int cp = mt_dist_size(d), r = mt_dist_rank(d);
  int a[7] = {8192, 2, 64, 4, 1, 2, 512};
  int na = 0;
  for (int i = 1; i < argc && na < 7; i++)
    if (!mt_gpt_is_option(argv[i])) a[na++] = atoi(argv[i]);
  const int seq = a[0], layers = a[1], hidden = a[2], heads = a[3], b = a[4], steps = a[5], V = a[6];
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  mt_gpt_config c = mt_tiny_gpt(layers, hidden, heads, 4 * hidden, seq, V, b, 1234);
  c.model.hidden_dropout = c.model.attention_dropout = 0.1f;
  for (int i = 1; i < argc; i++)
    if (mt_gpt_is_option(argv[i]) && mt_gpt_apply_option(&c, argv[i], err, sizeof err) != 0)
      mt_fatal("%s", err);
  c.cp_size = cp;
  c.cp_rank = r;
  c.cp_group = cp > 1 ? mt_dist_world(d) : NULL;
  mt_gpt *m = mt_gpt_create(be, &c);
  int32_t *tok = mt_xmalloc(sizeof(int32_t) * (size_t)b * (seq + 1));
  for (int64_t i = 0; i < (int64_t)b * (seq + 1); i++) tok[i] = (int32_t)((i * 7919) % V);
  int64_t *ids = mt_xcalloc((size_t)b, sizeof(int64_t));
  const float scale = 1.0f / ((float)b * seq);
  mt_gpt_forward_backward(m, tok, ids, 1, scale); /* warm-up: activation slots */
  mt_barrier(mt_dist_world(d));
  double t0 = mt_now(), loss = 0;
  for (int st = 0; st < steps; st++) {
    ids[0] = st + 1;
    loss = mt_gpt_forward_backward(m, tok, ids, 1, scale);
  }
  mt_barrier(mt_dist_world(d));
  const double dt = (mt_now() - t0) / steps;
  mt_allreduce(mt_dist_world(d), &loss, 1, MT_F64, MT_OP_SUM);
  const mt_mem_stats *ms = &be->mem;
  for (int k = 0; k < cp; k++) {
    if (k == r) {
      printf("cp=%d rank %d: peak MiB", cp, r);
      for (int cat = 0; cat < MT_MEM_NCAT; cat++)
        printf(" %s %.1f", mt_mem_cat_name((mt_mem_cat)cat), ms->peak[cat] / 1048576.0);
      printf(" | total %.1f\n", ms->peak_total / 1048576.0);
      fflush(stdout);
    }
    mt_barrier(mt_dist_world(d));
  }
  if (r == 0)
    printf("cp=%d seq %d (L=%d h=%d heads=%d b=%d): %.2f s/step, %.0f tokens/s, loss %.4f\n",
           cp, seq, layers, hidden, heads, b, dt, (double)b * seq / dt, loss / ((double)b * seq));
  mt_gpt_destroy(m);
  free(tok);
  free(ids);
  mt_backend_destroy(be);
  mt_dist_finalize(d);
  return 0;
}
