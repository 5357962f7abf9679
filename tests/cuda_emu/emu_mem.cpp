/* tests/cuda_emu/emu_mem.cpp — emulated device memory: one reserved address
 * range (the arena) whose pages are inaccessible (PROT_NONE) except while
 * the emulation executes device work (session_open/close), so that host code
 * dereferencing a device pointer faults as on a GPU, and the SIGSEGV handler
 * names the allocation (id, size, offset, where it was allocated). Each
 * allocation gets its own page-aligned span; freed spans stay inaccessible
 * and unused for a while (quarantine) so late uses are caught; so does
 * pinned host memory (cudaMallocHost) after cudaFreeHost. Also: messages,
 * configuration, device-memory accounting. */
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "emu.h"

namespace emu {

/* ---------------------------------------------------------------- messages */

static void vmsg(const char *level, const char *fmt, va_list ap) {
  char buf[4096];
  vsnprintf(buf, sizeof buf, fmt, ap);
  int r = world_rank();
  if (r >= 0)
    fprintf(stderr, "cuda-emu [rank %d]: %s%s\n", r, level, buf);
  else
    fprintf(stderr, "cuda-emu: %s%s\n", level, buf);
  fflush(stderr);
}

void fault(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg("ERROR: ", fmt, ap);
  va_end(ap);
  /* no core dump: the message is the report */
  signal(SIGABRT, SIG_DFL);
  abort();
}

void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg("", fmt, ap);
  va_end(ap);
}

double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t parse_bytes(const char *s, size_t dflt) {
  if (!s || !*s) return dflt;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v <= 0) fault("MT_EMU_DEVICE_MEMORY='%s': expected a size such as 80G", s);
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    case 0: break;
    default: fault("MT_EMU_DEVICE_MEMORY='%s': expected a size such as 80G", s);
  }
  return (size_t)v;
}

static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

const Config &config() {
  static Config c;
  static bool done = false;
  if (!done) {
    done = true;
    c.devices = env_int("MT_EMU_DEVICES", 8);
    if (c.devices < 1) c.devices = 1;
    c.device_memory = parse_bytes(getenv("MT_EMU_DEVICE_MEMORY"), (size_t)80 << 30);
    const char *h = getenv("MT_EMU_HANG_S");
    c.hang_s = h && *h ? atof(h) : 180.0;
    c.racecheck = env_int("MT_EMU_RACECHECK", 1);
    c.initcheck = env_int("MT_EMU_INITCHECK", 1);
  }
  return c;
}

int world_rank() {
  static int r = -2;
  if (r == -2) {
    const char *s = getenv("OMPI_COMM_WORLD_RANK");
    if (!s) s = getenv("PMI_RANK");
    r = s ? atoi(s) : -1;
  }
  return r;
}

/* ------------------------------------------------------------------- arena */

uintptr_t g_arena_lo, g_arena_hi;
static uintptr_t arena_top;          /* first never-used byte */
static const size_t PAGE = 4096;
static const size_t ARENA = ARENA_BYTES;
static std::map<uintptr_t, Alloc *> allocs; /* by base: device and pinned */
static uint64_t next_id = 1;
static int session_depth;
/* freed device spans: quarantined first, reusable after */
static std::deque<std::pair<uintptr_t, size_t>> quarantine;
static size_t quarantine_bytes;
static std::multimap<size_t, uintptr_t> reusable; /* span -> base */

static void install_fault_handler();

void init_memory() {
  if (g_arena_lo) return;
  void *p = mmap(NULL, ARENA, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fault("cannot reserve %zu bytes of address space for device memory", ARENA);
  g_arena_lo = (uintptr_t)p;
  g_arena_hi = g_arena_lo + ARENA;
  arena_top = g_arena_lo + PAGE; /* the first page stays unused */
  install_fault_handler();
}

void fill_garbage(char *p, size_t bytes) {
  const size_t H = 128 * 1024;
  if (bytes <= 2 * H) {
    memset(p, 0xFF, bytes);
  } else {
    memset(p, 0xFF, H);
    memset(p + bytes - H, 0xFF, H);
  }
}

void for_each_alloc(void (*f)(Alloc *)) {
  for (auto &kv : allocs) f(kv.second);
}

Alloc *alloc_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  auto it = allocs.upper_bound(a);
  if (it == allocs.begin()) return nullptr;
  --it;
  Alloc *x = it->second;
  return a < (uintptr_t)x->base + x->span ? x : nullptr;
}

