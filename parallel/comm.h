/* parallel/comm.h — the group API: process runtime, group handles and
 * collectives, with per-group per-op counters.
 *
 * Three engines behind one interface: MPI (host buffers; the CPU backend and
 * bootstrap), NCCL (device buffers; the CUDA backend) and STAGED (device
 * buffers copied to host staging buffers, the MPI engine's calls on them,
 * results copied back: parallel.distributed_backend "mpi" on cuda, several
 * ranks per GPU, no NCCL). model/ and trainer/ call only these functions;
 * they never see MPI or NCCL. docs/communication.md, "Engines".
 *
 * Counters (nccl-tests' definitions, docs/communication.md): for a call on a
 * group of n ranks moving `count` elements of size S (count = the per-rank
 * buffer for all-reduce/broadcast, the TOTAL gathered/scattered buffer for
 * all-gather/reduce-scatter, the total send buffer for all-to-all):
 *   bytes     = count * S
 *   bus_bytes = bytes * 2(n-1)/n (all-reduce), bytes * (n-1)/n (all-gather,
 *               reduce-scatter, all-to-all), bytes (broadcast, send/recv).
 * Groups of size 1 are valid: collectives become copies and count nothing.
 * On an NCCL or STAGED group, calls on host buffers (scalars such as loss
 * sums and norms) run through MPI on the same ranks.
 */
#ifndef MT_PARALLEL_COMM_H
#define MT_PARALLEL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "../core/dtype.h"

typedef enum { MT_OP_SUM = 0, MT_OP_MAX = 1 } mt_redop;

typedef enum {
  MT_COLL_ALLREDUCE = 0,
  MT_COLL_ALLGATHER,
  MT_COLL_REDUCE_SCATTER,
  MT_COLL_ALLTOALL,
  MT_COLL_ALLTOALLV,
  MT_COLL_BROADCAST,
  MT_COLL_SENDRECV,
  MT_COLL_BARRIER,
  MT_COLL_N
} mt_coll_kind;

typedef struct {
  int64_t calls;
  int64_t elements;
  int64_t bytes;
  int64_t bus_bytes;
} mt_coll_counter;

/* MPI: host buffers, MPI calls. NCCL: device buffers, NCCL calls on the
 * backend's stream. STAGED: device buffers staged through host buffers
 * (pinned with CUDA) around the MPI engine's calls — bitwise the MPI
 * engine's results, 2 extra copies per call. */
typedef enum { MT_ENGINE_MPI = 0, MT_ENGINE_NCCL = 1, MT_ENGINE_STAGED = 2 } mt_comm_engine;
/* "mpi", "nccl", "staged". */
const char *mt_comm_engine_name(mt_comm_engine e);

typedef struct mt_dist mt_dist;
typedef struct mt_backend mt_backend;
typedef struct mt_group mt_group;

/* Process runtime. Initialises MPI (works under mpirun, srun --mpi=pmix, or as
 * a plain process of world size 1), records rank/size/local rank, sets the log
 * rank and installs an abort hook so a fatal error on one rank ends the job. */
mt_dist *mt_dist_init(int *argc, char ***argv);
void mt_dist_finalize(mt_dist *d);
int mt_dist_rank(const mt_dist *d);
int mt_dist_size(const mt_dist *d);
int mt_dist_local_rank(const mt_dist *d);
/* Hang deadline (parallel.distributed_timeout_minutes; 0 = none, the
 * default until called): from now on, a collective or point-to-point wait
 * of any group that has not completed after `minutes` makes this rank print
 * one report — the group (kind and world ranks), the operation, its bytes,
 * the iteration and micro-batch, and which ranks of the group have not
 * reached it, read from their shared-memory records without their
 * cooperation — and end the job (ncclCommAbort on NCCL groups, then
 * MPI_Abort). Local; starts one watchdog thread per process on the first
 * call with minutes > 0. docs/communication.md, "Hang diagnosis". */
