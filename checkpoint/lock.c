/* checkpoint/lock.c — the advisory lock of a checkpoint save directory
 * (checkpoint/lock.h). */
#include "checkpoint/lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

struct mt_ckpt_lock {
  int fd;
};

#define LOCK_NAME ".megatrain.lock"

/* Agree on rank 0's outcome: status and message broadcast from rank 0. */
static int share(mt_group *world, int rc, char *err, size_t errlen) {
  if (!world || mt_group_size(world) < 2) return rc;
  int32_t msg[257];
  memset(msg, 0, sizeof msg);
  if (mt_group_rank(world) == 0) {
    msg[0] = rc;
    snprintf((char *)(msg + 1), 1024, "%s", err);
  }
  mt_broadcast(world, msg, 257, MT_I32, 0);
  ((char *)(msg + 1))[1023] = '\0';
  if (mt_group_rank(world) != 0) snprintf(err, errlen, "%s", (const char *)(msg + 1));
  return msg[0];
}

/* Remove SAVE/iter_*.tmp* and the temporary "latest" file: their writers
 * are gone (the lock was free). */
static void remove_leftovers(const char *save_dir) {
  DIR *d = opendir(save_dir);
  if (!d) return;
  struct dirent *e;
  char path[4400];
  while ((e = readdir(d))) {
    const int tmp_iter = !strncmp(e->d_name, "iter_", 5) && strstr(e->d_name, ".tmp");
    if (!tmp_iter && strcmp(e->d_name, "latest_checkpointed_iteration.txt.tmp") != 0) continue;
    snprintf(path, sizeof path, "%s/%s", save_dir, e->d_name);
    if (mt_dckpt_rm_rf(path) == 0)
      printf("> removed '%s' (left by a save that did not finish; its run no longer holds %s)\n",
             path, LOCK_NAME);
    else
      fprintf(stderr, "megatrain: warning: cannot remove leftover '%s': %s\n", path,
              strerror(errno));
  }
  closedir(d);
  fflush(stdout);
}

/* Rank 0: 0 and *fd (-1: no flock support), or -1 with a message. */
static int take(const char *save_dir, int *fd_out, char *err, size_t errlen) {
  char path[4200];
  *fd_out = -1;
  if (mt_mkdirs(save_dir) != 0) {
    snprintf(err, errlen, "cannot create checkpoint.save directory '%s': %s", save_dir,
             strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/" LOCK_NAME, save_dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create the lock file '%s' of checkpoint.save: %s", path,
             strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      char holder[512] = "";
      ssize_t k = pread(fd, holder, sizeof holder - 1, 0);
      holder[k > 0 ? k : 0] = '\0';
      char *nl = strchr(holder, '\n');
      if (nl) *nl = '\0';
      char host[256] = "?", when[64] = "?", job[64] = "";
      long pid = -1;
      sscanf(holder, "host %255s pid %ld started %63s job %63s", host, &pid, when, job);
      snprintf(err, errlen,
               "checkpoint.save '%s' is in use by another run (host %s, pid %ld, started %s%s%s); "
               "two runs must not write one checkpoint directory",
               save_dir, host, pid, when, job[0] ? ", Slurm job " : "", job);
      close(fd);
      return -1;
    }
    close(fd);
    if (e == ENOLCK || e == ENOSYS || e == EOPNOTSUPP) {
      fprintf(stderr,
              "megatrain: warning: the file system of checkpoint.save '%s' does not support "
              "flock (%s): this run cannot make sure it is the only writer there\n",
              save_dir, strerror(e));
      return 0;
    }
    snprintf(err, errlen, "cannot lock '%s': %s", path, strerror(e));
    return -1;
  }
  char host[256] = "unknown", when[64], line[512];
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const char *job = getenv("SLURM_JOB_ID");
  int n = snprintf(line, sizeof line, "host %s pid %ld started %s%s%s\n", host, (long)getpid(),
                   when, job && job[0] ? " job " : "", job && job[0] ? job : "");
  if (pwrite(fd, line, (size_t)n, 0) != n || ftruncate(fd, n) != 0) { /* never empty */
    snprintf(err, errlen, "cannot write the lock file '%s': %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  remove_leftovers(save_dir);
  *fd_out = fd;
  return 0;
}

int mt_ckpt_lock_acquire(const char *save_dir, mt_group *world, mt_ckpt_lock **out, char *err,
                         size_t errlen) {
  *out = NULL;
  err[0] = '\0';
  int fd = -1, rc = 0;
  if (!world || mt_group_rank(world) == 0) rc = take(save_dir, &fd, err, errlen);
  rc = share(world, rc, err, errlen);
  if (rc != 0) return -1;
  if (fd >= 0) {
    *out = mt_xmalloc(sizeof **out);
    (*out)->fd = fd;
  }
  return 0;
}

void mt_ckpt_lock_release(mt_ckpt_lock *l) {
  if (!l) return;
  flock(l->fd, LOCK_UN);
  close(l->fd);
  free(l);
}
