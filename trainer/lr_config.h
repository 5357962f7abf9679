/* trainer/lr_config.h — the optimizer schedule (optimizer/lr_schedule.h) of
 * a resolved config's training section: Megatron's
 * get_optimizer_param_scheduler inputs, rates as the decimals the config
 * holds (1e-3f as 0.001). Used at setup and, with the checkpoint's values,
 * by training.use_checkpoint_opt_param_scheduler on resume. */
#ifndef MT_TRAINER_LR_CONFIG_H
#define MT_TRAINER_LR_CONFIG_H

#include "config/config.h"
#include "optimizer/lr_schedule.h"

/* Host only; the style names must parse (the config check ensures it). */
mt_lr_schedule mt_trainer_lr_schedule(const mt_training_config *t);

#endif
