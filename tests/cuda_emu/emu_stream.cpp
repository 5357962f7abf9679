/* tests/cuda_emu/emu_stream.cpp — streams, events and the ops queued on them
 * (copies, memset, event records and waits, stream-ordered alloc/free,
 * kernels from emu_exec.cpp, cuBLAS and NCCL ops), the scheduler that runs
 * them in stream order, and the cross-stream checker.
 *
 * Ordering model (vector clocks): every op gets the set of earlier ops it is
 * ordered after: those of its own stream, those its stream learned of
 * through cudaStreamWaitEvent, those the host had seen complete when it was
 * queued (a synchronisation), and the legacy default stream's implicit
 * synchronisation with blocking streams. Two ops of different streams that
 * touch the same bytes of an allocation, at least one writing, must be
 * ordered one way: otherwise the checker reports a race naming both, as
 * the hardware could run them in either order or at the same time.
 *
 * Execution is lazy: ops run when the host waits for them (or blocks in MPI,
 * emu_mpi.cpp), in stream order; a stream whose first op cannot run yet (an
 * event not yet recorded, a collective whose peers have not arrived) does
 * not hold up the others. */
#include <dlfcn.h>
#include <execinfo.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "emu.h"

namespace emu {

static std::vector<Stream *> streams;
static std::set<Stream *> valid_streams;
static std::vector<uint64_t> host_vc;
static uint64_t g_stamp;
static size_t queued; /* ops in all queues */
static bool in_progress;

static inline uint64_t vat(const std::vector<uint64_t> &v, uint32_t i) {
  return i < v.size() ? v[i] : 0;
}
static void merge(std::vector<uint64_t> &a, const std::vector<uint64_t> &b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (size_t i = 0; i < b.size(); i++)
    if (b[i] > a[i]) a[i] = b[i];
}

static Stream *legacy() {
  if (streams.empty()) {
    Stream *s = new Stream();
    s->id = 0;
    s->flags = 0;
    s->legacy = true;
    s->destroyed = false;
    s->vc.assign(1, 0);
    streams.push_back(s);
    valid_streams.insert(s);
  }
  return streams[0];
}

Stream *stream_of(cudaStream_t h) {
  if (h == NULL || h == cudaStreamLegacy) return legacy();
  Stream *s = (Stream *)h;
  if (!valid_streams.count(s) || s->destroyed) return nullptr;
  return s;
}

cudaStream_t handle_of(Stream *s) { return s->legacy ? NULL : (cudaStream_t)s; }

Stream *stream_create(unsigned flags) {
  legacy();
  Stream *s = new Stream();
  s->id = (uint32_t)streams.size();
  s->flags = flags;
  s->legacy = false;
  s->destroyed = false;
  s->vc.assign(s->id + 1, 0);
  merge(s->vc, host_vc);
  streams.push_back(s);
  valid_streams.insert(s);
  return s;
}

void stream_destroy(Stream *s) { s->destroyed = true; /* its queued work still runs */ }

const char *stream_label(const Stream *s, char *buf, size_t len) {
  if (s->legacy) snprintf(buf, len, "the legacy default stream");
  else snprintf(buf, len, "stream %u%s", s->id, s->flags & cudaStreamNonBlocking ? " (non-blocking)" : "");
  return buf;
}

void enqueue(Stream *s, Op *op) {
  op->s = s;
  merge(s->vc, host_vc);
  if (s->legacy) {
    for (Stream *b : streams)
      if (!b->legacy && !(b->flags & cudaStreamNonBlocking)) merge(s->vc, b->vc);
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    merge(s->vc, legacy()->vc);
  }
  if (s->vc.size() <= s->id) s->vc.resize(s->id + 1, 0);
  op->vc = s->vc;
  op->seq = s->vc[s->id]++;
  op->stamp = ++g_stamp;
  s->q.push_back(op);
  queued++;
}

void host_joins(const std::vector<uint64_t> &vc) { merge(host_vc, vc); }

/* The legacy stream's implicit synchronisation, at execution. */
static bool legacy_ok(const Op *op) {
  const Stream *s = op->s;
  if (s->legacy) {
    for (Stream *b : streams)
      if (!b->legacy && !(b->flags & cudaStreamNonBlocking) && !b->q.empty() &&
          b->q.front()->stamp < op->stamp)
        return false;
    return true;
  }
  if (s->flags & cudaStreamNonBlocking) return true;
  const Stream *l = streams[0];
  return l->q.empty() || l->q.front()->stamp > op->stamp;
}

static void prune_records();
static std::set<Alloc *> recorded; /* allocations with records */

bool device_busy() { return queued > 0; }

bool progress() {
  if (in_progress || !queued) return false;
  in_progress = true;
  bool any = false, again = true;
  session_open();
  while (again) {
    again = false;
    for (size_t i = 0; i < streams.size(); i++) {
      Stream *s = streams[i];
      while (!s->q.empty()) {
        Op *op = s->q.front();
        bool done;
        if (!op->started) {
          if (!op->runnable() || !legacy_ok(op)) break;
          op->started = true;
          op->t_start = now();
          done = op->start();
        } else {
          done = op->poll();
        }
        if (!done) break;
        s->q.pop_front();
        queued--;
        delete op;
        any = again = true;
      }
    }
  }
  session_close();
  in_progress = false;
  if (!queued) prune_records();
  return any;
}

/* One line per stream with queued work (for hang and deadlock reports). */
static void dump_streams() {
  double t = now();
  for (Stream *s : streams) {
    if (s->q.empty()) continue;
    char b[64];
    Op *op = s->q.front();
    fprintf(stderr, "  %s: %zu op(s) queued; first: %s (%s)\n", stream_label(s, b, sizeof b),
            s->q.size(), op->name().c_str(),
            op->started ? (std::string("started ") + std::to_string((int)(t - op->t_start)) +
                           " s ago, waiting for its peers").c_str()
                        : "not started: waits for an event or an earlier op");
  }
  fflush(stderr);
}

/* ---------------------------------------------------------------- syncs */

/* MT_EMU_SYNCS=1: every host wait that finds device work still to do — a
 * synchronisation at which a GPU's host would stall — is counted by call
 * site (the first six frames outside the emulation library); at exit the
 * total and the sites, most frequent first, go to stderr. A wait that finds
 * its work done (a stream synchronised twice) is not counted, nor a blocking
 * MPI call (emu_mpi.cpp): on a GPU the device goes on meanwhile. */
struct SyncSite {
  uint64_t n = 0;
  std::string what;
};
static std::map<std::vector<uintptr_t>, SyncSite> *syncs;

static void syncs_print() {
  std::vector<std::pair<uint64_t, const std::vector<uintptr_t> *>> v;
  uint64_t tot = 0;
  for (auto &kv : *syncs) {
    v.emplace_back(kv.second.n, &kv.first);
    tot += kv.second.n;
  }
  std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
  fprintf(stderr, "cuda-emu host synchronisations (MT_EMU_SYNCS=1): %llu\n",
          (unsigned long long)tot);
  for (auto &e : v) {
    fprintf(stderr, "  %7llu x  %s\n", (unsigned long long)e.first, (*syncs)[*e.second].what.c_str());
    for (uintptr_t pc : *e.second) fprintf(stderr, "             at %s\n", symbolize(pc).c_str());
  }
}

static void sync_note(const char *what) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("MT_EMU_SYNCS");
    on = e && *e == '1';
    if (on) {
      syncs = new std::map<std::vector<uintptr_t>, SyncSite>();
      atexit(syncs_print);
    }
  }
  if (!on || !strncmp(what, "MPI", 3) || !strncmp(what, "an MPI", 6)) return;
  void *bt[32];
  const int n = backtrace(bt, 32);
  Dl_info self, d;
  dladdr((void *)&sync_note, &self);
  std::vector<uintptr_t> key;
  for (int i = 1; i < n && key.size() < 6; i++)
    if (!dladdr(bt[i], &d) || d.dli_fbase != self.dli_fbase) key.push_back((uintptr_t)bt[i] - 1);
  SyncSite &s = (*syncs)[key];
  if (!s.n) s.what = what;
  s.n++;
}

