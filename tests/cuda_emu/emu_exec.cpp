/* tests/cuda_emu/emu_exec.cpp — kernel execution. A launch (MT_LAUNCH) is
 * checked like CUDA's (block <= 1024 threads, grid limits, the 48 KiB
 * shared-memory rule: more dynamic shared memory needs the kernel's
 * cudaFuncAttributeMaxDynamicSharedMemorySize opt-in) and queued on its
 * stream. When the stream reaches it, its blocks run one after another;
 * a block's threads are fibers (one stack each) that run until they finish
 * or reach a barrier or warp collective, round-robin. A block barrier
 * (__syncthreads*) completes when every thread of the block arrived at the
 * same call; a warp collective (__shfl*_sync, __ballot_sync, __syncwarp,
 * mma.sync) when every lane of its mask did. Threads at different
 * barriers, a barrier or collective waiting for a thread that exited, or
 * no thread able to run is reported as a deadlock naming the kernel, the
 * block, the threads and the source lines. mma.sync.m16n8k16 (bf16 in,
 * fp32 accumulate) is computed from the PTX ISA fragment layout: A row
 * g + 8 (r % 2), k pair t + 4 (r / 2); B column g, k pair t + 4 r; C row
 * g + 8 (r / 2), column 2t + r % 2 (g = lane / 4, t = lane % 4; the lower
 * half of a 32-bit register holds the lower k). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "emu.h"

namespace emu {

bool g_in_kernel;

enum { READY = 0, BLOCKED = 1, DONE = 2 };
enum { K_BAR = 1, K_SHFL, K_BALLOT, K_SYNCWARP, K_MMA };
static const char *kind_str(int k, int red) {
  switch (k) {
    case K_BAR: return red == 0 ? "__syncthreads_count" : red == 1 ? "__syncthreads_or"
                     : red == 2 ? "__syncthreads_and" : "__syncthreads";
    case K_SHFL: return "__shfl_sync";
    case K_BALLOT: return "__ballot_sync";
    case K_SYNCWARP: return "__syncwarp";
    case K_MMA: return "mma.sync.m16n8k16";
  }
  return "?";
}

struct Fiber {
  void *sp;
  dim3 tid;
  int state;
  uint64_t res;   /* result of the last barrier / collective */
  float c[4];     /* mma result */
};
struct Warp {
  int kind;
  unsigned mask, arrived;
  const char *file;
  int line;
  unsigned epoch; /* completed __syncwarp()s */
  uint64_t val[32];
  int src[32];
  uint32_t a[32][4], b[32][2];
  float c[32][4];
};

static const size_t STACK = 256 * 1024, GUARD = 4096;
static const int MAXT = 1024;
static char *stacks;
static char *param_lo, *param_hi, *param_top;
static std::vector<void *> param_free_lists[8]; /* 64 << k bytes */
static char *dyn_lo;
static const size_t DYN_MAX = 256 * 1024;
static size_t dyn_size;

static Fiber fibers[MAXT];
static Warp warps[MAXT / 32];
static int cur = -1, nthreads;
int g_cur = -1;
uint32_t g_bar_epoch;
uint16_t g_warp_epoch[32];
uintptr_t g_stack_lo, g_stack_span, g_param_lo, g_param_span, g_dyn_lo;
size_t g_dyn_size;
static void *sched_sp;
static dim3 bidx, gdim, bdim;
static const mt_emu::LaunchDesc *L;
static std::string kname;
/* the block barrier */
static int bar_count, bar_red, bar_acc;
static const char *bar_file;
static int bar_line;
static std::map<const void *, int> dyn_optin;

#if defined(__x86_64__)
extern "C" void mt_emu_switch(void **save_sp, void *load_sp);
asm(".text\n.globl mt_emu_switch\n.type mt_emu_switch,@function\nmt_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n.size mt_emu_switch, .-mt_emu_switch\n");
#else
#error "the CUDA emulation's fibers need x86-64 (mt_emu_switch)"
#endif

