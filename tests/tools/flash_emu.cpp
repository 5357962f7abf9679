/* tests/tools/flash_emu.cpp — the CUDA fused-attention ops (cuda/cuda_flash_
 * attn.cu with the kernels of cuda_flash_mma.cu and cuda_flash_simt.cu)
 * compiled for the HOST and run on emulated warps, against a
 * double-precision reference written here (naive loops). The development
 * machine has no GPU; this checks the kernels' index arithmetic, tiling,
 * causal skipping, two-range positions, GQA, the kv-block form, dropout
 * counters, lse/merge and the backward's ownership of every output element,
 * under AddressSanitizer (out-of-bounds global or shared accesses abort).
 *
 * Emulation (tests/tools/flash_emu/cuda_runtime.h): one block at a time, its
 * threads as ucontext fibers scheduled round-robin; __syncthreads, __syncwarp,
 * shuffles and mma.sync are barriers over the block or warp (a divergent
 * collective is reported as a deadlock); mma.sync.m16n8k16 bf16 is computed
 * from the fragment layout of the PTX ISA ("Matrix Fragments for
 * mma.m16n8k16": A row g + 8 (r % 2), k pair t + 4 (r / 2); B n g, k pair
 * t + 4 r; C row g + 8 (r / 2), column 2t + r % 2; g = lane / 4, t = lane %
 * 4; the lower half of a 32-bit register holds the lower k). It cannot
 * check timing, occupancy, real bank conflicts, or the hardware's own
 * exp2f/expf rounding.
 *
 * usage: flash_emu            (all cases; exit 0 = every check passed)
 * built and run by scripts/flash-emu.sh (g++, -fsanitize=address). */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "cuda_runtime.h" /* the stand-in of tests/tools/flash_emu/ */

/* ------------------------------------------------------------ emulation */
namespace emu {
struct Group {
  int count = 0;
  unsigned gen = 0;
};
struct Warp {
  Group g;
  float f[32];
  uint32_t a[32][4], b[32][2];
};
struct Fiber {
  void *sp; /* saved stack pointer (x86-64 switch) */
  ucontext_t ctx;
  dim3 tid;
  bool done;
};
constexpr size_t STACK = 512 * 1024;
static std::vector<Fiber> fibers;
static std::vector<std::vector<char>> stacks;
static int cur, nthreads;
#if defined(__x86_64__)
static void *sched_sp;
#else
static ucontext_t sched;
#endif
static dim3 bidx, gdim, bdim;
static Group block_group;
static std::vector<Warp> warps;
static std::vector<char> dyn;
static uint64_t events;
static std::function<void()> body;
static std::map<const void *, int> smem_attr;

/* Context switch: on x86-64 a few instructions (callee-saved registers and
 * the stack pointer; glibc's swapcontext also makes a sigprocmask system
 * call per switch, 20x slower here), elsewhere ucontext. */
#if defined(__x86_64__)
extern "C" void emu_switch(void **save_sp, void *load_sp);
asm(".text\n.globl emu_switch\n.type emu_switch,@function\nemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n.size emu_switch, .-emu_switch\n");
static void to_sched() { emu_switch(&fibers[cur].sp, sched_sp); }
static void to_fiber(int t) { emu_switch(&sched_sp, fibers[t].sp); }
#else
static void to_sched() { swapcontext(&fibers[cur].ctx, &sched); }
static void to_fiber(int t) { swapcontext(&sched, &fibers[t].ctx); }
#endif
static void yield() { to_sched(); }
static void wait(Group &g, int n) {
  const unsigned gen = g.gen;
  events++;
  if (++g.count == n) {
    g.count = 0;
    g.gen++;
    return;
  }
  while (g.gen == gen) yield();
}
static void fiber_main() {
  body();
  fibers[cur].done = true;
  events++;
  to_sched();
  abort(); /* never resumed */
}

static __attribute__((noinline)) void init_fiber(int t, dim3 block) {
  Fiber &fb = fibers[t];
  fb.tid = dim3((unsigned)t % block.x, (unsigned)t / block.x % block.y,
                (unsigned)t / (block.x * block.y));
  fb.done = false;
#if defined(__x86_64__)
  /* initial frame for emu_switch: 6 registers, then fiber_main as the
   * return address; rsp % 16 == 8 at fiber_main's entry (the ABI's) */
  void **sp = (void **)((uintptr_t)(stacks[t].data() + STACK) & ~(uintptr_t)15);
  *--sp = NULL;
  *--sp = (void *)fiber_main;
  for (int i = 0; i < 6; i++) *--sp = NULL;
  fb.sp = sp;
#else
  getcontext(&fb.ctx);
  fb.ctx.uc_stack.ss_sp = stacks[t].data();
  fb.ctx.uc_stack.ss_size = STACK;
  fb.ctx.uc_link = NULL;
  makecontext(&fb.ctx, fiber_main, 0);
#endif
}

static void launch(const void *fn, dim3 grid, dim3 block, size_t smem, std::function<void()> f) {
  const int nt = (int)(block.x * block.y * block.z);
  if (nt <= 0 || nt > 1024 || nt % 32) { fprintf(stderr, "emu: bad block %d\n", nt); abort(); }
  if (grid.y > 65535 || grid.z > 65535 || grid.x == 0 || grid.y == 0) {
    fprintf(stderr, "emu: bad grid %u x %u x %u\n", grid.x, grid.y, grid.z);
    abort();
  }
  if (smem > 48 * 1024 && (!smem_attr.count(fn) || (size_t)smem_attr[fn] < smem)) {
    fprintf(stderr, "emu: %zu bytes of dynamic shared memory without the opt-in\n", smem);
    abort();
  }
  body = f;
  gdim = grid;
  bdim = block;
  nthreads = nt;
  fibers.assign(nt, Fiber());
  if ((int)stacks.size() < nt) stacks.resize(nt, std::vector<char>(STACK));
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        bidx = dim3(bx, by, bz);
        block_group = Group();
        warps.assign(nt / 32, Warp());
        dyn.assign(smem ? smem : 1, (char)0xFF); /* NaN pattern: catches unwritten reads */
        for (int t = 0; t < nt; t++) init_fiber(t, block);
        for (;;) {
          bool alive = false;
          const uint64_t e0 = events;
          for (int t = 0; t < nt; t++)
            if (!fibers[t].done) {
              alive = true;
              cur = t;
              to_fiber(t);
            }
          if (!alive) break;
          if (events == e0) {
            fprintf(stderr, "emu: deadlock in block (%u,%u,%u): divergent collective\n", bx, by, bz);
            abort();
          }
        }
      }
}
static int tid_flat() {
  const dim3 &t = fibers[cur].tid;
  return (int)(t.x + bdim.x * (t.y + bdim.y * t.z));
}
static float bf(uint32_t bits16) {
  uint32_t u = bits16 << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
} /* namespace emu */

