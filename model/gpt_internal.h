/* model/gpt_internal.h — private state of the GPT model shared by
 * model/gpt.c, model/gpt_block.c and model/gpt_forward.c. */
#ifndef MT_MODEL_GPT_INTERNAL_H
#define MT_MODEL_GPT_INTERNAL_H

#include "model/gpt.h"
#include "model/tensor_parallel.h"

/* Per-layer parameter slots, in registration order. */
enum {
  MT_LP_LN1_W = 0, MT_LP_LN1_B, MT_LP_QKV_W, MT_LP_QKV_B, MT_LP_PROJ_W, MT_LP_PROJ_B,
  MT_LP_LN2_W, MT_LP_LN2_B, MT_LP_FC1_W, MT_LP_FC1_B, MT_LP_FC2_W, MT_LP_FC2_B, MT_LP_N
};

/* Activations one layer saves for its backward pass (one micro-batch).
 * sl = s / tp under sequence parallelism, else s; np, hl = np·hn and fl are
 * this TP rank's heads, attention width and ffn width. */
typedef struct {
  void *ln1;                 /* [sl, b, h]  input_layernorm output            */
  float *ln1_mean, *ln1_rstd; /* [sl*b]                                       */
  void *qkv;                 /* [s, b, np, 3, hn]                             */
  void *probs;               /* [b, np, s, s] pre-dropout softmax (shared under selective recompute) */
  void *ctx;                 /* [s, b, hl]  attention context                 */
  void *x1;                  /* [sl, b, h]  residual after attention          */
  void *ln2;                 /* [sl, b, h]  pre_mlp_layernorm output          */
  float *ln2_mean, *ln2_rstd;
  void *fc1;                 /* [s, b, fl]  fc1 output (GELU input)           */
  void *gelu;                /* [s, b, fl]  GELU output (fc2 input)           */
} mt_layer_acts;

struct mt_gpt {
  mt_backend *be;
  mt_gpt_config cfg;
  mt_param_list params;
  int p_wte, p_wpe, p_lnf_w, p_lnf_b, p_out;
  int (*layer_p)[MT_LP_N];   /* [num_layers][MT_LP_N] parameter indices */
  void *param_buf;           /* flat, T */
  float *grad_buf;           /* flat, fp32 */
  void **param_ptr;          /* [n params] current device pointer of each parameter */
  float **grad_ptr;          /* [n params] current device pointer of each gradient */
  mt_gpt_hooks hooks;

  /* this rank's sizes */
  int np, hn;                /* local heads, head dim */
  int64_t hl, fl;            /* local attention width np*hn, local ffn width */
  int64_t vl, v_start, v_valid; /* local vocab slice [v_start, v_start+vl), real columns */
  int64_t sl, rows, rows_l;  /* local sequence, s*b, sl*b */
  mt_tp_ctx tp;

  void **resid;              /* [L + 1] x [sl, b, h]: input of layer l; resid[L] = stack output */
  mt_layer_acts **acts;      /* [L] -> activation set of layer l (shared under full recompute) */
  mt_layer_acts *act_sets;   /* owned activation sets */
  int n_act_sets;
  void *probs_shared;        /* selective recompute: one [b, np, s, s] buffer */
  void *lnf;                 /* [sl, b, h] */
  float *lnf_mean, *lnf_rstd;
  void *logits;              /* [s*b, vl]; reused in place for dlogits */
  float *row_max, *stats, *loss; /* [s*b], [2, s*b] (sumexp, target logit), [s*b] */
  int32_t *tokens, *targets; /* [s*b] device, [s, b] order */
  int32_t *host_tokens, *host_targets;

  /* workspace reused by every layer */
  void *tmp_h;               /* [sl, b, h] */
  void *dresid, *dtmp_h;     /* [sl, b, h] */
  void *dqkv, *dctx, *dffn;  /* [s, b, 3hl], [s, b, hl], [s, b, fl] */
  void *gather_ws, *grad_ws; /* [s, b, h] (tp ctx workspaces) */

  const int64_t *sample_ids; /* current micro-batch (host) */
  int train;
};

#define MT_HOOK(m, which, layer) \
  do { if ((m)->hooks.which) (m)->hooks.which((m)->hooks.ctx, (layer)); } while (0)

/* One transformer layer on the micro-batch in m: resid[l] -> resid[l + 1]. */
void mt_gpt_layer_forward(mt_gpt *m, int l);
/* Backward of layer l: m->dresid holds dL/d resid[l+1] on entry and
 * dL/d resid[l] on exit; parameter gradients accumulate. */
void mt_gpt_layer_backward(mt_gpt *m, int l);

/* y[M, out] = x[M, in] @ W[out, in]^T (+ bias) — Megatron's linear layer. */
void mt_linear_fwd(mt_backend *be, void *y, const void *x, const void *w, const void *bias,
                   int64_t M, int64_t out, int64_t in);
/* Backward of mt_linear_fwd: dW[out, in] += dy^T x (fp32); db[out] += colsum(dy)
 * (db may be NULL); dx[M, in] = dy @ W (dx may be NULL). */
void mt_linear_bwd(mt_backend *be, void *dx, float *dw, float *db, const void *dy, const void *x,
                   const void *w, int64_t M, int64_t out, int64_t in);

#endif
