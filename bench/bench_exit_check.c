/* bench/bench_exit_check.c — cost of the per-iteration preemption agreement
 * (mt_exit_check: one MAX all-reduce of two doubles over the world).
 * Usage: mpirun -np N build/bench/bench_exit_check */
#include <stdio.h>
#include "core/util.h"
#include "parallel/comm.h"
#include "trainer/train_signals.h"
int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  mt_group *w = mt_dist_world(d);
  mt_training_config tc = {0};
  tc.exit_signal_handler = 1;
  snprintf(tc.exit_signal, sizeof tc.exit_signal, "SIGTERM");
  mt_exit_watch x; char err[256];
  mt_exit_watch_start(&x, &tc, mt_now(), err, sizeof err);
  for (int i = 0; i < 100; i++) mt_exit_check(&x, w, mt_now());
  double t0 = mt_now(); int n = 2000;
  for (int i = 0; i < n; i++) mt_exit_check(&x, w, mt_now());
  double dt = mt_now() - t0;
  if (mt_dist_rank(d) == 0) printf("mt_exit_check over %d ranks: %.1f us per call\n", mt_dist_size(d), 1e6 * dt / n);
  mt_dist_finalize(d);
  return 0;
}
