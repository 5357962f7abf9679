/* trainer/lr_config.c — see lr_config.h. */
#include "trainer/lr_config.h"

mt_lr_schedule mt_trainer_lr_schedule(const mt_training_config *t) {
  mt_lr_schedule s = {0};
  s.max_lr = mt_lr_decimal(t->lr);
  s.min_lr = mt_lr_decimal(t->min_lr);
  s.init_lr = mt_lr_decimal(t->lr_warmup_init);
  s.style = mt_lr_style_parse(t->lr_decay_style);
  s.gbs = t->global_batch_size;
  s.samples = t->train_samples > 0;
  s.warmup_iters = t->lr_warmup_iters;
  s.decay_iters = t->lr_decay_iters;
  s.train_iters = t->train_iters;
  s.warmup_samples = t->lr_warmup_samples;
  s.decay_samples = t->lr_decay_samples;
  s.train_samples = t->train_samples;
  s.warmup_fraction = mt_lr_decimal(t->lr_warmup_fraction);
  s.wsd_decay_iters = t->lr_wsd_decay_iters;
  s.wsd_decay_samples = t->lr_wsd_decay_samples;
  s.wsd_style = mt_wsd_style_parse(t->lr_wsd_decay_style);
  s.wd_style = mt_wd_style_parse(t->weight_decay_incr_style);
  /* Megatron's arguments.py: the constant style uses weight_decay */
  const int cst = s.wd_style == MT_WD_CONSTANT;
  s.start_wd = mt_lr_decimal(cst ? t->weight_decay : t->start_weight_decay);
  s.end_wd = mt_lr_decimal(cst ? t->weight_decay : t->end_weight_decay);
  return s;
}
