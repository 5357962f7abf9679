/* core/log_stream.h — stdout and stderr that stop blocking the process once
 * it is being stopped (README "Running on a cluster", Signals).
 *
 * Why: a launcher that stops reading a rank's output while it tears the job
 * down (mpirun with a raised odls_base_sigkill_timeout sleeps without
 * forwarding output) leaves the rank asleep in write() on a full pipe or
 * pty; the signal handler returns into that write (SA_RESTART), and the
 * save that the signal asked for never starts.
 *
 * How: mt_log_streams_install replaces stdout and stderr by streams over
 * file descriptors 1 and 2 that behave like the originals (same buffering)
 * and count what they drop. mt_log_streams_nonblock — async-signal-safe,
 * called by the exit-signal handler — makes descriptors 1 and 2 non-blocking
 * on a private open file description (it opens /proc/self/fd/N again with
 * O_NONBLOCK and dup2s it over N, so a terminal or pipe shared with the
 * shell keeps its flags; a socket, which cannot be reopened, gets O_NONBLOCK
 * on its own description). A write blocked at that moment returns when the
 * handler does; from then on a write that would block is dropped whole and
 * counted (lines and bytes), never waited for. Regular files are left
 * alone (writes to them do not wait for a reader).
 *
 * State: one process-wide record (the descriptors' kinds, the original
 * streams, the counters), written by install before any thread is started
 * and by the handler; the counters are atomics. */
#ifndef MT_CORE_LOG_STREAM_H
#define MT_CORE_LOG_STREAM_H

#include <stdint.h>

/* Replace stdout and stderr (flushed first) by the counting streams. Returns
 * 0, or -1 when a stream cannot be made (nothing changed). A second call is
 * a no-op. */
int mt_log_streams_install(void);

/* Put the original streams back (ours flushed, and kept for a later
 * install: a thread may still hold a pointer to them); descriptors stay as
 * they are. No-op when not installed. */
void mt_log_streams_uninstall(void);

/* From now on, writes to descriptors 1 and 2 never block (see above).
 * Async-signal-safe; idempotent; works whether or not the streams are
 * installed (without them, a dropped write is stdio's error, not counted). */
void mt_log_streams_nonblock(void);

/* Lines (newline characters) and bytes dropped so far by the installed
 * streams. */
typedef struct {
  int64_t lines, bytes;
} mt_log_drops;
mt_log_drops mt_log_streams_dropped(void);

#endif
