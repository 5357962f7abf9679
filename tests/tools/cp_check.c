/* tests/tools/cp_check.c — context parallelism inside the model, on a CP
 * group of all ranks (run with mpirun -np cp; see tp= below). Every rank builds the model
 * twice from the same seed on two backends (separate allocator counters):
 * A with context_parallel_size = cp (its two chunks of each sequence, ring
 * attention over the world) and B with cp = 1 (the whole sequence). Both run
 * one training forward+backward of the same micro-batch, dropout on, then:
 *   1. parity: A's loss sum and gradient buffer, summed over the CP group,
 *      equal B's within `tol` (relative; loss) / `tol` x max|grad| (each
 *      gradient element);
 *   2. communication: the CP group's send bytes of the step equal the
 *      analytic count L x (fwd + bwd) of model/context_parallel.h (with full
 *      recomputation the forward ring runs twice);
 *   3. memory: A's activation bytes (allocator, MT_MEM_ACT: the slot, and
 *      the shared sets of selective/full recomputation) are exactly 1/cp of
 *      B's: every activation is per local token, the lse [b, np, s/cp];
 *      nothing of the activations is replicated over CP. (A's workspace
 *      adds the ring buffers, mt_cp_attn_workspace_bytes, printed.)
 * With tp=N the world is tp x cp ranks (tp fastest, Megatron's order), TP
 * with sequence parallelism inside each CP rank in both models (an odd tp
 * makes SP shards straddle the two chunks of a CP rank).
 * Prints one line per case on rank 0; exits non-zero on a mismatch.
 * usage: cp_check [tol] [KEY=VALUE model options (tests/tools/gpt_options.h)]
 *        and seq=, layers=, hidden=, heads=, tp=, recompute=full|selective */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/probes.h"
#include "backends/registry.h"
#include "core/util.h"
#include "model/context_parallel.h"
#include "model/gpt.h"
#include "model/gpt_internal.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"

#define CHECK(c, ...)                                 \
  do {                                                \
    if (!(c)) {                                       \
      fprintf(stderr, "[rank %d] FAIL: ", g_rank);    \
      fprintf(stderr, __VA_ARGS__);                   \
      fprintf(stderr, "\n");                          \
      exit(1);                                        \
    }                                                 \
  } while (0)

static int g_rank;