void mt_dist_set_timeout(mt_dist *d, double minutes);
/* The trainer's position, printed in hang reports: the iteration (1-based)
 * and micro-batch (0-based; -1 = outside the micro-batch loop). Local; a
 * few stores. */
void mt_dist_set_phase(mt_dist *d, int64_t iteration, int micro_batch);
/* The micro-batch only (pipeline schedules, which see groups only). */
void mt_group_set_micro_batch(mt_group *g, int micro_batch);
/* The compute backend whose memory the groups' buffers live in: the STAGED
 * and NCCL engines use be->stream (copies and NCCL calls are ordered on it),
 * be->is_device_ptr (a buffer it calls host memory goes straight to MPI)
 * and be's memcpy_d2h/memcpy_h2d ops (staging copies). Local; call right
 * after creating the backend and before creating groups of those engines
 * (their creation is fatal without it). be must outlive the groups; NULL
 * clears it. */
void mt_dist_set_backend(mt_dist *d, mt_backend *be);
/* The engine for the groups of a run on backend `be` with
 * parallel.distributed_backend `distributed_backend` ("nccl" | "mpi"): a
 * host-memory backend (the cpu backend: be->stream NULL, is_device_ptr 0)
 * → MPI; the cpu backend under the test switch
 * MEGATRAIN_TEST_DEVICE_BUFFERS=1 (is_device_ptr 1 for every pointer) →
 * STAGED; a device backend (be->stream set) → NCCL for "nccl", STAGED for
 * "mpi". NULL be → MPI. Local. */
mt_comm_engine mt_comm_engine_choose(const mt_backend *be, const char *distributed_backend);
/* How the engine is described in start-up lines: "mpi", "nccl", "mpi (staged
 * through host)". */
const char *mt_comm_engine_describe(mt_comm_engine e);
/* Group of all ranks (owned by d; MPI engine, host buffers). */
mt_group *mt_dist_world(mt_dist *d);
/* Check that `value` (e.g. a config hash) is equal on every rank. Collective
 * over the world. Returns 0 when all agree; otherwise -1 on every rank, with
 * err[errlen] = "<what> differs across ranks: rank 0 has 0x..; ranks 2,3 have
 * other values (rank 2: 0x..)". */
int mt_dist_check_agree(mt_dist *d, uint64_t value, const char *what, char *err, size_t errlen);

/* Create the group of `ranks` (world ranks, n entries, increasing) that
 * contains the calling rank. Collective over the world: every rank calls it
 * with its own group's list, in the same order of group kinds. `name` labels
 * counters ("tp", "dp", ...). The engine is MPI for host-memory backends and
 * NCCL or STAGED for device memory (STAGED and NCCL need
 * mt_dist_set_backend first). */
mt_group *mt_group_create(mt_dist *d, const int *ranks, int n, const char *name,
                          mt_comm_engine engine);
/* A rank that belongs to no group of a kind (e.g. a middle pipeline stage for
 * the embedding group) passes ranks = NULL, n = 0: it takes part in the
 * collective creation and gets NULL. The calling rank must be in `ranks`,
 * and every rank must pass the same list as the other members of its group
 * (checked: mt_fatal otherwise). MT_ENGINE_NCCL without a CUDA device, or in
 * a build without NCCL, is fatal with the CUDA error name. The NCCL engine
 * binds the process to GPU (local rank % device count) at its first group,
 * through cuda/'s one selection point (mt_cuda_select_device). */
void mt_group_destroy(mt_group *g); /* NULL is a no-op */
/* The NCCL engine enqueues a group's calls on the backend's stream
 * (mt_dist_set_backend; without a backend: the legacy default stream). It
 * creates a group's communicator at its first NCCL call (collective as that
 * call is), and never for a group of one rank, whose calls are copies on the
 * stream (test hook: env MEGATRAIN_NCCL_SIZE1=1 gives such a group a real
 * 1-rank communicator). */

