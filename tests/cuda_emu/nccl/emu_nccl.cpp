/* tests/cuda_emu/nccl/emu_nccl.cpp — the NCCL stand-in, built as
 * libnccl.so.2 (make CUDA_EMU=1: build-emu/nccl/) and found by the NCCL
 * engine's dlopen (parallel/nccl_api.c) through LD_LIBRARY_PATH. It
 * implements the calls megatrain makes with NCCL's semantics, over MPI:
 *   - ncclGetUniqueId: an id naming its creator's MPI world rank and a
 *     serial (so the communicator's MPI tag is unique in the job);
 *   - ncclCommInitRank: every member sends (rank, world rank, device, host)
 *     to the id's creator, which checks the set (each rank once, no GPU
 *     twice on one host: NCCL's "Duplicate GPU detected" is
 *     ncclInvalidUsage) and sends the table back; blocking, or done at
 *     ncclGroupEnd when called inside a group (so several communicators can
 *     be created together, as the pipeline's p2p channels are);
 *   - ncclGroupStart/End: the calls in between, per stream, become one op
 *     posted at once (emu_nccl_ops.cpp);
 *   - collectives and send/recv run when their CUDA stream reaches them;
 *   - ncclCommAbort (the watchdog's thread): pending ops fail the run.
 * Each rank is its own process with its own emulated device. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <map>

#include "emu_nccl.h"

using namespace nccl_emu;

namespace {

const uint32_t MAGIC = 0x4E434545; /* "EECN" */
struct IdData {
  uint32_t magic;
  int32_t root_world;
  uint32_t serial;
  uint32_t pid;
  uint64_t token;
};
uint32_t serial_counter;

struct Member {
  int32_t rank, world, device, ok;
  uint64_t host;
};

uint64_t host_hash() {
  char h[256] = "";
  gethostname(h, sizeof h - 1);
  uint64_t x = 1469598103934665603ull;
  for (const char *p = h; *p; p++) x = (x ^ (uint8_t)*p) * 1099511628211ull;
  return x;
}

/* ncclCommInitRank in progress. */
struct Init {
  ncclComm_t comm;
  int root_rank = -1; /* comm rank of the id's creator (known to the creator) */
  int root_world;
  Member me;
  std::vector<Member> table;
  std::vector<MPI_Request> reqs;
  int phase = 0; /* 0 posted, 1 creator: table sent, 2 done */
  ncclResult_t result = ncclSuccess;
};

int depth;                              /* ncclGroupStart nesting */
std::vector<Init *> group_inits;
std::vector<Call *> group_calls;

bool mpi_ready() {
  int a = 0, b = 0;
  PMPI_Initialized(&a);
  if (a) PMPI_Finalized(&b);
  return a && !b;
}

/* Advance an init; 1 when complete (result set). */
int init_poll(void *p) {
  Init *in = (Init *)p;
  ncclComm_t c = in->comm;
  int done = 0;
  if (in->phase == 2) return 1;
  if (!in->reqs.empty())
    PMPI_Testall((int)in->reqs.size(), in->reqs.data(), &done, MPI_STATUSES_IGNORE);
  else
    done = 1;
  if (!done) return 0;
  in->reqs.clear();
  const bool creator = in->root_world == in->me.world;
  if (creator && in->phase == 0) {
    /* every member's record arrived: check, then send the table back */
    std::vector<Member> t(c->nranks);
    std::vector<int> seen(c->nranks, 0);
    int ok = 1;
    for (const Member &m : in->table) {
      if (m.rank < 0 || m.rank >= c->nranks || seen[m.rank]++) {
        mt_emu_note("ncclCommInitRank: rank %d joined twice (or out of range) on a %d-rank "
                    "communicator", m.rank, c->nranks);
        ok = 0;
        continue;
      }
      t[m.rank] = m;
    }
    for (int a = 0; ok && a < c->nranks; a++)
      for (int b = a + 1; b < c->nranks; b++)
        if (t[a].host == t[b].host && t[a].device == t[b].device) {
          mt_emu_note("ncclCommInitRank: Duplicate GPU detected: rank %d and rank %d both on "
                      "CUDA device %d of one host (NCCL needs one GPU per rank)", a, b,
                      t[a].device);
          ok = 0;
        }
    for (Member &m : t) m.ok = ok;
    in->table = t;
    in->reqs.reserve(c->nranks);
    for (int r = 0; r < c->nranks; r++) {
      if (r == c->rank) continue;
      in->reqs.emplace_back();
      PMPI_Isend(in->table.data(), (int)(sizeof(Member) * t.size()), MPI_BYTE, t[r].world, c->tag,
                 MPI_COMM_WORLD, &in->reqs.back());
    }
    in->phase = 1;
    return init_poll(p);
  }
  /* creator: table sent; member: table received */
  c->world.resize(c->nranks);
  for (int r = 0; r < c->nranks; r++) c->world[r] = in->table[r].world;
  in->result = in->table[c->rank].ok ? ncclSuccess : ncclInvalidUsage;
  in->phase = 2;
  return 1;
}

