/* core/json.h — every JSON text megatrain reads goes through here: a strict
 * check of the raw text against RFC 8259 before cJSON parses it (cJSON
 * itself accepts what is not JSON: leading zeros "09", "1.", ".5", trailing
 * bytes after the value, raw control characters in strings, lone UTF-16
 * surrogates), with an option that refuses integers a double cannot hold
 * exactly; and the writer side: integers printed with every digit (cJSON
 * prints a number with 15 significant digits, so 9007199254740992 comes
 * back as 9007199254740990). */
#ifndef MT_CORE_JSON_H
#define MT_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* The largest integer every double holds exactly, 2^53. */
#define MT_JSON_INT_MAX 9007199254740992.0

enum {
  /* refuse a number written as an integer (no fraction, no exponent) whose
   * magnitude is above 2^53, and a number of any form that reads as ±2^53
   * without being exactly ±2^53 (e.g. 9007199254740993.0): readers that
   * take integers through cJSON's double would get another value. Readers
   * that take no numbers (JSON lines of a corpus) leave it off. */
  MT_JSON_INT53 = 1u << 0
};

/* The first problem found in a text. */
typedef struct {
  size_t offset;   /* byte offset of the problem */
  int line, col;   /* 1-based; col counts bytes */
  char path[192];  /* the value it is in: "model.hidden_size", "files[2]", "" (top level) */
  char what[256];  /* what is wrong and what was expected */
} mt_json_error;

/* Check that text[0, len) is one JSON text (RFC 8259: one value with
 * optional whitespace " \t\n\r" around it, a leading UTF-8 byte-order mark
 * allowed as cJSON skips it; numbers -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?;
 * strings without raw bytes < 0x20, with the escapes \" \\ \/ \b \f \n \r
 * \t \uXXXX and surrogate pairs complete; nesting at most 1000 deep, as
 * cJSON's limit) and, with MT_JSON_INT53, the integer rule above. Bytes
 * >= 0x80 in strings are not checked as UTF-8. Returns 0, or -1 with *e
 * filled. Pure function of its arguments. */
int mt_json_check(const char *text, size_t len, unsigned flags, mt_json_error *e);

/* "WHAT: line L, column C: PROBLEM (at PATH)" (PATH left out at the top
 * level) into err. */
void mt_json_format_error(const mt_json_error *e, const char *what, char *err, size_t errlen);

/* mt_json_check, then cJSON. Returns the tree (cJSON_Delete), or NULL with
 * the message of mt_json_format_error in err ("cannot parse" when cJSON
 * refuses what passed the check: out of memory). `what` names the text in
 * messages (a path, "metadata.json of ..."). */
cJSON *mt_json_parse(const char *text, size_t len, unsigned flags, const char *what, char *err,
                     size_t errlen);

/* A number item that prints v with all its digits (a raw item: cJSON
 * prints it verbatim). Aborts on out of memory. */
cJSON *mt_json_int(int64_t v);
cJSON *mt_json_uint(uint64_t v);
/* Add mt_json_int(v) to object o under name. */
void mt_json_add_int(cJSON *o, const char *name, int64_t v);

/* The text of tree `o` (compact: cJSON_PrintUnformatted) with every
 * integral number of at least 10^15 and at most 2^53 in magnitude printed
 * with all its digits (cJSON alone keeps 15 significant ones): a parsed
 * tree printed again reads back to the same numbers. malloc'ed (free()).
 * Aborts on out of memory. */
char *mt_json_print(const cJSON *o);

#endif