int mt_group_size(const mt_group *g);
int mt_group_rank(const mt_group *g);

/* Collectives below are called by every member of the group with the same
 * count/dtype/op/root. Buffers are host memory (MPI engine) or device memory
 * (NCCL engine: calls are asynchronous on the group's stream; STAGED engine:
 * calls return when the result is in the device buffer, queued on the
 * backend's stream). Counts that
 * MPI cannot express (> INT_MAX per call for all but all-reduce/broadcast,
 * which are chunked) are fatal. bf16 reductions round each partial sum to
 * bf16 on the MPI engine.
 *
 * In-place all-reduce of buf[count]. */
void mt_allreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op);
/* recv[n * count_per_rank] = concat over ranks of send[count_per_rank]
 * (send may equal recv + rank * count_per_rank: in place). */
void mt_allgather(mt_group *g, const void *send, void *recv, int64_t count_per_rank, mt_dtype t);
/* recv[count_per_rank] = reduction over ranks of send[rank * count_per_rank ...]
 * (recv may lie inside send, e.g. recv = send + rank * count_per_rank). */
void mt_reduce_scatter(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                       mt_dtype t, mt_redop op);
/* Variable all-gather (MPI_Allgatherv; Megatron's gather along the first
 * dimension with output_split_sizes): recv[recv_displs[i] ...
 * + recv_counts[i]) = rank i's send[recv_counts[i]]; send_count must equal
 * recv_counts[rank] (checked). send must not overlap recv. NCCL engine: one
 * ncclBroadcast per rank inside a group call.
 * Counters (MT_COLL_ALLGATHER): bytes = Σ recv_counts · S (the gathered
 * buffer), bus_bytes = (Σ recv_counts − recv_counts[rank]) · S (the bytes
 * this rank receives: equal to the fixed-size formula bytes·(n-1)/n when all
 * counts are equal). */
void mt_allgatherv(mt_group *g, const void *send, int64_t send_count, void *recv,
                   const int64_t *recv_counts, const int64_t *recv_displs, mt_dtype t);
/* Variable reduce-scatter (MPI_Reduce_scatter; Megatron's reduce-scatter
 * along the first dimension with input_split_sizes): send holds n
 * consecutive blocks, block i of counts[i] elements (displacement Σ_{j<i}
 * counts[j]); recv[counts[rank]] = reduction over ranks of their block
 * `rank` (deterministic ring order on the MPI engine). recv must not overlap
 * send. NCCL engine: one ncclReduce per rank inside a group call.
 * Counters (MT_COLL_REDUCE_SCATTER): bytes = Σ counts · S, bus_bytes =
 * (Σ counts − counts[rank]) · S. */
void mt_reduce_scatterv(mt_group *g, const void *send, const int64_t *counts, void *recv,
                        mt_dtype t, mt_redop op);
/* Equal splits: rank i's send block j goes to rank j's recv block i.
 * send and recv must not overlap (alltoall and alltoallv). */
void mt_alltoall(mt_group *g, const void *send, void *recv, int64_t count_per_rank, mt_dtype t);
/* Variable splits (element counts and displacements per peer, in elements).
 * Counters: bytes = sum(send_counts) * S, bus_bytes = bytes * (n-1)/n. */
void mt_alltoallv(mt_group *g, const void *send, const int64_t *send_counts,
                  const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                  const int64_t *recv_displs, mt_dtype t);
void mt_broadcast(mt_group *g, void *buf, int64_t count, mt_dtype t, int root);
void mt_barrier(mt_group *g);

