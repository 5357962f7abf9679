"""Compare two schedule tables (tests/tools/lr_table against
tests/reference/megatron_schedule.py or the committed
tests/data/megatron_schedule_table.txt): the same cases and updates, and
every lr and weight decay, applied and logged, within a relative 1e-12
(absolute 1e-18 for zeros). Prints one line per case (updates, worst
relative difference) and exits 1 on any mismatch.

usage: /usr/bin/python3 tests/reference/compare_schedule.py MEGATRAIN.txt MEGATRON.txt
"""
import sys


def load(p):
    rows = {}
    for line in open(p):
        f = line.split()
        if line.startswith("#") or len(f) != 7:
            continue
        rows[(f[0], int(f[1]))] = (int(f[2]), [float(x) for x in f[3:]])
    return rows


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if a.keys() != b.keys() or not a:
        sys.exit("FAIL: the tables hold other updates: %d vs %d rows, only in the first: %s, "
                 "only in the second: %s" % (len(a), len(b), sorted(a.keys() - b.keys())[:5],
                                              sorted(b.keys() - a.keys())[:5]))
    worst, bad = {}, 0
    names = ("lr applied", "wd applied", "lr logged", "wd logged")
    for key in sorted(a):
        (ca, va), (cb, vb) = a[key], b[key]
        if ca != cb:
            bad += 1
            print("FAIL %s update %d: consumed samples %d vs %d" % (key[0], key[1], ca, cb))
        for n, x, y in zip(names, va, vb):
            r = abs(x - y) / abs(y) if y != 0 else abs(x)
            ok = r <= 1e-12 if y != 0 else abs(x) <= 1e-18
            worst[key[0]] = max(worst.get(key[0], 0.0), r)
            if not ok:
                bad += 1
                print("FAIL %s update %d %s: %.17g vs %.17g (rel %.2e)" % (key[0], key[1], n, x, y, r))
    for name in sorted(worst):
        n = sum(1 for k in a if k[0] == name)
        print("%-22s %3d updates, worst rel diff %.2e" % (name, n, worst[name]))
    print("%d mismatches" % bad)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