static void to_sched() { mt_emu_switch(&fibers[cur].sp, sched_sp); }

static void init_regions() {
  if (stacks) return;
  size_t per = STACK + GUARD;
  stacks = (char *)mmap(NULL, per * MAXT, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == MAP_FAILED) fault("cannot map the emulated threads' stacks");
  for (int t = 0; t < MAXT; t++) mprotect(stacks + per * t, GUARD, PROT_NONE);
  const size_t PSZ = (size_t)256 << 20;
  param_lo = (char *)mmap(NULL, PSZ, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (param_lo == MAP_FAILED) fault("cannot map the kernel parameter space");
  param_top = param_lo;
  param_hi = param_lo + PSZ;
  dyn_lo = (char *)mmap(NULL, DYN_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (dyn_lo == MAP_FAILED) fault("cannot map the dynamic shared memory window");
  g_stack_lo = (uintptr_t)stacks;
  g_stack_span = per * MAXT;
  g_param_lo = (uintptr_t)param_lo;
  g_param_span = PSZ;
  g_dyn_lo = (uintptr_t)dyn_lo;
}

std::string where_now() {
  char b[512];
  if (cur < 0 || !L) return "outside any kernel";
  const dim3 &t = fibers[cur].tid;
  snprintf(b, sizeof b, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", kname.c_str(), bidx.x,
           bidx.y, bidx.z, t.x, t.y, t.z);
  return b;
}

static std::string tid_str(int t) {
  char b[64];
  const dim3 &d = fibers[t].tid;
  snprintf(b, sizeof b, "thread (%u,%u,%u)", d.x, d.y, d.z);
  return b;
}

/* ------------------------------------------------------------ deadlocks */

[[noreturn]] static void deadlock(const char *why) {
  note("ERROR: deadlock in kernel %s, block (%u,%u,%u) of grid (%u,%u,%u) x (%u,%u,%u) "
       "threads: %s", kname.c_str(), bidx.x, bidx.y, bidx.z, gdim.x, gdim.y, gdim.z, bdim.x,
       bdim.y, bdim.z, why);
  if (bar_count)
    fprintf(stderr, "  %d of %d threads wait at %s (%s:%d)\n", bar_count, nthreads,
            kind_str(K_BAR, bar_red), bar_file, bar_line);
  for (int w = 0; w < (nthreads + 31) / 32; w++)
    if (warps[w].arrived)
      fprintf(stderr, "  warp %d: lanes 0x%08x of mask 0x%08x wait at %s (%s:%d)\n", w,
              warps[w].arrived, warps[w].mask, kind_str(warps[w].kind, -1), warps[w].file,
              warps[w].line);
  int shown = 0;
  for (int t = 0; t < nthreads && shown < 4; t++)
    if (fibers[t].state == DONE) {
      fprintf(stderr, "  %s has exited\n", tid_str(t).c_str());
      shown++;
    }
  fault("deadlock in kernel %s (a barrier or warp collective that not every thread reaches)",
        kname.c_str());
}

/* ------------------------------------------------------------- barriers */

static void block_here() {
  fibers[cur].state = BLOCKED;
  to_sched();
}

static int block_barrier(int red, int pred, const char *file, int line) {
  if (bar_count == 0) {
    bar_red = red;
    bar_file = file;
    bar_line = line;
    bar_acc = red == 2 ? 1 : 0;
    for (int t = 0; t < nthreads; t++)
      if (fibers[t].state == DONE) {
        char b[256];
        snprintf(b, sizeof b, "%s reached %s (%s:%d) after %s exited", tid_str(cur).c_str(),
                 kind_str(K_BAR, red), file, line, tid_str(t).c_str());
        deadlock(b);
      }
  } else if (bar_red != red || bar_line != line || (bar_file != file && strcmp(bar_file, file))) {
    char b[512];
    snprintf(b, sizeof b, "%s reached %s (%s:%d) while other threads wait at %s (%s:%d): "
             "divergent barriers", tid_str(cur).c_str(), kind_str(K_BAR, red), file, line,
             kind_str(K_BAR, bar_red), bar_file, bar_line);
    deadlock(b);
  }
  if (red == 0) bar_acc += pred != 0;
  else if (red == 1) bar_acc |= pred != 0;
  else if (red == 2) bar_acc &= pred != 0;
  if (++bar_count == nthreads) {
    bar_count = 0;
    check_epoch_end();
    g_bar_epoch++;
    for (int t = 0; t < nthreads; t++) {
      fibers[t].res = (uint64_t)bar_acc;
      if (fibers[t].state == BLOCKED) fibers[t].state = READY;
    }
    return bar_acc;
  }
  block_here();
  return (int)fibers[cur].res;
}

/* A warp collective: every lane of `mask` arrives, the last one completes
 * it (complete(w)), each lane then reads its result. */
static void warp_arrive(int kind, unsigned mask, const char *file, int line,
                        void (*complete)(Warp &)) {
  Warp &w = warps[cur / 32];
  const int ln = cur & 31;
  const int wbase = cur & ~31;
  if (!(mask >> ln & 1)) {
    char b[256];
    snprintf(b, sizeof b, "%s calls %s (%s:%d) with mask 0x%08x, which leaves out its own lane",
             tid_str(cur).c_str(), kind_str(kind, -1), file, line, mask);
    deadlock(b);
  }
  if (!w.arrived) {
    w.kind = kind;
    w.mask = mask;
    w.file = file;
    w.line = line;
    for (int l = 0; l < 32; l++)
      if (mask >> l & 1 && (wbase + l >= nthreads || fibers[wbase + l].state == DONE)) {
        char b[256];
        snprintf(b, sizeof b, "%s reached %s (%s:%d) with mask 0x%08x, but lane %d %s",
                 tid_str(cur).c_str(), kind_str(kind, -1), file, line, mask, l,
                 wbase + l >= nthreads ? "does not exist" : "has exited");
        deadlock(b);
      }
  } else if (w.kind != kind || w.mask != mask || w.line != line || (w.file != file && strcmp(w.file, file))) {
    char b[512];
    snprintf(b, sizeof b, "%s reached %s (%s:%d, mask 0x%08x) while lanes 0x%08x of its warp "
             "wait at %s (%s:%d, mask 0x%08x): divergent warp collectives", tid_str(cur).c_str(),
             kind_str(kind, -1), file, line, mask, w.arrived, kind_str(w.kind, -1), w.file,
             w.line, w.mask);
    deadlock(b);
  }
  w.arrived |= 1u << ln;
  if (w.arrived == w.mask) {
    complete(w);
    w.arrived = 0;
    for (int l = 0; l < 32; l++)
      if (mask >> l & 1 && fibers[wbase + l].state == BLOCKED) fibers[wbase + l].state = READY;
    return;
  }
  block_here();
}

static void complete_shfl(Warp &w) {
  const int wbase = (int)(&w - warps) * 32;
  for (int l = 0; l < 32; l++) {
    if (!(w.mask >> l & 1)) continue;
    const int s = w.src[l];
    if (s < 0 || s > 31 || !(w.mask >> s & 1)) {
      char b[256];
      snprintf(b, sizeof b, "lane %d of a %s (%s:%d) reads lane %d, which is not in the mask "
               "0x%08x (undefined on a GPU)", l, kind_str(K_SHFL, -1), w.file, w.line, s, w.mask);
      deadlock(b);
    }
    fibers[wbase + l].res = w.val[s];
  }
}
static void complete_ballot(Warp &w) {
  const int wbase = (int)(&w - warps) * 32;
  unsigned bits = 0;
  for (int l = 0; l < 32; l++)
    if (w.mask >> l & 1 && w.val[l]) bits |= 1u << l;
  for (int l = 0; l < 32; l++)
    if (w.mask >> l & 1) fibers[wbase + l].res = bits;
}
static void complete_syncwarp(Warp &w) {
  w.epoch++;
  g_warp_epoch[&w - warps] = (uint16_t)w.epoch;
}

static inline float bf(uint32_t bits16) { return __builtin_bit_cast(float, bits16 << 16); }

static void complete_mma(Warp &w) {
  const int wbase = (int)(&w - warps) * 32;
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; l++) {
    for (int r = 0; r < 4; r++) {
      const int row = l / 4 + 8 * (r % 2), k = 2 * (l % 4 + 4 * (r / 2));
      A[row][k] = bf(w.a[l][r] & 0xFFFFu);
      A[row][k + 1] = bf(w.a[l][r] >> 16);
    }
    for (int r = 0; r < 2; r++) {
      const int n = l / 4, k = 2 * (l % 4 + 4 * r);
      B[k][n] = bf(w.b[l][r] & 0xFFFFu);
      B[k + 1][n] = bf(w.b[l][r] >> 16);
    }
  }
  for (int l = 0; l < 32; l++)
    for (int r = 0; r < 4; r++) {
      const int row = l / 4 + 8 * (r / 2), col = 2 * (l % 4) + r % 2;
      float acc = w.c[l][r];
      for (int k = 0; k < 16; k++) acc = fmaf(A[row][k], B[k][col], acc);
      fibers[wbase + l].c[r] = acc;
    }
}

/* ------------------------------------------------------------ execution */

static void fiber_main() {
  g_in_kernel = true;
  L->entry(L->pack);
  g_in_kernel = false;
  fibers[cur].state = DONE;
  if (bar_count) {
    char b[256];
    snprintf(b, sizeof b, "%s exited while %d thread(s) wait at %s (%s:%d)",
             tid_str(cur).c_str(), bar_count, kind_str(K_BAR, bar_red), bar_file, bar_line);
    deadlock(b);
  }
  Warp &w = warps[cur / 32];
  if (w.arrived && (w.mask >> (cur & 31) & 1)) {
    char b[256];
    snprintf(b, sizeof b, "%s exited while lanes 0x%08x of its warp wait for it at %s (%s:%d)",
             tid_str(cur).c_str(), w.arrived, kind_str(w.kind, -1), w.file, w.line);
    deadlock(b);
  }
  to_sched();
  abort(); /* never resumed */
}

static void init_fiber(int t) {
  Fiber &f = fibers[t];
  f.tid = dim3((unsigned)t % bdim.x, (unsigned)t / bdim.x % bdim.y, (unsigned)t / (bdim.x * bdim.y));
  f.state = READY;
  char *top = stacks + (STACK + GUARD) * (size_t)t + GUARD + STACK;
  void **sp = (void **)((uintptr_t)top & ~(uintptr_t)15);
  *--sp = NULL;
  *--sp = (void *)fiber_main;
  for (int i = 0; i < 6; i++) *--sp = NULL;
  f.sp = sp;
}

static void run_block() {
  check_block_begin();
  bar_count = 0;
  for (int w = 0; w < (nthreads + 31) / 32; w++) {
    warps[w].arrived = 0;
    warps[w].epoch = 0;
    g_warp_epoch[w] = 0;
  }
  if (dyn_size) memset(dyn_lo, 0xFF, dyn_size); /* garbage, as a GPU's */
  for (int t = 0; t < nthreads; t++) init_fiber(t);
  for (;;) {
    bool alive = false, ran = false;
    for (int t = 0; t < nthreads; t++) {
      if (fibers[t].state == DONE) continue;
      alive = true;
      if (fibers[t].state != READY) continue;
      cur = g_cur = t;
      ran = true;
      mt_emu_switch(&sched_sp, fibers[t].sp);
      g_in_kernel = false;
    }
    if (!alive) break;
    if (!ran) deadlock("no thread can run");
  }
  check_epoch_end();
  cur = g_cur = -1;
}

struct KernelOp : Op {
  mt_emu::LaunchDesc d;
  std::string name() const override { return "kernel " + kernel_name(d.fn, d.text); }
  bool start() override {
    L = &d;
    kname = kernel_name(d.fn, d.text);
    gdim = d.grid;
    bdim = d.block;
    nthreads = (int)(d.block.x * d.block.y * d.block.z);
    dyn_size = g_dyn_size = d.smem;
    check_kernel_begin(kname.c_str());
    for (unsigned z = 0; z < gdim.z; z++)
      for (unsigned y = 0; y < gdim.y; y++)
        for (unsigned x = 0; x < gdim.x; x++) {
          bidx = dim3(x, y, z);
          run_block();
        }
    check_kernel_end(this);
    L = nullptr;
    profile_add(kname, now() - t_start);
    return true;
  }
  ~KernelOp() override { d.destroy(d.pack); }
};

} /* namespace emu */

