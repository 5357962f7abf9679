/* tests/unit/model/test_moe_etp_params.c — expert tensor parallelism at model
 * construction, without communication (model/moe_etp.h, docs/moe.md
 * "Expert tensor parallelism"): for etp {2, 4} x ep {1, 2} x every
 * (etp rank, ep rank), GELU and SwiGLU experts, (1) every expert shard's
 * initial values are bitwise the matching slice of the one-process model's
 * (fc1 rows [r·F/etp, ...) of each SwiGLU half, fc2 columns [r·F/etp, ...)):
 * initialisation is keyed by global indices; (2) the expert parameter bytes
 * per rank (and their fp32 gradient bytes) equal the formula
 *   L_moe · (E/ep) · (g·F/etp·h + h·F/etp) · S   (g = 2 with SwiGLU, no biases),
 * and, summed over the etp x ep ranks holding distinct shards, the
 * one-process expert bytes. */
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

static mt_gpt_config moe_config(int swiglu) {
  mt_gpt_config c = mt_tiny_gpt(4, 32, 4, 64, 8, 300, 2, 99);
  c.model.num_experts = 4;
  c.model.moe_router_topk = 2;
  c.model.moe_ffn_hidden_size = 48;
  c.model.moe_layer_freq = 2;
  c.model.swiglu = swiglu;
  c.model.add_bias_linear = 0; /* no expert biases with ETP > 1 (Megatron) */
  return c;
}

static int64_t expert_numel(const mt_gpt *m) {
  const mt_param_list *pl = mt_gpt_params(m);
  int64_t n = 0;
  for (int i = 0; i < pl->n; i++)
    if (pl->p[i].is_expert) n += pl->p[i].numel;
  return n;
}

static void check(int swiglu) {
  mt_backend *be = mt_tool_cpu_backend();
  const mt_gpt_config c1 = moe_config(swiglu);
  mt_gpt *full = mt_gpt_create(be, &c1);
  float *Fv = mt_tool_host_params(be, full);
  const mt_param_list *fl = mt_gpt_params(full);
  const int64_t one = expert_numel(full);
  const int64_t g = swiglu ? 2 : 1, h = c1.model.hidden_size, F = c1.model.moe_ffn_hidden_size;
  const int64_t E = c1.model.num_experts, Lm = mt_gpt_num_moe_layers(&c1);
  EXPECT_EQ(one, Lm * E * (g * F * h + h * F), "swiglu %d etp 1", swiglu);
  for (int etp = 2; etp <= 4; etp *= 2)
    for (int ep = 1; ep <= 2; ep++) {
      int64_t sum = 0;
      for (int er = 0; er < etp; er++)
        for (int pr = 0; pr < ep; pr++) {
          mt_gpt_config c = c1;
          c.etp_size = etp;
          c.etp_rank = er;
          c.ep_size = ep;
          c.ep_rank = pr;
          mt_gpt *sh = mt_gpt_create(be, &c);
          float *S = mt_tool_host_params(be, sh);
          const mt_param_list *sl = mt_gpt_params(sh);
          const int64_t n = expert_numel(sh);
          /* (2) parameter and gradient bytes of this rank's expert shards */
          EXPECT_EQ(n * 4, Lm * (E / ep) * (g * (F / etp) * h + h * (F / etp)) * 4,
                    "swiglu %d etp %d ep %d rank (%d, %d)", swiglu, etp, ep, er, pr);
          sum += n;
          /* (1) values: the slice of the one-process tensor */
          for (int i = 0; i < sl->n; i++) {
            const mt_param *p = &sl->p[i];
            if (!p->is_expert) continue;
            const mt_param *q = &fl->p[mt_params_find(fl, p->name)];
            EXPECT_EQ(p->rows, q->rows, "tensor '%s'", p->name);
            EXPECT_EQ(p->cols, q->cols, "tensor '%s'", p->name);
            const int fc1 = strstr(p->name, "linear_fc1") != NULL;
            const int64_t Fl = F / etp, f0 = er * Fl;
            EXPECT_EQ(p->local_rows, fc1 ? g * Fl : h, "tensor '%s'", p->name);
            EXPECT_EQ(p->local_cols, fc1 ? h : Fl, "tensor '%s'", p->name);
            for (int64_t rr = 0; rr < p->local_rows; rr++)
              for (int64_t cc = 0; cc < p->local_cols; cc++) {
                /* fc1: gate rows f0.., then (SwiGLU) up rows F + f0..; fc2: columns f0.. */
                const int64_t gr = !fc1 ? rr : rr < Fl ? f0 + rr : F + f0 + rr - Fl;
                const int64_t gc = fc1 ? cc : f0 + cc;
                float a = S[p->offset + rr * p->local_cols + cc];
                float b = Fv[q->offset + gr * q->cols + gc];
                if (memcmp(&a, &b, sizeof a) != 0)
                  fail_msg("swiglu %d etp %d rank %d %s[%lld,%lld]: %g != %g", swiglu, etp, er,
                           p->name, (long long)gr, (long long)gc, a, b);
              }
          }
          free(S);
          mt_gpt_destroy(sh);
        }
      EXPECT_EQ(sum, one, "swiglu %d etp %d ep %d: shards sum to the whole", swiglu, etp, ep);
    }
  free(Fv);
  mt_gpt_destroy(full);
  mt_backend_destroy(be);
}

static void test_etp_shards(void **state) {
  (void)state;
  check(0);
  check(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_etp_shards),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
