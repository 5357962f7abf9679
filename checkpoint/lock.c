/* checkpoint/lock.c — the advisory locks of a checkpoint save directory
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
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

#define LOCK_NAME ".megatrain.lock"

struct mt_ckpt_lock {
  int fd;              /* SAVE/.megatrain.lock, locked */
  int dfd;             /* SAVE itself, locked; -1 when its file system refused */
  char dir[4096];
  char path[4200];     /* SAVE/.megatrain.lock */
  char line[512];      /* the holder line written into the lock file */
  int line_len;
};

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

/* The pid holding a flock on the file (dev, ino) according to /proc/locks
 * (this host only), or -1. */
static long proc_locks_holder(const struct stat *sb) {
  FILE *f = fopen("/proc/locks", "r");
  if (!f) return -1;
  char line[256];
  long found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    char kind[16], mode[16], rw[16];
    long pid;
    unsigned maj, mnr;
    unsigned long long ino;
    if (strstr(line, "->")) continue; /* a process waiting for the lock */
    if (sscanf(line, "%*[^:]: %15s %15s %15s %ld %x:%x:%llu", kind, mode, rw, &pid, &maj, &mnr,
               &ino) == 7 &&
        !strcmp(kind, "FLOCK") && maj == major(sb->st_dev) && mnr == minor(sb->st_dev) &&
        ino == (unsigned long long)sb->st_ino)
      found = pid;
  }
  fclose(f);
  return found;
}

/* "host H, pid P, started T[, Slurm job J]" from the lock file (fd, or the
 * path when fd < 0); 0, or -1 when it names no holder. */
static int read_holder(int fd, const char *path, char *out, size_t n, char *host, size_t hostn,
                       long *pid) {
  char holder[512] = "";
  int own = fd < 0;
  if (own) fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t k = pread(fd, holder, sizeof holder - 1, 0);
  if (own) close(fd);
  holder[k > 0 ? k : 0] = '\0';
  char *nl = strchr(holder, '\n');
  if (nl) *nl = '\0';
  char h[256] = "", when[64] = "", job[64] = "";
  *pid = -1;
  if (sscanf(holder, "host %255s pid %ld started %63s job %63s", h, pid, when, job) < 3) return -1;
  snprintf(host, hostn, "%s", h);
  snprintf(out, n, "host %s, pid %ld, started %s%s%s", h, *pid, when, job[0] ? ", Slurm job " : "",
           job);
  return 0;
}

/* The refusal naming the holder. by_dir: the directory lock (sb: the
 * directory) refused; else the lock file (fd) did. */
static void refuse(const char *save_dir, const char *path, int fd, int by_dir,
                   const struct stat *sb, char *err, size_t errlen) {
  char who[4800], host[256] = "", me[256] = "";
  long pid = -1;
  int have = read_holder(fd, path, who, sizeof who, host, sizeof host, &pid) == 0;
  if (by_dir) {
    /* the lock file may have been removed or replaced since the holder wrote
     * it: on this host the kernel's lock table names the holder for sure */
    long kpid = proc_locks_holder(sb);
    gethostname(me, sizeof me - 1);
    if (kpid > 0 && (!have || (!strcmp(host, me) && pid != kpid))) {
      snprintf(who, sizeof who,
               "pid %ld on this host, from /proc/locks: the lock file '%s' does not name it, it "
               "was removed or replaced",
               kpid, path);
      have = 1;
    }
  }
  if (!have)
    snprintf(who, sizeof who, "holder unknown: the lock file '%s' names no holder", path);
  snprintf(err, errlen,
           "checkpoint.save '%s' is in use by another run (%s); two runs must not write one "
           "checkpoint directory",
           save_dir, who);
}

/* Write l->line into fd (never empty: the line replaces the whole file). */
static int write_line(int fd, const mt_ckpt_lock *l) {
  return pwrite(fd, l->line, (size_t)l->line_len, 0) == l->line_len &&
                 ftruncate(fd, l->line_len) == 0
             ? 0
             : -1;
}

