/* tests/unit/model/test_tp_model.c — tensor-parallel model construction without
 * communication: (1) every TP shard's initial parameters are bitwise the
 * matching slice of the tp=1 model's (layout-independent init), for tp 2 and 4
 * and a vocabulary (50257... scaled down: 1000) that does not divide, for the
 * GPT-2 block and the Llama-style one (GQA fused QKV per query group,
 * SwiGLU fc1 gate/up halves, RMSNorm, qk_layernorm, no biases, untied);
 * (2) the allocator's activation bytes of one micro-batch slot equal
 * docs/memory.md's formula for every combination of tp {1,2,4} x sp x
 * recompute {none, selective, full} x block {GPT-2, Llama-style, Llama-style
 * with LayerNorm qk norms}. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/probes.h"
#include "tests/unit/check.h"

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/tiny_gpt.h"
#include "tests/tools/tool_util.h"

static mt_gpt_config base_config(void) {
  mt_gpt_config c = mt_tiny_gpt(3, 64, 8, 256, 16, 1000, 2, 77);
  c.model.max_position_embeddings = 20;
  return c;
}

/* Llama-style options on top of base_config: RoPE, RMSNorm, SwiGLU, 4 query
 * groups for 8 heads, no biases, untied output; qk: qk_layernorm with
 * LayerNorm instead of RMSNorm, and biases on. */
static mt_gpt_config llama_config(int qk) {
  mt_gpt_config c = base_config();
  MT_GPT_SET(c.model.position_embedding_type, "rope");
  c.model.rotary_base = 10000.0f;
  c.model.rotary_percent = 1.0f;
  MT_GPT_SET(c.model.normalization, qk ? "LayerNorm" : "RMSNorm");
  c.model.swiglu = 1;
  c.model.num_query_groups = 4;
  c.model.add_bias_linear = qk; /* the qk variant keeps biases (SwiGLU fc1 bias halves) */
  c.model.qk_layernorm = qk;
  c.model.untie_embeddings_and_output_weights = 1;
  return c;
}

static void check_init_shards(mt_gpt_config c1) {
  mt_backend *be = mt_tool_cpu_backend();
  c1.padded_vocab_size = mt_round_up(c1.model.vocab_size, 128 * 4); /* same padding for all tp */
  mt_gpt *full = mt_gpt_create(be, &c1);
  float *F = mt_tool_host_params(be, full);
  const mt_param_list *fl = mt_gpt_params(full);
  for (int tp = 2; tp <= 4; tp *= 2) {
    for (int r = 0; r < tp; r++) {
      mt_gpt_config c = c1;
      c.tp_size = tp;
      c.tp_rank = r;
      mt_gpt *sh = mt_gpt_create(be, &c);
      float *S = mt_tool_host_params(be, sh);
      const mt_param_list *sl = mt_gpt_params(sh);
      assert_int_equal(sl->n, fl->n);
      for (int i = 0; i < sl->n; i++) {
        const mt_param *p = &sl->p[i];
        const mt_param *q = &fl->p[mt_params_find(fl, p->name)];
        EXPECT_EQ(p->rows, q->rows, "tensor '%s'", p->name);
        EXPECT_EQ(p->cols, q->cols, "tensor '%s'", p->name);
        for (int64_t rr = 0; rr < p->local_rows; rr++)
          for (int64_t cc = 0; cc < p->local_cols; cc++) {
            float a = S[p->offset + rr * p->local_cols + cc];
            const int64_t gr = mt_param_global_row(p, rr);
            int64_t gc = p->col_offset + cc;
            if (p->halves && p->local_rows == 1) /* [1, 2f] SwiGLU bias: halves of columns */
              gc = cc < p->local_cols / 2 ? p->col_offset + cc
                                          : p->cols / 2 + p->col_offset + cc - p->local_cols / 2;
            float b = F[q->offset + gr * q->cols + gc];
            if (memcmp(&a, &b, sizeof a) != 0)
              fail_msg("tp=%d rank %d %s[%lld,%lld]: %g != %g", tp, r, p->name, (long long)gr,
                       (long long)gc, a, b);
          }
      }
      free(S);
      mt_gpt_destroy(sh);
    }
  }
  free(F);
  mt_gpt_destroy(full);
  mt_backend_destroy(be);
}

static void test_init_shards_bitwise(void **state) {
  (void)state;
  check_init_shards(base_config());
  check_init_shards(llama_config(0));
  check_init_shards(llama_config(1));
}

