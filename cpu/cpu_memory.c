/* cpu/cpu_memory.c — memory of the CPU backend: the counting allocator,
 * the two grow-only op scratch buffers (cpu_workspace, cpu_bf16_scratch) and
 * the memory ops of the op tables (cuda/cuda_memory.c is the GPU
 * counterpart). A file of its own so that the family files, which take
 * their scratch from here, and cpu_backend.c, whose tables name the family
 * ops, never call each other both ways (make check-layers, the file rule).
 *
 * Allocations are 64-byte aligned and carry a 64-byte header in front of the
 * returned pointer recording the size and category, so `free` can update
 * the per-category counters (mt_mem_account) without a lookup table.
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu_internal.h"

#define CPU_ALIGN 64
#define CPU_MAGIC 0x6D74637075616C6Cull /* "mtcpuall" */

typedef struct {
  uint64_t magic;
  uint64_t bytes;
  uint32_t cat;
} cpu_alloc_header;

_Static_assert(sizeof(cpu_alloc_header) <= CPU_ALIGN, "header fits the alignment pad");

void *cpu_alloc(mt_backend *be, size_t bytes, mt_mem_cat cat) {
  MT_ASSERT(cat >= 0 && cat < MT_MEM_NCAT);
  size_t total = CPU_ALIGN + (size_t)mt_round_up((int64_t)(bytes ? bytes : 1), CPU_ALIGN);
  char *base = aligned_alloc(CPU_ALIGN, total);
  if (!base)
    mt_fatal("cpu backend: out of memory allocating %zu bytes (%s)", bytes, mt_mem_cat_name(cat));
  cpu_alloc_header *hd = (cpu_alloc_header *)base;
  hd->magic = CPU_MAGIC;
  hd->bytes = bytes;
  hd->cat = (uint32_t)cat;
  mt_mem_account(&be->mem, cat, (int64_t)bytes);
  return base + CPU_ALIGN;
}

void cpu_free(mt_backend *be, void *p) {
  if (!p) return;
  char *base = (char *)p - CPU_ALIGN;
  cpu_alloc_header *hd = (cpu_alloc_header *)base;
  MT_ASSERT(hd->magic == CPU_MAGIC);
  hd->magic = 0;
  mt_mem_account(&be->mem, (mt_mem_cat)hd->cat, -(int64_t)hd->bytes);
  free(base);
}

/* Grow-only scratch *buf of *have bytes to at least `bytes` (counted under
 * MT_MEM_WORKSPACE; op_scratch = both scratch buffers). */
static void *grow_scratch(mt_backend *be, void **buf, size_t *have, size_t bytes) {
  cpu_impl *im = cpu_impl_of(be);
  if (bytes > *have) {
    cpu_free(be, *buf);
    *buf = cpu_alloc(be, bytes, MT_MEM_WORKSPACE);
    *have = bytes;
    be->mem.op_scratch = im->ws_bytes + im->bws_bytes;
  }
  return *buf;
}

void *cpu_workspace(mt_backend *be, size_t bytes) {
  cpu_impl *im = cpu_impl_of(be);
  return grow_scratch(be, &im->ws, &im->ws_bytes, bytes);
}

void *cpu_bf16_scratch(mt_backend *be, size_t bytes) {
  cpu_impl *im = cpu_impl_of(be);
  return grow_scratch(be, &im->bws, &im->bws_bytes, bytes);
}

void cpu_memcpy(mt_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  if (bytes && dst != src) memcpy(dst, src, bytes);
}

void cpu_memset0(mt_backend *be, void *dst, size_t bytes) {
  (void)be;
  if (bytes) memset(dst, 0, bytes);
}

void cpu_synchronize(mt_backend *be) { (void)be; }