static mt_backend *backend(void) {
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  return be;
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  const int world = mt_dist_size(d), r = mt_dist_rank(d);
  g_rank = r;
  double tol = 1e-5;
  int layers = 2, seq = 16, full_rc = 0, tp = 1, hidden = 32, heads = 4;
  mt_gpt_config c = mt_tiny_gpt(layers, 32, 4, 64, seq, 97, 2, 11);
  c.model.hidden_dropout = 0.1f;
  c.model.attention_dropout = 0.1f;
  char err[256], opts[512] = "";
  for (int i = 1; i < argc; i++) {
    if (mt_gpt_is_option(argv[i]) && strlen(opts) + strlen(argv[i]) + 2 < sizeof opts) {
      strcat(opts, " ");
      strcat(opts, argv[i]);
    }
    if (!strncmp(argv[i], "seq=", 4)) seq = atoi(argv[i] + 4);
    else if (!strncmp(argv[i], "tp=", 3)) tp = atoi(argv[i] + 3);
    else if (!strncmp(argv[i], "hidden=", 7)) hidden = atoi(argv[i] + 7);
    else if (!strncmp(argv[i], "heads=", 6)) heads = atoi(argv[i] + 6);
    else if (!strncmp(argv[i], "layers=", 7)) layers = atoi(argv[i] + 7);
    else if (!strcmp(argv[i], "recompute=full")) full_rc = 1;
    else if (!strcmp(argv[i], "recompute=selective")) full_rc = 2;
    else if (mt_gpt_is_option(argv[i])) {
      if (mt_gpt_apply_option(&c, argv[i], err, sizeof err) != 0) mt_fatal("%s", err);
    } else tol = atof(argv[i]);
  }
  c.model.num_layers = layers;
  c.model.hidden_size = hidden;
  c.model.num_attention_heads = heads;
  c.model.seq_length = c.model.max_position_embeddings = seq;
  /* ranks: tp fastest, then cp (Megatron's order); TP with sequence parallelism */
  MT_ASSERT(world % tp == 0);
  const int cp = world / tp, tp_rank = r % tp, cp_rank = r / tp;
  c.padded_vocab_size = mt_round_up(c.model.vocab_size, 8 * tp);
  if (full_rc) { /* both re-run the forward ring before the backward */
    MT_GPT_SET(c.model.recompute_granularity, full_rc == 1 ? "full" : "selective");
    c.model.recompute_num_layers = 1;
  }
  mt_backend_options o = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be_a = backend(), *be_b = backend();
  int *tl = mt_xmalloc(sizeof(int) * (size_t)tp), *cl = mt_xmalloc(sizeof(int) * (size_t)cp);
  for (int i = 0; i < tp; i++) tl[i] = cp_rank * tp + i;
  for (int i = 0; i < cp; i++) cl[i] = i * tp + tp_rank;
  mt_group *gt = mt_group_create(d, tl, tp, "tp", MT_ENGINE_MPI);
  mt_group *g = mt_group_create(d, cl, cp, "cp", MT_ENGINE_MPI);
  c.tp_size = tp;
  c.tp_rank = tp_rank;
  c.tp_group = gt;
  c.sequence_parallel = tp > 1;

  mt_gpt_config ca = c;
  ca.cp_size = cp;
  ca.cp_rank = cp_rank;
  ca.cp_group = g;
  mt_gpt *A = mt_gpt_create(be_a, &ca);
  mt_gpt *B = mt_gpt_create(be_b, &c);
  const int b = c.micro_batch_size, s = c.model.seq_length;
  int32_t *tok = mt_xmalloc(sizeof(int32_t) * (size_t)(b * (s + 1)));
  for (int i = 0; i < b * (s + 1); i++) tok[i] = (int32_t)((i * 37 + 5) % c.model.vocab_size);
  int64_t ids[8] = {3, 8, 1, 2, 5, 6, 7, 9};
  const float scale = 1.0f / (float)(b * s);

  mt_group_reset_counters(g);
  double la = mt_gpt_forward_backward(A, tok, ids, 1, scale);
  const mt_coll_counter *k = mt_group_counters(g);
  const int64_t sent = k[MT_COLL_SENDRECV].bytes;
  double lb = mt_gpt_forward_backward(B, tok, ids, 1, scale);
  mt_gpt_finalize_grads(A); /* SP-partial gradients over TP */
  mt_gpt_finalize_grads(B);
  mt_allreduce(g, &la, 1, MT_F64, MT_OP_SUM);

  /* 1. parity */
  CHECK(fabs(la - lb) <= tol * fabs(lb), "loss sum cp=%d %.9g vs one process %.9g", cp, la, lb);
  const int64_t n = mt_gpt_params(A)->numel;
  MT_ASSERT(n == mt_gpt_params(B)->numel);
  float *ga = mt_gpt_grad_buffer(A), *gb = mt_gpt_grad_buffer(B);
  mt_allreduce(g, ga, n, MT_F32, MT_OP_SUM);
  /* experts are not split over TP (expert_tensor_parallel_size 1): each TP
   * rank's experts saw its own token shard, and the trainer sums them over
   * the expert-data-parallel group, which holds the TP ranks; here too */
  const mt_param_list *pl = mt_gpt_params(B);
  for (int i = 0; i < pl->n && tp > 1; i++)
    if (pl->p[i].is_expert) {
      mt_allreduce(gt, ga + pl->p[i].offset, pl->p[i].numel, MT_F32, MT_OP_SUM);
      mt_allreduce(gt, gb + pl->p[i].offset, pl->p[i].numel, MT_F32, MT_OP_SUM);
    }
  double gmax = 0, dmax = 0, na = 0, nb = 0;
  int64_t worst = 0;
  for (int64_t i = 0; i < n; i++) {
    gmax = fabs(gb[i]) > gmax ? fabs(gb[i]) : gmax;
    na += (double)ga[i] * ga[i];
    nb += (double)gb[i] * gb[i];
    if (fabs(ga[i] - gb[i]) > dmax) {
      dmax = fabs(ga[i] - gb[i]);
      worst = i;
    }
  }
  CHECK(dmax <= tol * gmax, "gradient element %lld: %.9g vs %.9g (max |g| %.3g)",
        (long long)worst, ga[worst], gb[worst], gmax);
  CHECK(fabs(sqrt(na) - sqrt(nb)) <= tol * sqrt(nb), "grad norm %.9g vs %.9g", sqrt(na),
        sqrt(nb));
  if (r == 0)
    printf("ok parity cp=%d tp=%d (L=%d s=%d b=%d, dropout on;%s): loss %.9g vs %.9g (rel %.2e), "
           "grad norm %.9g vs %.9g, max grad diff %.2e of max |g| %.3g\n",
           cp, tp, layers, s, b, opts, la, lb, fabs(la - lb) / lb,
           sqrt(na), sqrt(nb), dmax, gmax);

  /* 2. communication */
  const mt_cp_layout L = mt_cp_layout_make(s, cp, cp_rank);
  const int ng = A->ng, hn = A->hn;
  const int64_t per_layer = mt_cp_attn_fwd_send_elems(&L, b, ng, hn) * (full_rc ? 2 : 1) +
                            mt_cp_attn_bwd_send_elems(&L, b, ng, hn);
  const int64_t want = (int64_t)layers * per_layer * (int64_t)sizeof(float);
  CHECK(sent == want, "CP group send bytes %lld, analytic %lld", (long long)sent,
        (long long)want);
  if (r == 0)
    printf("ok counters cp=%d: %lld bytes sent per rank per step = L x (fwd (cp-1) + bwd "
           "(2cp-1)%s) x K/V block of %lld bytes\n",
           cp, (long long)sent, full_rc ? " + recomputed fwd (cp-1)" : "",
           (long long)(mt_cp_local_len(&L) * b * ng * 2 * hn * 4));

  /* 3. memory */
  const size_t act_a = be_a->mem.live[MT_MEM_ACT], act_b = be_b->mem.live[MT_MEM_ACT];
  CHECK(act_a * (size_t)cp == act_b, "activation bytes cp=%d %zu x %d != cp=1 %zu", cp, act_a, cp,
        act_b);
  const size_t ring = mt_cp_attn_workspace_bytes(&L, b, A->np, ng, hn, MT_F32);
  if (r == 0)
    printf("ok memory cp=%d: activations %zu bytes per rank = cp=1's %zu / %d; ring workspace "
           "%zu bytes\n", cp, act_a, act_b, cp, ring);
  mt_group_destroy(g);
  mt_group_destroy(gt);
  free(tl);
  free(cl);
  mt_gpt_destroy(A);
  mt_gpt_destroy(B);
  free(tok);
  mt_backend_destroy(be_a);
  mt_backend_destroy(be_b);
  mt_dist_finalize(d);
  return 0;
}