void init_post(Init *in) {
  ncclComm_t c = in->comm;
  if (c->nranks == 1) {
    in->table.assign(1, in->me);
    in->table[0].ok = 1;
    in->phase = 0;
    in->root_world = in->me.world; /* creator path, nothing to receive */
    return;
  }
  if (in->root_world == in->me.world) {
    in->table.assign(c->nranks, Member()); /* never reallocated: receives land in it */
    in->reqs.resize(c->nranks - 1);
    for (int i = 0; i < c->nranks - 1; i++)
      PMPI_Irecv(&in->table[i], (int)sizeof(Member), MPI_BYTE, MPI_ANY_SOURCE, c->tag,
                 MPI_COMM_WORLD, &in->reqs[i]);
    in->table[c->nranks - 1] = in->me; /* its own record */
  } else {
    in->table.assign(c->nranks, Member());
    in->reqs.resize(2);
    PMPI_Isend(&in->me, (int)sizeof(Member), MPI_BYTE, in->root_world, c->tag, MPI_COMM_WORLD,
               &in->reqs[0]);
    PMPI_Irecv(in->table.data(), (int)(sizeof(Member) * c->nranks), MPI_BYTE, in->root_world,
               c->tag, MPI_COMM_WORLD, &in->reqs[1]);
    in->phase = 1; /* nothing more to send */
  }
}

/* The inits of one group advance together (a rank may create one
 * communicator while joining another that its peer creates). */
int inits_poll(void *p) {
  std::vector<Init *> &v = *(std::vector<Init *> *)p;
  int all = 1;
  for (Init *in : v) all &= init_poll(in);
  return all;
}

ncclResult_t wait_inits(std::vector<Init *> &v) {
  if (v.empty()) return ncclSuccess;
  char what[200];
  snprintf(what, sizeof what, "ncclCommInitRank (%zu communicator(s); rank %d of the first's %d, "
           "waiting for the other ranks to join)", v.size(), v[0]->comm->rank, v[0]->comm->nranks);
  mt_emu_host_wait(inits_poll, &v, what);
  ncclResult_t r = ncclSuccess;
  for (Init *in : v) {
    if (in->result != ncclSuccess) r = in->result;
    delete in;
  }
  v.clear();
  return r;
}

ncclResult_t submit(Call *c) {
  ncclResult_t r = check_call(*c);
  if (r != ncclSuccess) {
    delete c;
    return r;
  }
  if (depth > 0) group_calls.push_back(c);
  else nccl_emu::enqueue(std::vector<Call *>{c}, false);
  return ncclSuccess;
}

Call *make(Call::Kind k, const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
           int root, ncclComm_t c, cudaStream_t st) {
  Call *x = new Call();
  x->kind = k;
  x->send = s;
  x->recv = r;
  x->count = n;
  x->type = t;
  x->op = op;
  x->root = root;
  x->comm = c;
  x->stream = st;
  return x;
}

} /* namespace */

