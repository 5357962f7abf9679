/* config/config_msg.c — the messages of a config load: the first failure
 * ("<src>: <section>.<key>[ (from --set)]: ..."), with bytes that are not
 * printable escaped, and the notes collected for mt_config.notes. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

/* Length of the valid UTF-8 sequence of 2-4 bytes at p, or 0. */
static int utf8_len(const unsigned char *p) {
  int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (p[0] >= 0xf5) n = 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  return n;
}

/* Rewrite s in place (capacity cap) with control bytes (but newlines) and
 * bytes that are not valid UTF-8 shown as \xNN: a key or value quoted from a
 * binary file never writes raw bytes to the terminal. */
static void escape_unprintable(char *s, size_t cap) {
  char tmp[4096];
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p && o + 5 < sizeof tmp) {
    int u = *p >= 0x80 ? utf8_len(p) : 0;
    if (u) {
      memcpy(tmp + o, p, (size_t)u);
      o += (size_t)u;
      p += u;
    } else if ((*p < 0x20 && *p != '\n') || *p >= 0x7f) {
      o += (size_t)snprintf(tmp + o, sizeof tmp - o, "\\x%02X", *p++);
    } else {
      tmp[o++] = (char)*p++;
    }
  }
  tmp[o] = '\0';
  snprintf(s, cap, "%s", tmp);
}

static void vfail(mt_cfg_ctx *c, const char *label, const char *suffix, const char *fmt,
                  va_list ap) {
  if (c->failed) return;
  c->failed = 1;
  if (!c->err || c->errlen == 0) return;
  int n = snprintf(c->err, c->errlen, "%s: %s%s: ", c->src, label, suffix);
  if (n >= 0 && (size_t)n < c->errlen) vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
  escape_unprintable(c->err, c->errlen);
}

int mt_cfg_fail(mt_cfg_ctx *c, int key, const char *fmt, ...) {
  char label[96];
  const mt_cfg_key *kd = &mt_cfg_keys[key];
  if (kd->sec == 0)
    snprintf(label, sizeof label, "%s", kd->name);
  else
    snprintf(label, sizeof label, "%s.%s", mt_cfg_sections[kd->sec], kd->name);
  va_list ap;
  va_start(ap, fmt);
  vfail(c, label, c->overridden[key] ? " (from --set)" : "", fmt, ap);
  va_end(ap);
  return 2;
}

int mt_cfg_fail_label(mt_cfg_ctx *c, const char *label, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, label, "", fmt, ap);
  va_end(ap);
  return 2;
}

void mt_cfg_note(mt_cfg_ctx *c, const char *msg) {
  size_t used = strlen(c->notes);
  snprintf(c->notes + used, sizeof c->notes - used, "%s%s", used ? "\n" : "", msg);
}
