/* tests/unit/check.h — assertions for use inside loops: on failure they
 * print the condition (or both values, in decimal) and the loop's
 * parameters given as a printf format, e.g.
 *   EXPECT_EQ(out[i], 100 + i, "doc %d token %d", d, i);
 * Include after <cmocka.h>. */
#ifndef MT_TESTS_CHECK_H
#define MT_TESTS_CHECK_H

#define EXPECT(cond, fmt, ...)                                             \
  do {                                                                     \
    if (!(cond)) fail_msg("(%s) is false for " fmt, #cond, __VA_ARGS__);   \
  } while (0)

#define EXPECT_EQ(got, want, fmt, ...)                                                     \
  do {                                                                                     \
    long long got_ = (long long)(got), want_ = (long long)(want);                          \
    if (got_ != want_)                                                                     \
      fail_msg("%s = %lld, want %s = %lld, for " fmt, #got, got_, #want, want_, __VA_ARGS__); \
  } while (0)

#endif
