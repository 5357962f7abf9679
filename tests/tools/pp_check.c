/* tests/tools/pp_check.c — activation memory of the pipeline schedules,
 * counted by the allocator (run under mpirun -np p, all ranks one pipeline):
 * after one training step of m micro-batches, stage r's activation bytes are
 * exactly min(p − r, m) micro-batch slots under 1F1B; under the interleaved
 * schedule the micro-batches in flight peak at min(W + 1, m·v) with
 * W = 2(p − r − 1) + (v − 1)p (docs/memory.md).
 * The same with overlap_p2p_comm on and off (the receives posted ahead land
 * in the executor's MT_MEM_COMM buffers, not in activation slots).
 * usage: pp_check m v [overlap_p2p_comm: 1 (default) | 0] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "parallel/pipeline.h"
#include "tests/tools/tiny_gpt.h"

typedef struct {
  mt_gpt *m;
  int32_t *tok;
  int64_t ids[2];
} ctx_t;

static void begin(void *c, int ch, int mb) {
  ctx_t *x = c;
  x->ids[0] = 2 * mb;
  x->ids[1] = 2 * mb + 1;
  mt_gpt_chunk_begin(x->m, ch, mb, x->tok, x->ids, 1);
}
static void *input(void *c, int ch, int mb) { return mt_gpt_chunk_input(((ctx_t *)c)->m, ch, mb); }
static void fwd(void *c, int ch, int mb) { mt_gpt_chunk_forward(((ctx_t *)c)->m, ch, mb); }
static void *output(void *c, int ch, int mb) { return mt_gpt_chunk_output(((ctx_t *)c)->m, ch, mb); }
static void *grad(void *c) { return mt_gpt_grad_buffer_stage(((ctx_t *)c)->m); }
static void bwd(void *c, int ch, int mb) { mt_gpt_chunk_backward(((ctx_t *)c)->m, ch, mb, 0.01f); }
static void end(void *c, int ch, int mb) { mt_gpt_chunk_end(((ctx_t *)c)->m, ch, mb); }

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  const int p = mt_dist_size(d), r = mt_dist_rank(d);
  const int m = argc > 1 ? atoi(argv[1]) : 8, v = argc > 2 ? atoi(argv[2]) : 1;
  const int overlap = argc > 3 ? atoi(argv[3]) : 1;
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  mt_gpt_config c = mt_tiny_gpt(2 * p * v, 32, 4, 64, 8, 200, 2, 3);
  c.pp_size = p;
  c.pp_rank = r;
  c.vpp_size = v;
  mt_gpt *model = mt_gpt_create(be, &c);
  int32_t tok[2 * 9];
  for (int i = 0; i < 18; i++) tok[i] = (7 * i) % 200;
  ctx_t x = {.m = model, .tok = tok};
  mt_pp_schedule s;
  int built = v > 1 ? mt_pp_schedule_interleaved(&s, p, v, m, r, 0, err, sizeof err)
                    : mt_pp_schedule_1f1b(&s, p, m, r, 0, err, sizeof err);
  if (built != 0) mt_fatal("%s", err);
  mt_pp_model md = {&x, be, mt_gpt_stage_tensor_elems(model), MT_F32, begin, input, fwd,
                    output, grad, bwd, end};
  /* size of one slot of chunk 0 (kept by the pool after release) */
  size_t base = be->mem.live[MT_MEM_ACT];
  begin(&x, 0, 0);
  end(&x, 0, 0);
  size_t slot = be->mem.live[MT_MEM_ACT] - base;
  mt_pp_stats st;
  mt_pp_run(mt_dist_world(d), p, v, r, &s, &md, overlap, &st);
  size_t act = be->mem.peak[MT_MEM_ACT] - base;
  if (v == 1) {
    int bound = p - r < m ? p - r : m;
    if (st.max_in_flight != bound || act != (size_t)bound * slot)
      mt_fatal("stage %d: %d micro-batches in flight, %zu activation bytes; expected %d slots "
               "of %zu bytes",
               r, st.max_in_flight, act, bound, slot);
    printf("ok stage %d of %d, m=%d (1F1B): activation peak %zu bytes = %d x %zu (min(p-r, m))\n",
           r, p, m, act, bound, slot);
  } else {
    int w = m == p ? m * v : (p - r - 1) * 2 + (v - 1) * p;
    int bound = w + 1 < m * v ? w + 1 : m * v;
    if (st.max_in_flight != bound)
      mt_fatal("stage %d: %d chunk micro-batches in flight, expected %d", r, st.max_in_flight,
               bound);
    printf("ok stage %d of %d, m=%d v=%d (interleaved): %d chunk micro-batches in flight "
           "(min(W+1, m*v)), activation peak %zu bytes\n",
           r, p, m, v, st.max_in_flight, act);
  }
  fflush(stdout);
  mt_pp_schedule_free(&s);
  mt_gpt_destroy(model);
  mt_backend_destroy(be);
  mt_dist_finalize(d);
  return 0;
}
