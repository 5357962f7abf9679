/* tests/unit/checkpoint/test_ckpt_views.c — the checkpoint views of the model's
 * parameters (checkpoint/views.h), without communication: for tp {1, 2,
 * 4} (GELU and SwiGLU with biases: fc1 weight halves along rows, its bias
 * along columns), pipelines (tied embedding: the last stage's copy is never
 * written; interleaved), MoE with ep and etp (SwiGLU expert halves, shared
 * expert) and a vocabulary padded differently from the reference, every
 * rank's model is built and
 *  (1) every element of every global tensor (vocabulary rows cut to
 *      vocab_size) is written by exactly one rank's views, and
 *  (2) each written element equals the one-process model's value at the
 *      view's global position (initialisation is keyed by global indices,
 *      so this checks boxes, halves and the vocabulary cut). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/check.h"

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/tiny_gpt.h"
#include "tests/tools/tool_util.h"
#include "checkpoint/views.h"

#define VOCAB 300

typedef struct {
  const char *what;
  int tp, pp, vpp, ep, etp;
  int64_t padded; /* padded vocabulary of the sharded layout */
} layout;

/* Count writes per element of every global tensor and compare values. */
static void check_layout(mt_backend *be, const mt_gpt_config *c1, const layout *L) {
  mt_gpt *full = mt_gpt_create(be, c1);
  float *F = mt_tool_host_params(be, full);
  const mt_param_list *fl = mt_gpt_params(full);
  int **count = mt_xcalloc((size_t)fl->n, sizeof *count);
  int64_t *rows = mt_xcalloc((size_t)fl->n, sizeof *rows);
  for (int i = 0; i < fl->n; i++) {
    const mt_param *q = &fl->p[i];
    rows[i] = (!strcmp(q->name, "embedding.word_embeddings.weight") ||
               !strcmp(q->name, "output_layer.weight"))
                  ? VOCAB
                  : q->rows;
    count[i] = mt_xcalloc((size_t)(rows[i] * q->cols), sizeof(int));
  }
  for (int tr = 0; tr < L->tp; tr++)
    for (int pr = 0; pr < L->pp; pr++)
      for (int er = 0; er < L->ep; er++)
        for (int xr = 0; xr < L->etp; xr++) {
          mt_gpt_config c = *c1;
          c.tp_size = L->tp;
          c.tp_rank = tr;
          c.sequence_parallel = L->tp > 1;
          c.pp_size = L->pp;
          c.pp_rank = pr;
          c.vpp_size = L->vpp;
          c.ep_size = L->ep;
          c.ep_rank = er;
          c.etp_size = L->etp;
          c.etp_rank = xr;
          c.padded_vocab_size = L->padded;
          mt_gpt *m = mt_gpt_create(be, &c);
          float *S = mt_tool_host_params(be, m);
          float *base = mt_gpt_param_buffer(m);
          mt_dckpt_view *v = NULL;
          int n = 0;
          /* dense tensors written once over the expert coordinates, experts
           * once over the tensor-parallel ones (a stand-in for dp rank 0) */
          mt_ckpt_model_param_views(m, VOCAB, er == 0 && xr == 0, tr == 0, &v, &n);
          for (int k = 0; k < n; k++) {
            const mt_dckpt_view *x = &v[k];
            const int qi = mt_params_find(fl, x->name);
            if (qi < 0) fail_msg("%s: view '%s' is not a tensor of the model", L->what, x->name);
            const mt_param *q = &fl->p[qi];
            EXPECT_EQ(x->rows, rows[qi], "%s: rows of '%s'", L->what, x->name);
            EXPECT_EQ(x->cols, q->cols, "%s: cols of '%s'", L->what, x->name);
            if (!(x->r0 >= 0 && x->r0 + x->nr <= x->rows && x->c0 >= 0 &&
                  x->c0 + x->nc <= x->cols && 0 <= x->lo && x->lo < x->hi &&
                  x->hi <= x->nr * x->nc && x->dtype == MT_F32))
              fail_msg("%s: view of '%s' outside its tensor", L->what, x->name);
            const float *d = S + ((float *)x->data - base);
            for (int64_t e = x->lo; e < x->hi; e++) {
              const int64_t r = x->r0 + e / x->nc, col = x->c0 + e % x->nc;
              const float a = d[e - x->lo], b = F[q->offset + r * q->cols + col];
              if (memcmp(&a, &b, sizeof a) != 0)
                fail_msg("%s rank (tp %d, pp %d, ep %d, etp %d): %s[%lld, %lld] = %g, expected %g",
                         L->what, tr, pr, er, xr, x->name, (long long)r, (long long)col, a, b);
              if (x->write) count[qi][r * q->cols + col]++;
            }
          }
          free(v);
          free(S);
          mt_gpt_destroy(m);
        }
  for (int i = 0; i < fl->n; i++) {
    const mt_param *q = &fl->p[i];
    for (int64_t e = 0; e < rows[i] * q->cols; e++)
      if (count[i][e] != 1)
        fail_msg("%s: element [%lld, %lld] of '%s' written %d times", L->what,
                 (long long)(e / q->cols), (long long)(e % q->cols), q->name, count[i][e]);
    free(count[i]);
  }
  free(count);
  free(rows);
  free(F);
  mt_gpt_destroy(full);
}

