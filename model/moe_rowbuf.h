/* model/moe_rowbuf.h — grow-only device buffers of an MoE layer sized in
 * rows: the token rows an expert-parallel rank receives (the dispatcher's
 * receive buffers) and the rows its experts see (their activations and
 * workspaces), sized for what the routing actually sends instead of the
 * worst case (docs/moe_parallel.md "Buffers sized by the routing").
 *
 * A group holds one row capacity C, shared by every buffer registered in it
 * (all layers, all activation sets and the workspaces of one model): each
 * buffer is C · width elements (at least 1 element). C starts at rows0 and
 * only grows: mt_moe_rowbuf_reserve(g, R) with R > C sets C = R and
 * reallocates every registered buffer at once, so C is the high-water mark
 * of the rows reserved and every buffer of the group is sized by it. That
 * keeps the allocator's memory a function of C alone (planner/plan_moe.c
 * predicts it byte for byte from C: tests/integration/test_plan_memory.sh
 * passes the logged high-water marks to `megatrain plan --moe-recv-rows /
 * --moe-expert-rows`).
 *
 * Growth keeps live data: a buffer registered with a `keep` row count has
 * its first min(*keep, old C) rows moved through host memory (device to
 * host, free, allocate, host to device), others are freed and reallocated;
 * so no two copies of a buffer are ever on the device and each category's
 * live bytes only increase. Growth is rare (the high-water mark rises in
 * the first steps) and synchronous. Results do not depend on C (bitwise).
 *
 * Errors: R above rows_max (the worst case, every token of the EP group
 * routed to this rank) aborts the job: the dispatcher's counts cannot
 * exceed it.
 */
#ifndef MT_MODEL_MOE_ROWBUF_H
#define MT_MODEL_MOE_ROWBUF_H

#include <stdint.h>

#include "core/backend.h"

typedef struct mt_moe_rowbuf mt_moe_rowbuf;

/* A group with capacity rows0 rows (0 allowed), growing up to rows_max. */
mt_moe_rowbuf *mt_moe_rowbuf_create(mt_backend *be, int64_t rows0, int64_t rows_max);
/* Frees the registry (every buffer must have been removed). */
void mt_moe_rowbuf_destroy(mt_moe_rowbuf *g);
/* Allocate *p = [C, width] elements of type t in category cat and register
 * it; keep: NULL (the contents need not survive a growth) or the number of
 * leading rows to keep, read at growth time. */
void mt_moe_rowbuf_add(mt_moe_rowbuf *g, void **p, int64_t width, mt_dtype t, mt_mem_cat cat,
                       const int64_t *keep);
/* Free *p (registered by mt_moe_rowbuf_add), unregister it, set *p = NULL. */
void mt_moe_rowbuf_remove(mt_moe_rowbuf *g, void **p);
/* Make every buffer of the group hold at least `rows` rows. */
void mt_moe_rowbuf_reserve(mt_moe_rowbuf *g, int64_t rows);
/* The capacity C (the high-water mark of the rows reserved, or rows0). */
int64_t mt_moe_rowbuf_rows(const mt_moe_rowbuf *g);

#endif
