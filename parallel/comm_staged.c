/* parallel/comm_staged.c — the staging engine (MT_ENGINE_STAGED): device
 * buffers copied to host staging buffers around the MPI engine's calls.
 * (Placeholder until the engine lands: creation is fatal.) */
#include "comm_impl.h"

static void staged_missing(mt_group *g) {
  mt_fatal("group '%s': the staging engine is not implemented yet", g->name);
}

const mt_comm_engine_ops mt_comm_staged_engine = {
    staged_missing, staged_missing, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL,           NULL,           NULL, NULL, NULL, NULL, NULL,
};
