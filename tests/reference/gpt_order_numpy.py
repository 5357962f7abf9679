#!/usr/bin/env python3
"""tests/reference/gpt_order_numpy.py — an independent NumPy re-implementation
of Megatron-core's GPTDataset / BlendedDataset sample order (the rules of
docs/data.md "GPT samples"), written from the description, not from
megatrain's C: numpy.random.RandomState does the MT19937 and the legacy
shuffle, so this checks data/np_random.c and data/gpt_index.c against NumPy
itself. Same arguments and output as tests/tools/gpt_samples.c (for train,
valid, test: int64 n, then n samples of seq + 1 int32 ids); reads .bin/.idx
with tests/reference/mmidx_reader.py."""
import argparse
import math
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mmidx_reader import read_index  # noqa: E402


def split_ranges(split, n):
    v = [float(x) for x in re.findall(r"[.0-9]+", split)]
    v = v + [0.0] * (3 - len(v))
    w = (np.array(v) / np.sum(np.array(v))).tolist()
    c = [0]
    for x in w:
        c.append(c[-1] + x)
    return [None if c[i + 1] <= c[i] else (int(round(c[i] * float(n))), int(round(c[i + 1] * float(n))))
            for i in range(3)]


class Gpt:
    def __init__(self, lens, tokens, offs, docs, n, seq, seed, extra):
        self.lens, self.tokens, self.offs, self.seq, self.extra = lens, tokens, offs, seq, extra
        tpe = int(lens[docs].sum())
        e, t = 1, tpe
        if n is not None:
            while t < n * seq + extra:
                e += 1
                t += tpe
        sep = False
        if e > 1:
            sans = ((e - 1) * tpe - extra) // seq
            sep = n - sans < int(0.8 * ((tpe - extra) // seq))
        rs = np.random.RandomState(seed)

        def doc_index(epochs):
            d = np.tile(docs, epochs).astype(np.int32)
            rs.shuffle(d)
            return d

        self.di = np.concatenate([doc_index(e - 1), doc_index(1)]) if sep else doc_index(e)
        total = (e * tpe - extra) // seq
        si = [(0, 0)]
        k, off = 0, 0  # walk the stream: sample s starts at token s * seq
        for s in range(1, total + 1):
            need = seq
            while True:
                rem = int(lens[self.di[k]]) - off
                if need < rem or (need == rem and k == len(self.di) - 1):
                    off += need
                    break
                need -= rem
                k, off = k + 1, 0
            si.append((k, off))
        self.si = si
        first = np.arange(sans if sep else total, dtype=np.int64)
        rs.shuffle(first)
        if sep:
            last = np.arange(sans, total, dtype=np.int64)
            rs.shuffle(last)
            first = np.concatenate([first, last])
        self.sh = first

    def __len__(self):
        return len(self.sh)

    def get(self, i):
        j = self.sh[i]
        (k, off), out, need = self.si[j], [], self.seq + self.extra
        while need > 0:
            d = self.di[k]
            take = min(need, int(self.lens[d]) - off)
            out.append(self.tokens[self.offs[d] + off:self.offs[d] + off + take])
            need -= take
            k, off = k + 1, 0
        return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--split", default="969,30,1")
    ap.add_argument("--num-samples", type=int, nargs=3, required=True)
    ap.add_argument("--first-train", type=int, default=-1)
    ap.add_argument("--surplus", type=float, default=0.005)
    ap.add_argument("--no-extra-token", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    extra = 0 if a.no_extra_token else 1
    weighted = re.fullmatch(r"[0-9.eE+-]+", a.paths[0]) is not None
    prefixes = a.paths[1::2] if weighted else a.paths
    w = np.array([float(x) for x in a.paths[0::2]]) if weighted else None
    if weighted:
        w = (w / np.sum(w)).tolist()
    src = []
    for p in prefixes:
        ix = read_index(p)
        lens = np.asarray(ix["lens"], dtype=np.int64)
        offs = np.concatenate([[0], np.cumsum(lens)[:-1]])
        src.append((lens, np.fromfile(p + ".bin", dtype=ix["dtype"]).astype(np.int32), offs))
    with open(a.out, "wb") as f:
        for s in range(3):
            want = a.num_samples[s]
            items = []
            if want > 0:
                parts, targets = [], []
                for k, (lens, tok, offs) in enumerate(src):
                    r = split_ranges(a.split, len(lens))[s]
                    docs = np.arange(r[0], r[1], dtype=np.int32) if r else None
                    if r is None or lens[docs].sum() < 2:
                        parts = None
                        break
                    if len(src) == 1 and not weighted:
                        n = want
                    elif weighted:
                        targets.append(int(math.ceil(want * w[k])))
                        n = int(math.ceil(targets[-1] * (1 + a.surplus)))
                    else:
                        n = None
                    parts.append(Gpt(lens, tok, offs, docs, n, a.seq, a.seed, extra))
                if parts is None:
                    pass
                elif len(src) == 1 and not weighted:
                    items = [parts[0].get(i) for i in range(len(parts[0]))]
                else:
                    bw = w if weighted else [len(p) for p in parts]
                    bw = (np.array(bw, dtype=np.float64) / np.sum(np.array(bw, dtype=np.float64))).tolist()
                    size = sum(targets) if weighted else min(want, sum(len(p) for p in parts))
                    count = [0] * len(parts)
                    for i in range(size):
                        x = max(float(i), 1.0)
                        err = [bw[k] * x - count[k] for k in range(len(parts))]
                        k = int(np.argmax(err))  # first maximum
                        items.append(parts[k].get(count[k]))
                        count[k] += 1
            if s == 0 and 0 <= a.first_train < len(items):
                items = items[:a.first_train]
            f.write(struct.pack("<q", len(items)))
            for t in items:
                f.write(t.astype("<i4").tobytes())
            print("%s: %d samples" % (("train", "valid", "test")[s], len(items)))


if __name__ == "__main__":
    main()