void host_wait(bool (*done)(void *), void *ctx, const char *what) {
  if (!done(ctx)) sync_note(what);
  const double hang = config().hang_s;
  double last = now();
  unsigned idle = 0;
  while (!done(ctx)) {
    if (progress()) {
      last = now();
      idle = 0;
      continue;
    }
    if (now() - last > hang) {
      note("ERROR: hang: %s has made no progress for %.0f s (MT_EMU_HANG_S); queued device "
           "work:", what, hang);
      dump_streams();
      fault("hang in %s (a collective or send/recv whose peer never arrives: NCCL would hang "
            "here too)", what);
    }
    if (++idle > 64) usleep(idle > 4096 ? 2000 : 50);
    else sched_yield();
  }
}

static bool stream_empty(void *p) { return ((Stream *)p)->q.empty(); }
static bool all_empty(void *) { return queued == 0; }

void sync_stream(Stream *s) {
  char b[64], w[128];
  snprintf(w, sizeof w, "cudaStreamSynchronize(%s)", stream_label(s, b, sizeof b));
  host_wait(stream_empty, s, w);
  host_joins(s->vc);
}

void sync_all() {
  host_wait(all_empty, nullptr, "cudaDeviceSynchronize");
  for (Stream *s : streams) host_joins(s->vc);
}