const dim3 &fa_emu_thread_idx(void) { return emu::fibers[emu::cur].tid; }
const dim3 &fa_emu_block_idx(void) { return emu::bidx; }
const dim3 &fa_emu_grid_dim(void) { return emu::gdim; }
const dim3 &fa_emu_block_dim(void) { return emu::bdim; }
void __syncthreads(void) { emu::wait(emu::block_group, emu::nthreads); }
void __syncwarp(unsigned) { emu::wait(emu::warps[emu::tid_flat() / 32].g, 32); }
void __trap(void) { fprintf(stderr, "emu: __trap\n"); abort(); }
void *fa_emu_dyn_smem(void) { return emu::dyn.data(); }
cudaError_t cudaFuncSetAttribute(const void *fn, int, int value) {
  emu::smem_attr[fn] = value;
  return cudaSuccess;
}
float fa_emu_shfl(float v, int src) {
  const int t = emu::tid_flat();
  emu::Warp &w = emu::warps[t / 32];
  w.f[t & 31] = v;
  emu::wait(w.g, 32);
  const float r = w.f[src & 31];
  emu::wait(w.g, 32);
  return r;
}
void fa_emu_mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  const int t = emu::tid_flat(), lane = t & 31;
  emu::Warp &w = emu::warps[t / 32];
  memcpy(w.a[lane], a, sizeof w.a[lane]);
  w.b[lane][0] = b0;
  w.b[lane][1] = b1;
  emu::wait(w.g, 32);
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; l++) {
    for (int r = 0; r < 4; r++) {
      const int row = l / 4 + 8 * (r % 2), k = 2 * (l % 4 + 4 * (r / 2));
      A[row][k] = emu::bf(w.a[l][r] & 0xFFFFu);
      A[row][k + 1] = emu::bf(w.a[l][r] >> 16);
    }
    for (int r = 0; r < 2; r++) {
      const int n = l / 4, k = 2 * (l % 4 + 4 * r);
      B[k][n] = emu::bf(w.b[l][r] & 0xFFFFu);
      B[k + 1][n] = emu::bf(w.b[l][r] >> 16);
    }
  }
  for (int r = 0; r < 4; r++) {
    const int row = lane / 4 + 8 * (r / 2), col = 2 * (lane % 4) + r % 2;
    float acc = c[r];
    for (int k = 0; k < 16; k++) acc = fmaf(A[row][k], B[k][col], acc);
    c[r] = acc;
  }
  emu::wait(w.g, 32);
}

template <typename... P, typename... A>
void fa_emu_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, A... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel arity");
  std::tuple<P...> tp(static_cast<P>(args)...);
  emu::launch((const void *)k, grid, block, smem, [k, tp]() { std::apply(k, tp); });
}

/* The kernels and ops under test, compiled here. */
#include "cuda/cuda_flash_attn.cu"
#include "cuda/cuda_flash_mma.cu"
#include "cuda/cuda_flash_simt.cu"
/* The four-per-Philox-call work split of the unfused softmax and hidden
 * dropout kernels (checked by philox4_check in flash_emu_cases.h). */
#include "cuda/cuda_philox4.cuh"

/* Backend pieces the ops use (cuda_backend.c's, on host memory, each call a
 * fresh exact-size buffer so AddressSanitizer sees any overrun). */
static std::vector<void *> g_ws;
void *cuda_workspace(mt_backend *be, size_t bytes) {
  (void)be;
  void *p = malloc(bytes ? bytes : 1);
  memset(p, 0xFF, bytes);
  g_ws.push_back(p);
  return p;
}
const int64_t *cuda_upload_ids(mt_backend *be, const int64_t *ids, int b) {
  (void)be;
  int64_t *p = (int64_t *)malloc((size_t)b * sizeof(int64_t));
  memcpy(p, ids, (size_t)b * sizeof(int64_t));
  g_ws.push_back(p);
  return p;
}

#include "flash_emu_cases.h"