using namespace emu;

namespace mt_emu {

dim3 thread_idx() { return fibers[cur].tid; }
dim3 block_idx() { return bidx; }
dim3 block_dim() { return bdim; }
dim3 grid_dim() { return gdim; }
void *dyn_smem() { return dyn_lo; }

void syncthreads(const char *file, int line) {
  g_in_kernel = false;
  block_barrier(-1, 0, file, line);
  g_in_kernel = true;
}
int syncthreads_red(int kind, int pred, const char *file, int line) {
  g_in_kernel = false;
  int r = block_barrier(kind, pred, file, line);
  g_in_kernel = true;
  return r;
}
void syncwarp(unsigned mask, const char *file, int line) {
  g_in_kernel = false;
  warp_arrive(K_SYNCWARP, mask, file, line, complete_syncwarp);
  g_in_kernel = true;
}
uint64_t shfl(unsigned mask, uint64_t v, int lane, int width, int is_xor, const char *file,
              int line) {
  g_in_kernel = false;
  Warp &w = warps[cur / 32];
  const int ln = cur & 31;
  if (width < 1 || width > 32 || (width & (width - 1)))
    fault("%s: __shfl width %d at %s:%d is not a power of two <= 32", where_now().c_str(), width,
          file, line);
  w.val[ln] = v;
  int src = is_xor ? (ln ^ lane) : (ln & ~(width - 1)) + (lane & (width - 1));
  if (is_xor && (src & ~(width - 1)) != (ln & ~(width - 1))) src = ln;
  w.src[ln] = src;
  warp_arrive(K_SHFL, mask, file, line, complete_shfl);
  g_in_kernel = true;
  return fibers[cur].res;
}
unsigned ballot(unsigned mask, int pred, const char *file, int line) {
  g_in_kernel = false;
  warps[cur / 32].val[cur & 31] = pred != 0;
  warp_arrive(K_BALLOT, mask, file, line, complete_ballot);
  g_in_kernel = true;
  return (unsigned)fibers[cur].res;
}
void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, const char *file,
              int line) {
  g_in_kernel = false;
  Warp &w = warps[cur / 32];
  const int ln = cur & 31;
  memcpy(w.a[ln], a, sizeof w.a[ln]);
  w.b[ln][0] = b0;
  w.b[ln][1] = b1;
  memcpy(w.c[ln], c, sizeof w.c[ln]);
  warp_arrive(K_MMA, 0xffffffffu, file, line, complete_mma);
  memcpy(c, fibers[cur].c, sizeof fibers[cur].c);
  g_in_kernel = true;
}
void trap(const char *file, int line) {
  fault("__trap() in %s (%s:%d)", where_now().c_str(), file, line);
}

