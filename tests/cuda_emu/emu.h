/* tests/cuda_emu/emu.h — internals of the CUDA emulation (libcudaemu.so):
 * device memory (emu_mem.cpp), streams/events/ops and the cross-stream
 * checker (emu_stream.cpp), kernel execution (emu_exec.cpp), the access
 * hooks and shared-memory race detector (emu_check.cpp), the symbol table
 * (emu_sym.cpp), cuBLAS (emu_blas.cpp), the MPI progress wrappers
 * (emu_mpi.cpp). Everything runs on the process's one host thread (MPI is
 * FUNNELED): device work is executed lazily, inside the runtime call that
 * needs it (a synchronisation, a query, a blocking MPI call), so host code
 * never runs while device memory is open. */
#ifndef MT_CUDA_EMU_INTERNAL_H
#define MT_CUDA_EMU_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "include/cuda_emu.h"

namespace emu {

/* ---- messages (emu_mem.cpp) ---- */
/* "cuda-emu [rank R]: ERROR: ..." then abort (a device fault). */
[[noreturn]] void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double now();
/* Environment knobs (read once). */
struct Config {
  int devices;          /* MT_EMU_DEVICES, default 8                       */
  size_t device_memory; /* MT_EMU_DEVICE_MEMORY (bytes; K/M/G suffix)      */
  double hang_s;        /* MT_EMU_HANG_S: a host wait without progress     */
  int racecheck;        /* MT_EMU_RACECHECK (default 1): shared memory     */
  int initcheck;        /* MT_EMU_INITCHECK (default 1): unwritten shared  */
};
const Config &config();
int world_rank(); /* OMPI_COMM_WORLD_RANK or PMI_RANK, else -1 */

/* ---- memory (emu_mem.cpp) ---- */
struct Stream;
struct Pool;
/* A cross-stream access record of an allocation. */
struct Rec {
  uint32_t stream;
  uint64_t seq;
  uint64_t lo, hi;
  bool write;
  std::string what;
};
enum AllocKind { DEVICE = 0, PINNED = 1 };
struct Alloc {
  uint64_t id;
  char *base;
  size_t bytes, span;
  bool live;
  AllocKind kind;
  const char *how;
  Pool *pool;
  void *bt[12];
  int nbt;
  std::vector<Rec> recs;
};
/* The allocation (device or pinned, live or freed) containing p, or null. */
Alloc *alloc_of(const void *p);
/* The live device allocation holding [p, p + n), or null with *why set. */
Alloc *device_range(const void *p, size_t n, std::string *why);
extern uintptr_t g_arena_lo, g_arena_hi; /* reserved device address range */
static const size_t ARENA_BYTES = (size_t)1 << 40;
inline bool in_arena(uintptr_t a) { return a - g_arena_lo < ARENA_BYTES; }
Alloc *device_alloc(size_t bytes, const char *how, Pool *pool);
void device_release(Alloc *a); /* no longer live; pages returned */
Alloc *pinned_alloc(size_t bytes);
void pinned_release(Alloc *a);
/* Device memory is inaccessible outside these (nested) sessions. */
void session_open();
void session_close();
std::string describe(const Alloc *a);
/* New device memory is garbage, as on a GPU: 0xFF bytes (NaN in fp32 and
 * bf16), all of it up to 256 KiB, else the first and last 128 KiB. */
void fill_garbage(char *p, size_t bytes);
void for_each_alloc(void (*f)(Alloc *));
void print_backtrace(void *const *bt, int n, const char *indent);
/* Accounting of emulated device memory (the pool caches freed blocks). */
struct Pool {
  uint64_t threshold;
  std::multimap<size_t, int> cached; /* bytes of freed blocks kept */
  size_t cached_bytes;
};
cudaError_t account_alloc(size_t bytes, Pool *pool);
void account_free(size_t bytes, Pool *pool);
void pool_trim(Pool *pool, size_t keep);
size_t device_used();
void init_memory();

/* ---- streams and ops (emu_stream.cpp) ---- */
struct Op {
  Stream *s = nullptr;
  uint64_t seq = 0, stamp = 0;
  std::vector<uint64_t> vc; /* what this op is ordered after, per stream */
  bool started = false;
  double t_start = 0;
  virtual ~Op() {}
  virtual std::string name() const = 0;
  virtual bool runnable() { return true; }
  virtual bool start() = 0; /* true when done */
  virtual bool poll() { return true; }
  virtual bool is_comm() const { return false; }
};
struct Stream {
  uint32_t id;
  unsigned flags;
  bool legacy, destroyed;
  std::deque<Op *> q;
  std::vector<uint64_t> vc; /* vc[id] = ops queued so far */
};
Stream *stream_of(cudaStream_t s);
cudaStream_t handle_of(Stream *s);
Stream *stream_create(unsigned flags);
void stream_destroy(Stream *s);
void enqueue(Stream *s, Op *op);
/* Run whatever device work can run now; true if an op completed. */
bool progress();
bool device_busy();
/* Host waits (with progress and hang detection) until done(ctx). */
void host_wait(bool (*done)(void *), void *ctx, const char *what);
void sync_stream(Stream *s);
void sync_all();
/* The host learned that s's work so far is complete. */
void host_joins(const std::vector<uint64_t> &vc);
struct Access {
  Alloc *a;
  uint64_t lo, hi;
  bool write;
};
/* Cross-stream check of op's accesses against earlier ones, then recorded. */
void check_and_record(const Op *op, const Access *acc, int n);
void forget_records(Alloc *a); /* a freed allocation */
const char *stream_label(const Stream *s, char *buf, size_t len);
/* Events */
struct Event {
  unsigned flags;
  uint64_t gen_recorded, gen_done; /* records queued / executed */
  std::vector<uint64_t> vc;
  double t_done;
  bool destroyed;
};
Event *event_of(cudaEvent_t e);

/* Copies (emu_stream.cpp). */
cudaError_t copy_async(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, Stream *s,
                       const char *api);
cudaError_t memset_async(void *dst, int value, size_t bytes, Stream *s, const char *api);

/* ---- kernels (emu_exec.cpp / emu_check.cpp / emu_sym.cpp) ---- */
extern bool g_in_kernel; /* a kernel's thread is running */
std::string kernel_name(const void *fn, const char *text);
/* Static shared memory of a kernel (its function-local statics). */
size_t kernel_static_smem(const void *fn);
std::string symbolize(uintptr_t pc);
std::string shared_symbol(uintptr_t a, uintptr_t *off);
bool static_shared_extent(uintptr_t a, uintptr_t *lo, uintptr_t *hi);
void init_symbols();
/* emu_check.cpp: per-launch access ranges and shadow state. */
void check_kernel_begin(const char *kname);
void check_block_begin();
void check_epoch_end(); /* a block barrier completed, or the block ended */
void check_kernel_end(const Op *op);
/* emu_exec.cpp: the running thread and its block (hot-path state). */
std::string where_now();
extern int g_cur;                  /* flat thread index in its block, -1 */
extern uint32_t g_bar_epoch;       /* completed block barriers */
extern uint16_t g_warp_epoch[32];  /* completed __syncwarp()s per warp */
extern uintptr_t g_stack_lo, g_stack_span, g_param_lo, g_param_span, g_dyn_lo;
extern size_t g_dyn_size;
inline bool in_fiber_stack(uintptr_t a) { return a - g_stack_lo < g_stack_span; }
inline bool in_param(uintptr_t a) { return a - g_param_lo < g_param_span; }
/* per op name: count and seconds (MT_EMU_PROFILE=1 prints them at exit) */
void profile_add(const std::string &name, double seconds);
void set_last_error(cudaError_t e);

/* ---- MPI (emu_mpi.cpp) ---- */
bool mpi_ready();

} /* namespace emu */

#endif