/* Non-blocking point-to-point with a tag (pipeline schedules): post a send or
 * receive of buf[count] to/from group rank `peer`; messages match by (peer,
 * tag) and are non-overtaking per (peer, tag). The buffer must stay untouched
 * until mt_wait returns (or mt_test returns 1). Sends are counted under
 * MT_COLL_SENDRECV when posted. STAGED engine: a send copies buf to a host
 * copy the request owns at post; a receive lands in its host copy and is
 * copied into buf at mt_wait / the mt_test that returns 1. NCCL engine
 * (device buffers; docs/communication.md "The NCCL engine"): only between
 * ring neighbours (peer = rank +- 1 mod size; fatal otherwise), after
 * mt_group_enable_p2p; tags are not compared: a message travels on the
 * channel (sender, receiver, tag & 1), a FIFO, so the receiver must post
 * the receives of each channel in the order the sender posts the sends
 * (the pipeline's and the CP ring's do: comm_nccl_p2p.c says why). Posting
 * is stream-ordered after the work queued on the group's stream; mt_wait
 * makes that stream wait for the message (no host wait); mt_test asks
 * whether it is done. */
typedef struct mt_request mt_request;
mt_request *mt_isend(mt_group *g, int peer, int tag, const void *buf, int64_t count, mt_dtype t);
mt_request *mt_irecv(mt_group *g, int peer, int tag, void *buf, int64_t count, mt_dtype t);
/* Prepare g for mt_isend/mt_irecv on device buffers. Collective over g
 * (every member calls it, after creating the group and before its first
 * tagged message). NCCL engine: creates the channels to both ring
 * neighbours — per neighbour and direction two 2-rank communicators (tag
 * parity 0 and 1), each with its own CUDA stream — inside one
 * ncclGroupStart/End. No-op for the MPI and STAGED engines, for groups of
 * one rank and for NULL. NCCL errors are fatal. */
void mt_group_enable_p2p(mt_group *g);
/* Complete and free the request. */
void mt_wait(mt_request *r);
/* 1 (and the request is freed) when complete, else 0. */
int mt_test(mt_request *r);

/* ---- Non-blocking collectives (docs/communication.md, "Overlap") ----
 *
 * mt_iallreduce .. mt_ialltoallv start the collective of the same name and
 * return a handle: the mt_request of the tagged p2p above, completed and
 * freed by mt_wait (or by the mt_test that returns 1); every handle must be
 * completed, by its starting thread. Arguments, checks, byte counters
 * (counted at start) and results are those of the blocking call, bit for
 * bit: on the MPI engine the group's communication thread runs the very
 * same blocking MPI calls (MPI_Allreduce, not MPI_Iallreduce, whose
 * algorithm differs). Buffers stay untouched (send) and unread (recv) by
 * the caller until the handle completes; count arrays are copied at start.
 *
 * Ordering rules (every group, every engine):
 *  1. The started collectives of a group execute one at a time, in start
 *     order (a FIFO per group). So, as for blocking collectives in MPI,
 *     every member must start a group's collectives in the same order.
 *  2. A blocking collective (or barrier) on a group first waits for the
 *     group's started collectives, then runs on the caller: it executes
 *     after them, in program order.
 *  3. Different groups are independent: their started collectives may run
 *     at the same time, in any interleaving.
 *  4. Handles may be completed in any order; when one completes, every
 *     collective started earlier on its group has completed too (rule 1).
 *  5. Tagged p2p (mt_isend/mt_irecv) is not ordered against collectives.
 *
 * Engines. MPI groups: one communication thread per group, created at the
 * group's first started collective, when MPI provides MPI_THREAD_MULTIPLE
 * (mt_dist_init asks for it); the watchdog sees each collective from the
 * moment the thread begins it. NCCL groups: one communication stream per
 * group, ordered against the compute stream by events — start: the
 * communication stream waits for an event recorded on the compute stream,
 * then the NCCL call; mt_wait: the compute stream waits for an event
 * recorded after it (no host wait; the buffers are the compute stream's
 * again in stream order); a blocking call of the group first makes the
 * compute stream wait for the group's last started one. STAGED groups: the
 * device operands copied to host at start (after the compute stream's
 * queued work), the MPI engine's call on the group's communication thread,
 * the results copied back on the compute stream at mt_wait (queued, no
 * host wait). docs/communication.md, "The NCCL engine" and "The staging
 * engine". Host buffers of NCCL and STAGED groups go to the communication
 * thread like an MPI group's. Otherwise — MPI without MPI_THREAD_MULTIPLE,
 * env MEGATRAIN_COMM_THREAD=0 (MPI and STAGED groups), and groups of one
 * rank — the blocking call runs at start and the handle returned is
 * complete. */
