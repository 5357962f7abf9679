/* parallel/nccl_api.h — private to the NCCL engine (parallel/comm_nccl*.c,
 * built with MT_HAVE_NCCL only) and its unit test: NCCL loaded at run time.
 *
 * No binary links libnccl: the first NCCL group of a run that will call
 * NCCL (nccl_init in comm_nccl.c: size > 1, or MEGATRAIN_NCCL_SIZE1=1)
 * loads MT_NCCL_LIBRARY with dlopen and looks up exactly the
 * functions the engine calls (MT_NCCL_FUNCS) into one table, owned by the
 * distributed runtime (mt_dist's `nccl`, closed by mt_dist_finalize). So the
 * MPI and staging engines run where NCCL is missing, and only a run that
 * asks for parallel.distributed_backend "nccl" needs it. Every entry has the
 * type of <nccl.h>'s prototype (__typeof__), so calls are checked by the
 * compiler as direct calls would be. docs/communication.md, "The NCCL
 * engine". */
#ifndef MT_PARALLEL_NCCL_API_H
#define MT_PARALLEL_NCCL_API_H

#include <stddef.h>

#include <nccl.h>

/* The soname loaded (searched as the loader searches: LD_LIBRARY_PATH, the
 * binary's run path, the ldconfig cache, the default folders). */
#define MT_NCCL_LIBRARY "libnccl.so.2"
/* Oldest NCCL accepted (ncclGetVersion's code): ncclBfloat16 is 2.10's. */
#define MT_NCCL_MIN_VERSION 21000

/* The functions the engine calls, as X(name without the "nccl" prefix). */
#define MT_NCCL_FUNCS(X)                                                                   \
  X(GetVersion) X(GetErrorString) X(GetUniqueId) X(CommInitRank) X(CommDestroy)            \
  X(CommAbort) X(GroupStart) X(GroupEnd) X(AllReduce) X(AllGather) X(ReduceScatter)        \
  X(Broadcast) X(Reduce) X(Send) X(Recv)

typedef struct mt_nccl_api {
  void *lib;      /* dlopen handle */
  char *path;     /* the file the loader chose (owned) */
  int version;    /* ncclGetVersion: major*10000 + minor*100 + patch */
#define MT_NCCL_API_ENTRY_(f) __typeof__(&nccl##f) f;
  MT_NCCL_FUNCS(MT_NCCL_API_ENTRY_)
#undef MT_NCCL_API_ENTRY_
} mt_nccl_api;

/* Load `library` (a soname or a path; MT_NCCL_LIBRARY for the engine) and
 * fill the table. Returns NULL when the library cannot be loaded, lacks one
 * of the functions, or is older than MT_NCCL_MIN_VERSION, with err[errlen]
 * = the whole user-facing message: what was tried, the loader's reason and
 * the fix, e.g. 'parallel.distributed_backend "nccl": cannot load
 * libnccl.so.2 (libnccl.so.2: cannot open shared object file: No such file
 * or directory); put NCCL's lib folder on LD_LIBRARY_PATH, or set
 * parallel.distributed_backend to "mpi" (staged through host memory)'.
 * Calls no NCCL function but ncclGetVersion (no GPU needed). */
mt_nccl_api *mt_nccl_api_open(const char *library, char *err, size_t errlen);


/* mt_nccl_api_close (NULL: no-op) is declared in comm_impl.h: the runtime's
 * teardown calls it in every build. */

/* Every NCCL call of the engine: `call` is the call without the "nccl"
 * prefix, made through table `api`, e.g.
 *   MT_NCCL_CHECK(api, AllReduce(buf, buf, n, ncclFloat32, ncclSum, c, s));
 * On failure ends the job (mt_fatal) with
 *   "NCCL error: ncclAllReduce(buf, ...) failed: <ncclGetErrorString>"
 * (scripts/gpu-check.sh recognises NCCL faults by "NCCL error"). */
#define MT_NCCL_CHECK(api, call)                                                         \
  do {                                                                                   \
    const mt_nccl_api *mt_na_ = (api);                                                   \
    ncclResult_t mt_nr_ = mt_na_->call;                                                  \
    if (mt_nr_ != ncclSuccess)                                                           \
      mt_fatal("NCCL error: %s failed: %s", "nccl" #call, mt_na_->GetErrorString(mt_nr_)); \
  } while (0)

#endif
