/* planner/plan.h — `megatrain plan`: predict per-rank memory and step time of
 * a training config on a described cluster, and rank layouts (docs/planner.md).
 *
 * The planner reads the same config as training (config/config.h) and a
 * small hardware description (configs/hardware/NAME.json). It is pure
 * arithmetic: no backend, BLAS or MPI call. Layer: main.c -> planner/ ->
 * config/ + parallel/topology.
 *
 * Sources: activation memory per layer follows Korthikanti et al. 2022
 * (arXiv:2205.05198 §4, Table 2) adapted to this implementation's buffers
 * (model/gpt.c alloc_buffers); FLOPs follow Narayanan et al. 2021
 * (arXiv:2104.04473 §5.1, Appendix) and 2205.05198 Appendix A; the pipeline
 * bubble (p-1)/m and (p-1)/(v m) is 2104.04473 §2.2; collectives use the
 * ring alpha-beta cost model (Thakur et al. 2005; nccl-tests' bus bandwidth).
 */
#ifndef MT_PLANNER_PLAN_H
#define MT_PLANNER_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"

/* A GPU model and its node/network (configs/hardware/<name>.json). Vendor
 * figures are peaks; the `efficiency` section holds the achievable fractions
 * the time model uses (docs/throughput.md says which were fitted). */
typedef struct {
  char name[64];
  char source_path[MT_PATH_MAX];
  double peak_tflops_bf16;      /* dense bf16/fp16 tensor-core peak, TFLOP/s */
  double peak_tflops_fp32;      /* dense fp32 (TF32 tensor core) peak, TFLOP/s */
  double peak_tflops_fp8;       /* dense FP8 tensor-core peak, TFLOP/s (0: none, e.g. A100) */
  double hbm_gib;               /* HBM capacity per GPU, GiB */
  double hbm_gbs;               /* HBM bandwidth, GB/s */
  double intra_node_gbs;        /* NVLink/NVSwitch bandwidth per GPU per direction, GB/s */
  int gpus_per_node;
  double inter_node_gbs;        /* network bandwidth per GPU per direction, GB/s */
  double intra_latency_us;      /* alpha of one ring step inside a node, us */
  double inter_latency_us;      /* alpha of one ring step across nodes, us */
  double reserved_gib;          /* memory not available to tensors (context, allocator), GiB */
  /* efficiency (fractions of the peaks above) */
  double gemm_eff_max;          /* large-GEMM fraction of the tensor peak */
  double gemm_dim_half;         /* c in eff = max / (1 + c/M + c/N + c/K), elements */
  double hbm_eff;               /* achievable fraction of HBM bandwidth (elementwise) */
  double link_eff;              /* achievable fraction of link bandwidth (bus bandwidth) */
  double overhead_per_iter_ms;  /* fixed per-iteration host overhead (launch, logging) */
} mt_hardware;

/* Read and check a hardware file. Returns 0, or 2 with a message naming the
 * file and the key in err (unknown file, bad JSON, missing/non-positive key). */
int mt_hardware_load(mt_hardware *hw, const char *path, char *err, size_t errlen);

/* Planner options that are not (yet) config keys. */
typedef struct {
  int overlap_grad_reduce;      /* DP/ZeRO gradient reduction overlaps backward */
  int overlap_param_gather;     /* ZeRO: parameter all-gathers overlap the forward */
  int overlap_p2p_comm;         /* pipeline send/recv overlap the next chunk's compute */
  int moe_shared_expert_overlap;/* EP all-to-alls overlap the shared expert */
  /* MoE rows a rank receives without padding to capacity (planner/plan_moe.c,
   * docs/planner.md "MoE"): balanced routing times moe_load_factor (0 =
   * MT_PLAN_MOE_LOAD_FACTOR); or, when given (bit 1 of moe_rows_given),
   * exactly moe_recv_rows received and (bit 2) moe_expert_rows seen by the
   * experts (else etp · moe_recv_rows): the high-water marks a run logs
   * (megatrain-mem-peak moe_recv_rows, moe_expert_rows) */
  double moe_load_factor;
  int moe_rows_given;
  int64_t moe_recv_rows, moe_expert_rows;
} mt_plan_options;

/* The default routing assumption of the MoE buffers: the rank receiving the
 * most rows gets 1.25 times the balanced n_loc · k (docs/planner.md "MoE":
 * a capacity factor of 1.25, Switch Transformer's notion, Fedus et al. 2021
 * §2.2; Megatron's own estimate has no routed-token term). */
#define MT_PLAN_MOE_LOAD_FACTOR 1.25

/* Memory categories, mirroring the allocator's (core/backend.h mt_mem_cat). */
enum {
  MT_PM_PARAM = 0, MT_PM_GRAD, MT_PM_OPTIM, MT_PM_ACT, MT_PM_COMM, MT_PM_WORKSPACE, MT_PM_N
};
const char *mt_plan_mem_name(int cat);

