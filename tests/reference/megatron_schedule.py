"""Megatron's learning rate and weight decay per update, run from Megatron-LM's
own source, for the schedule cases of tests/data/lr_schedule_cases.json.

usage: /usr/bin/python3 tests/reference/megatron_schedule.py MEGATRON_LM_DIR CASES.json

Runs megatron/core/optimizer_param_scheduler.py (OptimizerParamScheduler) and
the functions get_optimizer_param_scheduler and update_train_iters of
megatron/training/training.py (taken from the file by name and executed with
a stub get_args; nothing else of Megatron is imported: megatron.core.utils is
stubbed with the one logging helper the scheduler uses). Each case holds
Megatron argument names; missing arguments take Megatron's defaults, and the
weight-decay rule of arguments.py (constant style: start = end =
weight_decay) is applied. The training loop is Megatron's: the scheduler is
built (its constructor steps 0), then for every iteration the optimizer
update uses the param group's lr and weight_decay, and
opt_param_scheduler.step(increment=global_batch_size) follows; the logged
lr is the group's after that step. Prints, per update,
  NAME K CONSUMED_BEFORE LR_APPLIED WD_APPLIED LR_LOGGED WD_LOGGED
with %.17g values (tests/tools/lr_table prints megatrain's the same way).
"""
import ast
import json
import os
import sys
import types


def load_megatron(root):
    # the scheduler module, with its one Megatron import stubbed
    for name in ("megatron", "megatron.core"):
        sys.modules.setdefault(name, types.ModuleType(name))
    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda logger, level, msg: None
    sys.modules["megatron.core.utils"] = utils
    path = os.path.join(root, "megatron", "core", "optimizer_param_scheduler.py")
    ns = {"__name__": "megatron.core.optimizer_param_scheduler"}
    exec(compile(open(path).read(), path, "exec"), ns)
    sched_cls = ns["OptimizerParamScheduler"]
    # the two functions of training.py, by name
    tpath = os.path.join(root, "megatron", "training", "training.py")
    tree = ast.parse(open(tpath).read(), tpath)
    want = {"get_optimizer_param_scheduler", "update_train_iters"}
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in want]
    assert {f.name for f in funcs} == want, "training.py lacks %s" % want
    return sched_cls, ast.Module(body=funcs, type_ignores=[]), tpath


DEFAULTS = dict(
    lr=None, min_lr=0.0, lr_decay_style="linear", lr_warmup_fraction=None, lr_warmup_iters=0,
    lr_warmup_samples=0, lr_warmup_init=0.0, lr_decay_iters=None, lr_decay_samples=None,
    lr_wsd_decay_style="exponential", lr_wsd_decay_iters=None, lr_wsd_decay_samples=None,
    weight_decay=0.01, start_weight_decay=None, end_weight_decay=None,
    weight_decay_incr_style="constant", train_iters=None, train_samples=None,
    global_batch_size=None, use_checkpoint_opt_param_scheduler=False,
    override_opt_param_scheduler=False, step_batch_size_schedule=None, rampup_batch_size=None)


class FakeOptimizer:
    def __init__(self):
        self.param_groups = [{"default_config": True}]


def run_case(sched_cls, module, tpath, case):
    args = types.SimpleNamespace(**DEFAULTS)
    for k, v in case.items():
        if k != "name":
            setattr(args, k, v)
    if args.weight_decay_incr_style == "constant":  # arguments.py
        assert args.start_weight_decay is None and args.end_weight_decay is None
        args.start_weight_decay = args.weight_decay
        args.end_weight_decay = args.weight_decay
    ns = {"get_args": lambda: args, "OptimizerParamScheduler": sched_cls,
          "print_rank_0": lambda *a, **k: None}
    exec(compile(module, tpath, "exec"), ns)
    opt = FakeOptimizer()
    sched = ns["get_optimizer_param_scheduler"](opt)
    g = opt.param_groups[0]
    rows = []
    consumed = 0
    for k in range(1, args.train_iters + 1):
        lr_a, wd_a = g["lr"], g["weight_decay"]  # what optimizer.step() uses
        sched.step(increment=args.global_batch_size)
        rows.append("%s %d %d %.17g %.17g %.17g %.17g" % (case["name"], k, consumed, lr_a, wd_a,
                                                         g["lr"], g["weight_decay"]))
        consumed += args.global_batch_size
    return rows


def main():
    root, cases_path = sys.argv[1], sys.argv[2]
    sched_cls, module, tpath = load_megatron(root)
    for case in json.load(open(cases_path)):
        for r in run_case(sched_cls, module, tpath, case):
            print(r)


if __name__ == "__main__":
    main()
