#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py OUT — seed corpora (valid inputs of every reader
the fuzz targets drive) and dictionaries for tests/fuzz/run_fuzz.sh, written
to OUT/corpus_TARGET/ and OUT/TARGET.dict. Deterministic; stdlib only."""
import glob, json, os, re, struct, sys, zlib

out = sys.argv[1]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def corpus(t):
    d = os.path.join(out, "corpus_" + t)
    os.makedirs(d, exist_ok=True)
    return d


def put(t, name, data):
    with open(os.path.join(corpus(t), name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def dictionary(t, words):
    with open(os.path.join(out, t + ".dict"), "w") as f:
        for w in sorted(set(words)):
            f.write('"%s"\n' % "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "\\x%02x" % ord(c) for c in w))


# ---- mmidx (first byte = .bin size / 64) and jsonl ----
lens = [3, 5, 1, 7]
ptrs, p = [], 0
for l in lens:
    ptrs.append(p)
    p += 2 * l
idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lens), len(lens) + 1)
idx += struct.pack(f"<{len(lens)}i", *lens) + struct.pack(f"<{len(lens)}q", *ptrs)
idx += struct.pack(f"<{len(lens)+1}q", *range(len(lens) + 1))
put("mmidx", "seed1", bytes([1]) + idx)
put("jsonl", "seed1", '{"text": "Hello, world! It\'s 2024 \\u00e9\\ud83d\\ude00"}\n{"text": ""}\n{"x": 1}\nnot json '.encode() + b"\xff\xfe\n")

# ---- dckpt: index.bin (checkpoint/dist_checkpoint_internal.h) + shard bytes ----
BLOCK, HDR = 1 << 20, 32


def dtype_codes():
    src = open(os.path.join(root, "core/dtype.h")).read()
    m = re.search(r"typedef enum\s*{([^}]*)}\s*mt_dtype", src)
    names = [x.strip().split("=")[0].strip() for x in m.group(1).split(",") if x.strip()]
    return {n: i for i, n in enumerate(names)}


codes = dtype_codes()
ES = {codes["MT_F32"]: 4, codes["MT_BF16"]: 2, codes["MT_I64"]: 8}


def dckpt_seed(tensors, pieces, flags=7, files=(0,)):
    """tensors: [(name, rows, cols, dtype)]; pieces: [(tensor, r0, c0, nr, nc, lo, hi)], all in
    file 0 (the others empty)."""
    shard = b""
    prec = []
    for (ti, r0, c0, nr, nc, lo, hi) in pieces:
        es = ES[tensors[ti][3]]
        nb = (hi - lo) * es
        while len(shard) % 8:
            shard += b"\0"
        off = HDR + len(shard)
        data = bytes((i * 37 + 11) & 0xFF for i in range(nb))
        shard += data
        crcs = [zlib.crc32(data[b:b + BLOCK]) for b in range(0, nb, BLOCK)]
        prec.append(struct.pack("<iiqq6qi", ti, 0, off, nb, r0, c0, nr, nc, lo, hi, len(crcs)) +
                    struct.pack(f"<{len(crcs)}I", *crcs))
    b = b"MTDCKIDX" + struct.pack("<IIIIQ", 1, len(tensors), len(files), len(pieces), BLOCK)
    for i, r in enumerate(files):
        b += struct.pack("<iq", r, HDR + len(shard) if i == 0 else HDR)
    for (name, rows, cols, dt) in tensors:
        nm = name.encode()
        b += struct.pack("<I", len(nm)) + nm + struct.pack("<qqI", rows, cols, dt)
    b += b"".join(prec)
    b += struct.pack("<I", zlib.crc32(b))
    return bytes([flags]) + struct.pack("<I", len(b)) + b + shard


F32, BF16, I64 = codes["MT_F32"], codes["MT_BF16"], codes["MT_I64"]
put("dckpt", "two_tensors", dckpt_seed(
    [("decoder.layers.0.self_attention.linear_qkv.weight", 4, 6, F32), ("embedding.word_embeddings.weight", 1, 5, BF16)],
    [(0, 0, 0, 2, 6, 0, 12), (0, 2, 0, 2, 6, 0, 12), (1, 0, 0, 1, 5, 0, 5)]))
put("dckpt", "tp_columns_zero", dckpt_seed(
    [("output_layer.weight", 3, 4, BF16), ("decoder.layers.0.mlp.router.expert_bias", 1, 3, I64)],
    [(0, 0, 0, 3, 2, 0, 4), (0, 0, 0, 3, 2, 4, 6), (0, 0, 2, 3, 2, 0, 6), (1, 0, 0, 1, 3, 0, 3)], files=(0, 1)))
put("dckpt", "empty_tensor", dckpt_seed([("x", 0, 3, F32)], [], flags=1))
put("dckpt", "convert", dckpt_seed([("optimizer.state.exp_avg.w", 2, 2, F32)], [(0, 0, 0, 2, 2, 0, 4)], flags=6))

# real files of `megatrain --config tests/configs/gpt-test.json` after 1 iteration
# (tests/fuzz/seeds/: index.bin with flags 1 and no shard bytes, metadata.json)
seeds = os.path.join(root, "tests", "fuzz", "seeds")
put("dckpt", "gpt_test_index", open(os.path.join(seeds, "dckpt_gpt_test_index"), "rb").read())
put("dckpt_meta", "gpt_test", open(os.path.join(seeds, "dckpt_meta_gpt_test.json"), "rb").read())

# ---- dckpt_meta ----
meta = {"format": "megatrain-dist-v2", "iteration": 20, "consumed_samples": 160, "step": 20,
        "skipped_iters": 0, "nan_iters": 0, "seed": 1234, "vocab_size": 50257, "has_optimizer": True,
        "files": ["shard_00000.bin", "shard_00001.bin"],
        "tensors": [{"name": "embedding.word_embeddings.weight", "shape": [50257, 64], "dtype": "fp32"}],
        "config": {"model": {"num_layers": 2, "hidden_size": 64}, "training": {"seed": 1234}}}
put("dckpt_meta", "meta", json.dumps(meta, indent=2))
meta2 = dict(meta, seed="18446744073709551615", has_optimizer=False, config=None)
put("dckpt_meta", "meta_bigseed", json.dumps(meta2))
dictionary("dckpt_meta", list(meta.keys()) + ["megatrain-dist-v2", "true", "false", "null", "1e308", "-0", "9007199254740993"])
dictionary("dckpt", ["MTDCKIDX", "MTDCKSHD", "\x01\x00\x00\x00", "\x00\x00\x10\x00\x00\x00\x00\x00", "\xff\xff\xff\x7f"])

# ---- config: world selector byte + JSON [\0 override]* ----
keys = set()
tbl = "".join(open(f).read() for f in [os.path.join(root, "config/config_table.c")] +
              sorted(glob.glob(os.path.join(root, "config", "keys_*.inc"))))
for m in re.finditer(r'\{S_[A-Z]+, "([a-z0-9_]+)"', tbl):
    keys.add(m.group(1))
for sec in ["model", "parallel", "training", "data", "checkpoint", "logging"]:
    keys.add(sec)
for i, f in enumerate(sorted(glob.glob(os.path.join(root, "configs", "*.json")))):
    put("config", "cfg_%s" % os.path.basename(f), bytes([i % 4]) + open(f, "rb").read())
    put("config", "cfg_set_%s" % os.path.basename(f), bytes([1]) + open(f, "rb").read() +
        b"\0parallel.tensor_model_parallel_size=2\0training.lr=3e-4")
dictionary("config", list(keys) + ["true", "false", "null", "cpu", "cuda", "bf16", "fp32", "=", "."])

# ---- hw ----
hw_keys = set()
for f in sorted(glob.glob(os.path.join(root, "configs", "hardware", "*.json"))):
    txt = open(f, "rb").read()
    put("hw", os.path.basename(f), txt)
    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                hw_keys.add(k)
                walk(v)
    walk(json.loads(txt))
dictionary("hw", hw_keys)

# ---- safetensors ----
def st_file(tensors, meta=None):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for name, dt, shape, es in tensors:
        n = es
        for d in shape:
            n *= d
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 7) & 0xFF for i in range(n))
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


f1 = st_file([("model.embed_tokens.weight", "BF16", [4, 3], 2), ("lm_head.weight", "F32", [2, 3], 4)], {"format": "pt"})
f2 = st_file([("model.norm.weight", "F32", [3], 4), ("scalar", "I64", [], 8), ("empty", "F16", [0, 5], 2)])
put("safetensors", "one", b"\0" + f1)
put("safetensors", "two", b"\0" + f2)
ij = json.dumps({"metadata": {"total_size": 100}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors", "scalar": "model-00002-of-00002.safetensors",
    "empty": "model-00002-of-00002.safetensors"}}).encode()
put("safetensors", "dir", b"\1" + struct.pack("<H", len(ij)) + ij + struct.pack("<I", len(f1)) + f1 + f2)
dictionary("safetensors", ["__metadata__", "dtype", "shape", "data_offsets", "F32", "BF16", "F16", "I64", "U8",
                           "BOOL", "F8_E4M3", "F8_E5M2", "F64", "weight_map", "metadata", "total_size",
                           "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])

# ---- legacy: mp_rank_01/model_optim_rng.bin of the model in fuzz_legacy.c ----
def legacy(bf16, it=7):
    params = [("decoder.layers.0.mlp.linear_fc1.weight", [8, 6, 4, 6, 4, 0], 24),
              ("decoder.final_layernorm.weight", [1, 6, 1, 6, 0, 0], 6)]
    kinds = 4 if bf16 else 3
    b = b"MTCKPT\0\1" + struct.pack("<II", 1, len(params) * kinds + 1)
    b += struct.pack("<qqqqqQ", it, 56, it, 0, 1, 1234)
    for kind in range(kinds):
        for name, shape, numel in params:
            dt = codes["MT_BF16"] if (kind == 0 and bf16) else codes["MT_F32"]
            el = 2 if (kind == 0 and bf16) else 4
            nm = name.encode()
            b += struct.pack("<I", len(nm)) + nm + struct.pack("<II6qQ", kind, dt, *shape, numel * el)
            b += bytes((i * 13 + kind) & 0x3F for i in range(numel * el))
    nm = b"decoder.layers.0.mlp.router.expert_bias"
    b += struct.pack("<I", len(nm)) + nm + struct.pack("<II6qQ", 4, codes["MT_F32"], 3, 1, 3, 1, 0, 0, 12) + bytes(12)
    b += struct.pack("<I", zlib.crc32(b))
    return b


put("legacy", "fp32", b"\1" + legacy(False))
put("legacy", "bf16", b"\3" + legacy(True))
dictionary("legacy", ["MTCKPT\x00\x01", "decoder.layers.0.mlp.linear_fc1.weight", "decoder.final_layernorm.weight",
                      "decoder.layers.0.mlp.router.expert_bias", "\x04\x00\x00\x00"])
