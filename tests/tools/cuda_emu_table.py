#!/usr/bin/env python3
"""tests/tools/cuda_emu_table.py — the table of issue 28 from the output of
tests/integration/test_cuda_emu_train.sh (MEGATRAIN_TEST_FULL=1): for each
layout x precision x engine, the worst relative difference of its per-step
metrics (lm loss, grad norm, validation loss) against the 1-rank cuda-emu
run of the same model and precision, and against the cpu backend's 1-rank
run; then the 1-rank cuda-emu runs against the cpu backend.

usage: cuda_emu_table.py LOG [LOG...]   (logs of one or several runs of the
test, e.g. one per precision with MEGATRAIN_EMU_PRECS; a comparison that
appears twice keeps its last figure). Reads the test's comparison lines
   NAME vs REF: metrics agree over N iterations (worst rel diff X, tolerance T)
or "... vs ...: <failure>" (shown as FAIL). Run names: LAYOUT_ENGINE_PREC
(PREC f32 or bf16, ENGINE nccl or mpi); REF is the 1-rank cuda-emu run, or
cpu_<that run> for the cpu backend's."""
import re
import sys

LINE = re.compile(r"^\s+(\S+) vs (\S+): (.*)$")
FIG = re.compile(r"worst rel diff ([0-9.e+-]+), tolerance ([0-9.e+-]+)")
RUN = re.compile(r"^(.+)_(nccl|mpi)_(f32|bf16)$")


def main(paths):
    if not paths:
        sys.exit(__doc__)
    rows, one = {}, {}
    for p in paths:
        with open(p) as f:
            for line in f:
                m = LINE.match(line.rstrip("\n"))
                if not m:
                    continue
                name, ref, rest = m.groups()
                fm = FIG.search(rest)
                val = "%s (tol %s)" % fm.groups() if fm else "FAIL"
                r = RUN.match(name)
                if r:
                    key = (r.group(1), r.group(3), r.group(2))
                    rows.setdefault(key, {})["cpu" if ref.startswith("cpu_") else "emu"] = val
                elif ref.startswith("cpu_"):
                    one["%s vs %s" % (name, ref)] = val
    print("| layout | precision | engine | vs 1-rank cuda-emu | vs cpu backend 1-rank |")
    print("| --- | --- | --- | --- | --- |")
    order = {"f32": 0, "bf16": 1}
    for lay, prec, eng in sorted(rows, key=lambda k: (k[0], order[k[1]], k[2])):
        r = rows[(lay, prec, eng)]
        print("| %s | %s | %s | %s | %s |" % (lay, "fp32" if prec == "f32" else prec, eng,
                                             r.get("emu", "-"), r.get("cpu", "-")))
    print("\n| 1-rank cuda-emu run vs the cpu backend | worst rel diff |")
    print("| --- | --- |")
    for k in sorted(one):
        print("| %s | %s |" % (k, one[k]))


if __name__ == "__main__":
    main(sys.argv[1:])