static void test_dense(void **state) {
  (void)state;
  mt_backend *be = mt_tool_cpu_backend();
  mt_gpt_config c = mt_tiny_gpt(4, 32, 4, 64, 8, VOCAB, 2, 7);
  const layout gelu[] = {{"gelu tp1", 1, 1, 1, 1, 1, 384},
                         {"gelu tp2 vocab/8", 2, 1, 1, 1, 1, 304},
                         {"gelu tp4", 4, 1, 1, 1, 1, 384},
                         {"gelu pp2 tied", 1, 2, 1, 1, 1, 384},
                         {"gelu tp2 pp2 v2 tied", 2, 2, 2, 1, 1, 320}};
  for (size_t i = 0; i < sizeof gelu / sizeof *gelu; i++) check_layout(be, &c, &gelu[i]);
  c.model.swiglu = 1;
  c.model.untie_embeddings_and_output_weights = 1;
  const layout glu[] = {{"swiglu untied tp2", 2, 1, 1, 1, 1, 384},
                        {"swiglu untied tp4 pp2", 4, 2, 1, 1, 1, 400}};
  for (size_t i = 0; i < sizeof glu / sizeof *glu; i++) check_layout(be, &c, &glu[i]);
  mt_backend_destroy(be);
}

static void test_moe(void **state) {
  (void)state;
  mt_backend *be = mt_tool_cpu_backend();
  mt_gpt_config c = mt_tiny_gpt(4, 32, 4, 64, 8, VOCAB, 2, 9);
  c.model.num_experts = 4;
  c.model.moe_router_topk = 2;
  c.model.moe_ffn_hidden_size = 48;
  c.model.moe_layer_freq = 2;
  const layout gelu[] = {{"moe ep2", 1, 1, 1, 2, 1, 384}, {"moe tp2 ep4", 2, 1, 1, 4, 1, 384}};
  for (size_t i = 0; i < sizeof gelu / sizeof *gelu; i++) check_layout(be, &c, &gelu[i]);
  c.model.swiglu = 1;
  c.model.add_bias_linear = 0; /* no expert biases with ETP > 1 (Megatron) */
  c.model.moe_shared_expert_intermediate_size = 32;
  const layout glu[] = {{"moe swiglu etp2 ep2 shared", 2, 1, 1, 2, 2, 384},
                        {"moe swiglu etp2 pp2", 2, 2, 1, 1, 2, 384}};
  for (size_t i = 0; i < sizeof glu / sizeof *glu; i++) check_layout(be, &c, &glu[i]);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dense),
      cmocka_unit_test(test_moe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
