/* tests/cuda_emu/emu_check.cpp — every load and store of the .cu files.
 * They are compiled with -fsanitize=kernel-address and
 * --param asan-instrumentation-with-call-threshold=0, which makes g++ call
 * __asan_{load,store}N_noabort(addr) before each access (no ASan runtime:
 * the hooks are defined here). Inside a kernel an access must be
 *   - in a live device allocation, within its bytes (else: out of bounds,
 *     use after free, or an address in no allocation),
 *   - in shared memory: a static __shared__ array of the kernel, or the
 *     dynamic shared memory within the launch's size,
 *   - the thread's own stack (locals) or the kernel's parameters;
 * anything else is host memory given to a kernel: a fault naming the kernel,
 * block, thread and the code address. Outside kernels, host code of the
 * .cu files touching device memory is a fault too.
 *
 * Shared memory race detector: per byte, the last writer and reader(s) with
 * the block-barrier epoch and the warp's __syncwarp epoch of the access. Two
 * threads touching a byte in the same epoch, at least one writing, are a
 * race (reported with the kernel, the shared array and offset, both threads
 * and both code addresses), unless both are in one warp with a __syncwarp
 * between them. A read of a byte no thread of the block wrote is reported as
 * uninitialised (MT_EMU_INITCHECK=0 turns that off, MT_EMU_RACECHECK=0 both).
 *
 * Global memory: each kernel's byte ranges read and written per allocation
 * feed the cross-stream checker (emu_stream.cpp). */
#include <stdio.h>
#include <string.h>

#include <unordered_map>

#include "emu.h"

