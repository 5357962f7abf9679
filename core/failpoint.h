/* core/failpoint.h — fault injection for tests: the environment variable
 * MEGATRAIN_FAILPOINT holds a comma-separated list of tokens
 * NAME[:ARG[:ARG...]] (ARG: a decimal integer), e.g.
 *   MEGATRAIN_FAILPOINT=checkpoint_write:20,freeze:2:3
 * Names in use (docs/checkpoint.md, README "Environment"):
 *   checkpoint_write:N    the rank writes half of its shard file of iteration
 *                         N, then SIGKILL (crash during a save)
 *   checkpoint_enospc:N   the rank's shard write of iteration N fails with
 *                         ENOSPC (failed-save test); checkpoint_eio:N: EIO
 *   checkpoint_latest_enospc:N  rank 0's write of latest_checkpointed_iteration.txt
 *                         after iteration N is published fails with ENOSPC
 *   checkpoint_stall:N    the background writer of an asynchronous save of
 *                         iteration N sleeps before writing (kill -9 test)
 *   freeze:RANK:ITER      rank RANK stops at iteration ITER (hang test)
 *   stop:RANK:ITER        rank RANK sends itself SIGSTOP inside its first
 *                         collective of iteration ITER (hang test)
 *   moe_route_skew        every MoE router adds 100 to the logits of experts
 *                         0 .. k-1 before routing (read when the model is
 *                         built): every token's slots go to those experts,
 *                         the dropless worst case of the receive buffers
 *                         (tests/integration/test_moe_skew.sh)
 * The variable is read at each call (no state is kept); malformed tokens
 * are ignored (they match nothing). */
#ifndef MT_CORE_FAILPOINT_H
#define MT_CORE_FAILPOINT_H

#include <stdint.h>

#define MT_FAILPOINT_MAX_ARGS 4

/* Look up token `name` in MEGATRAIN_FAILPOINT: returns the number of
 * integer arguments it has (0..MT_FAILPOINT_MAX_ARGS, stored in args[],
 * which may be NULL) or -1 when no token has that name. The first matching
 * token wins. */
int mt_failpoint_get(const char *name, int64_t args[MT_FAILPOINT_MAX_ARGS]);

/* 1 when some token `name` has first argument equal to a0 (e.g.
 * checkpoint_write:N with N == the iteration being saved), else 0. */
int mt_failpoint_at(const char *name, int64_t a0);

/* Parse `spec` (the same syntax) instead of the environment; for tests and
 * for mt_failpoint_get. */
int mt_failpoint_parse(const char *spec, const char *name, int64_t args[MT_FAILPOINT_MAX_ARGS]);

#endif
