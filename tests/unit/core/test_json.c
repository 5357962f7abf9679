/* tests/unit/core/test_json.c — core/json.h: the strict check refuses what cJSON
 * accepts but JSON does not (leading zeros, "1.", ".5", "+1", trailing
 * bytes, raw control bytes in strings, bad escapes and lone surrogates,
 * trailing commas, over-long numbers, NaN), names where (line, column, key
 * path), and with MT_JSON_INT53 refuses integers a double does not hold
 * exactly; valid texts pass and parse; integers are written with every
 * digit (cJSON's own printer keeps 15). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/json.h"

/* text must fail with a message holding `what` (and at `path`, when given) */
static void bad(const char *text, unsigned flags, const char *what, const char *path) {
  mt_json_error e;
  if (mt_json_check(text, strlen(text), flags, &e) == 0) fail_msg("accepted: %s", text);
  if (!strstr(e.what, what)) fail_msg("'%s': message '%s' lacks '%s'", text, e.what, what);
  if (path && strcmp(e.path, path)) fail_msg("'%s': path '%s', expected '%s'", text, e.path, path);
}

static void good(const char *text, unsigned flags) {
  mt_json_error e;
  if (mt_json_check(text, strlen(text), flags, &e))
    fail_msg("refused '%s': %s at %s", text, e.what, e.path);
  char err[512];
  cJSON *o = mt_json_parse(text, strlen(text), flags, "t", err, sizeof err);
  if (!o) fail_msg("cJSON refused '%s': %s", text, err);
  cJSON_Delete(o);
}

static void test_valid(void **state) {
  (void)state;
  good("{}", 0);
  good(" [ ] ", 0);
  good("0", 0);
  good("-0.0e-5", 0);
  good("{\"a\": [1, 2.5, -3e10, true, false, null, \"x\\n\\u00e9\\ud83d\\ude00\"], \"b\": {}}", 0);
  good("\xEF\xBB\xBF{\"bom\": 1}", 0);
  good("{\"step\": 9007199254740992}", MT_JSON_INT53);
  good("{\"step\": -9007199254740992}", MT_JSON_INT53);
  good("{\"x\": 9.007199254740992e15, \"y\": 90071992547409920e-1, \"z\": 9007199254740992000e-3, "
       "\"w\": 0.0009007199254740992000e19, \"v\": 9007199254740992.000}",
       MT_JSON_INT53);
  good("{\"big\": 1e300, \"f\": 0.1}", MT_JSON_INT53); /* not integer literals */
  good("{\"id\": 12345678901234567890}", 0);            /* without the flag */
  char n200[210] = "[0."; /* long numbers: Debian's cJSON reads them */
  memset(n200 + 3, '1', 200);
  strcpy(n200 + 203, "]");
  good(n200, MT_JSON_INT53);
}