namespace emu {

/* ---- per-launch global access ranges ---- */
struct Range {
  Alloc *a;
  uint64_t rlo, rhi, wlo, whi;
};
static std::vector<Range> ranges;
static Range *last_range;
static uint64_t block_serial;
static const char *kname_c;

void check_kernel_begin(const char *kname) {
  kname_c = kname;
  ranges.clear();
  last_range = nullptr;
}

uint64_t cur_block_serial() { return block_serial; }
void check_block_begin() {
  block_serial++;
}

void check_kernel_end(const Op *op) {
  std::vector<Access> acc;
  for (const Range &r : ranges) {
    if (r.rhi > r.rlo) acc.push_back(Access{r.a, r.rlo, r.rhi, false});
    if (r.whi > r.wlo) acc.push_back(Access{r.a, r.wlo, r.whi, true});
  }
  check_and_record(op, acc.data(), (int)acc.size());
  ranges.clear();
  last_range = nullptr;
}

[[noreturn]] static void kernel_fault(uintptr_t pc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void kernel_fault(uintptr_t pc, const char *fmt, ...) {
  char b[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  g_in_kernel = false;
  fault("%s\n  in %s\n  at %s", b, where_now().c_str(), symbolize(pc).c_str());
}

static void global_access(uintptr_t a, size_t n, bool w, uintptr_t pc) {
  Range *r = last_range;
  if (!r || a - (uintptr_t)r->a->base + n > r->a->bytes || a < (uintptr_t)r->a->base) {
    Alloc *x = alloc_of((void *)a);
    if (!x || x->kind != DEVICE)
      kernel_fault(pc, "kernel %s %zu bytes at device address %p, which is in no allocation",
                   w ? "writes" : "reads", n, (void *)a);
    if (!x->live)
      kernel_fault(pc, "kernel %s %zu bytes at %p, offset %zu of freed memory (%s)",
                   w ? "writes" : "reads", n, (void *)a, (size_t)(a - (uintptr_t)x->base),
                   describe(x).c_str());
    if (a + n > (uintptr_t)x->base + x->bytes)
      kernel_fault(pc, "kernel %s %zu bytes at offset %zu of %s: out of bounds by %zu bytes",
                   w ? "writes" : "reads", n, (size_t)(a - (uintptr_t)x->base),
                   describe(x).c_str(), (size_t)(a + n - (uintptr_t)x->base - x->bytes));
    r = nullptr;
    for (Range &q : ranges)
      if (q.a == x) r = &q;
    if (!r) {
      ranges.push_back(Range{x, UINT64_MAX, 0, UINT64_MAX, 0});
      r = &ranges.back();
    }
    last_range = r;
  }
  const uint64_t lo = a - (uintptr_t)r->a->base, hi = lo + n;
  if (w) {
    if (lo < r->wlo) r->wlo = lo;
    if (hi > r->whi) r->whi = hi;
  } else {
    if (lo < r->rlo) r->rlo = lo;
    if (hi > r->rhi) r->rhi = hi;
  }
}

/* ---- shared memory shadow ---- */
struct Sh {
  uint64_t wblk, rblk;      /* block serial of the last write / read(s) */
  uint32_t wep, rep;        /* block-barrier epochs */
  uint16_t wt, rt;          /* threads; rt == MULTI: several readers */
  uint16_t wwe, rwe;        /* warp epochs (__syncwarp) */
  int16_t rwarp;            /* MULTI readers: their one warp, or -1 */
  uintptr_t wpc, rpc;
};
static const uint16_t MULTI = 0xFFFF;
struct Uninit {
  uintptr_t a;
  int t;
  uintptr_t pc;
};
static std::vector<Uninit> pending_uninit;
static std::unordered_map<uintptr_t, Sh *> shadow_pages;
static uintptr_t last_page = 1;
static Sh *last_shadow;

static Sh *shadow(uintptr_t a) {
  const uintptr_t pg = a >> 12;
  if (pg != last_page) {
    Sh *&p = shadow_pages[pg];
    if (!p) p = (Sh *)calloc(4096, sizeof(Sh));
    last_page = pg;
    last_shadow = p;
  }
  return last_shadow + (a & 4095);
}

static std::string tstr(int t) {
  char b[48];
  dim3 bd = mt_emu::block_dim();
  snprintf(b, sizeof b, "thread (%u,%u,%u)", (unsigned)t % bd.x, (unsigned)t / bd.x % bd.y,
           (unsigned)t / (bd.x * bd.y));
  return b;
}

[[noreturn]] static void race(uintptr_t a, const char *what, int other, uintptr_t opc,
                              bool my_write, uintptr_t pc) {
  g_in_kernel = false;
  uintptr_t off = 0;
  std::string sym = shared_symbol(a, &off);
  note("ERROR: shared memory race in kernel %s, block (%u,%u,%u): %s at byte offset %zu of %s",
       kname_c, mt_emu::block_idx().x, mt_emu::block_idx().y, mt_emu::block_idx().z, what,
       (size_t)off, sym.c_str());
  fprintf(stderr, "  %s %s it at %s\n", tstr(g_cur).c_str(), my_write ? "writes" : "reads",
          symbolize(pc).c_str());
  if (other == MULTI)
    fprintf(stderr, "  other threads read it since the last barrier (last at %s)\n",
            symbolize(opc).c_str());
  else
    fprintf(stderr, "  %s %s it at %s\n", tstr(other).c_str(),
            strstr(what, "read-after-write") || strstr(what, "write-after-write") ? "wrote"
                                                                                   : "read",
            symbolize(opc).c_str());
  fault("shared memory race: no __syncthreads() (or __syncwarp() within a warp) between the "
        "two accesses");
}

static void shared_access(uintptr_t a, size_t n, bool w, uintptr_t pc) {
  const Config &c = config();
  if (!c.racecheck) return;
  const int t = g_cur;
  const uint64_t blk = block_serial;
  const uint32_t ep = g_bar_epoch;
  const uint16_t we = g_warp_epoch[t >> 5];
  for (size_t i = 0; i < n; i++) {
    Sh &e = *shadow(a + i);
    if (!w) {
      if (e.wblk != blk) {
        /* not written yet in this block: a thread may still write it before
         * the next barrier (then the write reports the race); checked at
         * the barrier (check_epoch_end) */
        if (c.initcheck && e.rblk != blk) pending_uninit.push_back(Uninit{a + i, t, pc});
      } else if (e.wt != t && e.wep == ep && !((e.wt >> 5) == (t >> 5) && e.wwe != we)) {
        race(a + i, "read-after-write by another thread", e.wt, e.wpc, false, pc);
      }
      if (e.rblk != blk || e.rep != ep) {
        e.rblk = blk;
        e.rep = ep;
        e.rt = (uint16_t)t;
        e.rwe = we;
        e.rpc = pc;
      } else if (e.rt != t && e.rt != MULTI) {
        e.rwarp = (e.rt >> 5) == (t >> 5) ? (int16_t)(t >> 5) : -1;
        e.rt = MULTI;
        e.rwe = we;
      } else if (e.rt == MULTI && e.rwarp != (t >> 5)) {
        e.rwarp = -1;
      }
    } else {
      if (e.wblk == blk && e.wep == ep && e.wt != t && !((e.wt >> 5) == (t >> 5) && e.wwe != we))
        race(a + i, "write-after-write by another thread", e.wt, e.wpc, true, pc);
      if (e.rblk == blk && e.rep == ep && e.rt != t) {
        bool ordered = e.rt == MULTI ? (e.rwarp == (t >> 5) && e.rwe != we)
                                     : ((e.rt >> 5) == (t >> 5) && e.rwe != we);
        if (!ordered) race(a + i, "write-after-read by another thread", e.rt, e.rpc, true, pc);
      }
      e.wblk = blk;
      e.wep = ep;
      e.wt = (uint16_t)t;
      e.wwe = we;
      e.wpc = pc;
      e.rblk = 0;
    }
  }
}

/* Reads of shared bytes no thread had written yet, reported at the next
 * barrier or the block's end: uninitialised shared memory. */
void check_epoch_end() {
  /* (another thread's write after the read in the same epoch was reported
   * as a race when it happened) */
  for (const Uninit &u : pending_uninit) {
    g_in_kernel = false;
    uintptr_t off = 0;
    std::string sym = shared_symbol(u.a, &off);
    fault("kernel %s reads byte offset %zu of %s, which no thread of this block writes "
          "(uninitialised shared memory)\n  in kernel %s, block (%u,%u,%u), %s\n  at %s", kname_c,
          (size_t)off, sym.c_str(), kname_c, mt_emu::block_idx().x, mt_emu::block_idx().y,
          mt_emu::block_idx().z, tstr(u.t).c_str(), symbolize(u.pc).c_str());
  }
  pending_uninit.clear();
}

/* ---- the hooks ---- */
static uintptr_t st_lo[8], st_hi[8]; /* recently hit static shared arrays */
static unsigned st_next;

static inline bool static_hit(uintptr_t a, size_t n) {
  for (int i = 0; i < 8; i++)
    if (a - st_lo[i] < st_hi[i] - st_lo[i] && a + n <= st_hi[i]) return true;
  return false;
}

static inline __attribute__((always_inline)) void on_access(uintptr_t a, size_t n, bool w,
                                                           uintptr_t pc) {
  if (!g_in_kernel) {
    if (in_arena(a)) {
      Alloc *x = alloc_of((void *)a);
      fault("host code %s %zu bytes of device memory at %p (%s): a device pointer dereferenced "
            "on the host\n  at %s", w ? "writes" : "reads", n, (void *)a,
            x ? describe(x).c_str() : "in no allocation", symbolize(pc).c_str());
    }
    return;
  }
  if (in_fiber_stack(a)) return;
  if (in_arena(a)) {
    Range *r = last_range;
    const uintptr_t off = a - (uintptr_t)(r ? r->a->base : 0);
    if (r && off + n <= r->a->bytes) { /* the last allocation again */
      if (w) {
        if (off < r->wlo) r->wlo = off;
        if (off + n > r->whi) r->whi = off + n;
      } else {
        if (off < r->rlo) r->rlo = off;
        if (off + n > r->rhi) r->rhi = off + n;
      }
      return;
    }
    global_access(a, n, w, pc);
    return;
  }
  if (a - g_dyn_lo < 256 * 1024) {
    if (a + n - g_dyn_lo > g_dyn_size)
      kernel_fault(pc, "kernel %s %zu bytes at offset %zu of dynamic shared memory, but the "
                   "launch asked for %zu bytes", w ? "writes" : "reads", n,
                   (size_t)(a - g_dyn_lo), g_dyn_size);
    shared_access(a, n, w, pc);
    return;
  }
  if (static_hit(a, n)) {
    shared_access(a, n, w, pc);
    return;
  }
  if (in_param(a)) {
    if (w) kernel_fault(pc, "kernel writes its argument space at %p", (void *)a);
    return;
  }
  uintptr_t lo, hi;
  if (static_shared_extent(a, &lo, &hi)) {
    if (a + n > hi)
      kernel_fault(pc, "kernel %s %zu bytes at %p, past the end of a __shared__ array",
                   w ? "writes" : "reads", n, (void *)a);
    st_lo[st_next % 8] = lo;
    st_hi[st_next % 8] = hi;
    st_next++;
    shared_access(a, n, w, pc);
    return;
  }
  Alloc *x = alloc_of((void *)a);
  kernel_fault(pc, "kernel %s %zu bytes at %p: %s; kernels can only use device memory", w ? "writes" : "reads",
               n, (void *)a,
               x ? "pinned host memory (cudaMallocHost)" : "host memory (a host pointer given to a kernel)");
}

} /* namespace emu */

using namespace emu;

#define PC() ((uintptr_t)__builtin_return_address(0))
extern "C" {
#define MT_EMU_HOOK(n)                                                                    \
  void __asan_load##n##_noabort(uintptr_t a) { on_access(a, n, false, PC()); }           \
  void __asan_store##n##_noabort(uintptr_t a) { on_access(a, n, true, PC()); }
MT_EMU_HOOK(1)
MT_EMU_HOOK(2)
MT_EMU_HOOK(4)
MT_EMU_HOOK(8)
MT_EMU_HOOK(16)
#undef MT_EMU_HOOK
void __asan_loadN_noabort(uintptr_t a, size_t n) { on_access(a, n, false, PC()); }
void __asan_storeN_noabort(uintptr_t a, size_t n) { on_access(a, n, true, PC()); }
void __asan_handle_no_return(void) {}
}
