/* parallel/comm_impl.h — private to parallel/comm*.c and dist.c: the layout
 * of mt_dist / mt_group and the engine table each engine implements. */
#ifndef MT_PARALLEL_COMM_IMPL_H
#define MT_PARALLEL_COMM_IMPL_H

#include <mpi.h>
#include <stdatomic.h>

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

#define MT_COMM_KINDS 32 /* group kinds (names) with their own time accounts */

/* One MEGATRAIN_SIM_LINK entry (comm_simlink.c). */
typedef struct {
  char kind[32];        /* "" = the default entry */
  int used;             /* a group of this name was created (mt_sim_link_mark) */
  double bytes_per_ns;  /* GB/s = bytes per ns */
  double latency_ns;
} mt_sim_link;

/* Time accounts of one group kind (comm.h mt_comm_time), in ns. */
typedef struct {
  char name[32];
  _Atomic int64_t exposed_ns, comm_ns, ops;
} mt_comm_account;

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
  int thread_multiple;  /* MPI provides MPI_THREAD_MULTIPLE and
                         * MEGATRAIN_COMM_THREAD is not 0: communication threads */
  mt_sim_link sim[MT_COMM_KINDS];
  int n_sim;
  char seen[MT_COMM_KINDS][32]; /* group names created so far (mt_sim_link_mark) */
  int n_seen;
  mt_comm_account acct[MT_COMM_KINDS];
  int n_acct;           /* written only by group creation (collective) */
};

/* Parse MEGATRAIN_SIM_LINK (comm.h) into d->sim; fatal on a malformed
 * value. No variable: n_sim = 0. */
void mt_sim_link_parse(mt_dist *d, const char *value);
/* Record that a group named `kind` was created (member or not): its
 * MEGATRAIN_SIM_LINK entry, if any, is used. Collective order, local. */
void mt_sim_link_mark(mt_dist *d, const char *kind);
/* The link of a group named `kind`: 1 and *bpns, *lat_ns set when one
 * applies, else 0. */
int mt_sim_link_of(const mt_dist *d, const char *kind, double *bytes_per_ns, double *lat_ns);

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
  /* Started collectives (comm.h mt_iallreduce ..) on device buffers of a
   * group of >= 2 ranks; all three NULL: the group's communication thread
   * runs the blocking entry (the MPI engine). start(g, r): issue r->op's
   * collective (comm_start.c checked and counted it) and keep what finish
   * needs in r->engine_state; the engine either sets r->op->done (the host
   * has nothing left to wait for: NCCL) or queues r->op on the
   * communication thread itself (mt_comm_queue_push: STAGED). finish(r,
   * block), called once r->op->done: complete the device side (block = 1:
   * always, returns 1; block = 0: 1 when complete) and release
   * r->engine_state. drain(g), after the communication thread's queue is
   * empty: rule 2 of comm.h for the device side — order g's next blocking
   * call after every collective started on g. */
  void (*start)(mt_group *g, mt_request *r);
  int (*finish)(mt_request *r, int block);
  void (*drain)(mt_group *g);
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
  struct mt_coll_op *op;         /* a started collective (comm_async.c), or NULL */
  int64_t post_ns;               /* CLOCK_MONOTONIC at post */
  int64_t ready_ns;              /* simulated link: a receive completes no earlier */
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
  int acct;             /* index of the group's kind in d->acct */
  int sim;              /* 1: simulated link of sim_bpns, sim_lat_ns */
  double sim_bpns, sim_lat_ns;
  struct mt_comm_queue *q; /* communication thread (comm_async.c), NULL before */
};

/* ---- timing, simulated link and started collectives (comm_async.c) ---- */
int64_t mt_comm_now_ns(void); /* CLOCK_MONOTONIC */
/* The simulated link's extra time for `bus_bytes` on g (0 without one). */
int64_t mt_sim_delay_ns(const mt_group *g, int64_t bus_bytes);
/* Sleep (nanosleep, no CPU) until CLOCK_MONOTONIC reaches t_ns. */
void mt_sleep_until_ns(int64_t t_ns);
/* Add to g's kind account: exposed (caller blocked) and comm (executing). */
void mt_comm_account_add(mt_group *g, int64_t exposed_ns, int64_t comm_ns, int64_t ops);
/* Wait until every collective started on g has completed (rule 2 of
 * comm.h); no-op without a communication thread. */
void mt_comm_drain(mt_group *g);
/* Stop and join g's communication thread (group destroy). */
void mt_comm_queue_destroy(mt_group *g);
/* One started collective (comm_start.c fills it, comm_async.c runs it). */
typedef struct mt_coll_op {
  struct mt_coll_op *next;
  mt_coll_kind kind;
  void *buf;          /* allreduce: in place; others: recv */
  const void *send;
  int64_t count;      /* allreduce: count; allgather/reduce-scatter/alltoall: per rank */
  mt_dtype t;
  mt_redop op;
  int64_t *v;         /* alltoallv: sc, sd, rc, rd (4 * size), owned */
  const mt_comm_engine_ops *eng; /* the entries that run it: NULL = g->ops;
                      * the MPI engine's for host buffers of an NCCL or
                      * STAGED group (comm_start.c) and for STAGED's host
                      * copies (its start entry) */
  int64_t wd_bytes;   /* the watchdog's bytes */
  int64_t bus_bytes;  /* the simulated link's */
  _Atomic int done;
} mt_coll_op;
/* A started collective of kind k (fields as mt_coll_op's), not queued yet. */
mt_coll_op *mt_comm_new_op(mt_coll_kind k, const void *send, void *buf, int64_t count,
                           mt_dtype t, mt_redop rop, int64_t wd_bytes);
/* Queue op on g's communication thread (started at g's first) and return
 * its handle. Counters are the caller's (at start, on the compute thread). */
mt_request *mt_comm_enqueue(mt_group *g, mt_coll_op *op);
/* Queue op on g's communication thread (started at g's first), for an
 * engine's start entry that prepared it (STAGED). */
void mt_comm_queue_push(mt_group *g, mt_coll_op *op);
/* Issue op through engine e's blocking entry on the calling thread: no
 * watchdog mark, timing or simulated link (run_op and the NCCL engine's
 * start, which enqueues it on its communication stream). */
void mt_comm_op_issue(mt_group *g, const mt_comm_engine_ops *e, mt_coll_op *op);
/* The handle of a collective that already ran (the blocking fallback). */
mt_request *mt_comm_completed(mt_group *g);
/* Block until the host part of a started collective is done (r->op->done;
 * the caller's blocked time counts as exposed); r stays valid. */
void mt_comm_op_wait_done(mt_request *r);
/* mt_wait / mt_test of a started collective (r->op != NULL). */
void mt_comm_op_wait(mt_request *r);
int mt_comm_op_test(mt_request *r);

/* Argument checks and counters shared by comm.c and comm_async.c (fatal on
 * bad arguments; record returns the call's bus bytes, 0 on a group of 1). */
void mt_comm_check_count(const mt_group *g, int64_t count, const char *what);
void mt_comm_check_disjoint(const mt_group *g, const void *a, size_t na, const void *b, size_t nb,
                            const char *what);
int64_t mt_comm_record(mt_group *g, mt_coll_kind k, int64_t elems, mt_dtype t);
/* Checks of an all-to-allv; returns the total send count. */
int64_t mt_comm_check_alltoallv(const mt_group *g, const void *send, const int64_t *sc,
                                const int64_t *sd, const void *recv, const int64_t *rc,
                                const int64_t *rd, mt_dtype t);

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
