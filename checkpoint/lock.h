/* checkpoint/lock.h — one writer per checkpoint directory
 * (docs/checkpoint.md "One writer per directory"). A run that saves holds an
 * advisory lock, flock(LOCK_EX | LOCK_NB) on SAVE/.megatrain.lock, taken by
 * world rank 0 at start-up and held until the process ends (the kernel
 * releases it when the process dies, however it dies). The file names the
 * holder on one line: "host H pid P started T[ job J]" (T: ISO 8601 UTC,
 * J: $SLURM_JOB_ID). Loading never takes the lock. */
#ifndef MT_CHECKPOINT_LOCK_H
#define MT_CHECKPOINT_LOCK_H

#include <stddef.h>

#include "parallel/comm.h"

typedef struct mt_ckpt_lock mt_ckpt_lock;

/* Take the lock of save_dir (created if missing) on rank 0 of `world`
 * (NULL: one process) and agree on the outcome over `world` (collective).
 * When another process holds it, every rank returns -1 with "checkpoint.save
 * 'DIR' is in use by another run (host H, pid P, started T); two runs must not
 * write one checkpoint directory"; a directory or lock file that cannot be
 * created is refused naming the path and the error. When the lock is ours,
 * rank 0 removes the temporary directories of earlier, dead writers
 * (SAVE/iter_*.tmp*, latest_checkpointed_iteration.txt.tmp), printing what
 * it removed. A file system without flock support (ENOLCK, ENOSYS,
 * EOPNOTSUPP) gets a warning and no lock (and no clean-up). Returns 0 and
 * *out (NULL on ranks other than 0 and when unlocked), or -1 with err set on
 * every rank. */
int mt_ckpt_lock_acquire(const char *save_dir, mt_group *world, mt_ckpt_lock **out, char *err,
                         size_t errlen);

/* Release the lock and free it (NULL is a no-op). The lock file stays. */
void mt_ckpt_lock_release(mt_ckpt_lock *l);

#endif
