/* checkpoint/lock.h — one writer per checkpoint directory
 * (docs/checkpoint.md "One writer per directory"). A run that saves holds two
 * advisory locks, both flock(LOCK_EX | LOCK_NB), taken by world rank 0 at
 * start-up and held until the process ends (the kernel releases them when
 * the process dies, however it dies):
 *  - on the directory SAVE itself: it cannot be deleted away without deleting
 *    the checkpoints, so removing or replacing the lock file does not let a
 *    second run in (on file systems that lock directories locally only, e.g.
 *    NFS, this covers runs on the same host);
 *  - on SAVE/.megatrain.lock, a regular file (the lock that NFS and Lustre
 *    carry across hosts), which names the holder on one line:
 *    "host H pid P started T[ job J]" (T: ISO 8601 UTC, J: $SLURM_JOB_ID).
 * Before every save and again right before publishing one (mt_ckpt_lock_verify)
 * the run checks that both are still the ones on disk; a lock file removed
 * or replaced by one nobody holds is taken again. Loading never takes the
 * lock. */
#ifndef MT_CHECKPOINT_LOCK_H
#define MT_CHECKPOINT_LOCK_H

#include <stddef.h>

#include "parallel/comm.h"

typedef struct mt_ckpt_lock mt_ckpt_lock;

/* Take the locks of save_dir (created if missing) on rank 0 of `world`
 * (NULL: one process) and agree on the outcome over `world` (collective).
 * When another process holds either, every rank returns -1 with
 * "checkpoint.save 'DIR' is in use by another run (host H, pid P, started T);
 * two runs must not write one checkpoint directory" (the holder from the
 * lock file, or, when that file no longer names the holder of the directory
 * lock, its pid from /proc/locks); a directory or lock file that cannot be
 * created is refused naming the path and the error. When the locks are
 * ours, rank 0 removes the temporary directories of earlier, dead writers
 * (SAVE/iter_*.tmp*, latest_checkpointed_iteration.txt.tmp), printing what
 * it removed. A file system without flock support on the lock file (ENOLCK,
 * ENOSYS, EOPNOTSUPP) gets a warning and no lock (and no clean-up); one that
 * cannot lock the directory keeps the file lock alone. Returns 0 and *out
 * (NULL on ranks other than 0 and when unlocked), or -1 with err set on every
 * rank. */
int mt_ckpt_lock_acquire(const char *save_dir, mt_group *world, mt_ckpt_lock **out, char *err,
                         size_t errlen);

/* Rank 0 (the holder; NULL is a no-op returning 0): whether this run still
 * owns save_dir. The directory at the path must be the one locked at
 * start-up (same device and inode), and the lock file at the path the one
 * this run holds. A lock file that was removed, or replaced by one that no
 * process holds, is taken again and the holder line rewritten (a warning
 * on stderr says so). Returns 0, or -1 with "checkpoint.save 'DIR': ...; this
 * run no longer owns the directory and does not write into it" when the
 * directory was removed, renamed or replaced, or another process holds the
 * lock file now on disk (named from that file). No communication. */
int mt_ckpt_lock_verify(mt_ckpt_lock *l, char *err, size_t errlen);

/* Release the locks and free them (NULL is a no-op). The lock file stays. */
void mt_ckpt_lock_release(mt_ckpt_lock *l);

#endif
