/* trainer/train.h — the training loop (Megatron's pretrain()/train()). */
#ifndef MT_TRAINER_TRAIN_H
#define MT_TRAINER_TRAIN_H

#include "parallel/comm.h"
#include "config/config.h"

/* Train the model described by cfg on this process's rank of `dist`: build
 * the backend, the data loader and the model, optionally load a checkpoint,
 * run train_iters iterations with evaluation, logging and checkpointing.
 * Returns the process exit status: 0 on success, 1 on a data/checkpoint/
 * runtime error (message printed with a "[rank N]" prefix). */
int mt_train(const mt_config *cfg, mt_dist *dist);

#endif