mt_request *mt_iallreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op);
mt_request *mt_iallgather(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                          mt_dtype t);
mt_request *mt_ireduce_scatter(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                               mt_dtype t, mt_redop op);
mt_request *mt_ialltoall(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                         mt_dtype t);
mt_request *mt_ialltoallv(mt_group *g, const void *send, const int64_t *send_counts,
                          const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                          const int64_t *recv_displs, mt_dtype t);
/* 1 when started collectives of g really run in the background (MPI and
 * STAGED groups with their communication thread, NCCL groups of >= 2
 * ranks on their communication stream), 0 when they complete at start. */
int mt_group_async(const mt_group *g);

/* ---- Simulated link (docs/communication.md, "Simulated link") ----
 * Env MEGATRAIN_SIM_LINK, read by mt_dist_init:
 *   "<GB/s>,<latency us>"                    every group kind;
 *   "<kind>=<GB/s>,<latency us>;..."         per group kind (the group's
 *                                            name: dp, tp, pp, cp, ep, edp,
 *                                            ...); a bare entry among them
 *                                            is the default for the others.
 * e.g. "dp=2,50;tp=100,5". Each collective of a group of >= 2 ranks then
 * takes latency + bus_bytes / bandwidth more wall time (bus_bytes as the
 * counters; barriers: the latency), slept (no CPU) on the path that carries
 * it: the communication thread for a started collective, the caller for a
 * blocking one. A tagged receive completes no earlier than latency +
 * bytes / bandwidth after it was posted (mt_wait sleeps, mt_test says 0
 * until then). Kinds not named, and no variable: no delay. A malformed
 * value is fatal at start-up, quoting it. */
/* After a run's groups are created: an entry whose kind names none of the
 * groups created so far (a typo such as "dq=2,50") is fatal, quoting the
 * value and listing the groups' names. Local (every rank sees the same
 * names). */
void mt_dist_check_sim_link(const mt_dist *d);

/* ---- Exposed communication ----
 * Per group kind, the wall time the calling (compute) thread spent blocked
 * in communication — blocking collectives (from entry to return, including
 * the wait for the group's started collectives and the simulated link) and
 * mt_wait on any handle, collective or p2p — and the wall time
 * communication took wherever it ran (collectives from begin to end of
 * execution, on the communication thread or the caller; p2p receives from
 * post to completion). Groups of one rank count nothing. */
typedef struct {
  double exposed_s; /* the compute thread blocked */
  double comm_s;    /* communication executing, wherever */
  int64_t ops;      /* collectives and p2p receives counted in comm_s */
} mt_comm_time;
/* kind: a group name ("dp"), or NULL for the sum over all kinds (a kind no
 * group has: zeros). Since the last mt_dist_reset_comm_time (or start).
 * Local; reads relaxed atomics, callable from the compute thread at any
 * time. */
mt_comm_time mt_dist_comm_time(const mt_dist *d, const char *kind);
void mt_dist_reset_comm_time(mt_dist *d);

/* Counters of one group. bus_bytes is rounded down per call (integer
 * arithmetic: bytes * 2(n-1) / n). A barrier counts calls only. */
const mt_coll_counter *mt_group_counters(const mt_group *g); /* [MT_COLL_N] */
void mt_group_reset_counters(mt_group *g);

#endif