/* Kernel arguments live in their own region (kernels may read it), in
 * size classes of 64 << k bytes with a 16-byte header holding k. */
void *param_alloc(size_t bytes) {
  init_regions();
  int k = 0;
  while (k < 7 && ((size_t)64 << k) < bytes + 16) k++;
  if (((size_t)64 << k) < bytes + 16) fault("kernel arguments of %zu bytes (at most 8 KiB)", bytes);
  std::vector<void *> &fl = param_free_lists[k];
  char *p;
  if (!fl.empty()) {
    p = (char *)fl.back();
    fl.pop_back();
  } else {
    const size_t sz = (size_t)64 << k;
    if (param_top + sz > param_hi)
      fault("kernel parameter space exhausted (too many queued launches)");
    p = param_top;
    param_top += sz;
  }
  *(int *)p = k;
  return p + 16;
}

void param_free(void *q) {
  char *p = (char *)q - 16;
  param_free_lists[*(int *)p].push_back(p);
}

void check_arg_pointer(const LaunchDesc &d, int index, const void *p) {
  if (!p) return;
  std::string why;
  Alloc *a = alloc_of(p);
  if (a && a->kind == DEVICE && a->live) return;
  fault("kernel %s (%s:%d) argument %d is %p: %s; a kernel can only use device memory "
        "(cudaMalloc / the backend's alloc)", kernel_name(d.fn, d.text).c_str(), d.file, d.line,
        index + 1, p,
        !a ? (in_arena((uintptr_t)p) ? "a device address outside every allocation"
                                     : "host memory, not a device allocation")
        : a->kind == PINNED ? "pinned host memory (cudaMallocHost)" : "freed device memory");
}

