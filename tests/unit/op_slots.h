/* tests/unit/op_slots.h — every slot of the backend op table
 * (core/backend.h: mt_backend_ops) mapped to the rows of the op-case table
 * (op_cases.h) that exercise it, or, for the memory ops that have no numeric
 * case, to the test that covers them. test_ops.c checks (ot_check_slots),
 * with offsetof over the struct, that the map names every slot exactly once
 * and that each named op has a runner and rows in the table (an fp32 row;
 * a bf16 row too for the ops with storage-dtype "T" operands), and that no
 * row is left without a slot. So a slot added to mt_backend_ops without
 * op-case rows fails test_ops, naming it.
 *
 * To add an op: its slot in core/backend.h, cpu_<op>/cpu_bf16_<op> and
 * cuda_<op> in the family's files and both tables (cpu/cpu_backend.c,
 * cuda/cuda_backend.c), a runner (op_runners_*.h, ot_runner_of), rows in
 * op_cases.h, and its line here. */
#ifndef MT_TESTS_OP_SLOTS_H
#define MT_TESTS_OP_SLOTS_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/backend.h"
#include "op_cases.h"

typedef struct {
  size_t off;            /* offsetof(mt_backend_ops, slot) */
  const char *slot;      /* the slot's name */
  const char *cases;     /* space-separated op names of op_cases.h rows that
                          * call it; NULL: no numeric case (see `elsewhere`) */
  int bf16;              /* 1: T operands, so bf16 rows are required too */
  const char *elsewhere; /* cases NULL: the test that covers the slot */
} ot_slot;

#define OT_SLOT(name, cases, bf16) {offsetof(mt_backend_ops, name), #name, cases, bf16, NULL}
#define OT_SLOT_TESTED_IN(name, where) {offsetof(mt_backend_ops, name), #name, NULL, 0, where}

static const ot_slot ot_slots[] = {
    /* memory: every op case allocates, uploads, downloads and synchronises
     * through these; their own properties are checked elsewhere */
    OT_SLOT_TESTED_IN(alloc, "test_backend_props.c: test_allocator_counters"),
    OT_SLOT_TESTED_IN(free, "test_backend_props.c: test_allocator_counters"),
    OT_SLOT_TESTED_IN(memcpy_h2d, "test_backend_props.c: test_memory_ops"),
    OT_SLOT_TESTED_IN(memcpy_d2h, "test_backend_props.c: test_memory_ops"),
    OT_SLOT_TESTED_IN(memcpy_d2d, "test_backend_props.c: test_memory_ops"),
    OT_SLOT_TESTED_IN(memset0, "test_backend_props.c: test_memory_ops"),
    OT_SLOT_TESTED_IN(synchronize, "op_harness.h: ot_exec, after every case"),
    /* elementwise */
    OT_SLOT(init_normal, "init_normal", 1),
    OT_SLOT(fill, "fill", 1),
    OT_SLOT(cast, "cast", 1),
    /* GEMM */
    OT_SLOT(gemm, "gemm", 1),
    OT_SLOT(gemm_grouped, "gemm_grouped", 1),
    OT_SLOT(bias_grad, "bias_grad", 1),
    OT_SLOT(fp8_amax, "fp8_quantize", 1),
    OT_SLOT(fp8_quantize, "fp8_quantize", 1),
    OT_SLOT(fp8_dequantize, "fp8_quantize", 1),
    OT_SLOT(fp8_gemm, "fp8_gemm", 1), /* NULL on cpu: its rows run the dequantize path there */
    /* norms, activations, RoPE */
    OT_SLOT(layernorm_fwd, "layernorm_fwd", 1),
    OT_SLOT(layernorm_bwd, "layernorm_bwd", 1),
    OT_SLOT(rmsnorm_fwd, "rmsnorm_fwd", 1),
    OT_SLOT(rmsnorm_bwd, "rmsnorm_bwd", 1),
    OT_SLOT(swiglu_fwd, "swiglu_fwd", 1),
    OT_SLOT(swiglu_bwd, "swiglu_bwd", 1),
    OT_SLOT(rope_fwd, "rope_fwd", 1),
    OT_SLOT(rope_bwd, "rope_bwd", 1),
    OT_SLOT(qknorm_fwd, "qknorm_fwd", 1),
    OT_SLOT(qknorm_bwd, "qknorm_bwd", 1),
    OT_SLOT(gelu_fwd, "gelu_fwd", 1),
    OT_SLOT(gelu_bwd, "gelu_bwd", 1),
    /* fused attention */
    OT_SLOT(flash_attn_fwd, "flash_attn_fwd flash_attn_ring flash_vs_unfused", 1),
    OT_SLOT(attn_merge, "attn_merge flash_attn_ring", 1),
    OT_SLOT(flash_attn_bwd, "flash_attn_bwd flash_attn_ring flash_vs_unfused", 1),
    /* dropout */
    OT_SLOT(dropout_add_fwd, "dropout_add_fwd", 1),
    OT_SLOT(dropout_bwd, "dropout_bwd", 1),
    /* embeddings */
    OT_SLOT(embedding_fwd, "embedding_fwd", 1),
    OT_SLOT(embedding_bwd, "embedding_bwd", 1),
    OT_SLOT(pos_embedding_fwd, "pos_embedding_fwd", 1),
    OT_SLOT(pos_embedding_bwd, "pos_embedding_bwd", 1),
    /* cross-entropy (xent_loss: fp32 operands only) */
    OT_SLOT(xent_max, "xent_max", 1),
    OT_SLOT(xent_stats, "xent_stats", 1),
    OT_SLOT(xent_loss, "xent_loss", 0),
    OT_SLOT(xent_bwd, "xent_bwd", 1),
    /* elementwise and reductions (the *_f32 ops: fp32 operands only) */
    OT_SLOT(add, "add", 1),
    OT_SLOT(axpy_f32, "axpy_f32", 0),
    OT_SLOT(scale_f32, "scale_f32", 0),
    OT_SLOT(sumsq_f32, "sumsq_f32", 0),
    OT_SLOT(sum_f32, "sum_f32", 0),
    OT_SLOT(sumsq_acc_f32, "sumsq_acc_f32", 0),
    /* MoE */
    OT_SLOT(moe_gather_rows, "moe_gather_rows", 1),
    OT_SLOT(moe_combine_fwd, "moe_combine_fwd", 1),
    OT_SLOT(moe_combine_bwd, "moe_combine_bwd", 1),
    /* optimizer */
    OT_SLOT(adamw, "adamw", 1),
};

