"""Reader of megatrain checkpoints that returns global tensors: the
layout-free format (megatrain-dist-v2, read by tests/reference/dist_ckpt.py)
and the previous per-layout format (checkpoint/legacy_format.c format v1, whose
tensor-parallel shards are reassembled here).

usage as a tool:
  /usr/bin/python3 tests/reference/ckpt_reader.py compare DIR_A DIR_B [RELTOL]
      compare the parameters of the latest checkpoints under DIR_A and DIR_B
      (any layouts, either format): the model parameters only (not the
      optimizer state nor the buffers such as the MoE expert bias); the whole model's relative L2 difference
      ||a - b|| / ||b|| over all parameters must be <= RELTOL (default 1e-5);
      the worst single tensor is printed too. Element-wise comparison is not
      meaningful after AdamW steps: gradients that are zero up to rounding
      (e.g. the key bias, to which softmax is invariant) are normalised by
      Adam into full-size steps of random sign, so such elements differ
      between any two summation orders.
"""
import glob
import json
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_ckpt  # noqa: E402

KINDS = ["param", "exp_avg", "exp_avg_sq", "master"]
# optimizer state names of the layout-free format per kind (prefix + parameter name)
DIST_PREFIX = {"exp_avg": "optimizer.state.exp_avg.", "exp_avg_sq": "optimizer.state.exp_avg_sq.",
               "master": "optimizer.state.fp32_param."}
# persistent buffers stored next to the parameters (not parameters)
BUFFER_SUFFIXES = ("router.expert_bias", "router.tokens_per_expert")


def read_file(path):
    data = open(path, "rb").read()
    assert data[:8] == b"MTCKPT\x00\x01", "bad magic in " + path
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    assert zlib.crc32(data[:-4]) & 0xFFFFFFFF == crc, "checksum mismatch in " + path
    off = 8
    version, nrec = struct.unpack_from("<II", data, off)
    off += 8
    iteration, consumed, step, skipped, nan, seed = struct.unpack_from("<qqqqqQ", data, off)
    off += 48
    recs = []
    for _ in range(nrec):
        (nl,) = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + nl].decode()
        off += nl
        kind, dtype = struct.unpack_from("<II", data, off)
        off += 8
        shape = struct.unpack_from("<6q", data, off)
        off += 48
        (nbytes,) = struct.unpack_from("<Q", data, off)
        off += 8
        arr = np.frombuffer(data, dtype=np.float32, count=nbytes // 4, offset=off)
        off += nbytes
        recs.append((name, KINDS[kind], shape, arr))
    return {"iteration": iteration, "consumed": consumed, "step": step, "records": recs}


def swiglu_halves(meta, name):
    """True when tensor `name` is a SwiGLU linear_fc1 weight or bias split over
    TP (the dense MLP's or the shared experts') (model.swiglu in the checkpoint's config): each shard then holds its
    slice of the gate half followed by its slice of the up half, placed at
    offset (row or column) o and at global_size/2 + o."""
    cfg = meta.get("config", {}).get("model", {})
    return bool(cfg.get("swiglu")) and ".experts." not in name and (
        name.endswith("mlp.linear_fc1.weight") or name.endswith("mlp.linear_fc1.bias")
        or name.endswith("mlp.shared_experts.linear_fc1.weight")
        or name.endswith("mlp.shared_experts.linear_fc1.bias"))


def load_dist(it_dir, kind):
    """{name: global array} of one kind from a layout-free checkpoint."""
    if kind == "param":
        def pick(n):
            return not n.startswith("optimizer.") and not n.endswith(BUFFER_SUFFIXES)
        return dist_ckpt.load_checkpoint(it_dir, pick)[1]
    prefix = DIST_PREFIX[kind]
    t = dist_ckpt.load_checkpoint(it_dir, lambda n: n.startswith(prefix))[1]
    return {n[len(prefix):]: a for n, a in t.items()}


def load_global(ckpt_dir, kind="param"):
    """{name: global np.ndarray [rows, cols]} of the latest checkpoint under
    ckpt_dir: index.bin + shard files, or all mp_rank_* files."""
    it = int(open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt")).read())
    it_dir = os.path.join(ckpt_dir, "iter_%07d" % it)
    if os.path.exists(os.path.join(it_dir, "index.bin")):
        return load_dist(it_dir, kind)
    files = sorted(glob.glob(os.path.join(it_dir, "mp_rank_*", "model_optim_rng.bin")))
    assert files, "no checkpoint files under " + ckpt_dir
    meta_path = os.path.join(it_dir, "metadata.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    out, seen = {}, {}
    for f in files:
        for name, k, shape, arr in read_file(f)["records"]:
            if k != kind:
                continue
            rows, cols, lr, lc, ro, co = shape
            if name not in out:
                out[name] = np.full((rows, cols), np.nan, dtype=np.float32)
            a = arr.reshape(lr, lc)
            if swiglu_halves(meta, name) and rows > 1:
                out[name][ro:ro + lr // 2, co:co + lc] = a[:lr // 2]
                out[name][rows // 2 + ro:rows // 2 + ro + lr // 2, co:co + lc] = a[lr // 2:]
            elif swiglu_halves(meta, name):
                out[name][:, co:co + lc // 2] = a[:, :lc // 2]
                out[name][:, cols // 2 + co:cols // 2 + co + lc // 2] = a[:, lc // 2:]
            else:
                out[name][ro:ro + lr, co:co + lc] = a
    for name, a in out.items():
        assert not np.isnan(a).any(), "tensor %s not fully covered by the shards" % name
    return out


def compare(a_dir, b_dir, tol):
    a, b = load_global(a_dir), load_global(b_dir)
    assert a.keys() == b.keys(), "tensor sets differ: only in %s: %s; only in %s: %s" % (
        a_dir, sorted(set(a) - set(b))[:5], b_dir, sorted(set(b) - set(a))[:5])
    worst = ("", 0.0)
    num = den = 0.0
    for name in a:
        x, y = a[name], b[name]
        if x.shape != y.shape:  # vocabulary padding depends on tp: extra rows must be zero
            r = min(x.shape[0], y.shape[0])
            assert x.shape[1] == y.shape[1] and not x[r:].any() and not y[r:].any(), name
            x, y = x[:r], y[:r]
        diff = (x.astype(np.float64) - y.astype(np.float64))
        num += float((diff ** 2).sum())
        den += float((y.astype(np.float64) ** 2).sum())
        d = np.abs(diff).max() / max(np.abs(y).max(), 1e-30)
        if d > worst[1]:
            worst = (name, d)
    rel = (num / den) ** 0.5
    ok = rel <= tol
    print("%s parameters (%d tensors, shards gathered): relative L2 difference %.3e (tolerance %g); "
          "worst tensor %s max-abs rel %.3e" % ("agree:" if ok else "DIFFER:", len(a), rel, tol, worst[0], worst[1]))
    return ok


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        sys.exit(0 if compare(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5) else 1)
    print(__doc__)
    sys.exit(2)
