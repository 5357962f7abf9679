#!/usr/bin/python3
"""tests/integration/moe_compare.py — the MoE layout-parity comparison (run by
cmp_moe in moe_lib.sh): two runs' metrics files agree per iteration, key by
key (nested lists flattened, e.g. tokens per expert per MoE layer), within a
relative tolerance (0 = bitwise); iterations FIRST..LAST (default 20) must
be present in both. Prints one summary line; exits non-zero naming the first mismatch.

usage: moe_compare.py A.jsonl B.jsonl NAME_A NAME_B [--keys K,K?,...]
         [--first N] [--last N] [--tol T] [--bitwise K,...] [--bias-moved]
A key ending in '?' may be absent from both runs (not from only one)."""
import argparse, json, math, sys

DEFAULT_KEYS = ("lm_loss,grad_norm,load_balancing_loss,z_loss,dropped_tokens,"
                "tokens_per_expert_max")

ap = argparse.ArgumentParser()
ap.add_argument("a"); ap.add_argument("b"); ap.add_argument("name_a"); ap.add_argument("name_b")
ap.add_argument("--keys", default=DEFAULT_KEYS, help="comma-separated; '?' suffix: optional")
ap.add_argument("--first", type=int, default=1, help="first iteration compared")
ap.add_argument("--last", type=int, default=20, help="last iteration (the runs' train_iters)")
ap.add_argument("--tol", type=float, default=1e-5, help="relative tolerance (0: bitwise)")
ap.add_argument("--bitwise", default="", help="keys that must be bitwise equal in every iteration (counts, expert bias)")
ap.add_argument("--bias-moved", action="store_true",
                help="require non-zero expert_bias entries at the last step and report them")
opt = ap.parse_args()

def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p))
            if "lm_loss" in o and o["iteration"] >= opt.first}

def flat(v):
    return [w for u in v for w in flat(u)] if isinstance(v, list) else [v]

a, b = load(opt.a), load(opt.b)
assert a.keys() == b.keys() and len(a) == opt.last + 1 - opt.first, (sorted(a), sorted(b))
keys = [k.rstrip("?") for k in opt.keys.split(",")]
optional = {k.rstrip("?") for k in opt.keys.split(",") if k.endswith("?")}
report_bitwise = [k for k in opt.bitwise.split(",") if k]
worst, worst_key, not_bitwise = 0.0, "", set()
for it in sorted(a):
    for k in keys:
        if k in optional and k not in a[it] and k not in b[it]:
            continue
        if k not in a[it] or k not in b[it]:
            where = opt.name_b if k in a[it] else opt.name_a if k in b[it] else "both"
            sys.exit("%s vs %s: iteration %d: %s missing from %s" % (
                opt.name_a, opt.name_b, it, k, where))
        x, y = a[it][k], b[it][k]
        xs, ys = flat(x), flat(y)
        if len(xs) != len(ys):
            sys.exit("%s vs %s: iteration %d %s: lengths differ: %r vs %r" % (
                opt.name_a, opt.name_b, it, k, x, y))
        for u, v in zip(xs, ys):
            r = abs(u - v) / max(abs(v), 1e-30) if u != v else 0.0
            if u != v and k in report_bitwise:
                not_bitwise.add(k)
            if r > worst or math.isnan(r):
                worst, worst_key = r, "%s@%d" % (k, it)
            if not r <= opt.tol or (opt.tol == 0 and u != v):
                sys.exit("%s vs %s: iteration %d %s: %r vs %r (rel %.3e > %g)" % (
                    opt.name_a, opt.name_b, it, k, x, y, r, opt.tol))

if not_bitwise:
    sys.exit("%s vs %s: %s not bitwise equal (expected bitwise: integer counts and the expert bias "
             "they drive)" % (opt.name_a, opt.name_b, ",".join(sorted(not_bitwise))))
last = a[opt.last]
span = "%d steps" % opt.last if opt.first == 1 else "iterations %d-%d" % (opt.first, opt.last)
line = "%s vs %s: %s agree (worst rel %.2e%s, tolerance %g)" % (
    opt.name_a, opt.name_b, span, worst, " at %s" % worst_key if worst else "", opt.tol)
if report_bitwise:
    line += "; %s %s" % ("/".join(report_bitwise), "bitwise equal" if not not_bitwise
                         else "")
fields = (("lm", "lm_loss", "%.5f"), ("gn", "grad_norm", "%.5f"), ("lb", "load_balancing_loss", "%.5f"),
          ("z", "z_loss", "%.4f"), ("dropped", "dropped_tokens", "%d"),
          ("tokens/expert max", "tokens_per_expert_max", "%s"))
line += "; step %d: " % opt.last + " ".join("%s %s" % (label, fmt % (last[k],))
                                         for label, k, fmt in fields if k in last)
if opt.bias_moved:
    bias = flat(last.get("expert_bias", []))
    moved = sum(1 for v in bias if v != 0)
    assert moved > 0, "%s: expert bias never moved" % opt.name_a
    line += ", %d of %d bias entries non-zero" % (moved, len(bias))
print(line)
