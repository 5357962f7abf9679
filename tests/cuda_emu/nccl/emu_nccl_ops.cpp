/* tests/cuda_emu/nccl/emu_nccl_ops.cpp — the NCCL calls as ops on CUDA
 * streams (cuda_emu.h mt_emu_enqueue_ext): when its stream reaches it, an op
 * copies its device inputs to host buffers and posts its MPI traffic (every
 * rank sends its contribution to the ranks that need it with MPI_Issend,
 * which completes only once the receiver posted the matching receive, as an
 * NCCL transfer needs both sides running); it completes when every request
 * did, writing its results to device memory. Reductions run in comm-rank
 * order 0, 1, ..., n-1 on every rank (fp32 and fp64 in their own type, bf16
 * accumulated in fp32 and rounded once, integers exactly), so every rank
 * gets the same bits. The calls of one ncclGroupStart/End on one stream are
 * one op: posted together, so a send/recv pair between two ranks matches;
 * outside a group each call is its own op, and two ranks that both send
 * first wait for each other forever, as with NCCL (reported as a hang
 * after MT_EMU_HANG_S seconds). */
#include <limits.h>
#include <string.h>

#include "emu_nccl.h"

namespace nccl_emu {

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  }
  return 0;
}

const char *call_name(Call::Kind k) {
  switch (k) {
    case Call::ALLREDUCE: return "ncclAllReduce";
    case Call::BROADCAST: return "ncclBroadcast";
    case Call::REDUCE: return "ncclReduce";
    case Call::ALLGATHER: return "ncclAllGather";
    case Call::REDUCESCATTER: return "ncclReduceScatter";
    case Call::SEND: return "ncclSend";
    case Call::RECV: return "ncclRecv";
  }
  return "?";
}

static void isend(Call &c, const char *p, size_t bytes, int peer) {
  if (bytes > INT_MAX) mt_emu_fault("%s: %zu bytes in one message", call_name(c.kind), bytes);
  c.reqs.emplace_back();
  PMPI_Issend(p, (int)bytes, MPI_BYTE, c.comm->world[peer], c.comm->tag, MPI_COMM_WORLD,
              &c.reqs.back());
}
static void irecv(Call &c, int peer, size_t bytes) {
  if (bytes > INT_MAX) mt_emu_fault("%s: %zu bytes in one message", call_name(c.kind), bytes);
  c.parts[peer].resize(bytes ? bytes : 1);
  c.reqs.emplace_back();
  PMPI_Irecv(c.parts[peer].data(), (int)bytes, MPI_BYTE, c.comm->world[peer], c.comm->tag,
             MPI_COMM_WORLD, &c.reqs.back());
}

void post(Call &c) {
  const int n = c.comm->nranks, me = c.comm->rank;
  const size_t bytes = c.count * type_size(c.type);
  c.parts.assign(n, std::vector<char>());
  const char *s = (const char *)c.send;
  switch (c.kind) {
    case Call::ALLREDUCE:
    case Call::ALLGATHER:
      c.mine.assign(s, s + bytes);
      for (int p = 0; p < n; p++)
        if (p != me) irecv(c, p, bytes);
      for (int p = 0; p < n; p++)
        if (p != me) isend(c, c.mine.data(), bytes, p);
      break;
    case Call::BROADCAST:
      if (me == c.root) {
        c.mine.assign(s, s + bytes);
        for (int p = 0; p < n; p++)
          if (p != me) isend(c, c.mine.data(), bytes, p);
      } else {
        irecv(c, c.root, bytes);
      }
      break;
    case Call::REDUCE:
      c.mine.assign(s, s + bytes);
      if (me == c.root) {
        for (int p = 0; p < n; p++)
          if (p != me) irecv(c, p, bytes);
      } else {
        isend(c, c.mine.data(), bytes, c.root);
      }
      break;
    case Call::REDUCESCATTER:
      c.mine.assign(s, s + bytes * (size_t)n);
      for (int p = 0; p < n; p++)
        if (p != me) irecv(c, p, bytes);
      for (int p = 0; p < n; p++)
        if (p != me) isend(c, c.mine.data() + bytes * (size_t)p, bytes, p);
      break;
    case Call::SEND:
      c.mine.assign(s, s + bytes);
      isend(c, c.mine.data(), bytes, c.root);
      break;
    case Call::RECV:
      irecv(c, c.root, bytes);
      break;
  }
}

