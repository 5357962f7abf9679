#!/usr/bin/python3
"""Make a broken copy of a safetensors file for the bad-input tests
(tests/integration/test_hf_convert.sh). Stdlib only.

  st_edit.py MODE SRC DST [TENSOR]
    truncate   the first 100 bytes only (header cut short)
    overlap    TENSOR's data_offsets set to those of the tensor before it
               (same size, so only the overlap is wrong)
    dtype      TENSOR's dtype "F32" -> "F31"
    missing    TENSOR removed (header and data)
    transpose  TENSOR's shape reversed (same bytes)
    extra      a tensor "TENSOR" of 2 floats added
    strip      the prefix TENSOR removed from every name (GPT2Model's names)
    f16        every F32 tensor stored as F16 (round to nearest, numpy)
    copy       a tensor "lm_head.weight" equal to TENSOR added (tied models'
               files that keep the head); "copy-" adds it with one value changed
"""
import json
import struct
import sys


def load(p):
    raw = open(p, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def save(p, h, data):
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + data)


def rebuild(h, data, drop=None, add=None, conv=None):
    """the same tensors with fresh contiguous offsets; conv(entry, bytes) ->
    (entry, bytes) may change a tensor"""
    out, buf = {}, b""
    for k, e in h.items():
        if k == "__metadata__":
            out[k] = e
            continue
        if k == drop:
            continue
        b, en = e["data_offsets"]
        e2, raw = conv(e, data[b:en]) if conv else (e, data[b:en])
        out[k] = dict(e2, data_offsets=[len(buf), len(buf) + len(raw)])
        buf += raw
    if add:
        out[add] = {"dtype": "F32", "shape": [2], "data_offsets": [len(buf), len(buf) + 8]}
        buf += struct.pack("<2f", 1, 2)
    return out, buf


def main():
    mode, src, dst = sys.argv[1:4]
    t = sys.argv[4] if len(sys.argv) > 4 else None
    if mode == "truncate":
        open(dst, "wb").write(open(src, "rb").read()[:100])
        return
    h, data = load(src)
    if mode == "overlap":
        names = [k for k in h if k != "__metadata__"]
        names.sort(key=lambda k: h[k]["data_offsets"][0])
        i = names.index(t)
        prev = h[names[i - 1]]
        assert prev["data_offsets"][1] - prev["data_offsets"][0] == \
            h[t]["data_offsets"][1] - h[t]["data_offsets"][0], "pick a tensor of the previous one's size"
        h[t]["data_offsets"] = list(prev["data_offsets"])
    elif mode == "dtype":
        h[t]["dtype"] = "F31"
    elif mode == "missing":
        h, data = rebuild(h, data, drop=t)
    elif mode == "transpose":
        h[t]["shape"] = h[t]["shape"][::-1]
    elif mode == "extra":
        h, data = rebuild(h, data, add=t)
    elif mode == "f16":
        import numpy as np

        def f16(e, raw):
            if e["dtype"] != "F32":
                return e, raw
            return dict(e, dtype="F16"), np.frombuffer(raw, "<f4").astype("<f2").tobytes()
        h, data = rebuild(h, data, conv=f16)
    elif mode in ("copy", "copy-"):
        b, en = h[t]["data_offsets"]
        raw = bytearray(data[b:en])
        if mode == "copy-":
            raw[0] ^= 1
        h["lm_head.weight"] = dict(h[t], data_offsets=[len(data), len(data) + len(raw)])
        data = data + bytes(raw)
    elif mode == "strip":
        h = {k[len(t):] if k.startswith(t) else k: e for k, e in h.items()}
    else:
        sys.exit(__doc__)
    save(dst, h, data)


if __name__ == "__main__":
    main()