Alloc *device_range(const void *p, size_t n, std::string *why) {
  char b[512];
  Alloc *a = alloc_of(p);
  if (!a || a->kind != DEVICE) {
    if (why) {
      if (a) snprintf(b, sizeof b, "%p is pinned host memory (%s)", p, describe(a).c_str());
      else snprintf(b, sizeof b, "%p is host memory, not a device allocation", p);
      *why = b;
    }
    return nullptr;
  }
  uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
  if (!a->live) {
    if (why) {
      snprintf(b, sizeof b, "%p is in freed device memory (%s)", p, describe(a).c_str());
      *why = b;
    }
    return nullptr;
  }
  if (off + n > a->bytes) {
    if (why) {
      snprintf(b, sizeof b, "[%p, +%zu) runs past the end of %s (offset %zu)", p, n,
               describe(a).c_str(), (size_t)off);
      *why = b;
    }
    return nullptr;
  }
  return a;
}

std::string describe(const Alloc *a) {
  char b[256];
  snprintf(b, sizeof b, "%s allocation #%llu of %zu bytes at %p from %s%s",
           a->kind == DEVICE ? "device" : "pinned host", (unsigned long long)a->id, a->bytes,
           (void *)a->base, a->how, a->live ? "" : ", already freed");
  return b;
}

void print_backtrace(void *const *bt, int n, const char *indent) {
  char **s = backtrace_symbols(bt, n);
  for (int i = 0; i < n; i++) {
    std::string sym = symbolize((uintptr_t)bt[i] - (i ? 1 : 0));
    fprintf(stderr, "%s#%d %s\n", indent, i, sym.empty() ? (s ? s[i] : "?") : sym.c_str());
  }
  free(s);
}

static Alloc *new_alloc(char *base, size_t bytes, size_t span, AllocKind kind, const char *how) {
  Alloc *a = new Alloc();
  a->id = next_id++;
  a->base = base;
  a->bytes = bytes;
  a->span = span;
  a->live = true;
  a->kind = kind;
  a->how = how;
  a->pool = nullptr;
  a->nbt = backtrace(a->bt, 12);
  allocs[(uintptr_t)base] = a;
  return a;
}

Alloc *device_alloc(size_t bytes, const char *how, Pool *pool) {
  init_memory();
  size_t span = (bytes + PAGE - 1) / PAGE * PAGE + PAGE; /* + a guard page */
  uintptr_t base = 0;
  auto it = reusable.lower_bound(span);
  if (it != reusable.end()) {
    base = it->second;
    size_t have = it->first;
    reusable.erase(it);
    if (have > span) reusable.emplace(have - span, base + span);
  } else {
    if (arena_top + span > g_arena_hi) fault("the emulated device address space is exhausted");
    base = arena_top;
    arena_top += span;
  }
  if (session_depth > 0) mprotect((void *)base, span, PROT_READ | PROT_WRITE);
  Alloc *a = new_alloc((char *)base, bytes, span, DEVICE, how);
  a->pool = pool;
  return a;
}

void device_release(Alloc *a) {
  a->live = false;
  forget_records(a);
  /* pages back to the system; the span stays PROT_NONE (reads of freed
   * memory by host code fault, kernels are checked by emu_check.cpp) */
  madvise(a->base, a->span, MADV_DONTNEED);
  if (session_depth == 0) mprotect(a->base, a->span, PROT_NONE);
  quarantine.emplace_back((uintptr_t)a->base, a->span);
  quarantine_bytes += a->span;
  while (quarantine_bytes > ((size_t)4 << 30) || quarantine.size() > 100000) {
    auto q = quarantine.front();
    quarantine.pop_front();
    quarantine_bytes -= q.second;
    auto f = allocs.find(q.first);
    if (f != allocs.end()) {
      delete f->second;
      allocs.erase(f);
    }
    reusable.emplace(q.second, q.first);
  }
}