/* ---------------------------------------------------------------- profile */

struct Prof {
  uint64_t n = 0;
  double s = 0;
};
static std::map<std::string, Prof> *prof;

static void profile_print() {
  std::vector<std::pair<double, std::string>> v;
  double tot = 0;
  for (auto &kv : *prof) {
    v.emplace_back(kv.second.s, kv.first);
    tot += kv.second.s;
  }
  std::sort(v.rbegin(), v.rend());
  fprintf(stderr, "cuda-emu profile (MT_EMU_PROFILE=1): %.2f s of emulated device work\n", tot);
  for (size_t i = 0; i < v.size() && i < 30; i++)
    fprintf(stderr, "  %8.3f s %7llu x  %s\n", v[i].first,
            (unsigned long long)(*prof)[v[i].second].n, v[i].second.c_str());
}

void profile_add(const std::string &name, double seconds) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("MT_EMU_PROFILE");
    on = e && *e == '1';
    if (on) {
      prof = new std::map<std::string, Prof>();
      atexit(profile_print);
    }
  }
  if (!on) return;
  Prof &p = (*prof)[name];
  p.n++;
  p.s += seconds;
}

/* --------------------------------------------------- cross-stream checker */

void check_and_record(const Op *op, const Access *acc, int n) {
  const uint32_t sid = op->s->id;
  for (int i = 0; i < n; i++) {
    const Access &x = acc[i];
    Alloc *a = x.a;
    for (const Rec &r : a->recs) {
      if (r.stream == sid || (!r.write && !x.write) || r.hi <= x.lo || x.hi <= r.lo) continue;
      if (r.seq < vat(op->vc, r.stream)) continue; /* r happens before op */
      char b1[64], b2[64];
      Stream *rs = r.stream < streams.size() ? streams[r.stream] : nullptr;
      note("ERROR: stream race on %s:", describe(a).c_str());
      fprintf(stderr,
              "  %s on %s (op #%llu) %s bytes [%llu, %llu),\n"
              "  %s on %s (op #%llu) %s bytes [%llu, %llu),\n"
              "  and no event or synchronisation orders them, so a GPU may run them in either "
              "order or at once (record an event after the one that must come first and make "
              "the other's stream wait for it: cudaEventRecord + cudaStreamWaitEvent)\n",
              op->name().c_str(), stream_label(op->s, b1, sizeof b1), (unsigned long long)op->seq,
              x.write ? "writes" : "reads", (unsigned long long)x.lo, (unsigned long long)x.hi,
              r.what.c_str(), rs ? stream_label(rs, b2, sizeof b2) : "?",
              (unsigned long long)r.seq, r.write ? "writes" : "reads", (unsigned long long)r.lo,
              (unsigned long long)r.hi);
      fprintf(stderr, "  the allocation was made at:\n");
      print_backtrace(a->bt, a->nbt, "    ");
      fault("stream race (see above)");
    }
  }
  for (int i = 0; i < n; i++) {
    const Access &x = acc[i];
    std::vector<Rec> &v = x.a->recs;
    if (!v.empty()) {
      Rec &l = v.back();
      if (l.stream == sid && l.write == x.write && l.lo == x.lo && l.hi == x.hi) {
        l.seq = op->seq;
        continue;
      }
    }
    if (v.size() >= 1024) v.erase(v.begin(), v.begin() + 512);
    v.push_back(Rec{sid, op->seq, x.lo, x.hi, x.write, op->name()});
    recorded.insert(x.a);
  }
}

/* Device idle: a record the host has joined past orders before every later
 * op (each inherits the host's clock). */
