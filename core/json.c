/* core/json.c — the strict JSON check (RFC 8259 over the raw text) and the
 * exact integer writer of core/json.h. */
#include "core/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

enum { MAX_DEPTH = 1000 }; /* cJSON's CJSON_NESTING_LIMIT */

typedef struct {
  const char *key; /* object: the member being read (NULL before the first key) */
  size_t key_len;
  int64_t index;   /* array: the element being read */
  int is_array;
} frame;

typedef struct {
  const unsigned char *s;
  size_t n, i;
  unsigned flags;
  mt_json_error *e;
  int depth;
  frame *path; /* [MAX_DEPTH] */
} scan;

static void add_key(char *out, size_t cap, size_t *o, const char *k, size_t len) {
  for (size_t j = 0; j < len && j < 48 && *o + 5 < cap; j++) {
    unsigned char ch = (unsigned char)k[j];
    if (ch < 0x20 || ch == 0x7f)
      *o += (size_t)snprintf(out + *o, cap - *o, "\\x%02X", ch);
    else
      out[(*o)++] = (char)ch;
  }
  if (len > 48 && *o + 4 < cap) *o += (size_t)snprintf(out + *o, cap - *o, "...");
  out[*o] = '\0';
}

/* Record the first problem at byte `at`. Always returns -1. */
static int fail(scan *sc, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(scan *sc, size_t at, const char *fmt, ...) {
  mt_json_error *e = sc->e;
  if (at > sc->n) at = sc->n;
  e->offset = at;
  e->line = 1;
  size_t ls = 0;
  for (size_t j = 0; j < at; j++)
    if (sc->s[j] == '\n') e->line++, ls = j + 1;
  e->col = (int)(at - ls) + 1;
  size_t o = 0;
  e->path[0] = '\0';
  for (int d = 0; d < sc->depth && o + 8 < sizeof e->path; d++) {
    const frame *f = &sc->path[d];
    if (f->is_array) {
      o += (size_t)snprintf(e->path + o, sizeof e->path - o, "[%" PRId64 "]", f->index);
    } else if (f->key) {
      if (o) e->path[o++] = '.';
      add_key(e->path, sizeof e->path, &o, f->key, f->key_len);
    }
    if (o >= sizeof e->path) o = sizeof e->path - 1;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->what, sizeof e->what, fmt, ap);
  va_end(ap);
  return -1;
}

static void ws(scan *sc) {
  while (sc->i < sc->n) {
    unsigned char c = sc->s[sc->i];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
    sc->i++;
  }
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* How a byte is shown in a message. */
static const char *show(scan *sc, size_t at, char *buf, size_t n) {
  if (at >= sc->n) return "the end of the text";
  unsigned char c = sc->s[at];
  if (c >= 0x21 && c < 0x7f)
    snprintf(buf, n, "'%c'", c);
  else
    snprintf(buf, n, "byte 0x%02X", c);
  return buf;
}

static int hex4(scan *sc, unsigned *cp) {
  if (sc->n - sc->i < 4) return -1;
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    unsigned char c = sc->s[sc->i + (size_t)k];
    v <<= 4;
    if (is_digit(c)) v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  sc->i += 4;
  *cp = v;
  return 0;
}

/* A string at sc->i (the opening quote); its contents are [*b, *b + *len). */
static int string(scan *sc, const char **b, size_t *len) {
  const size_t start = sc->i++;
  if (b) *b = (const char *)sc->s + sc->i;
  size_t dummy;
  if (!len) len = &dummy;
  /* until the closing quote: what was read so far (a message names the key) */
  for (*len = 0; sc->i < sc->n; *len = sc->i - start - 1) {
    unsigned char c = sc->s[sc->i];
    if (c == '"') {
      sc->i++;
      return 0;
    }
    if (c < 0x20)
      return fail(sc, sc->i,
                  "raw control byte 0x%02X in a string (expected it escaped, e.g. \\n or "
                  "\\u00%02X)",
                  c, c);
    if (c != '\\') {
      sc->i++;
      continue;
    }
    const size_t esc = sc->i++;
    if (sc->i >= sc->n) break;
    c = sc->s[sc->i];
    if (strchr("\"\\/bfnrt", c) && c) {
      sc->i++;
      continue;
    }
    if (c != 'u')
      return fail(sc, esc, "invalid escape '\\%c' in a string (expected one of \\\" \\\\ \\/ \\b "
                           "\\f \\n \\r \\t \\uXXXX)",
                  c >= 0x20 && c < 0x7f ? c : '?');
    sc->i++;
    unsigned cp;
    if (hex4(sc, &cp))
      return fail(sc, esc, "'\\u' is not followed by four hexadecimal digits");
    if (cp >= 0xDC00 && cp <= 0xDFFF)
      return fail(sc, esc, "lone UTF-16 low surrogate \\u%04X (expected it after a high "
                           "surrogate \\uD800-\\uDBFF)", cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      unsigned lo = 0;
      if (sc->n - sc->i < 2 || sc->s[sc->i] != '\\' || sc->s[sc->i + 1] != 'u' ||
          (sc->i += 2, hex4(sc, &lo)) || lo < 0xDC00 || lo > 0xDFFF)
        return fail(sc, esc, "UTF-16 high surrogate \\u%04X is not followed by a low surrogate "
                             "\\uDC00-\\uDFFF", cp);
    }
  }
  return fail(sc, start, "unterminated string (expected a closing '\"')");
}

/* Does the number token `tok` (valid JSON, NUL-terminated) denote exactly
 * ±2^53? Its value is D x 10^(ex - frac), D the digits without leading
 * zeros; each trailing zero of D taken off moves the point one place. */
static int denotes_2p53(const char *tok) {
  char *digits = mt_xmalloc(strlen(tok) + 1);
  long nd = 0, frac = 0, ex = 0;
  int in_frac = 0;
  const char *p = tok;
  if (*p == '-') p++;
  for (; *p && *p != 'e' && *p != 'E'; p++) {
    if (*p == '.') {
      in_frac = 1;
      continue;
    }
    frac += in_frac;
    if (nd == 0 && *p == '0') continue;
    digits[nd++] = *p;
  }
  if (*p) ex = strtol(p + 1, NULL, 10);
  while (nd > 0 && digits[nd - 1] == '0') nd--, frac--;
  digits[nd] = '\0';
  /* |ex| beyond 10^6 is far from 10^15 (and keeps ex - frac from overflowing) */
  const int yes = ex < 1000000 && ex > -1000000 && !strcmp(digits, "9007199254740992") &&
                  ex - frac == 0;
  free(digits);
  return yes;
}

static int number(scan *sc) {
  const size_t start = sc->i;
  const unsigned char *s = sc->s;
  if (s[sc->i] == '-') sc->i++;
  if (sc->i >= sc->n || !is_digit(s[sc->i])) {
    char b[16];
    return fail(sc, sc->i, "expected a digit after '-', got %s", show(sc, sc->i, b, sizeof b));
  }
  const size_t int_start = sc->i;
  if (s[sc->i] == '0') {
    sc->i++;
    if (sc->i < sc->n && is_digit(s[sc->i])) {
      size_t e = sc->i;
      while (e < sc->n && is_digit(s[e])) e++;
      return fail(sc, start, "the number %.*s has a leading zero, which JSON does not allow "
                             "(expected %.*s)",
                  (int)(e - start > 40 ? 40 : e - start), (const char *)s + start,
                  (int)(e - sc->i > 40 ? 40 : e - sc->i), (const char *)s + sc->i);
    }
  } else {
    while (sc->i < sc->n && is_digit(s[sc->i])) sc->i++;
  }
  const size_t int_end = sc->i;
  int literal = 1;
  if (sc->i < sc->n && s[sc->i] == '.') {
    literal = 0;
    sc->i++;
    if (sc->i >= sc->n || !is_digit(s[sc->i])) {
      char b[16];
      return fail(sc, sc->i, "expected a digit after the decimal point, got %s",
                  show(sc, sc->i, b, sizeof b));
    }
    while (sc->i < sc->n && is_digit(s[sc->i])) sc->i++;
  }
  if (sc->i < sc->n && (s[sc->i] == 'e' || s[sc->i] == 'E')) {
    literal = 0;
    sc->i++;
    if (sc->i < sc->n && (s[sc->i] == '+' || s[sc->i] == '-')) sc->i++;
    if (sc->i >= sc->n || !is_digit(s[sc->i])) {
      char b[16];
      return fail(sc, sc->i, "expected a digit in the exponent, got %s",
                  show(sc, sc->i, b, sizeof b));
    }
    while (sc->i < sc->n && is_digit(s[sc->i])) sc->i++;
  }
  const size_t len = sc->i - start;
  if (!(sc->flags & MT_JSON_INT53)) return 0;
  const int shown = len > 40 ? 40 : (int)len;
  const char *more = len > 40 ? "..." : "";
  const size_t nd = int_end - int_start;
  if (literal && (nd > 16 || (nd == 16 && memcmp(s + int_start, "9007199254740992", 16) > 0)))
    return fail(sc, start, "the integer %.*s%s is beyond 2^53 = 9007199254740992, the largest "
                           "this reader holds exactly (expected at most 2^53 in magnitude)",
                shown, (const char *)s + start, more);
  if (literal) return 0;
  char *tok = mt_xmalloc(len + 1);
  memcpy(tok, s + start, len);
  tok[len] = '\0';
  const int off = fabs(strtod(tok, NULL)) == MT_JSON_INT_MAX && !denotes_2p53(tok);
  free(tok);
  if (off)
    return fail(sc, start, "%.*s%s reads as %s2^53 = 9007199254740992 but is not that number "
                           "(expected an integer of at most 2^53 in magnitude, written exactly)",
                shown, (const char *)s + start, more, s[start] == '-' ? "-" : "");
  return 0;
}

static int value(scan *sc);

static int container(scan *sc, int is_array) {
  const char close = is_array ? ']' : '}';
  if (sc->depth >= MAX_DEPTH)
    return fail(sc, sc->i, "nested deeper than %d objects and arrays", MAX_DEPTH);
  frame *f = &sc->path[sc->depth++];
  memset(f, 0, sizeof *f);
  f->is_array = is_array;
  sc->i++;
  ws(sc);
  char b[16];
  if (sc->i < sc->n && sc->s[sc->i] == (unsigned char)close) {
    sc->i++;
    sc->depth--;
    return 0;
  }
  for (int first = 1;; first = 0) {
    if (!is_array) {
      if (sc->i >= sc->n || sc->s[sc->i] != '"')
        return fail(sc, sc->i,
                    first ? "expected a key in double quotes or '}', got %s"
                          : "expected a key in double quotes after ',', got %s (JSON allows no "
                            "trailing comma)",
                    show(sc, sc->i, b, sizeof b));
      if (string(sc, &f->key, &f->key_len)) return -1;
      ws(sc);
      if (sc->i >= sc->n || sc->s[sc->i] != ':')
        return fail(sc, sc->i, "expected ':' after the key, got %s", show(sc, sc->i, b, sizeof b));
      sc->i++;
      ws(sc);
    } else if (!first && sc->i < sc->n && sc->s[sc->i] == ']') {
      return fail(sc, sc->i, "expected a value after ',', got ']' (JSON allows no trailing "
                             "comma)");
    }
    if (value(sc)) return -1;
    ws(sc);
    if (sc->i < sc->n && sc->s[sc->i] == ',') {
      sc->i++;
      ws(sc);
      if (is_array) f->index++;
      continue;
    }
    if (sc->i < sc->n && sc->s[sc->i] == (unsigned char)close) {
      sc->i++;
      sc->depth--;
      return 0;
    }
    return fail(sc, sc->i, "expected ',' or '%c' after %s, got %s", close,
                is_array ? "an array element" : "an object member", show(sc, sc->i, b, sizeof b));
  }
}

static int literal(scan *sc, const char *word) {
  size_t n = strlen(word);
  if (sc->n - sc->i >= n && memcmp(sc->s + sc->i, word, n) == 0) {
    sc->i += n;
    return 0;
  }
  return fail(sc, sc->i, "expected a JSON value (object, array, string, number, true, false or "
                         "null)");
}

static int value(scan *sc) {
  char b[16];
  if (sc->i >= sc->n) return fail(sc, sc->i, "expected a JSON value, got the end of the text");
  switch (sc->s[sc->i]) {
    case '{': return container(sc, 0);
    case '[': return container(sc, 1);
    case '"': return string(sc, NULL, NULL);
    case 't': return literal(sc, "true");
    case 'f': return literal(sc, "false");
    case 'n': return literal(sc, "null");
    default:
      if (sc->s[sc->i] == '-' || is_digit(sc->s[sc->i])) return number(sc);
      return fail(sc, sc->i, "expected a JSON value (object, array, string, number, true, false "
                             "or null), got %s",
                  show(sc, sc->i, b, sizeof b));
  }
}

int mt_json_check(const char *text, size_t len, unsigned flags, mt_json_error *e) {
  memset(e, 0, sizeof *e);
  frame *path = mt_xmalloc(MAX_DEPTH * sizeof *path);
  scan sc = {(const unsigned char *)(text ? text : ""), text ? len : 0, 0, flags, e, 0, path};
  if (sc.n >= 3 && memcmp(sc.s, "\xEF\xBB\xBF", 3) == 0) sc.i = 3; /* cJSON skips a UTF-8 BOM */
  ws(&sc);
  int rc;
  if (sc.i >= sc.n) {
    rc = fail(&sc, sc.i, "no JSON value (the text is empty or only whitespace)");
  } else {
    rc = value(&sc);
    if (!rc) {
      ws(&sc);
      char b[16];
      if (sc.i < sc.n)
        rc = fail(&sc, sc.i, "%s after the JSON value (expected the end of the text)",
                  show(&sc, sc.i, b, sizeof b));
    }
  }
  free(path);
  return rc;
}

void mt_json_format_error(const mt_json_error *e, const char *what, char *err, size_t errlen) {
  if (e->path[0])
    snprintf(err, errlen, "%s: line %d, column %d: %s (at %s)", what, e->line, e->col, e->what,
             e->path);
  else
    snprintf(err, errlen, "%s: line %d, column %d: %s", what, e->line, e->col, e->what);
}

cJSON *mt_json_parse(const char *text, size_t len, unsigned flags, const char *what, char *err,
                     size_t errlen) {
  mt_json_error e;
  if (mt_json_check(text, len, flags, &e)) {
    mt_json_format_error(&e, what, err, errlen);
    return NULL;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (!root) snprintf(err, errlen, "%s: cannot parse (out of memory)", what);
  return root;
}

cJSON *mt_json_int(int64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%" PRId64, v);
  cJSON *o = cJSON_CreateRaw(s);
  MT_ASSERT(o != NULL);
  return o;
}

cJSON *mt_json_uint(uint64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%" PRIu64, v);
  cJSON *o = cJSON_CreateRaw(s);
  MT_ASSERT(o != NULL);
  return o;
}

void mt_json_add_int(cJSON *o, const char *name, int64_t v) {
  cJSON_AddItemToObject(o, name, mt_json_int(v));
}

/* A copy of o with the large integral numbers as raw items. */
static cJSON *exact_copy(const cJSON *o) {
  if (cJSON_IsNumber(o)) {
    const double d = o->valuedouble;
    if (fabs(d) >= 1e15 && fabs(d) <= MT_JSON_INT_MAX && d == floor(d))
      return mt_json_int((int64_t)d);
  }
  cJSON *c = cJSON_Duplicate(o, 0);
  MT_ASSERT(c != NULL);
  for (const cJSON *ch = o->child; ch; ch = ch->next) {
    cJSON *k = exact_copy(ch);
    if (ch->string) cJSON_AddItemToObject(c, ch->string, k);
    else cJSON_AddItemToArray(c, k);
  }
  return c;
}

char *mt_json_print(const cJSON *o) {
  cJSON *c = exact_copy(o);
  char *s = cJSON_PrintUnformatted(c);
  cJSON_Delete(c);
  MT_ASSERT(s != NULL);
  char *out = mt_xmalloc(strlen(s) + 1);
  strcpy(out, s);
  cJSON_free(s);
  return out;
}
