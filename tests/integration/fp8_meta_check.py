"""FP8 delayed-scaling state in layout-free checkpoints (docs/fp8.md
"Checkpoints"): the tensors "<linear>.fp8_meta.<role>" = [scale, amax
history most recent first], read with tests/reference/dist_ckpt.py.

usage (each DIR an iter_NNNNNNN directory or a save directory = its latest):
  fp8_meta_check.py same A B
      every FP8 state of A equals B's bitwise (same names); prints the count
  fp8_meta_check.py shift A B K
      B is A continued for one step of K history updates (K micro-batches)
      under any layout: for every state, B's history entries [K:] equal A's
      [:L-K] bitwise (what A saved was loaded and continued); prints the
      count and how many of B's K new entries equal those of C when a third
      directory C (A's uninterrupted continuation) is given
  fp8_meta_check.py count A
      prints the number of FP8 states and the history length
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import dist_ckpt  # noqa: E402


def states(d):
    _, x = dist_ckpt.load_checkpoint(d, names=lambda n: ".fp8_meta." in n)
    if not x:
        sys.exit("%s holds no FP8 state (no *.fp8_meta.* tensor)" % d)
    return {k: np.asarray(v, dtype=np.float32).ravel() for k, v in x.items()}


def bits(a):
    return a.view(np.uint32)


def main(argv):
    mode = argv[1]
    a = states(argv[2])
    if mode == "count":
        print("%d FP8 states, amax history length %d" % (len(a), len(next(iter(a.values()))) - 1))
        return
    b = states(argv[3])
    if sorted(a) != sorted(b):
        sys.exit("FP8 state names differ: %s vs %s" % (sorted(set(a) ^ set(b))[:4], ""))
    if mode == "same":
        for k in sorted(a):
            if not np.array_equal(bits(a[k]), bits(b[k])):
                sys.exit("%s differs: %r vs %r" % (k, a[k], b[k]))
        print("  %d FP8 states (scale + amax history) bitwise equal" % len(a))
        return
    if mode == "shift":
        K = int(argv[4])
        c = states(argv[5]) if len(argv) > 5 else None
        L = len(next(iter(a.values()))) - 1
        if not 0 < K < L:
            sys.exit("shift %d needs a history longer than it (length %d)" % (K, L))
        same_new = 0
        for k in sorted(a):
            ha, hb = a[k][1:], b[k][1:]
            if not np.array_equal(bits(hb[K:]), bits(ha[:L - K])):
                sys.exit("%s: continued history %r does not hold the saved one %r shifted by %d"
                         % (k, hb, ha, K))
            if not np.any(ha[:L - K] != 0):
                sys.exit("%s: the saved history is empty (nothing checked)" % k)
            if c is not None:
                same_new += int(np.sum(bits(hb[:K]) == bits(c[k][1:K + 1])))
        msg = "  %d FP8 states: the saved history (%d entries) continued bitwise" % (len(a), L - K)
        if c is not None:
            msg += "; new entries bitwise equal to the uninterrupted run's: %d of %d" % (
                same_new, K * len(a))
        print(msg)
        return
    sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main(sys.argv)
