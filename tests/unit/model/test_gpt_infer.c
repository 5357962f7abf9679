/* tests/unit/model/test_gpt_infer.c — the inference forward (model/gpt_infer.h)
 * against the training forward and against itself, one rank:
 *  (1) recompute path == training forward: feeding a sequence one token at
 *      a time without the cache, the summed cross-entropy of the next-token
 *      logits equals mt_gpt_forward_backward's loss sum (train 0) within
 *      1e-5 relative (the training forward is the one proven equal to
 *      PyTorch by the parity tests);
 *  (2) KV cache == recompute: after a prefill of 5 tokens and then one
 *      token per call, every logits row equals the recompute path's within
 *      1e-4 absolute (same ops, other summation order), and its argmax is
 *      the same;
 *  (3) reset: a second sequence through the same state gives the same
 *      logits as a fresh state.
 * For the GPT-2 block, the Llama-style block (RoPE, RMSNorm, SwiGLU, GQA, no
 * biases, untied output) and a variant with qk_layernorm and
 * rotary_percent 0.5. Also: MoE, pp > 1 and a too long max_len are refused. */
#include <math.h>
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
#include "model/gpt_infer.h"
#include "tests/tools/tiny_gpt.h"
#include "tests/tools/tool_util.h"

enum { SEQ = 24, PREFILL = 5 };

static mt_gpt_config gpt2_config(void) {
  mt_gpt_config c = mt_tiny_gpt(2, 64, 4, 256, SEQ, 300, 1, 11);
  c.model.init_method_std = 0.1f; /* attention far from uniform */
  return c;
}

static mt_gpt_config llama_config(int qk) {
  mt_gpt_config c = gpt2_config();
  MT_GPT_SET(c.model.position_embedding_type, "rope");
  c.model.rotary_base = 10000.0f;
  c.model.rotary_percent = qk ? 0.5f : 1.0f;
  MT_GPT_SET(c.model.normalization, "RMSNorm");
  c.model.swiglu = 1;
  c.model.num_query_groups = 2;
  c.model.add_bias_linear = qk;
  c.model.qk_layernorm = qk;
  c.model.untie_embeddings_and_output_weights = 1;
  return c;
}

static double xent(const float *l, int64_t V, int32_t target) {
  double mx = l[0], s = 0.0;
  for (int64_t v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
  for (int64_t v = 0; v < V; v++) s += exp((double)l[v] - mx);
  return log(s) + mx - (double)l[target];
}

static int64_t argmax(const float *l, int64_t V) {
  int64_t b = 0;
  for (int64_t v = 1; v < V; v++)
    if (l[v] > l[b]) b = v;
  return b;
}

static void check_model(mt_gpt_config c, const char *what) {
  mt_backend *be = mt_tool_cpu_backend();
  mt_gpt *m = mt_gpt_create(be, &c);
  const int64_t V = c.model.vocab_size;
  int32_t tok[SEQ + 1];
  uint64_t x = 12345;
  for (int i = 0; i <= SEQ; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tok[i] = (int32_t)((x >> 33) % (uint64_t)V);
  }
  int64_t sid = 0;
  const double ref = mt_gpt_forward_backward(m, tok, &sid, 0, 1.0f);

  char err[256];
  mt_gpt_infer *nc = mt_gpt_infer_create(m, NULL, SEQ, 0, err, sizeof err);
  mt_gpt_infer *kv = mt_gpt_infer_create(m, NULL, SEQ, 1, err, sizeof err);
  assert_non_null(nc);
  assert_non_null(kv);
  float *ln = mt_xmalloc((size_t)V * sizeof(float)), *lk = mt_xmalloc((size_t)V * sizeof(float));
  double sum = 0.0, worst = 0.0;
  for (int t = 0; t < SEQ; t++) {
    mt_gpt_infer_append(nc, &tok[t], 1, ln);
    sum += xent(ln, V, tok[t + 1]);
    if (t + 1 < PREFILL) continue;
    if (t + 1 == PREFILL)
      mt_gpt_infer_append(kv, tok, PREFILL, lk);
    else
      mt_gpt_infer_append(kv, &tok[t], 1, lk);
    for (int64_t v = 0; v < V; v++) {
      double d = fabs((double)ln[v] - (double)lk[v]);
      worst = d > worst ? d : worst;
    }
    EXPECT_EQ(argmax(lk, V), argmax(ln, V), "%s step %d", what, t);
  }
  print_message("%s: training loss sum %.9g, inference %.9g (rel %.2e); cache vs recompute "
                "max |dlogit| %.2e\n",
                what, ref, sum, fabs(sum - ref) / fabs(ref), worst);
  EXPECT(fabs(sum - ref) <= 1e-5 * fabs(ref), "%s", what);
  EXPECT(worst <= 1e-4, "%s", what);
  free(ln);
  free(lk);
  mt_gpt_infer_destroy(nc);
  mt_gpt_infer_destroy(kv);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
}

static void test_gpt2(void **st) {
  (void)st;
  check_model(gpt2_config(), "gpt2");
}

static void test_llama(void **st) {
  (void)st;
  check_model(llama_config(0), "llama");
}

static void test_llama_qk_partial_rope(void **st) {
  (void)st;
  check_model(llama_config(1), "llama+qk_layernorm+rotary_percent 0.5");
}

static void test_refusals(void **st) {
  (void)st;
  mt_backend *be = mt_tool_cpu_backend();
  char err[256];
  mt_gpt_config c = gpt2_config();
  mt_gpt *m = mt_gpt_create(be, &c);
  assert_null(mt_gpt_infer_create(m, NULL, SEQ + 1, 1, err, sizeof err));
  assert_non_null(strstr(err, "max_position_embeddings"));
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
}

/* MoE layers (issue 31): the inference forward routes every call's tokens
 * dropless as the training forward routes the micro-batch (no capacity), so
 * both give the same loss; sigmoid routing in groups with scaling and a
 * shared expert, the first layer dense; and softmax top-2 in every layer */
static void test_moe(void **st) {
  (void)st;
  mt_gpt_config c = llama_config(0);
  c.model.num_experts = 8;
  c.model.moe_router_topk = 2;
  c.model.moe_ffn_hidden_size = 32;
  c.model.moe_layer_pattern_len = 2;
  c.model.moe_layer_pattern[0] = 0;
  c.model.moe_layer_pattern[1] = 1;
  MT_GPT_SET(c.model.moe_router_score_function, "sigmoid");
  c.model.moe_router_topk_scaling_factor = 2.5f;
  c.model.moe_router_num_groups = 4;
  c.model.moe_router_group_topk = 2;
  c.model.moe_shared_expert_intermediate_size = 64;
  check_model(c, "moe sigmoid groups shared");
  c = llama_config(0);
  c.model.num_experts = 4;
  c.model.moe_router_topk = 2;
  c.model.moe_ffn_hidden_size = 32;
  c.model.moe_layer_freq = 1;
  check_model(c, "moe softmax top-2");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpt2),
      cmocka_unit_test(test_llama),
      cmocka_unit_test(test_llama_qk_partial_rope),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_moe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
