/* tests/cuda_emu/emu_api.cpp — the CUDA runtime calls megatrain makes
 * (cuda_runtime.h of this folder): errors, devices, allocation (plain,
 * pinned, the stream-ordered pool), pointer attributes, copies and memset,
 * and the external-op interface of cuda_emu.h. A call given the wrong kind
 * of memory (a host pointer where the copy kind says device, a range that
 * leaves its allocation, freed memory) prints what is wrong on stderr and
 * returns cudaErrorInvalidValue, so megatrain's MT_CUDA_CHECK ends the run
 * with both messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <set>

#include "emu.h"

namespace emu {

static cudaError_t last_error = cudaSuccess;
static int cur_device;

void set_last_error(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
}
static cudaError_t fail(cudaError_t e) {
  set_last_error(e);
  return e;
}

/* Memory classes of a pointer. */
enum Where { PAGEABLE, PINNED_HOST, DEV };
static Where where_is(const void *p) {
  Alloc *a = alloc_of(p);
  if (!a) return in_arena((uintptr_t)p) ? DEV : PAGEABLE;
  return a->kind == DEVICE ? DEV : PINNED_HOST;
}
static const char *kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an invalid cudaMemcpyKind";
}

struct Token {
  bool done = false;
};

struct CopyOp : Op {
  char *dst;
  const char *src;
  size_t bytes;
  bool dst_dev, src_dev;
  std::vector<char> staged; /* pageable source, copied at the call */
  std::vector<char> snap;   /* pinned source: its bytes at the call */
  Token *token = nullptr;
  const char *api;
  std::string name() const override {
    char b[160];
    snprintf(b, sizeof b, "%s(%s, %zu bytes)", api,
             dst_dev ? (src_dev ? "device to device" : "host to device") : "device to host", bytes);
    return b;
  }
  bool start() override {
    Access acc[2];
    int n = 0;
    std::string why;
    if (src_dev) {
      Alloc *a = device_range(src, bytes, &why);
      if (!a) fault("%s: the source %s", name().c_str(), why.c_str());
      acc[n++] = Access{a, (uint64_t)(src - a->base), (uint64_t)(src - a->base + bytes), false};
    }
    if (dst_dev) {
      Alloc *a = device_range(dst, bytes, &why);
      if (!a) fault("%s: the destination %s", name().c_str(), why.c_str());
      acc[n++] = Access{a, (uint64_t)(dst - a->base), (uint64_t)(dst - a->base + bytes), true};
    }
    check_and_record(this, acc, n);
    if (!snap.empty() && memcmp(snap.data(), src, bytes)) {
      size_t i = 0;
      while (snap[i] == src[i]) i++;
      Alloc *a = alloc_of(src);
      fault("%s: host code changed byte %zu of its pinned source %p (%s) after the copy was "
            "queued and before the stream ran it; a copy from pinned memory reads it when the "
            "stream gets there: wait for the copy (an event or a synchronisation) before "
            "reusing the buffer", name().c_str(), i, (const void *)src,
            a ? describe(a).c_str() : "?");
    }
    memmove(dst, staged.empty() ? src : staged.data(), bytes);
    if (token) token->done = true;
    return true;
  }
};

struct SetOp : Op {
  char *dst;
  int value;
  size_t bytes;
  std::string name() const override {
    char b[96];
    snprintf(b, sizeof b, "cudaMemsetAsync(%zu bytes)", bytes);
    return b;
  }
  bool start() override {
    std::string why;
    Alloc *a = device_range(dst, bytes, &why);
    if (!a) fault("%s: %s", name().c_str(), why.c_str());
    Access acc{a, (uint64_t)(dst - a->base), (uint64_t)(dst - a->base + bytes), true};
    check_and_record(this, &acc, 1);
    memset(dst, value, bytes);
    return true;
  }
};

static bool token_done(void *p) { return ((Token *)p)->done; }

