/* parallel/comm_impl.h — private to parallel/comm*.c and dist.c: the layout
 * of mt_dist / mt_group and the engine table each engine implements. */
#ifndef MT_PARALLEL_COMM_IMPL_H
#define MT_PARALLEL_COMM_IMPL_H

#include <mpi.h>

#include "../core/util.h"
#include "comm.h"
#include "watchdog.h"

/* Wrap an MPI call: on failure, fatal with the call text and MPI's message. */
#define MT_MPI_CHECK(call)                                                     \
  do {                                                                         \
    int mt_rc_ = (call);                                                       \
    if (mt_rc_ != MPI_SUCCESS) {                                               \
      char mt_msg_[MPI_MAX_ERROR_STRING];                                      \
      int mt_len_ = 0;                                                         \
      MPI_Error_string(mt_rc_, mt_msg_, &mt_len_);                             \
      mt_fatal("%s failed: %s", #call, mt_msg_);                               \
    }                                                                          \
  } while (0)

struct mt_dist {
  int rank, size, local_rank, local_size;
  int own_mpi;          /* we called MPI_Init_thread, so we finalize */
  MPI_Op bf16_sum, bf16_max;
  int cuda_device;      /* GPU bound by the NCCL engine, -1 before */
  mt_group *world;
  mt_watchdog *wd;      /* hang watchdog (watchdog.h) */
  mt_backend *be;       /* mt_dist_set_backend; NULL = host memory only */
  struct mt_nccl_api *nccl; /* NCCL's functions (nccl_api.h), loaded by the first
                             * NCCL group; NULL before (and for MPI/staged runs) */
};

/* Unload a table of nccl_api.h and free it (NULL: no-op; every build). */
void mt_nccl_api_close(struct mt_nccl_api *a);

/* One engine: the collectives on already-validated arguments. */
typedef struct {
  void (*init)(mt_group *g);   /* after g->comm exists */
  void (*fini)(mt_group *g);
  void (*allreduce)(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op);
  void (*allgather)(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t);
  void (*reduce_scatter)(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t,
                         mt_redop op);
  void (*alltoall)(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t);
  void (*alltoallv)(mt_group *g, const void *send, const int64_t *sc, const int64_t *sd,
                    void *recv, const int64_t *rc, const int64_t *rd, mt_dtype t);
  void (*broadcast)(mt_group *g, void *buf, int64_t count, mt_dtype t, int root);
  void (*barrier)(mt_group *g);
  /* variable counts (displacements in elements; see comm.h) */
  void (*allgatherv)(mt_group *g, const void *send, int64_t sc, void *recv, const int64_t *rc,
                     const int64_t *rd, mt_dtype t);
  void (*reduce_scatterv)(mt_group *g, const void *send, const int64_t *cnt, void *recv,
                          mt_dtype t, mt_redop op);
  /* watchdog expiry, from its thread: abort the engine's communicator
   * (ncclCommAbort); NULL when MPI_Abort suffices */
  void (*abort)(mt_group *g);
  /* Tagged non-blocking point-to-point (comm.h mt_isend/mt_irecv; comm_p2p.c
   * fills r's public fields, checks them and counts sends, then calls post).
   * complete(r, block): block = 1 waits; block = 0 tests. Returns 1 when
   * the request is complete (its buffer may be reused / read in stream
   * order); the engine then releases its own part of r (comm_p2p.c frees
   * r). NULL post: the engine has no tagged p2p (fatal with a message). */
  void (*post)(mt_group *g, mt_request *r);
  int (*complete)(mt_request *r, int block);
} mt_comm_engine_ops;

/* One posted tagged message (comm.h's opaque mt_request). */
struct mt_request {
  mt_group *g;
  const mt_comm_engine_ops *eng; /* the engine that posted it */
  int peer, tag, is_send;
  void *buf;                     /* the caller's buffer */
  int64_t count;
  mt_dtype dtype;
  int64_t bytes;
  MPI_Request req;               /* MPI-based engines */
  void *host;                    /* engine-owned host copy (staging), or NULL */
  void *engine_state;            /* engine-private (NCCL: events), or NULL */
};

extern const mt_comm_engine_ops mt_comm_mpi_engine;
/* The MPI engine's tagged p2p (comm_p2p.c): MPI_Isend/MPI_Irecv on r->buf
 * with r->tag; complete = MPI_Wait / MPI_Test. Other engines may reuse
 * them on host copies. */
void mt_comm_mpi_post(mt_group *g, mt_request *r);
int mt_comm_mpi_complete(mt_request *r, int block);
extern const mt_comm_engine_ops mt_comm_nccl_engine;
/* The NCCL engine's tagged-p2p channel of a message (comm_nccl_p2p.c),
 * seen from group rank `rank` of `size`: 0..3 towards the next ring
 * neighbour (rank + 1 mod size), 4..7 towards the previous one (only when
 * size > 2; with 2 ranks next = prev uses 0..3); within each, slot
 * 2·is_send + (tag & 1). -1 when peer is not a ring neighbour or is rank.
 * Pure (no CUDA): unit-tested without a GPU. */
int mt_nccl_channel_slot(int size, int rank, int peer, int is_send, int tag);
/* Channels per rank: 0 (size < 2), 4 (size 2), 8. */
int mt_nccl_channel_count(int size);
/* The staging engine (comm_staged.c): device buffers copied to host staging
 * buffers (g->engine_state), the MPI engine's entries on them, results
 * copied back. Needs g->d->be. */
extern const mt_comm_engine_ops mt_comm_staged_engine;

struct mt_group {
  mt_dist *d;
  char name[32];
  mt_comm_engine engine;
  const mt_comm_engine_ops *ops;
  int size, rank;
  int *world_ranks;     /* [size] */
  MPI_Comm comm;        /* always present (bootstrap, barrier, MPI engine) */
  void *engine_state;   /* NCCL: communicator + stream */
  mt_coll_counter ctr[MT_COLL_N];
  void *scratch;        /* host scratch, grow-only (fresh pages are slow) */
  size_t scratch_bytes;
  int wd_slot;          /* watchdog slot, -1 = not watched */
};

/* Watchdog marks around one blocking operation of g (groups of one rank
 * never wait and are not marked). */
static inline void mt_wd_op_begin(mt_group *g, int kind, int64_t bytes, int peer) {
  if (g->size > 1 && g->d->wd) mt_wd_begin(g->d->wd, g->wd_slot, kind, bytes, peer);
}
static inline void mt_wd_op_end(mt_group *g) {
  if (g->size > 1 && g->d->wd) mt_wd_end(g->d->wd, g->wd_slot);
}

/* 1 when a call of g on buffer p must go through plain MPI instead of g's
 * engine: always 0 for MPI groups (they are MPI already); STAGED: p is not
 * device memory by g->d->be->is_device_ptr (host scalars such as loss sums
 * and norms); NCCL: by be->is_device_ptr when mt_dist_set_backend was
 * called, else mt_comm_is_host_ptr. The ONE rule, used by comm.c's
 * collectives and comm_p2p.c's tagged p2p. */
int mt_comm_buf_on_host(const mt_group *g, const void *p);

/* 1 when p is host memory (always without CUDA). Collectives of an NCCL
 * group on host buffers (loss sums, norms, flags) run through MPI on the
 * group's communicator instead. */
int mt_comm_is_host_ptr(const void *p);

/* Host scratch of at least `bytes`, owned by g (valid until the next call). */
void *mt_group_scratch(mt_group *g, size_t bytes);

/* MPI datatype of a dtype (bf16 travels as MPI_UINT16_T). */
MPI_Datatype mt_mpi_dtype(mt_dtype t);
/* MPI reduction op for (dtype, op): bf16 uses the user ops in d. */
MPI_Op mt_mpi_op(const mt_dist *d, mt_dtype t, mt_redop op);

#endif
