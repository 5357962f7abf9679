/* parallel/comm_nccl_impl.h — private to comm_nccl.c and comm_nccl_p2p.c
 * (built with MT_HAVE_NCCL only): the NCCL engine's per-group state and the
 * pieces both files share. docs/communication.md, "The NCCL engine". */
#ifndef MT_PARALLEL_COMM_NCCL_IMPL_H
#define MT_PARALLEL_COMM_NCCL_IMPL_H

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm_impl.h"
#include "cuda/cuda_check.h"
#include "nccl_api.h" /* MT_NCCL_CHECK */

/* Tagged p2p channels of one group (comm_nccl_p2p.c). */
typedef struct mt_nccl_p2p mt_nccl_p2p;

/* Started collectives of one group (comm_nccl_async.c). */
typedef struct mt_nccl_async mt_nccl_async;

/* g->engine_state of an NCCL group. */
typedef struct {
  const mt_nccl_api *api; /* every NCCL call of g goes through it (g->d->nccl);
                           * NULL when !want_comm (g never calls NCCL) */
  ncclComm_t comm;  /* the group's communicator: NULL until its first NCCL call */
  int want_comm;    /* size > 1, or env MEGATRAIN_NCCL_SIZE1=1 (test hook);
                     * 0: a size-1 group, whose calls are device copies */
  mt_nccl_p2p *p2p; /* channels, NULL until mt_group_enable_p2p */
  mt_nccl_async *as; /* started collectives (comm_nccl_async.c), NULL before */
  cudaStream_t issue; /* the stream the collective entries issue on: NULL =
                       * the compute stream (mt_nccl_stream); the
                       * communication stream only inside mt_nccl_start */
} mt_nccl_state;

/* The stream every NCCL call and copy of g is ordered on: the backend's
 * (g->d->be->stream, mt_dist_set_backend), else the legacy default stream
 * (NULL). */
cudaStream_t mt_nccl_stream(const mt_group *g);
ncclDataType_t mt_nccl_dtype(mt_dtype t);

/* Channels (comm_nccl_p2p.c). create: collective over g (size > 1). destroy
 * and abort: local; no-ops when there are none. */
void mt_nccl_p2p_create(mt_group *g);
void mt_nccl_p2p_destroy(mt_group *g);
void mt_nccl_p2p_abort(mt_group *g);
/* The engine table's started-collective entries (comm_impl.h
 * start/finish/drain; comm_nccl_async.c) and their teardown (group
 * destroy: waits for the communication stream; no-op when none). */
void mt_nccl_start(mt_group *g, mt_request *r);
int mt_nccl_finish(mt_request *r, int block);
void mt_nccl_drain(mt_group *g);
void mt_nccl_async_destroy(mt_group *g);
/* The engine table's tagged p2p entries (comm_impl.h post/complete). */
void mt_nccl_post(mt_group *g, mt_request *r);
int mt_nccl_complete(mt_request *r, int block);

#endif