extern "C" {

ncclResult_t ncclGetVersion(int *v) {
  if (!v) return ncclInvalidArgument;
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return ncclInvalidArgument;
  memset(id, 0, sizeof *id);
  IdData d;
  d.magic = MAGIC;
  d.root_world = -1;
  if (mpi_ready()) PMPI_Comm_rank(MPI_COMM_WORLD, &d.root_world);
  d.serial = ++serial_counter;
  d.pid = (uint32_t)getpid();
  d.token = host_hash() ^ ((uint64_t)time(NULL) << 20) ^ d.serial;
  memcpy(id->internal, &d, sizeof d);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  IdData d;
  memcpy(&d, id.internal, sizeof d);
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks || d.magic != MAGIC) {
    mt_emu_note("ncclCommInitRank: invalid argument (nranks %d, rank %d%s)", nranks, rank,
                d.magic != MAGIC ? ", an id not from ncclGetUniqueId" : "");
    return ncclInvalidArgument;
  }
  if (!mpi_ready() || (nranks > 1 && d.root_world < 0)) {
    mt_emu_note("ncclCommInitRank: the NCCL stand-in runs over MPI: MPI must be initialised "
                "before ncclGetUniqueId and ncclCommInitRank");
    return ncclSystemError;
  }
  int *ub = nullptr, flag = 0;
  PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  const long tag = (1L << 30) | ((long)(d.root_world & 0x3FFF) << 16) | (long)(d.serial & 0xFFFF);
  if (nranks > 1 && (!flag || !ub || tag > *ub)) {
    mt_emu_note("ncclCommInitRank: MPI_TAG_UB %d is too small for the NCCL stand-in's tags",
                flag && ub ? *ub : -1);
    return ncclSystemError;
  }
  ncclComm_t c = new ncclComm();
  c->nranks = nranks;
  c->rank = rank;
  c->tag = (int)tag;
  c->device = mt_emu_device();
  Init *in = new Init();
  in->comm = c;
  in->root_world = d.root_world;
  int w = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &w);
  in->me = Member{rank, w, c->device, 1, host_hash()};
  init_post(in);
  *comm = c;
  if (depth > 0) {
    group_inits.push_back(in);
    return ncclSuccess;
  }
  std::vector<Init *> v{in};
  return wait_inits(v);
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  c->destroyed = true; /* kept while queued ops still use it */
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  c->aborted = true;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *n) {
  if (!c || !n) return ncclInvalidArgument;
  *n = c->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) {
  if (!c || !r) return ncclInvalidArgument;
  *r = c->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *d) {
  if (!c || !d) return ncclInvalidArgument;
  *d = c->device;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (depth <= 0) {
    mt_emu_note("ncclGroupEnd without ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--depth > 0) return ncclSuccess;
  ncclResult_t r = wait_inits(group_inits);
  std::vector<Call *> calls;
  calls.swap(group_calls);
  if (r != ncclSuccess) {
    for (Call *c : calls) delete c;
    return r;
  }
  /* one op per stream, in call order */
  std::map<cudaStream_t, std::vector<Call *>> by;
  std::vector<cudaStream_t> order;
  for (Call *c : calls) {
    if (!by.count(c->stream)) order.push_back(c->stream);
    by[c->stream].push_back(c);
  }
  for (cudaStream_t s : order) nccl_emu::enqueue(by[s], true);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st) {
  return submit(make(Call::ALLREDUCE, s, r, n, t, op, 0, c, st));
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st) {
  return submit(make(Call::BROADCAST, s, r, n, t, ncclSum, root, c, st));
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t c, cudaStream_t st) {
  return submit(make(Call::REDUCE, s, r, n, t, op, root, c, st));
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st) {
  return submit(make(Call::ALLGATHER, s, r, n, t, ncclSum, 0, c, st));
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  return submit(make(Call::REDUCESCATTER, s, r, n, t, op, 0, c, st));
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  return submit(make(Call::SEND, s, nullptr, n, t, ncclSum, peer, c, st));
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  return submit(make(Call::RECV, nullptr, r, n, t, ncclSum, peer, c, st));
}

} /* extern "C" */