/* Rank 0: 0 and *out (NULL: no flock support), or -1 with a message. */
static int take(const char *save_dir, mt_ckpt_lock **out, char *err, size_t errlen) {
  char path[4200];
  struct stat sb;
  *out = NULL;
  if (mt_mkdirs(save_dir) != 0) {
    snprintf(err, errlen, "cannot create checkpoint.save directory '%s': %s", save_dir,
             strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/" LOCK_NAME, save_dir);
  /* the directory first: a refused run never creates or touches the file */
  int dfd = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fstat(dfd, &sb) != 0) {
    snprintf(err, errlen, "cannot open checkpoint.save directory '%s': %s", save_dir,
             strerror(errno));
    if (dfd >= 0) close(dfd);
    return -1;
  }
  if (flock(dfd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      refuse(save_dir, path, -1, 1, &sb, err, errlen);
      close(dfd);
      return -1;
    }
    close(dfd); /* no directory locks here: the lock file alone */
    dfd = -1;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create the lock file '%s' of checkpoint.save: %s", path,
             strerror(errno));
    if (dfd >= 0) close(dfd);
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) refuse(save_dir, path, fd, 0, &sb, err, errlen);
    close(fd);
    if (dfd >= 0) close(dfd);
    if (e == EWOULDBLOCK) return -1;
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
  mt_ckpt_lock *l = mt_xcalloc(1, sizeof *l);
  l->fd = fd;
  l->dfd = dfd;
  snprintf(l->dir, sizeof l->dir, "%s", save_dir);
  snprintf(l->path, sizeof l->path, "%s", path);
  char host[256] = "unknown", when[64];
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const char *job = getenv("SLURM_JOB_ID");
  l->line_len = snprintf(l->line, sizeof l->line, "host %s pid %ld started %s%s%s\n", host,
                         (long)getpid(), when, job && job[0] ? " job " : "",
                         job && job[0] ? job : "");
  if (write_line(fd, l) != 0) {
    snprintf(err, errlen, "cannot write the lock file '%s': %s", path, strerror(errno));
    mt_ckpt_lock_release(l);
    return -1;
  }
  remove_leftovers(save_dir);
  *out = l;
  return 0;
}

int mt_ckpt_lock_acquire(const char *save_dir, mt_group *world, mt_ckpt_lock **out, char *err,
                         size_t errlen) {
  *out = NULL;
  err[0] = '\0';
  mt_ckpt_lock *l = NULL;
  int rc = 0;
  if (!world || mt_group_rank(world) == 0) rc = take(save_dir, &l, err, errlen);
  rc = share(world, rc, err, errlen);
  if (rc != 0) return -1;
  *out = l;
  return 0;
}

static int same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int mt_ckpt_lock_verify(mt_ckpt_lock *l, char *err, size_t errlen) {
  if (!l) return 0;
  struct stat held, now;
  if (l->dfd >= 0) {
    const int gone = stat(l->dir, &now) != 0;
    const int e = errno;
    if (fstat(l->dfd, &held) != 0 || gone || !same_file(&held, &now)) {
      snprintf(err, errlen,
               "checkpoint.save '%s' is no longer the directory this run locked at start-up (%s); "
               "this run no longer owns the directory and does not write into it",
               l->dir, gone ? strerror(e) : "it was removed, renamed or replaced by another");
      return -1;
    }
  }
  const int removed = stat(l->path, &now) != 0;
  if (!removed && fstat(l->fd, &held) == 0 && same_file(&held, &now)) return 0;
  /* removed, or replaced: take the file now at the path when nobody holds it */
  int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen,
             "checkpoint.save '%s': the lock file '%s' this run held was removed or replaced "
             "and cannot be created again (%s); this run no longer owns the directory and does "
             "not write into it",
             l->dir, l->path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char who[700], host[256];
    long pid;
    if (errno != EWOULDBLOCK) {
      snprintf(err, errlen,
               "checkpoint.save '%s': the lock file '%s' this run held was removed or replaced "
               "and cannot be locked again (%s); this run no longer owns the directory and does "
               "not write into it",
               l->dir, l->path, strerror(errno));
      close(fd);
      return -1;
    }
    if (read_holder(fd, l->path, who, sizeof who, host, sizeof host, &pid) != 0)
      snprintf(who, sizeof who, "holder unknown: it names none");
    snprintf(err, errlen,
             "checkpoint.save '%s': the lock file '%s' this run held was replaced, and another "
             "run holds the new one (%s); this run no longer owns the directory and does not "
             "write into it",
             l->dir, l->path, who);
    close(fd);
    return -1;
  }
  if (write_line(fd, l) != 0) {
    snprintf(err, errlen, "cannot write the lock file '%s' again: %s", l->path, strerror(errno));
    close(fd);
    return -1;
  }
  close(l->fd);
  l->fd = fd;
  fprintf(stderr,
          "megatrain: warning: the lock file '%s' of this run was %s while the run held it; "
          "this run took it again (%s)\n",
          l->path, removed ? "removed" : "replaced by one that no process held",
          l->dfd >= 0 ? "the directory lock kept other runs out meanwhile"
                      : "no other process holds it now");
  fflush(stderr);
  return 0;
}

void mt_ckpt_lock_release(mt_ckpt_lock *l) {
  if (!l) return;
  flock(l->fd, LOCK_UN);
  close(l->fd);
  if (l->dfd >= 0) {
    flock(l->dfd, LOCK_UN);
    close(l->dfd);
  }
  free(l);
}
