/* core/tb_writer.c — see tb_writer.h. */
#include "core/tb_writer.h"

#include <errno.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"

uint32_t mt_crc32c(uint32_t crc, const void *data, size_t n) {
  /* bit by bit: records are a few hundred bytes, a few per iteration */
  const unsigned char *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
  }
  return ~crc;
}

static uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* protobuf varint of v at p; returns its length */
static size_t varint(unsigned char *p, uint64_t v) {
  size_t n = 0;
  do {
    p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return n;
}

static void write_record(mt_tb_writer *w, const unsigned char *data, size_t n) {
  unsigned char head[12], tail[4];
  put_le(head, n, 8);
  put_le(head + 8, masked(mt_crc32c(0, head, 8)), 4);
  put_le(tail, masked(mt_crc32c(0, data, n)), 4);
  fwrite(head, 1, sizeof head, w->f);
  fwrite(data, 1, n, w->f);
  fwrite(tail, 1, sizeof tail, w->f);
}

static double wall_now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

/* Event header: wall_time (field 1, fixed64) and step (field 2, varint). */
static size_t event_head(unsigned char *p, int64_t step) {
  double wt = wall_now();
  uint64_t bits;
  memcpy(&bits, &wt, sizeof bits);
  size_t n = 0;
  p[n++] = 0x09;
  put_le(p + n, bits, 8);
  n += 8;
  p[n++] = 0x10;
  n += varint(p + n, (uint64_t)step);
  return n;
}

int mt_tb_open(mt_tb_writer *w, const char *dir, char *err, size_t errlen) {
  memset(w, 0, sizeof *w);
  if (mt_mkdirs(dir) != 0) {
    snprintf(err, errlen, "cannot create logging.tensorboard_dir '%s': %s", dir, strerror(errno));
    return -1;
  }
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s", dir,
           (long long)time(NULL), host);
  w->f = fopen(w->path, "wb");
  if (!w->f) {
    snprintf(err, errlen, "cannot create the TensorBoard event file '%s': %s", w->path,
             strerror(errno));
    return -1;
  }
  static const char version[] = "brain.Event:2";
  unsigned char ev[64];
  size_t n = event_head(ev, 0);
  ev[n++] = 0x1a;
  ev[n++] = (unsigned char)(sizeof version - 1);
  memcpy(ev + n, version, sizeof version - 1);
  n += sizeof version - 1;
  write_record(w, ev, n);
  fflush(w->f);
  return 0;
}

void mt_tb_scalar(mt_tb_writer *w, const char *tag, double value, int64_t step) {
  if (!w || !w->f) return;
  size_t tl = strlen(tag);
  if (tl > 200) tl = 200;
  unsigned char val[256], sum[264], ev[300];
  size_t nv = 0;
  val[nv++] = 0x0a; /* Value.tag */
  nv += varint(val + nv, tl);
  memcpy(val + nv, tag, tl);
  nv += tl;
  const float f = (float)value;
  uint32_t fb;
  memcpy(&fb, &f, sizeof fb);
  val[nv++] = 0x15; /* Value.simple_value, fixed32 */
  put_le(val + nv, fb, 4);
  nv += 4;
  size_t ns = 0;
  sum[ns++] = 0x0a; /* Summary.value */
  ns += varint(sum + ns, nv);
  memcpy(sum + ns, val, nv);
  ns += nv;
  size_t ne = event_head(ev, step);
  ev[ne++] = 0x2a; /* Event.summary */
  ne += varint(ev + ne, ns);
  memcpy(ev + ne, sum, ns);
  ne += ns;
  write_record(w, ev, ne);
}

void mt_tb_flush(mt_tb_writer *w) {
  if (w && w->f) fflush(w->f);
}

void mt_tb_close(mt_tb_writer *w) {
  if (w && w->f) fclose(w->f);
  if (w) w->f = NULL;
}