typedef struct {
  double bytes[MT_PM_N];  /* on the worst rank, bytes */
  double total;           /* sum of bytes[] */
  double capacity;        /* hbm - reserved, bytes */
  int fits;               /* total <= capacity */
  int worst_stage;        /* pipeline stage of the worst rank */
  double act_layer_bytes; /* activations one layer keeps for one micro-batch */
  double inflight_layers; /* layer-micro-batches of activations held at peak */
  int64_t params_per_rank, params_total; /* params_total: padded vocabulary */
  int64_t params_total_unpadded;          /* the tokenizer's vocabulary (published counts) */
  int64_t params_active;                  /* per token: unpadded, k of E routed experts */
  int64_t params_mtp, params_mtp_active;  /* of those, the MTP depths' (they share the
                                             embedding and the output layer) */
  /* MoE (0 when dense): rows a rank's receive buffers / experts hold under the
   * routing assumption, the worst case (all tokens routed to one rank), the
   * load factor used (0 with padding or given rows), and the worst rank's
   * total under the worst case (= total when the rows are static) */
  double moe_recv_rows, moe_expert_rows, moe_worst_rows, moe_load_factor, total_worst;
} mt_plan_memory;

/* Time components of one iteration on the critical path, seconds. */
enum {
  MT_PT_GEMM = 0,     /* linear layers + logits GEMMs (fwd + bwd)          */
  MT_PT_ATTN,         /* attention score/context GEMMs + softmax/dropout   */
  MT_PT_ELEMWISE,     /* LayerNorm, bias/GeLU/dropout/residual, loss        */
  MT_PT_RECOMPUTE,    /* extra forward work of activation recomputation    */
  MT_PT_TP_COMM,      /* exposed TP/SP all-reduce / all-gather / reduce-scatter */
  MT_PT_CP_COMM,      /* exposed context-parallel K/V and dK/dV ring transfers */
  MT_PT_EP_COMM,      /* MoE token all-to-all                              */
  MT_PT_PP_COMM,      /* pipeline send/recv                                */
  MT_PT_BUBBLE,       /* pipeline fill/drain idle time                     */
  MT_PT_DP_COMM,      /* exposed DP/ZeRO reduction and gathers (dp x cp)   */
  MT_PT_OPTIM,        /* optimizer step, grad norm, zeroing                */
  MT_PT_OTHER,        /* fixed per-iteration overhead                      */
  MT_PT_N
};
const char *mt_plan_time_name(int comp);

/* The context-parallel ring of one layer for one micro-batch on one rank
 * (all zero when cp == 1): bytes sent forward ((cp-1) K/V blocks) and
 * backward ((cp-1) K/V + cp dK/dV blocks), the transfer time of all hops,
 * the compute time of one forward block [s/cp x s/cp] that each hop
 * overlaps, and the exposed (not hidden) remainder per pass. */
typedef struct {
  double fwd_bytes, bwd_bytes;
  double transfer_s, block_s;
  double exposed_fwd_s, exposed_bwd_s;
} mt_plan_cp_ring;

typedef struct {
  double comp[MT_PT_N];       /* seconds per iteration on the critical path */
  double t_iter;              /* seconds */
  double model_flops;         /* per iteration, Megatron's formula (no recompute) */
  double hw_flops;            /* per iteration, including recomputation */
  double tflops_per_gpu;      /* model FLOPs / t_iter / world, TFLOP/s */
  double hw_tflops_per_gpu;   /* hardware FLOPs / t_iter / world */
  double mfu, hfu;            /* fractions of the peak */
  double tokens_per_s;
  double bubble_fraction;     /* (p-1)/(v m) */
  mt_plan_cp_ring cp_ring;    /* per layer and micro-batch */
  /* communication per iteration of the *_COMM components, all of it (comp[]
   * holds the exposed part; planner/plan_overlap.c) */
  double comm_total[MT_PT_N];
  /* bytes of the data-parallel parameter all-gathers per iteration on the
   * worst stage's rank: the full gathered buffers (ZeRO-1/2 once, ZeRO-3 for
   * every micro-batch's forward and backward; 0 without ZeRO) */
  double dp_gather_bytes;
} mt_plan_time;

/* The FP8 terms of a plan (planner/plan_fp8.c; all zero with FP8 off). Per
 * iteration on the worst stage's rank. */
typedef struct {
  int on;
  double peak_tflops;         /* the FP8 peak the FP8 GEMMs run at */
  int fp8_layers, bf16_layers;/* transformer layers with FP8 / bf16 linears */
  double gemm_s;              /* GEMM seconds of the FP8 linears (fprop, dgrad, wgrad) */
  double quant_s, quant_bytes;/* quantization passes (in the elementwise time) */
  double weights, tensors;    /* FP8 linear weights and weight tensors on the rank */
} mt_plan_fp8_info;