static void test_refused(void **state) {
  (void)state;
  /* the issue-26 crash input: a leading zero, and 2^53 + 1 */
  bad("{\"step\":09007199254740993}", MT_JSON_INT53, "leading zero", "step");
  bad("{\"step\":9007199254740993}", MT_JSON_INT53, "beyond 2^53", "step");
  bad("{\"a\": {\"b\": [1, 2, -18446744073709551615]}}", MT_JSON_INT53, "beyond 2^53", "a.b[2]");
  bad("{\"x\": 9007199254740993.0}", MT_JSON_INT53, "reads as 2^53", "x");
  bad("{\"x\": -90071992547409925e-1}", MT_JSON_INT53, "reads as -2^53", "x");
  bad("[01]", 0, "leading zero", "[0]");
  bad("[-01]", 0, "leading zero", "[0]");
  bad("[1.]", 0, "after the decimal point", NULL);
  bad("[.5]", 0, "expected a JSON value", NULL);
  bad("[+1]", 0, "expected a JSON value", NULL);
  bad("[1e]", 0, "in the exponent", NULL);
  bad("[-]", 0, "after '-'", NULL);
  bad("[NaN]", 0, "expected a JSON value", NULL);
  bad("[Infinity]", 0, "expected a JSON value", NULL);
  bad("[0x10]", 0, "expected ',' or ']'", NULL);
  bad("{\"a\": 1} x", 0, "after the JSON value", NULL);
  bad("{\"a\": \"x\ty\"}", 0, "raw control byte 0x09", "a");
  bad("{\"a\": \"\\x\"}", 0, "invalid escape", "a");
  bad("{\"a\": \"\\u12\"}", 0, "four hexadecimal", "a");
  bad("{\"a\": \"\\udc00\"}", 0, "lone UTF-16 low surrogate", "a");
  bad("{\"a\": \"\\ud800x\"}", 0, "not followed by a low surrogate", "a");
  bad("{\"a\": 1,}", 0, "no trailing comma", "a");
  bad("[1, 2,]", 0, "no trailing comma", "[2]");
  bad("{\"a\" 1}", 0, "expected ':'", "a");
  bad("{'a': 1}", 0, "double quotes", NULL);
  bad("{\"a\": tru}", 0, "expected a JSON value", "a");
  bad("", 0, "empty", NULL);
  bad("  \n ", 0, "empty", NULL);
  bad("{\"a\": \"x", 0, "unterminated string", "a");
  bad("[1\f]", 0, "byte 0x0C", NULL);
  bad("[9007199254740992.0001]", MT_JSON_INT53, "reads as 2^53", "[0]");
  bad("[900719925474099.3e1]", MT_JSON_INT53, "reads as 2^53", "[0]");
  char deep[2100];
  memset(deep, '[', 1001);
  deep[1001] = '\0';
  bad(deep, 0, "nested deeper than 1000", NULL);
}

static void test_position(void **state) {
  (void)state;
  const char *t = "{\n  \"model\": {\n    \"hidden_size\": 012\n  }\n}\n";
  mt_json_error e;
  assert_int_equal(mt_json_check(t, strlen(t), MT_JSON_INT53, &e), -1);
  assert_int_equal(e.line, 3);
  assert_int_equal(e.col, 20);
  assert_string_equal(e.path, "model.hidden_size");
  char err[600];
  mt_json_format_error(&e, "x.json", err, sizeof err);
  assert_non_null(strstr(err, "x.json: line 3, column 20: the number 012 has a leading zero"));
  assert_non_null(strstr(err, "(at model.hidden_size)"));
  /* a NUL inside the given length is a byte after the value */
  assert_int_equal(mt_json_check("{}\0{}", 5, 0, &e), -1);
  assert_non_null(strstr(e.what, "byte 0x00 after the JSON value"));
  /* not NUL-terminated: nothing is read past len */
  char buf[4] = {'[', '1', ']', '9'};
  assert_int_equal(mt_json_check(buf, 3, MT_JSON_INT53, &e), 0);
  assert_int_equal(mt_json_check(buf, 2, MT_JSON_INT53, &e), -1);
}

static void test_exact_ints(void **state) {
  (void)state;
  cJSON *o = cJSON_CreateObject();
  mt_json_add_int(o, "a", 9007199254740992LL);
  mt_json_add_int(o, "b", -1234567890123456789LL);
  cJSON_AddItemToObject(o, "c", mt_json_uint(18446744073709551615ULL));
  char *s = cJSON_PrintUnformatted(o);
  assert_string_equal(s, "{\"a\":9007199254740992,\"b\":-1234567890123456789,\"c\":18446744073709551615}");
  cJSON_free(s);
  cJSON_Delete(o);
  /* what cJSON's printer alone does to 2^53 (why the raw items exist) */
  o = cJSON_CreateNumber(9007199254740992.0);
  s = cJSON_PrintUnformatted(o);
  assert_string_not_equal(s, "9007199254740992");
  cJSON_free(s);
  cJSON_Delete(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_valid), cmocka_unit_test(test_refused),
                                     cmocka_unit_test(test_position),
                                     cmocka_unit_test(test_exact_ints)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
