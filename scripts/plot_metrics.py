#!/usr/bin/python3
"""Plot a megatrain metrics file (JSONL): train and validation loss against
iteration, and throughput (tokens/s), to one PNG.

usage: /usr/bin/python3 scripts/plot_metrics.py METRICS.jsonl [MORE.jsonl ...] -o OUT.png [--title T] [--loss-only]
Several files are drawn on the same axes, labelled by file name.
--loss-only leaves out the throughput panel (for runs timed on a shared machine).
Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    it, loss, vit, vloss, tit, tps = [], [], [], [], [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            if "lm_loss" in o:
                it.append(o["iteration"])
                loss.append(o["lm_loss"])
                if o.get("tokens_per_s") is not None:
                    tit.append(o["iteration"])
                    tps.append(o["tokens_per_s"])
            if "val_loss" in o:
                vit.append(o["iteration"])
                vloss.append(o["val_loss"])
    return it, loss, vit, vloss, tit, tps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="megatrain")
    ap.add_argument("--loss-only", action="store_true", help="no throughput panel")
    a = ap.parse_args()
    if a.loss_only:
        fig, ax1 = plt.subplots(1, 1, figsize=(7, 4.5))
        ax2 = None
    else:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for path in a.metrics:
        name = os.path.basename(path)
        it, loss, vit, vloss, tit, tps = load(path)
        ax1.plot(it, loss, lw=1, label="train lm loss (%s)" % name)
        if vit:
            ax1.plot(vit, vloss, "o-", label="validation loss (%s)" % name)
        if ax2 is not None:
            ax2.plot(tit, tps, lw=1, label=name)
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("loss (nats/token)")
    ax1.grid(alpha=0.3)
    ax1.legend()
    ax1.set_title(a.title + ": loss")
    if ax2 is None:
        fig.tight_layout()
        fig.savefig(a.output, dpi=110)
        print("wrote", a.output)
        return
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("tokens/s")
    ax2.grid(alpha=0.3)
    ax2.set_title(a.title + ": throughput")
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
