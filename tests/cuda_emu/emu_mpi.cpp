/* tests/cuda_emu/emu_mpi.cpp — a GPU runs its queued work while the host
 * waits in MPI; the emulation runs device work only inside runtime calls.
 * So every blocking MPI call megatrain makes is wrapped here (the MPI
 * profiling interface: these definitions come first in the link, each calls
 * PMPI_*): when device work is queued, the call becomes its non-blocking
 * form, tested while the queued device work progresses. Without that, a
 * rank blocked in (say) MPI_Allreduce of a host scalar would never run the
 * NCCL collective its peers wait for in their own device work: a deadlock
 * a GPU does not have. Collectives without a non-blocking form
 * (MPI_Comm_split, window creation, MPI_Finalize) are preceded by an
 * MPI_Ibarrier on the same communicator, waited for in the same way, so no
 * peer is still waiting for this rank's device when they start. Every rank
 * takes the same form of a collective whatever its device holds: MPI does
 * not match a blocking collective with a non-blocking one. */
#include <mpi.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "emu.h"

namespace emu {

bool mpi_ready() {
  int init = 0, fin = 0;
  PMPI_Initialized(&init);
  if (init) PMPI_Finalized(&fin);
  return init && !fin;
}

struct MpiWait {
  MPI_Request *r;
  MPI_Status *st;
  int rc;
};
static bool mpi_done(void *p) {
  MpiWait *w = (MpiWait *)p;
  int done = 0;
  w->rc = PMPI_Test(w->r, &done, w->st);
  return w->rc != MPI_SUCCESS || done;
}

/* The emulation runs on the process's main thread. Another thread (a
 * group's communication thread, parallel/comm_async.c, running MPI calls on
 * host buffers) never runs device work: its calls wait in MPI alone, in the
 * same (non-blocking) form as the main thread's. */
static bool main_thread() { return syscall(SYS_gettid) == getpid(); }

/* host_wait: device work progresses meanwhile; a wait that sees no
 * progress for MT_EMU_HANG_S seconds is reported with the queued work. */
static int wait_progress(MPI_Request *r, MPI_Status *st, const char *what) {
  if (!main_thread()) return PMPI_Wait(r, st);
  MpiWait w{r, st, MPI_SUCCESS};
  host_wait(mpi_done, &w, what);
  return w.rc;
}

static int fence(MPI_Comm c) {
  MPI_Request r;
  int rc = PMPI_Ibarrier(c, &r);
  return rc == MPI_SUCCESS ? wait_progress(&r, MPI_STATUS_IGNORE, "an MPI collective") : rc;
}

} /* namespace emu */

using namespace emu;

/* Collectives always take the non-blocking form, on every rank: MPI never
 * matches a blocking collective with a non-blocking one. */
#define NB(call_nb)                                         \
  do {                                                      \
    MPI_Request r_;                                         \
    int rc_ = call_nb;                                      \
    if (rc_ != MPI_SUCCESS) return rc_;                     \
    return wait_progress(&r_, MPI_STATUS_IGNORE, __func__); \
  } while (0)

extern "C" {

int MPI_Barrier(MPI_Comm c) { NB(PMPI_Ibarrier(c, &r_)); }

int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  NB(PMPI_Ibcast(b, n, t, root, c, &r_));
}

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  NB(PMPI_Iallreduce(s, r, n, t, op, c, &r_));
}

int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  NB(PMPI_Ireduce(s, r, n, t, op, root, c, &r_));
}

int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                  MPI_Comm c) {
  NB(PMPI_Iallgather(s, sn, st, r, rn, rt, c, &r_));
}

int MPI_Allgatherv(const void *s, int sn, MPI_Datatype st, void *r, const int rn[],
                   const int rd[], MPI_Datatype rt, MPI_Comm c) {
  NB(PMPI_Iallgatherv(s, sn, st, r, rn, rd, rt, c, &r_));
}

int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                 MPI_Comm c) {
  NB(PMPI_Ialltoall(s, sn, st, r, rn, rt, c, &r_));
}

int MPI_Alltoallv(const void *s, const int sn[], const int sd[], MPI_Datatype st, void *r,
                  const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm c) {
  NB(PMPI_Ialltoallv(s, sn, sd, st, r, rn, rd, rt, c, &r_));
}

int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                             MPI_Comm c) {
  NB(PMPI_Ireduce_scatter_block(s, r, n, t, op, c, &r_));
}

int MPI_Send(const void *b, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c) {
  NB(PMPI_Isend(b, n, t, dst, tag, c, &r_));
}

int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *st) {
  if (!main_thread() || !device_busy()) return PMPI_Recv(b, n, t, src, tag, c, st);
  MPI_Request r;
  int rc = PMPI_Irecv(b, n, t, src, tag, c, &r);
  return rc == MPI_SUCCESS ? wait_progress(&r, st, "MPI_Recv") : rc;
}

int MPI_Sendrecv(const void *sb, int sn, MPI_Datatype stt, int dst, int stag, void *rb, int rn,
                 MPI_Datatype rtt, int src, int rtag, MPI_Comm c, MPI_Status *st) {
  if (!main_thread() || !device_busy()) return PMPI_Sendrecv(sb, sn, stt, dst, stag, rb, rn, rtt, src, rtag, c, st);
  MPI_Request r[2];
  int rc = PMPI_Irecv(rb, rn, rtt, src, rtag, c, &r[1]);
  if (rc == MPI_SUCCESS) rc = PMPI_Isend(sb, sn, stt, dst, stag, c, &r[0]);
  if (rc != MPI_SUCCESS) return rc;
  if ((rc = wait_progress(&r[0], MPI_STATUS_IGNORE, "MPI_Sendrecv")) != MPI_SUCCESS) return rc;
  return wait_progress(&r[1], st, "MPI_Sendrecv");
}

int MPI_Wait(MPI_Request *r, MPI_Status *st) {
  if (!main_thread() || !device_busy()) return PMPI_Wait(r, st);
  return wait_progress(r, st, "MPI_Wait");
}

int MPI_Waitall(int n, MPI_Request r[], MPI_Status st[]) {
  if (!main_thread() || !device_busy()) return PMPI_Waitall(n, r, st);
  for (int i = 0; i < n; i++) {
    int rc = wait_progress(&r[i], st == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &st[i],
                           "MPI_Waitall");
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int MPI_Test(MPI_Request *r, int *flag, MPI_Status *st) {
  if (main_thread()) progress();
  return PMPI_Test(r, flag, st);
}

int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
  int rc = fence(c);
  return rc == MPI_SUCCESS ? PMPI_Comm_split(c, color, key, out) : rc;
}

int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm *out) {
  int rc = fence(c);
  return rc == MPI_SUCCESS ? PMPI_Comm_split_type(c, type, key, info, out) : rc;
}

int MPI_Win_allocate_shared(MPI_Aint size, int du, MPI_Info info, MPI_Comm c, void *base,
                            MPI_Win *win) {
  int rc = fence(c);
  return rc == MPI_SUCCESS ? PMPI_Win_allocate_shared(size, du, info, c, base, win) : rc;
}

int MPI_Finalize(void) {
  sync_all();
  int rc = fence(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? PMPI_Finalize() : rc;
}

} /* extern "C" */
