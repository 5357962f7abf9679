/* parallel/comm_mpi_dtype.c — the MPI datatype of each megatrain dtype,
 * shared by the collectives (comm_mpi.c) and tagged point-to-point
 * (comm_p2p.c); its own file so those two do not call each other. bf16
 * travels as MPI_UINT16_T (sums over bf16 use the user op of mt_mpi_op). */
#include "comm_impl.h"

MPI_Datatype mt_mpi_dtype(mt_dtype t) {
  switch (t) {
    case MT_F32: return MPI_FLOAT;
    case MT_BF16: return MPI_UINT16_T;
    case MT_I32: return MPI_INT32_T;
    case MT_I64: return MPI_INT64_T;
    case MT_F64: return MPI_DOUBLE;
    case MT_U8: return MPI_UINT8_T;
  }
  mt_fatal("unknown dtype %d", (int)t);
}