Alloc *pinned_alloc(size_t bytes) {
  init_memory();
  size_t span = (bytes + PAGE - 1) / PAGE * PAGE;
  if (!span) span = PAGE;
  void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new_alloc((char *)p, bytes, span, PINNED, "cudaMallocHost");
}

void pinned_release(Alloc *a) {
  a->live = false;
  madvise(a->base, a->span, MADV_DONTNEED);
  mprotect(a->base, a->span, PROT_NONE); /* host use after cudaFreeHost faults */
}

/* ---------------------------------------------------------------- sessions */

static void protect_arena(int prot) {
  if (arena_top > g_arena_lo) mprotect((void *)g_arena_lo, arena_top - g_arena_lo, prot);
}

void session_open() {
  if (session_depth++ > 0) return;
  protect_arena(PROT_READ | PROT_WRITE);
}

void session_close() {
  if (--session_depth > 0) return;
  protect_arena(PROT_NONE);
}

/* ----------------------------------------------------------- fault handler */

static struct sigaction old_segv, old_bus;

static void on_segv(int sig, siginfo_t *si, void *uc_) {
  ucontext_t *uc = (ucontext_t *)uc_;
  uintptr_t a = (uintptr_t)si->si_addr;
#if defined(__x86_64__)
  const bool write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  const uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
  const bool write = false;
  const uintptr_t pc = 0;
  (void)uc;
#endif
  Alloc *x = (in_arena(a) || allocs.size()) ? alloc_of((void *)a) : nullptr;
  if (g_in_kernel && in_fiber_stack(a)) {
    note("ERROR: stack overflow of an emulated thread: %s", where_now().c_str());
  } else if (x && x->kind == DEVICE) {
    note("ERROR: host code %s device memory at %p (offset %zu of %s): a device pointer "
         "dereferenced on the host (copy it with cudaMemcpy first)",
         write ? "wrote" : "read", (void *)a, (size_t)(a - (uintptr_t)x->base),
         describe(x).c_str());
  } else if (in_arena(a)) {
    note("ERROR: host code %s device address %p, which is in no allocation",
         write ? "wrote" : "read", (void *)a);
  } else if (x && x->kind == PINNED && !x->live) {
    note("ERROR: host code %s pinned memory %p after cudaFreeHost (%s)",
         write ? "wrote" : "read", (void *)a, describe(x).c_str());
  } else {
    struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
    sigaction(sig, old, NULL); /* not ours: the previous handler (or default) */
    return;
  }
  fprintf(stderr, "  at %s\n  host call stack:\n", symbolize(pc).c_str());
  void *bt[24];
  int n = backtrace(bt, 24);
  print_backtrace(bt, n, "    ");
  if (x) {
    fprintf(stderr, "  the allocation was made at:\n");
    print_backtrace(x->bt, x->nbt, "    ");
  }
  fflush(stderr);
  signal(SIGABRT, SIG_DFL);
  abort();
}

static void install_fault_handler() {
  static char altstack[1 << 16];
  stack_t ss;
  ss.ss_sp = altstack;
  ss.ss_size = sizeof altstack;
  ss.ss_flags = 0;
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
}

/* -------------------------------------------------------------- accounting */

static size_t used; /* bytes of device memory in use, pool caches included */

size_t device_used() { return used; }

cudaError_t account_alloc(size_t bytes, Pool *pool) {
  if (pool) { /* the smallest cached block that fits is reused */
    auto it = pool->cached.lower_bound(bytes);
    if (it != pool->cached.end()) {
      pool->cached_bytes -= it->first;
      used -= it->first;
      pool->cached.erase(it);
    }
  }
  if (used + bytes > config().device_memory) return cudaErrorMemoryAllocation;
  used += bytes;
  return cudaSuccess;
}

void account_free(size_t bytes, Pool *pool) {
  if (pool && pool->threshold > pool->cached_bytes) { /* kept in the pool */
    pool->cached.emplace(bytes, 0);
    pool->cached_bytes += bytes;
    return;
  }
  used -= bytes;
}

void pool_trim(Pool *pool, size_t keep) {
  while (pool->cached_bytes > keep && !pool->cached.empty()) {
    auto it = pool->cached.begin();
    pool->cached_bytes -= it->first;
    used -= it->first;
    pool->cached.erase(it);
  }
}

} /* namespace emu */
