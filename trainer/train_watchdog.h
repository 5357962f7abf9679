/* trainer/train_watchdog.h — the trainer's side of the hang watchdog
 * (parallel.distributed_timeout_minutes; docs/communication.md "Hang
 * diagnosis") and the freeze fault-injection point. */
#ifndef MT_TRAINER_TRAIN_WATCHDOG_H
#define MT_TRAINER_TRAIN_WATCHDOG_H

#include <stdint.h>

#include "config/config.h"
#include "parallel/comm.h"

/* Arm the deadline of every collective and point-to-point operation with
 * cfg->parallel.distributed_timeout_minutes. Local (no communication). */
void mt_trainer_watchdog_start(const mt_config *cfg, mt_dist *dist);

/* At the start of iteration `iteration` (1-based): record it for hang
 * reports, then apply the fault-injection point
 * MEGATRAIN_FAILPOINT=freeze:RANK:ITER (one of comma-separated NAME:ARGS
 * tokens): world rank RANK prints one line and stops for good at the start
 * of iteration ITER — its process stays alive and silent, as a deadlocked
 * or stuck rank would. Local. */
void mt_trainer_iteration_begin(mt_dist *dist, int64_t iteration);

#endif