void forget_records(Alloc *a) {
  a->recs.clear();
  recorded.erase(a);
}

static void prune_records() {
  static uint64_t calls;
  if (++calls % 16) return;
  for (auto it = recorded.begin(); it != recorded.end();) {
    std::vector<Rec> &v = (*it)->recs;
    size_t k = 0;
    for (size_t i = 0; i < v.size(); i++)
      if (v[i].seq >= vat(host_vc, v[i].stream)) v[k++] = v[i];
    v.resize(k);
    it = k ? std::next(it) : recorded.erase(it);
  }
}

/* ------------------------------------------------------------------ events */

static std::set<Event *> valid_events;

Event *event_of(cudaEvent_t h) {
  Event *e = (Event *)h;
  return h && valid_events.count(e) && !e->destroyed ? e : nullptr;
}

struct RecordOp : Op {
  Event *e;
  uint64_t gen;
  std::string name() const override { return "cudaEventRecord"; }
  bool start() override {
    if (gen > e->gen_done) e->gen_done = gen;
    e->t_done = now();
    return true;
  }
};

struct WaitOp : Op {
  Event *e;
  uint64_t gen;
  std::string name() const override { return "cudaStreamWaitEvent"; }
  bool runnable() override { return e->gen_done >= gen; }
  bool start() override { return true; }
};

} /* namespace emu */

using namespace emu;

extern "C" {

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  if (!e) return cudaErrorInvalidValue;
  Event *x = new Event();
  x->flags = flags;
  x->gen_recorded = x->gen_done = 0;
  x->t_done = 0;
  x->destroyed = false;
  valid_events.insert(x);
  *e = (cudaEvent_t)x;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t h) {
  Event *e = event_of(h);
  if (!e) return cudaErrorInvalidResourceHandle;
  e->destroyed = true; /* queued records and waits still hold it */
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t st) {
  Event *e = event_of(h);
  Stream *s = stream_of(st);
  if (!e || !s) return cudaErrorInvalidResourceHandle;
  RecordOp *op = new RecordOp();
  op->e = e;
  op->gen = ++e->gen_recorded;
  enqueue(s, op);
  e->vc = s->vc;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t h, unsigned flags) {
  (void)flags;
  Event *e = event_of(h);
  Stream *s = stream_of(st);
  if (!e || !s) return cudaErrorInvalidResourceHandle;
  if (!e->gen_recorded) return cudaSuccess; /* never recorded: nothing to wait for */
  merge(s->vc, e->vc);
  WaitOp *op = new WaitOp();
  op->e = e;
  op->gen = e->gen_recorded;
  enqueue(s, op);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t h) {
  Event *e = event_of(h);
  if (!e) return cudaErrorInvalidResourceHandle;
  progress();
  if (e->gen_done < e->gen_recorded) return cudaErrorNotReady;
  host_joins(e->vc);
  return cudaSuccess;
}

static bool event_done(void *p) {
  Event *e = (Event *)p;
  return e->gen_done >= e->gen_recorded;
}

cudaError_t cudaEventSynchronize(cudaEvent_t h) {
  Event *e = event_of(h);
  if (!e) return cudaErrorInvalidResourceHandle;
  host_wait(event_done, e, "cudaEventSynchronize");
  host_joins(e->vc);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  Event *x = event_of(a), *y = event_of(b);
  if (!ms || !x || !y) return cudaErrorInvalidResourceHandle;
  if ((x->flags | y->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
  if (x->gen_done < x->gen_recorded || y->gen_done < y->gen_recorded) return cudaErrorNotReady;
  *ms = (float)((y->t_done - x->t_done) * 1e3); /* host time of the emulation */
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags) {
  if (!st) return cudaErrorInvalidValue;
  *st = (cudaStream_t)stream_create(flags);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *st) { return cudaStreamCreateWithFlags(st, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t st) {
  Stream *s = stream_of(st);
  if (!s || s->legacy) return cudaErrorInvalidResourceHandle;
  stream_destroy(s);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st) {
  Stream *s = stream_of(st);
  if (!s) return cudaErrorInvalidResourceHandle;
  sync_stream(s);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t st) {
  Stream *s = stream_of(st);
  if (!s) return cudaErrorInvalidResourceHandle;
  progress();
  if (!s->q.empty()) return cudaErrorNotReady;
  host_joins(s->vc);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  sync_all();
  return cudaSuccess;
}

} /* extern "C" */