void launch(const LaunchDesc &d) {
  init_regions();
  const char *bad = nullptr;
  char b[256];
  const unsigned nt = d.block.x * d.block.y * d.block.z;
  Stream *s = stream_of(d.stream);
  if (!s) bad = "invalid stream";
  else if (!d.block.x || !d.block.y || !d.block.z || d.block.x > 1024 || d.block.y > 1024 ||
           d.block.z > 64 || nt > 1024)
    bad = "block shape (at most 1024 threads, 1024 x 1024 x 64)";
  else if (!d.grid.x || !d.grid.y || !d.grid.z || d.grid.x > 0x7FFFFFFFu || d.grid.y > 65535 ||
           d.grid.z > 65535)
    bad = "grid shape (x up to 2^31-1, y and z up to 65535)";
  size_t st = kernel_static_smem(d.fn);
  if (!bad && d.smem > DYN_MAX) bad = "dynamic shared memory above the device's 227 KiB";
  if (!bad && st + d.smem > 48 * 1024) {
    auto it = dyn_optin.find(d.fn);
    if (st > 48 * 1024) {
      snprintf(b, sizeof b, "%zu bytes of static shared memory (48 KiB at most)", st);
      bad = b;
    } else if (it == dyn_optin.end() || (size_t)it->second < d.smem) {
      snprintf(b, sizeof b, "%zu bytes of dynamic + %zu static shared memory exceed 48 KiB "
               "without the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize opt-in "
               "(set to %d)", d.smem, st, it == dyn_optin.end() ? 0 : it->second);
      bad = b;
    } else if (st + d.smem > 232448) {
      bad = "shared memory above the 227 KiB opt-in limit";
    }
  }
  if (bad) {
    note("ERROR: launch of kernel %s (%s:%d) with grid (%u,%u,%u) x block (%u,%u,%u), %zu "
         "bytes of dynamic shared memory: invalid %s", kernel_name(d.fn, d.text).c_str(),
         d.file, d.line, d.grid.x, d.grid.y, d.grid.z, d.block.x, d.block.y, d.block.z, d.smem,
         bad);
    set_last_error(strstr(bad, "shared") ? cudaErrorInvalidValue : cudaErrorInvalidConfiguration);
    d.destroy(d.pack);
    return;
  }
  KernelOp *op = new KernelOp();
  op->d = d;
  enqueue(s, op);
}

} /* namespace mt_emu */

extern "C" cudaError_t cudaFuncSetAttribute(const void *fn, enum cudaFuncAttribute attr,
                                            int value) {
  if (!fn || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      (size_t)value + kernel_static_smem(fn) > 232448) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  dyn_optin[fn] = value;
  return cudaSuccess;
}
