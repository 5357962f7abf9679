/* model/params.h — parameter registry: every parameter tensor of this rank
 * with its global (unsharded) shape, the shard this rank holds, its place in
 * the flat parameter/gradient buffers, and how it is initialised.
 *
 * Parameters live in ONE flat buffer of the backend's storage dtype T and
 * gradients in one flat fp32 buffer of the same element count and offsets
 * (docs/architecture.md "Tensors and memory"); buckets, ZeRO shards, the
 * optimizer and checkpoints slice these buffers by offset.
 */
#ifndef MT_MODEL_PARAMS_H
#define MT_MODEL_PARAMS_H

#include <stdint.h>

#include "core/backend.h"

typedef enum {
  MT_INIT_NORMAL = 0, /* N(0, init_method_std)                             */
  MT_INIT_SCALED,     /* N(0, init_method_std / sqrt(2 * num_layers))      */
  MT_INIT_ONES,       /* LayerNorm weight                                  */
  MT_INIT_ZEROS       /* biases                                            */
} mt_init_kind;

#define MT_PARAM_NAME_MAX 96

typedef struct {
  char name[MT_PARAM_NAME_MAX]; /* Megatron name, e.g. "decoder.layers.0.mlp.linear_fc1.weight" */
  int64_t rows, cols;           /* global shape [rows, cols]; 1-D tensors have rows = 1 */
  int64_t local_rows, local_cols; /* this rank's shard */
  int64_t row_offset, col_offset; /* shard position inside the global tensor */
  int64_t offset;               /* element offset in the flat buffers */
  int64_t numel;                /* local_rows * local_cols */
  mt_init_kind init;
  int no_weight_decay;          /* biases and LayerNorm parameters */
  int tp_replicated;            /* identical on every TP rank (counted once in norms) */
  int sp_partial;               /* gradient partial per TP rank, summed over TP after the
                                   backward: norms and the position table under sequence
                                   parallelism, q/k norms under any tp > 1 */
  int halves;                   /* the shard is two slices of the two halves of the global
                                   tensor along its split dimension (rows; columns of a [1, n]
                                   bias): local row r < local_rows/2 is global row
                                   row_offset + r, the rest global row
                                   rows/2 + row_offset + r - local_rows/2 (SwiGLU's fc1: this
                                   rank's gate slice, then its up slice) */
  int shared_copy;              /* a copy of a tensor owned by another stage (tied word
                                   embedding on the last stage): not counted in norms */
  int is_expert;                /* MoE expert weight (model/moe_layer.h): gradients reduce over the
                                   expert-data-parallel group, norms count it once per EP rank */
} mt_param;

typedef struct {
  mt_param *p;      /* [n] */
  int n, cap;
  int64_t numel;    /* total local elements (sum of numel, with alignment) */
} mt_param_list;

/* Append a parameter with global shape [rows, cols] of which this rank holds
 * [local_rows, local_cols] at (row_offset, col_offset); returns its index.
 * Offsets in the flat buffer are assigned in order, 16-element aligned. */
int mt_params_add(mt_param_list *pl, const char *name, int64_t rows, int64_t cols,
                  int64_t local_rows, int64_t local_cols, int64_t row_offset, int64_t col_offset,
                  mt_init_kind init, int no_weight_decay, int tp_replicated);


/* Index of the parameter called `name`, or -1. */
int mt_params_find(const mt_param_list *pl, const char *name);

void mt_params_free(mt_param_list *pl);

#endif
