/* core/log_stream.c — see log_stream.h. */
#include "log_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What can block: pipes, ttys (mpirun's rank stdout is a pty), sockets. */
enum { KIND_OTHER = 0, KIND_REOPEN = 1, KIND_SOCKET = 2 };

/* The one process-wide record (log_stream.h "State"). fd_kind and
 * fd_flags are written by install before threads start and read by the
 * handler; the rest are atomics. */
static struct {
  FILE *orig[2];          /* the streams replaced (NULL: not installed) */
  FILE *mine[2];          /* the counting streams (made at the first install) */
  volatile sig_atomic_t fd_kind[2];
  volatile sig_atomic_t fd_flags[2];
  volatile sig_atomic_t nonblock;
  _Atomic int64_t lines, bytes;
} g_log = {{NULL, NULL}, {NULL, NULL}, {0, 0}, {0, 0}, 0, 0, 0};

static int kind_of(int fd, int *flags) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) return KIND_OTHER;
  *flags = fcntl(fd, F_GETFL);
  if (S_ISSOCK(sb.st_mode)) return KIND_SOCKET;
  if (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)) return KIND_REOPEN;
  return KIND_OTHER;
}

static void count_drop(const char *buf, size_t n) {
  int64_t lines = 0;
  for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
  atomic_fetch_add(&g_log.lines, lines);
  atomic_fetch_add(&g_log.bytes, (int64_t)n);
}

/* Write all of buf to the descriptor; once non-blocking, what would block
 * is dropped and counted. */
static ssize_t stream_write(void *cookie, const char *buf, size_t size) {
  const int fd = cookie == &g_log.mine[0] ? 1 : 2;
  size_t done = 0;
  while (done < size) {
    ssize_t k = write(fd, buf + done, size - done);
    if (k > 0) {
      done += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (g_log.nonblock) {
        count_drop(buf + done, size - done);
        return (ssize_t)size;
      }
      /* a descriptor inherited non-blocking: wait as a blocking one would
       * (a signal interrupts poll, and the next write sees the flag) */
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      poll(&p, 1, -1);
      continue;
    }
    count_drop(buf + done, size - done); /* EPIPE, EIO, ...: lost as well */
    return done ? (ssize_t)done : -1;
  }
  return (ssize_t)size;
}

static FILE *make_stream(int i) {
  cookie_io_functions_t io = {.read = NULL, .write = stream_write, .seek = NULL, .close = NULL};
  FILE *f = fopencookie(&g_log.mine[i], "w", io);
  if (!f) return NULL;
  const int fd = i + 1;
  if (fd == 2) setvbuf(f, NULL, _IONBF, 0);
  else setvbuf(f, NULL, isatty(fd) ? _IOLBF : _IOFBF, BUFSIZ);
  return f;
}

int mt_log_streams_install(void) {
  if (g_log.orig[0]) return 0;
  for (int i = 0; i < 2; i++) /* made once, kept for the process (no thread can hold a freed one) */
    if (!g_log.mine[i] && !(g_log.mine[i] = make_stream(i))) return -1;
  for (int i = 0; i < 2; i++) {
    int flags = 0;
    g_log.fd_kind[i] = kind_of(i + 1, &flags);
    g_log.fd_flags[i] = flags;
  }
  fflush(stdout);
  fflush(stderr);
  g_log.orig[0] = stdout;
  g_log.orig[1] = stderr;
  stdout = g_log.mine[0];
  stderr = g_log.mine[1];
  return 0;
}

void mt_log_streams_uninstall(void) {
  if (!g_log.orig[0]) return;
  fflush(g_log.mine[0]);
  fflush(g_log.mine[1]);
  stdout = g_log.orig[0];
  stderr = g_log.orig[1];
  g_log.orig[0] = g_log.orig[1] = NULL;
}

void mt_log_streams_nonblock(void) {
  if (g_log.nonblock) return;
  const int saved = errno; /* a handler leaves errno as it found it */
  for (int i = 0; i < 2; i++) {
    const int fd = i + 1;
    int flags = g_log.fd_flags[i];
    const int kind = g_log.orig[0] ? (int)g_log.fd_kind[i] : kind_of(fd, &flags);
    if (kind == KIND_OTHER) continue;
    if (kind == KIND_REOPEN) {
      /* "/proc/self/fd/N" without snprintf (not async-signal-safe) */
      char path[] = "/proc/self/fd/N";
      path[sizeof path - 2] = (char)('0' + fd);
      int nfd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY);
      if (nfd >= 0) {
        if (nfd != fd) {
          dup2(nfd, fd);
          close(nfd);
        }
        continue;
      }
    }
    if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
  g_log.nonblock = 1;
  errno = saved;
}

mt_log_drops mt_log_streams_dropped(void) {
  mt_log_drops d = {atomic_load(&g_log.lines), atomic_load(&g_log.bytes)};
  return d;
}
