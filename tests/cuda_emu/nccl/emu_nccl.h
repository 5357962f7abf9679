/* tests/cuda_emu/nccl/emu_nccl.h — internals of the NCCL stand-in
 * (libnccl.so.2 of the emulated build): communicators over MPI
 * (emu_nccl.cpp) and the collectives and send/recv as ops on CUDA streams
 * (emu_nccl_ops.cpp). All traffic is MPI point-to-point on MPI_COMM_WORLD
 * with one tag per communicator (never a tag megatrain uses), synchronous
 * sends (MPI_Issend: complete once the peer's receive is posted, as an
 * NCCL transfer needs both sides running), through host bounce buffers. */
#ifndef MT_EMU_NCCL_INTERNAL_H
#define MT_EMU_NCCL_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include <atomic>
#include <string>
#include <vector>

#include "cuda_emu.h"
#include "nccl.h"

struct ncclComm {
  int nranks, rank;
  int tag;                 /* MPI tag of everything on this communicator */
  std::vector<int> world;  /* world rank of each comm rank */
  int device;
  std::atomic<bool> aborted{false};
  bool destroyed = false;
  int pending = 0;         /* queued ops that still use it */
};

namespace nccl_emu {

/* One call (collective or send/recv) inside an op. */
struct Call {
  enum Kind { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, SEND, RECV } kind;
  const void *send;
  void *recv;
  size_t count; /* elements: per rank for ALLGATHER (send) and REDUCESCATTER (recv) */
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;     /* root, or the peer of SEND/RECV */
  ncclComm_t comm;
  cudaStream_t stream;
  /* runtime state */
  std::vector<char> mine;                /* this rank's contribution (host copy) */
  std::vector<std::vector<char>> parts;  /* received blocks, by comm rank */
  std::vector<MPI_Request> reqs;
};

size_t type_size(ncclDataType_t t);
const char *call_name(Call::Kind k);
/* Post the MPI traffic of c (device memory readable); finish once every
 * request completed (results written to device memory). */
void post(Call &c);
void finish(Call &c);
/* Queue the calls of one stream as one op (a group's calls together). */
void enqueue(std::vector<Call *> calls, bool grouped);
ncclResult_t check_call(const Call &c);

} /* namespace nccl_emu */

#endif
