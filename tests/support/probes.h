/* tests/support/probes.h — test-only views and analytic expectations that
 * the product never calls (scripts/check-dead.py keeps them out of the
 * library): accessors of private state the tests inspect, and the formulas
 * the allocator-exact memory and communication-count checks compare the
 * library's measured counters against. Linked into tests, tools and bench
 * only (build/libmegatrain_test.a). */
#ifndef MT_TEST_PROBES_H
#define MT_TEST_PROBES_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "core/backend.h"
#include "core/safetensors.h"
#include "model/context_parallel.h"
#include "model/moe_layer.h"
#include "model/params.h"
#include "optimizer/distrib_optimizer.h"
#include "optimizer/optimizer.h"
#include "parallel/comm.h"
#ifdef MT_HAVE_NCCL
#include "parallel/nccl_api.h"
#endif

/* ---- config (tests/support/probe_config.c) ---- */
/* Fill cfg with the key table's defaults (Megatron's: what an empty section
 * means), derived keys resolved for one rank; json stays NULL. */
void mt_config_defaults(mt_config *cfg);

/* The key table's defaults of the model section alone, derived keys left 0
 * (= derive): the starting point of a model config built by hand (tests,
 * benches; the model resolves derived sizes left 0, model/gpt.h). */
void mt_model_config_defaults(mt_model_config *m);

/* ---- model (tests/support/probe_model.c) ---- */
/* Workspace bytes held by the ring: two K/V blocks in flight, two dK/dV
 * blocks in flight plus the local dK/dV partial (5·KV), the dQ/dK/dV gather
 * source (s/cp·b·(np+2ng)·hn), one partial ctx and lse of a chunk, and the
 * K/V pack and unpack index tables (int32). */
size_t mt_cp_attn_workspace_bytes(const mt_cp_layout *L, int b, int np, int ng, int hn,
                                  mt_dtype T);

/* Elements of T this rank sends over the CP group per layer and micro-batch:
 * forward (cp−1)·KV; backward (2cp−1)·KV (see the header comment). */
int64_t mt_cp_attn_fwd_send_elems(const mt_cp_layout *L, int b, int ng, int hn);
int64_t mt_cp_attn_bwd_send_elems(const mt_cp_layout *L, int b, int ng, int hn);

/* Global row of local row r of a weight p (see mt_param.halves). */
int64_t mt_param_global_row(const mt_param *p, int64_t r);

/* Routing of the last forward with these acts. */
const mt_moe_routing *mt_moe_acts_routing(const mt_moe_acts *a);

/* ---- optimizer (tests/support/probe_optimizer.c) ---- */
/* Part k alone (0 dense, 1 experts; k < n_part) of mt_zero_opt_expected_bytes:
 * the full stage-1/2 buffers are split between the parts by parameter kind,
 * the alignment gaps counted with the dense part. */
void mt_zero_opt_part_expected_bytes(const mt_zero_opt *z, int k, size_t out[MT_MEM_NCAT]);
/* Model-state bytes per category of this rank as the ZeRO formulas predict
 * them for this layout (no working buffers): out[MT_MEM_PARAM], [GRAD],
 * [OPTIM]; the allocator's live counters should match after a step. */
void mt_zero_opt_expected_bytes(const mt_zero_opt *z, size_t out[MT_MEM_NCAT]);
/* Sum of squares of this rank's expert gradients (mt_param.is_expert; not
 * counted by mt_grad_sumsq). */
double mt_grad_sumsq_experts(const mt_adamw *opt);

/* ---- core (tests/support/probe_core.c) ---- */
/* __metadata__[key] of an open safetensors file, or NULL. */
const char *mt_st_metadata(const mt_st_file *f, const char *key);

/* ---- parallel (tests/support/probe_parallel.c) ---- */
const char *mt_group_name(const mt_group *g);
/* "all_reduce", "all_gather", ... for messages; "?" out of range. */
const char *mt_coll_name(mt_coll_kind k);
mt_comm_engine mt_group_engine(const mt_group *g);
/* World rank of group member i. */
int mt_group_world_rank(const mt_group *g, int i);
#ifdef MT_HAVE_NCCL
/* "NCCL 2.28.3 (/usr/local/cuda/lib/libnccl.so.2)" into buf. */
void mt_nccl_api_describe(const mt_nccl_api *a, char *buf, size_t len);
#endif

/* ---- planner (tests/support/probe_planner.c) ---- */
/* Parameters of the whole model (all ranks, tied word embedding counted
 * once): with the vocabulary padded to make_vocab_size_divisible_by x tp as
 * allocated (padded_vocab 1), or with the tokenizer's vocabulary, which is
 * how model cards count (padded_vocab 0). Every block option counts
 * (docs/planner.md "Model options"). No errors. */
int64_t mt_plan_num_parameters(const mt_config *cfg, int padded_vocab);

#endif