/* recompute_granularity by index: none, selective, full */
enum { RC_NONE, RC_SELECTIVE, RC_FULL };
static const char *const k_recompute[] = {"", "selective", "full"};

/* docs/memory.md: activation elements of this implementation. */
static int64_t expected_act_bytes(const mt_gpt_config *c, int tp, int sp, int recompute, int n_rc) {
  const int64_t s = c->model.seq_length, b = c->micro_batch_size, h = c->model.hidden_size;
  const int64_t f = c->model.ffn_hidden_size, a = c->model.num_attention_heads;
  const int64_t L = c->model.num_layers;
  const int64_t Vp = c->padded_vocab_size;
  const int64_t tsp = sp && tp > 1 ? tp : 1;
  const int64_t ng = c->model.num_query_groups ? c->model.num_query_groups : a;
  const int64_t hn = c->model.kv_channels ? c->model.kv_channels : h / a;
  const int64_t qkv = (a + 2 * ng) * hn, g = c->model.swiglu ? 2 : 1;
  const int64_t nstat = !strcmp(c->model.normalization, "RMSNorm") ? 1 : 2; /* no mean */
  /* one layer's saved set (elements), the attention's lse separately */
  int64_t layer = s * b * h * 3 / tsp          /* ln1, x1, ln2 */
                  + 2 * nstat * s * b / tsp    /* norm means and rstds */
                  + s * b * (qkv + a * hn) / tp /* qkv and ctx */
                  + (g + 1) * s * b * f / tp;  /* fc1 (gate and up with SwiGLU) and act */
  if (c->model.qk_layernorm)                         /* pre-norm qkv, q/k norm statistics */
    layer += s * b * qkv / tp + nstat * s * b * (a + ng) / tp;
  int64_t lse = b * (a / tp) * s;             /* fused attention log-sum-exp (fp32) */
  int64_t total;
  if (recompute == RC_NONE) total = L * (layer + lse);
  else if (recompute == RC_SELECTIVE) total = L * layer + lse;
  else total = n_rc * (layer + lse);
  total += (L + 1) * s * b * h / tsp;          /* residual stream: layer inputs + output */
  total += s * b * h / tsp + nstat * s * b / tsp; /* final norm output, mean, rstd */
  total += s * b * Vp / tp;                    /* logits */
  total += 4 * s * b + 2 * s * b;              /* row max, (sumexp, target), loss; tokens, targets */
  return total * 4;
}

static void test_activation_bytes(void **state) {
  (void)state;
  mt_backend *be = mt_tool_cpu_backend();
  for (int blk = 0; blk < 3; blk++)
  for (int tp = 1; tp <= 4; tp *= 2)
    for (int sp = 0; sp <= 1; sp++)
      for (int rc = 0; rc <= 2; rc++) {
        mt_gpt_config c = blk ? llama_config(blk == 2) : base_config();
        c.padded_vocab_size = mt_round_up(c.model.vocab_size, 128 * tp);
        c.tp_size = tp;
        c.sequence_parallel = sp;
        MT_GPT_SET(c.model.recompute_granularity, k_recompute[rc]);
        c.model.recompute_num_layers = 2;
        size_t before = be->mem.live[MT_MEM_ACT];
        mt_gpt *m = mt_gpt_create(be, &c);
        /* activations are allocated per micro-batch slot: take one */
        int32_t tok[2 * 17] = {0};
        int64_t ids[2] = {0, 1};
        mt_gpt_chunk_begin(m, 0, 0, tok, ids, 1);
        int64_t got = (int64_t)(be->mem.live[MT_MEM_ACT] - before);
        mt_gpt_chunk_end(m, 0, 0);
        int64_t want = expected_act_bytes(&c, tp, sp, rc, 2);
        if (got != want)
          fail_msg("block %d tp=%d sp=%d recompute=%d: allocator %lld bytes, formula %lld", blk,
                   tp, sp, rc, (long long)got, (long long)want);
        mt_gpt_destroy(m);
      }
  /* the paper's claim: TP + SP + selective stores ~1/tp of tp=1's layer activations */
  mt_gpt_config c = base_config();
  c.padded_vocab_size = mt_round_up(c.model.vocab_size, 512);
  int64_t one = expected_act_bytes(&c, 1, 0, RC_SELECTIVE, 1);
  int64_t four = expected_act_bytes(&c, 4, 1, RC_SELECTIVE, 1);
  print_message("selective: tp=1 %lld bytes, tp=4+sp %lld bytes (ratio %.3f)\n", (long long)one,
                (long long)four, (double)four / (double)one);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_shards_bitwise),
      cmocka_unit_test(test_activation_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