static inline float bf2f(uint16_t b) { return __builtin_bit_cast(float, (uint32_t)b << 16); }
static inline uint16_t f2bf(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

template <typename T, typename A, typename L, typename S>
static void reduce_t(const std::vector<const char *> &src, char *dst, size_t count, bool max,
                     L load, S store) {
  for (size_t i = 0; i < count; i++) {
    A acc = load(src[0], i);
    for (size_t r = 1; r < src.size(); r++) {
      A v = load(src[r], i);
      acc = max ? (v > acc ? v : acc) : acc + v;
    }
    store(dst, i, acc);
  }
}

/* dst = op over src[0..n) in that order. */
static void reduce(const std::vector<const char *> &src, char *dst, size_t count,
                   ncclDataType_t t, ncclRedOp_t op) {
  const bool mx = op == ncclMax;
  switch (t) {
    case ncclFloat32:
      reduce_t<float, float>(src, dst, count, mx,
                             [](const char *p, size_t i) { return ((const float *)p)[i]; },
                             [](char *p, size_t i, float v) { ((float *)p)[i] = v; });
      break;
    case ncclFloat64:
      reduce_t<double, double>(src, dst, count, mx,
                               [](const char *p, size_t i) { return ((const double *)p)[i]; },
                               [](char *p, size_t i, double v) { ((double *)p)[i] = v; });
      break;
    case ncclBfloat16:
      reduce_t<uint16_t, float>(src, dst, count, mx,
                                [](const char *p, size_t i) { return bf2f(((const uint16_t *)p)[i]); },
                                [](char *p, size_t i, float v) { ((uint16_t *)p)[i] = f2bf(v); });
      break;
    case ncclInt32:
      reduce_t<int32_t, int64_t>(src, dst, count, mx,
                                 [](const char *p, size_t i) { return (int64_t)((const int32_t *)p)[i]; },
                                 [](char *p, size_t i, int64_t v) { ((int32_t *)p)[i] = (int32_t)v; });
      break;
    case ncclInt64:
      reduce_t<int64_t, int64_t>(src, dst, count, mx,
                                 [](const char *p, size_t i) { return ((const int64_t *)p)[i]; },
                                 [](char *p, size_t i, int64_t v) { ((int64_t *)p)[i] = v; });
      break;
    default:
      mt_emu_fault("the NCCL stand-in reduces fp32, fp64, bf16, int32 and int64 only (type %d)",
                   (int)t);
  }
}

void finish(Call &c) {
  const int n = c.comm->nranks, me = c.comm->rank;
  const size_t bytes = c.count * type_size(c.type);
  char *r = (char *)c.recv;
  std::vector<const char *> src(n);
  switch (c.kind) {
    case Call::ALLREDUCE:
      for (int p = 0; p < n; p++) src[p] = p == me ? c.mine.data() : c.parts[p].data();
      reduce(src, r, c.count, c.type, c.op);
      break;
    case Call::REDUCE:
      if (me != c.root) break;
      for (int p = 0; p < n; p++) src[p] = p == me ? c.mine.data() : c.parts[p].data();
      reduce(src, r, c.count, c.type, c.op);
      break;
    case Call::REDUCESCATTER:
      for (int p = 0; p < n; p++)
        src[p] = p == me ? c.mine.data() + bytes * (size_t)me : c.parts[p].data();
      reduce(src, r, c.count, c.type, c.op);
      break;
    case Call::BROADCAST:
      memcpy(r, me == c.root ? c.mine.data() : c.parts[c.root].data(), bytes);
      break;
    case Call::ALLGATHER:
      for (int p = 0; p < n; p++)
        memcpy(r + bytes * (size_t)p, p == me ? c.mine.data() : c.parts[p].data(), bytes);
      break;
    case Call::RECV:
      memcpy(r, c.parts[c.root].data(), bytes);
      break;
    case Call::SEND:
      break;
  }
  c.mine.clear();
  c.parts.clear();
}

ncclResult_t check_call(const Call &c) {
  const char *nm = call_name(c.kind);
  if (!c.comm) return mt_emu_note("%s: NULL communicator", nm), ncclInvalidArgument;
  if (c.comm->destroyed) return mt_emu_note("%s: destroyed communicator", nm), ncclInvalidArgument;
  if (!type_size(c.type)) return mt_emu_note("%s: datatype %d", nm, (int)c.type), ncclInvalidArgument;
  if (c.op < ncclSum || c.op > ncclAvg) return mt_emu_note("%s: reduction op %d", nm, (int)c.op), ncclInvalidArgument;
  if (c.root < 0 || c.root >= c.comm->nranks)
    return mt_emu_note("%s: %s %d of a %d-rank communicator", nm,
                       c.kind == Call::SEND || c.kind == Call::RECV ? "peer" : "root", c.root,
                       c.comm->nranks),
           ncclInvalidArgument;
  if (c.count && ((c.kind != Call::RECV && !c.send) || (c.kind != Call::SEND && !c.recv)))
    return mt_emu_note("%s: NULL buffer", nm), ncclInvalidArgument;
  return ncclSuccess;
}

/* ---- one stream op ---- */
struct Op {
  std::vector<Call *> calls;
  std::string name;
};

static int op_poll(void *p) {
  Op *o = (Op *)p;
  for (Call *c : o->calls) {
    if (c->comm->aborted)
      mt_emu_fault("%s: the communicator was aborted (ncclCommAbort) while it was pending",
                   o->name.c_str());
    int done = 0;
    if (!c->reqs.empty()) PMPI_Testall((int)c->reqs.size(), c->reqs.data(), &done, MPI_STATUSES_IGNORE);
    else done = 1;
    if (!done) return 0;
  }
  for (Call *c : o->calls) finish(*c);
  return 1;
}

static int op_start(void *p) {
  Op *o = (Op *)p;
  for (Call *c : o->calls) post(*c);
  return op_poll(p);
}

static void op_release(void *p) {
  Op *o = (Op *)p;
  for (Call *c : o->calls) {
    c->comm->pending--;
    delete c;
  }
  delete o;
}

static std::string describe(const Call &c) {
  char b[200];
  const size_t bytes = c.count * type_size(c.type);
  switch (c.kind) {
    case Call::SEND: snprintf(b, sizeof b, "ncclSend(%zu bytes to rank %d)", bytes, c.root); break;
    case Call::RECV: snprintf(b, sizeof b, "ncclRecv(%zu bytes from rank %d)", bytes, c.root); break;
    case Call::BROADCAST:
    case Call::REDUCE: snprintf(b, sizeof b, "%s(%zu bytes, root %d)", call_name(c.kind), bytes, c.root); break;
    default: snprintf(b, sizeof b, "%s(%zu bytes)", call_name(c.kind), bytes); break;
  }
  char w[120];
  snprintf(w, sizeof w, " on rank %d of a %d-rank communicator (MPI tag %d)", c.comm->rank,
           c.comm->nranks, c.comm->tag);
  return std::string(b) + w;
}

void enqueue(std::vector<Call *> calls, bool grouped) {
  if (calls.empty()) return;
  Op *o = new Op();
  o->calls = calls;
  std::vector<mt_emu_range> rg;
  const int n = calls[0]->comm->nranks;
  for (Call *c : calls) {
    c->comm->pending++;
    const size_t bytes = c->count * type_size(c->type);
    const int me = c->comm->rank;
    switch (c->kind) {
      case Call::ALLREDUCE: rg.push_back({c->send, bytes, 0}); rg.push_back({c->recv, bytes, 1}); break;
      case Call::ALLGATHER: rg.push_back({c->send, bytes, 0}); rg.push_back({c->recv, bytes * (size_t)c->comm->nranks, 1}); break;
      case Call::REDUCESCATTER: rg.push_back({c->send, bytes * (size_t)c->comm->nranks, 0}); rg.push_back({c->recv, bytes, 1}); break;
      case Call::BROADCAST:
        if (me == c->root) rg.push_back({c->send, bytes, 0});
        rg.push_back({c->recv, bytes, 1});
        break;
      case Call::REDUCE:
        rg.push_back({c->send, bytes, 0});
        if (me == c->root) rg.push_back({c->recv, bytes, 1});
        break;
      case Call::SEND: rg.push_back({c->send, bytes, 0}); break;
      case Call::RECV: rg.push_back({c->recv, bytes, 1}); break;
    }
  }
  (void)n;
  if (grouped) {
    o->name = "NCCL group {";
    for (size_t i = 0; i < calls.size() && i < 4; i++)
      o->name += (i ? ", " : "") + describe(*calls[i]);
    if (calls.size() > 4) o->name += ", ... (" + std::to_string(calls.size()) + " calls)";
    o->name += "}";
  } else {
    o->name = describe(*calls[0]);
    if (calls[0]->kind == Call::SEND || calls[0]->kind == Call::RECV)
      o->name += ", outside ncclGroupStart/ncclGroupEnd (it waits for the peer's matching call "
                 "to run)";
  }
  mt_emu_enqueue_ext(calls[0]->stream, o->name.c_str(), rg.data(), (int)rg.size(), op_start,
                     op_poll, op_release, o, 1);
}

} /* namespace nccl_emu */