cudaError_t copy_async(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, Stream *s,
                       const char *api) {
  if (!bytes) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  const Where wd = where_is(dst), ws = where_is(src);
  const bool dd = wd == DEV, sd = ws == DEV;
  const char *bad = nullptr;
  switch (kind) {
    case cudaMemcpyHostToDevice: bad = sd ? "the source is device memory" : !dd ? "the destination is host memory" : nullptr; break;
    case cudaMemcpyDeviceToHost: bad = !sd ? "the source is host memory" : dd ? "the destination is device memory" : nullptr; break;
    case cudaMemcpyDeviceToDevice: bad = !sd ? "the source is host memory" : !dd ? "the destination is host memory" : nullptr; break;
    case cudaMemcpyHostToHost: bad = sd || dd ? "an operand is device memory" : nullptr; break;
    case cudaMemcpyDefault: break;
    default: bad = "invalid copy kind"; break;
  }
  std::string why;
  if (!bad && sd && !device_range(src, bytes, &why)) bad = "the source range is not device memory";
  if (!bad && dd && !device_range(dst, bytes, &why)) bad = "the destination range is not device memory";
  if (bad) {
    note("ERROR: %s(dst=%p, src=%p, %zu bytes, %s): %s%s%s", api, dst, src, bytes,
         kind_name(kind), bad, why.empty() ? "" : ": ", why.c_str());
    return fail(cudaErrorInvalidValue);
  }
  if (!sd && !dd) { /* host to host: stream-ordered too */
    sync_stream(s);
    memmove(dst, src, bytes);
    return cudaSuccess;
  }
  CopyOp *op = new CopyOp();
  op->dst = (char *)dst;
  op->src = (const char *)src;
  op->bytes = bytes;
  op->dst_dev = dd;
  op->src_dev = sd;
  op->api = api;
  if (ws == PAGEABLE) op->staged.assign((const char *)src, (const char *)src + bytes);
  /* pinned source: checked unchanged when the copy runs; pinned
   * destination: undefined until the copy ran (0xFF: NaN if read early) */
  if (ws == PINNED_HOST) op->snap.assign((const char *)src, (const char *)src + bytes);
  if (wd == PINNED_HOST) memset(dst, 0xFF, bytes);
  Token tok;
  if (wd == PAGEABLE) op->token = &tok; /* into pageable memory: synchronous */
  enqueue(s, op);
  std::vector<uint64_t> vc = s->vc;
  if (wd == PAGEABLE) {
    host_wait(token_done, &tok, api);
    host_joins(vc);
  }
  return cudaSuccess;
}

cudaError_t memset_async(void *dst, int value, size_t bytes, Stream *s, const char *api) {
  if (!bytes) return cudaSuccess;
  std::string why;
  if (!device_range(dst, bytes, &why)) {
    note("ERROR: %s(%p, %d, %zu bytes): %s", api, dst, value, bytes, why.c_str());
    return fail(cudaErrorInvalidValue);
  }
  SetOp *op = new SetOp();
  op->dst = (char *)dst;
  op->value = value;
  op->bytes = bytes;
  enqueue(s, op);
  return cudaSuccess;
}

/* Stream-ordered allocation: the bytes belong to the stream from here on
 * (recorded as a write, so use on another stream needs an event), filled
 * with garbage (fill_garbage: a read of never-written memory shows). */
struct AllocOp : Op {
  Alloc *a;
  std::string name() const override { return "cudaMallocFromPoolAsync"; }
  bool start() override {
    Access acc{a, 0, a->bytes, true};
    check_and_record(this, &acc, 1);
    fill_garbage(a->base, a->bytes);
    return true;
  }
};

static std::set<Alloc *> free_queued;

struct FreeOp : Op {
  Alloc *a;
  std::string name() const override { return "cudaFreeAsync"; }
  bool start() override {
    Access acc{a, 0, a->bytes, true};
    check_and_record(this, &acc, 1);
    account_free(a->bytes, a->pool);
    free_queued.erase(a);
    device_release(a);
    return true;
  }
};

static std::set<Pool *> pools;
static Pool default_pool = {0, {}, 0};

struct ExtOp : Op {
  std::string nm;
  std::vector<mt_emu_range> ranges;
  int (*start_fn)(void *), (*poll_fn)(void *);
  void (*release_fn)(void *);
  void *ctx;
  bool comm;
  std::string name() const override { return nm; }
  bool is_comm() const override { return comm; }
  bool start() override {
    std::vector<Access> acc;
    for (const mt_emu_range &r : ranges) {
      if (!r.bytes) continue;
      std::string why;
      Alloc *a = device_range(r.ptr, r.bytes, &why);
      if (!a) fault("%s: %s buffer %s", nm.c_str(), r.write ? "output" : "input", why.c_str());
      uint64_t lo = (uint64_t)((const char *)r.ptr - a->base);
      acc.push_back(Access{a, lo, lo + r.bytes, r.write != 0});
    }
    check_and_record(this, acc.data(), (int)acc.size());
    return start_fn(ctx) != 0;
  }
  bool poll() override { return poll_fn(ctx) != 0; }
  ~ExtOp() override {
    if (release_fn) release_fn(ctx);
  }
};

} /* namespace emu */

