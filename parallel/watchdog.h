/* parallel/watchdog.h — private to parallel/: the hang watchdog behind
 * parallel.distributed_timeout_minutes (docs/communication.md, "Hang
 * diagnosis").
 *
 * Each rank owns one record in an MPI shared-memory window on its node
 * (MPI_Win_allocate_shared over the node communicator): per group slot an
 * operation counter and the operation in flight (kind, bytes, start time,
 * iteration, micro-batch). The owner writes it with relaxed atomic stores
 * (a few per operation); the other ranks of the node read it directly, with
 * no MPI call and no cooperation of the owner, so a frozen rank can still be
 * named. One thread per process wakes every second (or timeout / 5) and,
 * when this rank's current operation has been pending longer than the
 * deadline, prints one report and ends the job (ncclCommAbort on NCCL
 * groups, then MPI_Abort on the world).
 *
 * Slots are numbered by group creation order, which is the same on every
 * rank (mt_group_create is collective over the world). */
#ifndef MT_PARALLEL_WATCHDOG_H
#define MT_PARALLEL_WATCHDOG_H

#include <stdint.h>

#include "comm.h"

/* Operation kinds beyond mt_coll_kind recorded by the watchdog. */
#define MT_WD_WAIT_SEND (MT_COLL_N + 0) /* mt_wait on an isend */
#define MT_WD_WAIT_RECV (MT_COLL_N + 1) /* mt_wait on an irecv */
#define MT_WD_AGREE (MT_COLL_N + 2)     /* mt_dist_check_agree */
#define MT_WD_CREATE (MT_COLL_N + 3)    /* mt_group_create (on the world's slot) */

typedef struct mt_watchdog mt_watchdog;

/* Collective over the world (allocates the node's shared window). Never
 * fatal when the window cannot be made: peers are then "unknown". */
mt_watchdog *mt_wd_create(mt_dist *d);
/* Stops the thread and frees the window (collective over the world). */
void mt_wd_destroy(mt_watchdog *w);
/* Register a group created by the calling rank (NULL = not a member: the
 * slot number still advances, identically on every rank). Returns the
 * slot, or -1 past the slot table (the group's operations are then not
 * watched). */
int mt_wd_register(mt_watchdog *w, mt_group *g);
void mt_wd_unregister(mt_watchdog *w, int slot);
/* Mark an operation of `kind` moving `bytes` on the group of `slot` as
 * started / completed. peer = the group rank of a point-to-point wait, -1
 * otherwise. No-op for slot < 0. */
void mt_wd_begin(mt_watchdog *w, int slot, int kind, int64_t bytes, int peer);
void mt_wd_end(mt_watchdog *w, int slot);
void mt_wd_set_timeout(mt_watchdog *w, double minutes);
void mt_wd_set_phase(mt_watchdog *w, int64_t iteration, int micro_batch);
void mt_wd_set_micro_batch(mt_watchdog *w, int micro_batch);

#endif