/* MoE communication of one MoE layer for one micro-batch on one rank,
 * forward + backward (zeros for a dense model; docs/moe_parallel.md "Memory and
 * communication formulas"): bytes are what the rank sends (all-to-all:
 * 4 all-to-allv of its s_rows h es bytes, plus the 8 E bytes of counts
 * without padding) or its ring bus bytes (ETP: 2 all-gathers and 2
 * reduce-scatters of the etp r_rows gathered rows, (etp-1)/etp of each;
 * shared expert: 3 all-gathers and 2 reduce-scatters of [s b, h] over TP),
 * times on the critical path without overlap. */
typedef struct {
  int edp;                 /* expert data parallel = world / (etp ep pp) */
  int ep_per_node;         /* EP ranks that share a node (the rest across the network) */
  int etp_intra, edp_intra;
  double a2a_bytes, a2a_s;
  double etp_bytes, etp_s;
  double shared_tp_bytes, shared_tp_s;
} mt_plan_moe_comm;

/* One layout and its predictions. */
typedef struct {
  int world, tp, pp, vpp, dp, cp, ep, etp, zero, sp, mbs, gbs, n_micro;
  int recompute; /* 0 none, 1 selective, 2 full */
  int recompute_num_layers;
  int bf16;
  int tp_intra, cp_intra, dp_intra, pp_intra; /* groups inside one node (rank order;
                                                dp_intra: the dp x cp group) */
  mt_plan_memory mem;
  mt_plan_time time;
  mt_plan_moe_comm moe;    /* MoE only */
  mt_plan_options opt;     /* the options it was computed with */
  mt_plan_fp8_info fp8;    /* FP8 only */
} mt_plan;

/* Seconds per iteration of t: computation (GEMMs, attention, elementwise,
 * recomputation, optimizer), communication of the TP, CP, EP, PP and DP
 * kinds in total (hidden or not), and its exposed part. */
double mt_plan_compute_s(const mt_plan_time *t);
double mt_plan_comm_total(const mt_plan_time *t);
double mt_plan_comm_exposed(const mt_plan_time *t);
/* Predict memory and time of `cfg` (loaded for `world` ranks, so the layout
 * is valid) on `hw`. Returns 0, or 2 with a message in err when the layout
 * cannot be built (parallel/topology's checks). */
int mt_plan_compute(const mt_config *cfg, int world, const mt_hardware *hw,
                    const mt_plan_options *opt, mt_plan *out, char *err, size_t errlen);

/* Memory part only (used by tests against the allocator); opt: NULL, or
 * the MoE routing assumption (moe_load_factor, moe_recv_rows, ...). */
void mt_plan_memory_compute(const mt_config *cfg, int world, const mt_hardware *hw,
                            const mt_plan_options *opt, mt_plan_memory *mem);


/* Bytes by category (MT_PM_*) of one rank of pipeline stage `stage`
 * (0 .. pipeline_model_parallel_size-1) during training. Every rank of a
 * stage gets the same sizes (TP shards, ZeRO shards and vocabulary shards
 * are equal); the CPU backend's own op scratch is not in `workspace`. */
void mt_plan_memory_stage(const mt_config *cfg, int world, const mt_plan_options *opt, int stage,
                          double bytes[MT_PM_N]);

/* Hardware FLOPs of one iteration: Megatron's model FLOPs plus the forward
 * work recomputation repeats (selective: the attention core, 4 B s^2 a hn L;
 * full: one more forward of every layer's GEMMs, 2205.05198 Appendix A eq. 8
 * and 2104.04473 eq. 3; model/gpt_flops.h mt_flops_forward_parts). */
double mt_plan_hw_flops(const mt_config *cfg);

/* Print one plan: a human table or (json) one JSON object. */
void mt_plan_print(FILE *f, const mt_config *cfg, const mt_hardware *hw, const mt_plan *p,
                   int json);

/* --sweep: every valid layout of `cfg`'s model on `world` ranks (tp, pp, v,
 * ep, zero, recompute, micro-batch; SP on when tp > 1), ranked by predicted
 * tokens/s among those that fit. Writes up to `top` rows (all when <= 0).
 * Returns 0, or 2 with a message in err when nothing is valid. */
int mt_plan_sweep(const mt_config *cfg, int world, const mt_hardware *hw,
                  const mt_plan_options *opt, int top, int json, FILE *f, char *err,
                  size_t errlen);

/* `megatrain plan ...` (argv[0] = "plan"). Exit status 0, or 2 for bad
 * usage, config or hardware file. */
int mt_plan_main(int argc, char **argv);

#endif
