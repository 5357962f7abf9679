"""Parity of megatrain's GPT against the PyTorch reference.

usage: /usr/bin/python3 tests/reference/test_gpt_parity.py DUMP_DIR
DUMP_DIR is written by build/tests/tools/gpt_dump. Checks, in fp64 PyTorch
against megatrain's fp32:
  - loss of one batch: relative error <= 1e-5
  - every parameter gradient: max |g - g_ref| / max |g_ref| <= 1e-4
  - the loss curve of 10 AdamW steps (same lrs, betas, eps, decoupled weight
    decay without decay on biases/LayerNorm): relative error <= 1e-5 per step
Prints one line per check and exits non-zero on any failure.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from gpt_reference import Reference, load_tensor  # noqa: E402


def main():
    d = sys.argv[1]
    ref = Reference(d)
    toks = ref.tokens()
    failures = 0

    loss = ref.loss(toks[0])
    loss.backward()
    mt_loss = ref.meta["loss"]
    rel = abs(mt_loss - loss.item()) / abs(loss.item())
    ok = rel <= 1e-5
    failures += not ok
    print("%s loss: megatrain %.9f torch %.9f rel %.2e" % ("ok  " if ok else "FAIL", mt_loss, loss.item(), rel))

    worst = ("", 0.0)
    for p in ref.meta["params"]:
        name = p["name"]
        g_ref = ref.params[name].grad.detach().numpy().reshape(-1)
        g = load_tensor(d, "grad." + name, (-1,)).astype(np.float64)
        denom = np.abs(g_ref).max()
        err = np.abs(g - g_ref).max() / denom if denom > 0 else np.abs(g).max()
        if err > worst[1]:
            worst = (name, err)
        if err > 1e-4:
            failures += 1
            print("FAIL grad %s: max rel err %.3e" % (name, err))
    print("%s gradients: %d tensors, worst %s rel %.2e" % ("ok  " if worst[1] <= 1e-4 else "FAIL",
                                                          len(ref.meta["params"]), worst[0], worst[1]))

    # AdamW curve from the same initial weights
    ref = Reference(d)
    lrs = ref.meta["adamw_lrs"]
    opt = ref.adamw(lrs)
    losses = []
    for k in range(len(lrs) + 1):
        opt.zero_grad()
        l = ref.loss(toks[k])
        losses.append(l.item())
        if k == len(lrs):
            break
        l.backward()
        for g in opt.param_groups:
            g["lr"] = lrs[k]
        opt.step()
    mt_curve = ref.meta["adamw_losses"]
    worst_c = max(abs(a - b) / abs(b) for a, b in zip(mt_curve, losses))
    ok = worst_c <= 1e-5 and len(mt_curve) == len(losses)
    failures += not ok
    print("%s AdamW curve over %d steps: worst rel %.2e (first %.6f last %.6f)" %
          ("ok  " if ok else "FAIL", len(lrs), worst_c, losses[0], losses[-1]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