using namespace emu;

extern "C" {

/* ---- errors ---- */
cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define N(x) \
  case x: return #x;
    N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation)
    N(cudaErrorInitializationError) N(cudaErrorInvalidConfiguration)
    N(cudaErrorInvalidDevicePointer) N(cudaErrorInvalidMemcpyDirection)
    N(cudaErrorInsufficientDriver) N(cudaErrorInvalidDeviceFunction) N(cudaErrorNoDevice)
    N(cudaErrorInvalidDevice) N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady)
    N(cudaErrorIllegalAddress) N(cudaErrorLaunchOutOfResources) N(cudaErrorLaunchFailure)
    N(cudaErrorNotSupported) N(cudaErrorUnknown)
#undef N
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

/* ---- devices ---- */
cudaError_t cudaDriverGetVersion(int *v) {
  if (!v) return fail(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
  if (!v) return fail(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) {
  if (!n) return fail(cudaErrorInvalidValue);
  *n = config().devices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= config().devices) return fail(cudaErrorInvalidDevice);
  init_memory();
  cur_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
  if (!d) return fail(cudaErrorInvalidValue);
  *d = cur_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int dev) {
  if (!v) return fail(cudaErrorInvalidValue);
  if (dev < 0 || dev >= config().devices) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
    case cudaDevAttrMemoryPoolsSupported: *v = 1; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
  if (!p) return fail(cudaErrorInvalidValue);
  if (dev < 0 || dev >= config().devices) return fail(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "megatrain cuda-emu (host emulation of an sm_90 GPU)");
  p->totalGlobalMem = config().device_memory;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 232448;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->multiProcessorCount = 132;
  p->major = 9;
  p->minor = 0;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) {
  if (!fr || !tot) return fail(cudaErrorInvalidValue);
  *tot = config().device_memory;
  *fr = *tot - device_used();
  return cudaSuccess;
}

/* ---- memory ---- */
cudaError_t cudaMalloc(void **p, size_t bytes) {
  if (!p) return fail(cudaErrorInvalidValue);
  if (account_alloc(bytes, nullptr) != cudaSuccess) return fail(cudaErrorMemoryAllocation);
  Alloc *a = device_alloc(bytes, "cudaMalloc", nullptr);
  session_open();
  fill_garbage(a->base, bytes);
  session_close();
  *p = a->base;
  return cudaSuccess;
}

static Alloc *device_base(const void *p, const char *api) {
  Alloc *a = alloc_of(p);
  if (!a || a->kind != DEVICE || a->base != (const char *)p || !a->live || free_queued.count(a)) {
    note("ERROR: %s(%p): %s", api, p,
         !a || a->kind != DEVICE ? "not device memory"
         : a->base != (const char *)p ? "not the start of an allocation"
                                      : "already freed");
    return nullptr;
  }
  return a;
}

cudaError_t cudaFree(void *p) {
  if (!p) return cudaSuccess;
  sync_all(); /* cudaFree synchronises the device */
  Alloc *a = device_base(p, "cudaFree");
  if (!a) return fail(cudaErrorInvalidValue);
  account_free(a->bytes, nullptr);
  device_release(a);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
  if (!p) return fail(cudaErrorInvalidValue);
  Alloc *a = pinned_alloc(bytes);
  if (!a) return fail(cudaErrorMemoryAllocation);
  *p = a->base;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) {
  if (!p) return cudaSuccess;
  sync_all();
  Alloc *a = alloc_of(p);
  if (!a || a->kind != PINNED || !a->live || a->base != (char *)p) {
    note("ERROR: cudaFreeHost(%p): not memory from cudaMallocHost", p);
    return fail(cudaErrorInvalidValue);
  }
  pinned_release(a);
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void **p, size_t bytes, cudaMemPool_t pool, cudaStream_t st) {
  Stream *s = stream_of(st);
  Pool *pl = (Pool *)pool;
  if (!p || !s || (pl != &default_pool && !pools.count(pl))) return fail(cudaErrorInvalidValue);
  if (account_alloc(bytes, pl) != cudaSuccess) return fail(cudaErrorMemoryAllocation);
  AllocOp *op = new AllocOp();
  op->a = device_alloc(bytes, "cudaMallocFromPoolAsync", pl);
  enqueue(s, op);
  *p = op->a->base;
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t st) {
  return cudaMallocFromPoolAsync(p, bytes, (cudaMemPool_t)&default_pool, st);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t st) {
  Stream *s = stream_of(st);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  if (!p) return cudaSuccess;
  Alloc *a = device_base(p, "cudaFreeAsync");
  if (!a) return fail(cudaErrorInvalidValue);
  free_queued.insert(a);
  FreeOp *op = new FreeOp();
  op->a = a;
  enqueue(s, op);
  return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props) {
  if (!pool || !props || props->allocType != cudaMemAllocationTypePinned ||
      props->location.type != cudaMemLocationTypeDevice || props->location.id < 0 ||
      props->location.id >= config().devices)
    return fail(cudaErrorInvalidValue);
  Pool *p = new Pool{0, {}, 0};
  pools.insert(p);
  *pool = (cudaMemPool_t)p;
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  Pool *p = (Pool *)pool;
  if (!pools.count(p)) return fail(cudaErrorInvalidValue);
  pool_trim(p, 0);
  p->threshold = 0; /* live blocks go back to the device when freed */
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *v) {
  Pool *p = (Pool *)pool;
  if (!pools.count(p) || !v || attr != cudaMemPoolAttrReleaseThreshold)
    return fail(cudaErrorInvalidValue);
  p->threshold = *(uint64_t *)v;
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  Pool *p = (Pool *)pool;
  if (!pools.count(p)) return fail(cudaErrorInvalidValue);
  pool_trim(p, keep);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *at, const void *p) {
  if (!at) return fail(cudaErrorInvalidValue);
  memset(at, 0, sizeof *at);
  at->device = -2;
  Alloc *a = p ? alloc_of(p) : nullptr;
  if (a && a->live && a->kind == DEVICE) {
    at->type = cudaMemoryTypeDevice;
    at->device = cur_device;
    at->devicePointer = (void *)p;
  } else if (a && a->live && a->kind == PINNED) {
    at->type = cudaMemoryTypeHost;
    at->device = cur_device;
    at->devicePointer = at->hostPointer = (void *)p;
  } else {
    at->type = cudaMemoryTypeUnregistered;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t st) {
  Stream *s = stream_of(st);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  return copy_async(dst, src, bytes, kind, s, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
  Stream *s = stream_of(NULL);
  cudaError_t e = copy_async(dst, src, bytes, kind, s, "cudaMemcpy");
  if (e == cudaSuccess) sync_stream(s);
  return e;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t st) {
  Stream *s = stream_of(st);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  return memset_async(dst, value, bytes, s, "cudaMemsetAsync");
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
  Stream *s = stream_of(NULL);
  cudaError_t e = memset_async(dst, value, bytes, s, "cudaMemset");
  if (e == cudaSuccess) sync_stream(s);
  return e;
}

/* ---- cuda_emu.h ---- */
void mt_emu_enqueue_ext(cudaStream_t st, const char *name, const mt_emu_range *ranges,
                        int nranges, int (*start)(void *), int (*poll)(void *),
                        void (*release)(void *), void *ctx, int comm) {
  Stream *s = stream_of(st);
  if (!s) fault("%s: invalid stream %p", name, (void *)st);
  for (int i = 0; i < nranges; i++) {
    std::string why;
    if (ranges[i].bytes && !device_range(ranges[i].ptr, ranges[i].bytes, &why))
      fault("%s: %s buffer %s", name, ranges[i].write ? "output" : "input", why.c_str());
  }
  ExtOp *op = new ExtOp();
  op->nm = name;
  op->ranges.assign(ranges, ranges + nranges);
  op->start_fn = start;
  op->poll_fn = poll;
  op->release_fn = release;
  op->ctx = ctx;
  op->comm = comm != 0;
  enqueue(s, op);
}

struct WaitCtx {
  int (*done)(void *);
  void *ctx;
};
static bool ext_done(void *p) {
  WaitCtx *w = (WaitCtx *)p;
  return w->done(w->ctx) != 0;
}
void mt_emu_host_wait(int (*done)(void *), void *ctx, const char *what) {
  WaitCtx w{done, ctx};
  host_wait(ext_done, &w, what);
}

int mt_emu_device(void) { return cur_device; }

void mt_emu_fault(const char *fmt, ...) {
  char b[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  fault("%s", b);
}

void mt_emu_note(const char *fmt, ...) {
  char b[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  note("%s", b);
}

double mt_emu_hang_seconds(void) { return config().hang_s; }

} /* extern "C" */
