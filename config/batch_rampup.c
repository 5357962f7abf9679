/* config/batch_rampup.c — see batch_rampup.h. */
#include "config/batch_rampup.h"

mt_batch_rampup mt_batch_rampup_make(const int64_t rampup[3], int64_t global_batch_size) {
  mt_batch_rampup r = {0};
  r.global = global_batch_size;
  if (rampup[0] <= 0 || rampup[1] <= 0 || global_batch_size <= rampup[0]) return r;
  r.start = rampup[0];
  r.increment = rampup[1];
  r.samples = rampup[2];
  const int64_t n_increments = (global_batch_size - r.start) / r.increment;
  r.per_increment = (double)r.samples / (double)n_increments;
  return r;
}

int64_t mt_batch_rampup_gbs(const mt_batch_rampup *r, int64_t consumed) {
  if (r->start <= 0 || consumed > r->samples) return r->global;
  /* Python's int() of the float quotient: truncation */
  const int64_t steps = (int64_t)((double)consumed / r->per_increment);
  const int64_t gbs = r->start + steps * r->increment;
  return gbs < r->global ? gbs : r->global;
}

int64_t mt_batch_rampup_train_iters(const mt_batch_rampup *r, int64_t train_samples) {
  if (r->start <= 0) return r->global > 0 ? train_samples / r->global : 0;
  int64_t iters = 0, consumed = 0;
  while (consumed <= r->samples && consumed <= train_samples) {
    const int64_t b = mt_batch_rampup_gbs(r, consumed);
    /* iterations that surely keep this batch size and the loop condition
     * (one batch short of the next increment and of both limits): taken at
     * once, so that a long ramp takes no longer than its increments */
    const int64_t k = (b - r->start) / r->increment;
    const double next = (double)(k + 1) * r->per_increment;
    const int64_t lim = r->samples < train_samples ? r->samples : train_samples;
    int64_t j = (int64_t)((next - (double)consumed) / (double)b) - 2;
    if ((lim - consumed) / b - 1 < j) j = (lim - consumed) / b - 1;
    if (j > 0) {
      consumed += j * b;
      iters += j;
    }
    consumed += b;
    iters++;
  }
  if (train_samples > consumed) iters += (train_samples - consumed) / r->global;
  return iters;
}