#define OT_N_SLOTS (sizeof ot_slots / sizeof *ot_slots)

/* 1 when the space-separated list names op. */
static int ot_list_has(const char *list, const char *op) {
  const size_t n = strlen(op);
  for (const char *p = list; *p;) {
    while (*p == ' ') p++;
    const char *e = p;
    while (*e && *e != ' ') e++;
    if ((size_t)(e - p) == n && !strncmp(p, op, n)) return 1;
    p = e;
  }
  return 0;
}

/* Rows of `cases` with op name [op, op + n) and storage dtype t. */
static size_t ot_rows_of(const op_case *cases, size_t ncases, const char *op, size_t n,
                         mt_dtype t) {
  size_t k = 0;
  for (size_t i = 0; i < ncases; i++)
    k += strlen(cases[i].op) == n && !strncmp(cases[i].op, op, n) && cases[i].dtype == t;
  return k;
}

/* The checks of the file comment over a slot map and a case table; prints
 * one line per problem, starting with `tag` ("FAIL"), and returns their
 * count (0 = every slot covered). */
static int ot_check_slots(const ot_slot *slots, size_t nslots, const op_case *cases,
                          size_t ncases, const char *tag) {
  typedef void (*fnptr)(void);
  int bad = 0;
  if (sizeof(mt_backend_ops) != MT_BACKEND_N_OPS * sizeof(fnptr)) {
    printf("%s mt_backend_ops has a member that is not a function pointer\n", tag);
    bad++;
  }
  for (size_t k = 0; k < MT_BACKEND_N_OPS; k++) {
    int hits = 0;
    for (size_t i = 0; i < nslots; i++) hits += slots[i].off == k * sizeof(fnptr);
    if (hits != 1) {
      const char *prev = NULL; /* the mapped slot just before it, to name the place */
      size_t best = 0;
      for (size_t i = 0; i < nslots; i++)
        if (slots[i].off < k * sizeof(fnptr) && (!prev || slots[i].off >= best))
          prev = slots[i].slot, best = slots[i].off;
      printf("%s op-table slot %zu of %zu (offset %zu in mt_backend_ops, after %s) has %d "
             "rows in tests/unit/op_slots.h (want 1): map it to its op-case rows\n",
             tag, k, (size_t)MT_BACKEND_N_OPS, k * sizeof(fnptr), prev ? prev : "none", hits);
      bad++;
    }
  }
  for (size_t i = 0; i < nslots; i++) {
    const ot_slot *s = &slots[i];
    if (!s->cases) {
      if (!s->elsewhere || !*s->elsewhere) {
        printf("%s op-table slot %s has neither op-case rows nor a test named\n", tag, s->slot);
        bad++;
      }
      continue;
    }
    int rows = 0;
    for (const char *p = s->cases; *p;) {
      while (*p == ' ') p++;
      const char *e = p;
      while (*e && *e != ' ') e++;
      if (e == p) break;
      char op[64];
      snprintf(op, sizeof op, "%.*s", (int)(e - p), p);
      if (!ot_runner_of(op)) {
        printf("%s op-table slot %s: op case '%s' has no runner (op_cases.h ot_runner_of)\n",
               tag, s->slot, op);
        bad++;
      }
      rows += (int)ot_rows_of(cases, ncases, p, (size_t)(e - p), MT_F32);
      p = e;
    }
    if (!rows) {
      printf("%s op-table slot %s has no fp32 row in the op-case table (op_cases.h; '%s')\n",
             tag, s->slot, s->cases);
      bad++;
    }
    if (s->bf16) {
      int brows = 0;
      for (const char *p = s->cases; *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        brows += (int)ot_rows_of(cases, ncases, p, (size_t)(e - p), MT_BF16);
        p = e;
      }
      if (!brows) {
        printf("%s op-table slot %s has no bf16 row in the op-case table (op_cases.h; '%s')\n",
               tag, s->slot, s->cases);
        bad++;
      }
    }
  }
  for (size_t i = 0; i < ncases; i++) {
    int owned = 0, seen = 0;
    for (size_t j = 0; j < nslots && !owned; j++)
      owned = slots[j].cases && ot_list_has(slots[j].cases, cases[i].op);
    for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(cases[j].op, cases[i].op);
    if (!owned && !seen) {
      printf("%s op-case row %zu (%s) exercises no slot of tests/unit/op_slots.h\n", tag, i,
             cases[i].op);
      bad++;
    }
  }
  return bad;
}

#endif
