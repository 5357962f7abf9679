/* core/util.h — error handling and small helpers shared by every layer.
 *
 * Errors come in two kinds (docs/architecture.md, "Errors"):
 *  - bad user input: reported by the caller with a message and exit status 2
 *    (config) or 1 (data/checkpoint); never through these macros;
 *  - broken invariants / failed library calls: mt_fatal, MT_ASSERT and the
 *    call checks built on them (MT_MPI_CHECK in parallel/comm_impl.h;
 *    MT_CUDA_CHECK, MT_CUBLAS_CHECK in cuda/cuda_check.h; MT_NCCL_CHECK in
 *    parallel/nccl_api.h)
 *    print "[rank N] file:line: message" and abort the whole job through the
 *    abort hook (MPI_Abort once the distributed runtime is up), so no rank
 *    hangs.
 */
#ifndef MT_CORE_UTIL_H
#define MT_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Process-wide identity used only to prefix messages. Set once by the
 * distributed runtime at start-up (parallel/dist.c); -1 until then. This is
 * the single piece of process state outside context structs: it is written
 * once before any thread starts and only read afterwards. */
void mt_set_log_rank(int rank);

/* Hook called by mt_fatal after printing; the distributed runtime installs
 * one that calls MPI_Abort so every rank exits non-zero. Default: abort(). */
typedef void (*mt_abort_fn)(int code);
void mt_set_abort_hook(mt_abort_fn fn);

/* End the whole job with exit status `code` through the abort hook (every
 * rank exits non-zero); a plain exit(code) when no hook is installed. */
void mt_abort_job(int code) __attribute__((noreturn));

/* Print "[rank N] file:line: <fmt>" to stderr and abort the job. */
void mt_fatal_at(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
#define mt_fatal(...) mt_fatal_at(__FILE__, __LINE__, __VA_ARGS__)

#define MT_ASSERT(cond)                                                        \
  do {                                                                         \
    if (!(cond)) mt_fatal("assertion failed: %s", #cond);                      \
  } while (0)

/* Allocation on the host that cannot fail silently (host bookkeeping only;
 * tensors go through the backend allocator). */
void *mt_xmalloc(size_t n);
void *mt_xcalloc(size_t n, size_t sz);
void *mt_xrealloc(void *p, size_t n);
char *mt_xstrdup(const char *s);

/* Wall clock in seconds (CLOCK_MONOTONIC). */
double mt_now(void);

/* The shortest decimal that reads back as f, as a double: the value the
 * user wrote in the config (configs store floats), e.g. 0.35f -> 0.35. */
double mt_float_decimal(float f);

/* Channels of each head that RoPE rotates, as Megatron's RotaryEmbedding
 * computes them: kv_channels when rotary_percent >= 1, else
 * int(kv_channels * rotary_percent) in double precision on the decimal the
 * config gave (80 x 0.35 = 28, not 27 as in float). */
int mt_rotary_dim(int kv_channels, float rotary_percent);

/* Round n up to a multiple of m (m > 0). */
static inline int64_t mt_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
/* Greatest common divisor of a, b >= 0 (gcd(a, 0) = a): the row unit that
 * splits head widths of different sizes into whole gathers (MLA, the CP ring). */
static inline int64_t mt_gcd64(int64_t a, int64_t b) {
  while (b) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

#endif
