"""Megatron's batch-size ramp-up per iteration, written from its formula
(megatron/core/num_microbatches_calculator.py,
RampupBatchsizeNumMicroBatchesCalculator, and update_train_iters of
megatron/training/training.py, Megatron-LM before step_batch_size_schedule
replaced them), for the cases of tests/data/rampup_cases.json.

usage: /usr/bin/python3 tests/reference/megatron_rampup.py CASES.json [MEGATRON_LM_DIR]

The formula: with n = (global - start) / increment increments, the samples
per increment are samples / n (a Python float); the batch of the iteration
that starts after `consumed` samples is global once consumed > samples, else
start + increment * int(consumed / per_increment). Sample-based training
runs as many iterations as Megatron's update_train_iters counts: ramp
iterations while consumed <= samples and consumed <= train_samples, then
(train_samples - consumed) // global full batches. The loop adds each
iteration's batch to the consumed samples, as Megatron's training loop.

Prints, per case and iteration,
  NAME K GLOBAL_BATCH NUM_MICRO_BATCHES CONSUMED_BEFORE CONSUMED_AFTER
and one line "NAME train_iters T". With MEGATRON_LM_DIR (a checkout whose
megatron/core/num_microbatches_calculator.py still has
RampupBatchsizeNumMicroBatchesCalculator) the same lines come from that file's
calculator and update_train_iters instead (executed from the checkout; nothing
of it is kept here), so that the two outputs can be compared.
"""
import ast
import json
import os
import sys
import types


class OwnRampup:
    """The ramp-up calculator from Megatron's formula (our own code)."""

    def __init__(self, start, increment, samples, global_batch, micro, dp):
        self.start, self.increment, self.samples = start, increment, samples
        self.global_batch, self.per_step = global_batch, micro * dp
        n_increments = (global_batch - start) // increment
        self.per_increment = samples / n_increments
        self.batch = start

    def update(self, consumed):
        if consumed > self.samples:
            self.batch = self.global_batch
        else:
            self.batch = self.start + int(consumed / self.per_increment) * self.increment

    def num_micro_batches(self):
        return self.batch // self.per_step


def own_train_iters(calc, train_samples):
    iters, consumed = 0, 0
    while consumed <= calc.samples and consumed <= train_samples:
        calc.update(consumed)
        consumed += calc.batch
        iters += 1
    calc.update(0)
    if train_samples > consumed:
        iters += (train_samples - consumed) // calc.global_batch
    return iters


def megatron_factory(root):
    """Megatron's calculator class and update_train_iters, run from `root`."""
    path = os.path.join(root, "megatron", "core", "num_microbatches_calculator.py")
    ns = {"__name__": "megatron.core.num_microbatches_calculator"}
    exec(compile(open(path).read(), path, "exec"), ns)
    tpath = os.path.join(root, "megatron", "training", "training.py")
    tree = ast.parse(open(tpath).read())
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "update_train_iters"]
    mod = ast.Module(body=fn, type_ignores=[])
    tns = {"update_num_microbatches": ns["update_num_microbatches"],
           "get_current_global_batch_size": ns["get_current_global_batch_size"],
           "print_rank_0": lambda *a, **k: None}
    exec(compile(mod, tpath, "exec"), tns)

    def make(c):
        ns["_GLOBAL_NUM_MICROBATCHES_CALCULATOR"] = None
        ns["init_num_microbatches_calculator"](0, c["rampup_batch_size"], c["global_batch_size"],
                                                c["micro_batch_size"], c["data_parallel_size"],
                                                False)
        args = types.SimpleNamespace(train_iters=None, train_samples=c["train_samples"],
                                     rampup_batch_size=c["rampup_batch_size"],
                                     global_batch_size=c["global_batch_size"])
        tns["update_train_iters"](args)
        return args.train_iters, ns["update_num_microbatches"], \
            ns["get_current_global_batch_size"], ns["get_num_microbatches"]
    return make


def main():
    cases = json.load(open(sys.argv[1]))
    make = megatron_factory(sys.argv[2]) if len(sys.argv) > 2 else None
    for c in cases:
        name = c["name"]
        if make:
            iters, update, gbs, nmb = make(c)
        else:
            r = c["rampup_batch_size"]
            calc = OwnRampup(r[0], r[1], r[2], c["global_batch_size"], c["micro_batch_size"],
                             c["data_parallel_size"])
            iters = own_train_iters(calc, c["train_samples"])
            update = lambda consumed, _chk, verbose=False, calc=calc: calc.update(consumed)
            gbs = lambda calc=calc: calc.batch
            nmb = calc.num_micro_batches
        consumed = 0
        for k in range(1, iters + 1):
            update(consumed, True)
            b = gbs()
            print(name, k, b, nmb(), consumed, consumed + b)
            consumed += b
        print(name, "train_iters", iters)


if __name__ == "__main__":
    main()
