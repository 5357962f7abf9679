"""Independent reader of megatrain's layout-free checkpoint ("megatrain-dist-v2",
checkpoint/dist_checkpoint.h; docs/checkpoint.md "Files"), written from the file
description only: struct + json + zlib + numpy.

API:
  load_checkpoint(path, names=None) -> (meta, tensors)
      path: a save directory (the iteration in latest_checkpointed_iteration.txt)
      or an iter_NNNNNNN directory. meta: metadata.json as a dict. tensors:
      {name: global numpy array [rows, cols]}: fp32 as float32, bf16 converted
      to float32, int64 as int64. names (optional): a predicate on the name
      choosing which tensors to read. Every piece read has its 1 MiB block
      CRC-32s verified; every tensor must be covered exactly (element count
      and a coverage mask).

  index.bin version 2 records the CRC-32 of metadata.json's bytes (checked);
  version 1 does not.

usage as a tool:
  /usr/bin/python3 tests/reference/dist_ckpt.py dump DIR
      one line per tensor: name, shape, dtype, L2 norm.
  /usr/bin/python3 tests/reference/dist_ckpt.py reseal ITER_DIR
      record the CRC-32 of ITER_DIR/metadata.json in ITER_DIR/index.bin (for
      tests that edit metadata.json on purpose).
"""
import json
import os
import signal
import struct
import sys
import zlib

import numpy as np

INDEX_MAGIC = b"MTDCKIDX"
SHARD_MAGIC = b"MTDCKSHD"
DTYPES = {0: "fp32", 1: "bf16", 3: "int64"}
ITEMSIZE = {0: 4, 1: 2, 3: 8}


class CheckpointError(Exception):
    pass


def iter_dir(path):
    """The iter_NNNNNNN directory of `path` (a save dir or an iter dir)."""
    if os.path.exists(os.path.join(path, "index.bin")):
        return path
    latest = os.path.join(path, "latest_checkpointed_iteration.txt")
    if not os.path.exists(latest):
        raise CheckpointError("%s: neither index.bin nor latest_checkpointed_iteration.txt" % path)
    it = int(open(latest).read().strip())
    return os.path.join(path, "iter_%07d" % it)


def read_index(path):
    data = open(path, "rb").read()
    if len(data) < 36 or data[:8] != INDEX_MAGIC:
        raise CheckpointError("%s: not a megatrain checkpoint index" % path)
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) & 0xFFFFFFFF != crc:
        raise CheckpointError("%s: checksum mismatch of the index" % path)
    version, nt, nf, npieces, block = struct.unpack_from("<IIIIQ", data, 8)
    if version not in (1, 2):
        raise CheckpointError("%s: index version %d, expected 1 or 2" % (path, version))
    end = len(data) - 4
    meta_crc = None
    if version == 2:  # u32 CRC-32 of metadata.json before the index's own CRC
        end -= 4
        (meta_crc,) = struct.unpack_from("<I", data, end)
    off = 32
    files = []
    for _ in range(nf):
        rank, nbytes = struct.unpack_from("<iq", data, off)
        off += 12
        files.append((rank, nbytes))
    tensors = []
    for _ in range(nt):
        (nl,) = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + nl].decode()
        off += nl
        rows, cols, dtype = struct.unpack_from("<qqI", data, off)
        off += 20
        if dtype not in DTYPES:
            raise CheckpointError("%s: tensor %s has unknown dtype %d" % (path, name, dtype))
        tensors.append({"name": name, "rows": rows, "cols": cols, "dtype": dtype, "pieces": []})
    for _ in range(npieces):
        t, f, offset, nbytes, r0, c0, nr, nc, lo, hi, nb = struct.unpack_from("<iiqq6qi", data, off)
        off += 4 + 4 + 8 + 8 + 48 + 4
        crcs = struct.unpack_from("<%dI" % nb, data, off)
        off += 4 * nb
        tensors[t]["pieces"].append(dict(file=f, offset=offset, nbytes=nbytes, r0=r0, c0=c0,
                                         nr=nr, nc=nc, lo=lo, hi=hi, crcs=crcs))
    if off != end:
        raise CheckpointError("%s: index is malformed (%d trailing bytes)" % (path, end - off))
    return files, tensors, block, meta_crc


def reseal(d):
    """Rewrite d/index.bin (version 2) with the CRC-32 of d/metadata.json."""
    path = os.path.join(d, "index.bin")
    data = bytearray(open(path, "rb").read())
    (version,) = struct.unpack_from("<I", data, 8)
    if version != 2:
        raise CheckpointError("%s: index version %d, reseal needs 2" % (path, version))
    meta = open(os.path.join(d, "metadata.json"), "rb").read()
    struct.pack_into("<I", data, len(data) - 8, zlib.crc32(meta) & 0xFFFFFFFF)
    struct.pack_into("<I", data, len(data) - 4, zlib.crc32(bytes(data[:-4])) & 0xFFFFFFFF)
    open(path, "wb").write(bytes(data))


def _decode(raw, dtype):
    if dtype == 0:
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if dtype == 1:
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, dtype="<i8").astype(np.int64)


def load_checkpoint(path, names=None):
    d = iter_dir(path)
    files, tensors, block, meta_crc = read_index(os.path.join(d, "index.bin"))
    meta_bytes = open(os.path.join(d, "metadata.json"), "rb").read()
    if meta_crc is not None and zlib.crc32(meta_bytes) & 0xFFFFFFFF != meta_crc:
        raise CheckpointError("%s: checksum mismatch of metadata.json" % d)
    meta = json.loads(meta_bytes)
    if meta.get("format") != "megatrain-dist-v2":
        raise CheckpointError("%s: format %r, expected megatrain-dist-v2" % (d, meta.get("format")))
    handles = {}
    out = {}
    for t in tensors:
        name = t["name"]
        if names is not None and not names(name):
            continue
        rows, cols, dt = t["rows"], t["cols"], t["dtype"]
        arr = np.zeros((rows, cols), dtype=np.int64 if dt == 3 else np.float32)
        seen = np.zeros((rows, cols), dtype=np.int8)
        for p in t["pieces"]:
            rank, fbytes = files[p["file"]]
            fpath = os.path.join(d, "shard_%05d.bin" % rank)
            if fpath not in handles:
                if not os.path.exists(fpath):
                    raise CheckpointError("%s (tensor %s) is missing" % (fpath, name))
                if os.path.getsize(fpath) < fbytes:
                    raise CheckpointError("%s is truncated (tensor %s)" % (fpath, name))
                handles[fpath] = open(fpath, "rb")
                if handles[fpath].read(8) != SHARD_MAGIC:
                    raise CheckpointError("%s: not a megatrain shard file" % fpath)
            fh = handles[fpath]
            fh.seek(p["offset"])
            raw = fh.read(p["nbytes"])
            if len(raw) != p["nbytes"]:
                raise CheckpointError("%s is truncated (tensor %s)" % (fpath, name))
            for i, crc in enumerate(p["crcs"]):
                if zlib.crc32(raw[i * block:(i + 1) * block]) & 0xFFFFFFFF != crc:
                    raise CheckpointError("%s: checksum mismatch in tensor %s (block %d)" % (fpath, name, i))
            vals = _decode(raw, dt)
            r0, c0, nr, nc, lo, hi = (p[k] for k in ("r0", "c0", "nr", "nc", "lo", "hi"))
            # box elements [lo, hi): a partial first row, whole rows, a partial last row
            k = lo
            while k < hi:
                i, j = divmod(k, nc)
                if j == 0 and hi - k >= nc:
                    m = (hi - k) // nc
                    arr[r0 + i:r0 + i + m, c0:c0 + nc] = vals[k - lo:k - lo + m * nc].reshape(m, nc)
                    seen[r0 + i:r0 + i + m, c0:c0 + nc] += 1
                    k += m * nc
                else:
                    e = min(hi, (i + 1) * nc)
                    arr[r0 + i, c0 + j:c0 + j + e - k] = vals[k - lo:e - lo]
                    seen[r0 + i, c0 + j:c0 + j + e - k] += 1
                    k = e
        if not (seen == 1).all():
            raise CheckpointError("%s: tensor %s is not covered exactly once by its pieces" % (d, name))
        out[name] = arr
    for fh in handles.values():
        fh.close()
    return meta, out


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `dump DIR | head` ends quietly
    if len(argv) == 3 and argv[1] == "dump":
        meta, tensors = load_checkpoint(argv[2])
        print("iteration %s consumed_samples %s step %s seed %s vocab_size %s has_optimizer %s" % (
            meta["iteration"], meta["consumed_samples"], meta["step"], meta["seed"],
            meta["vocab_size"], meta["has_optimizer"]))
        dtypes = {t["name"]: t["dtype"] for t in meta["tensors"]}
        for name, a in tensors.items():
            print("%-70s [%d, %d] %-5s norm %.9g" % (name, a.shape[0], a.shape[1], dtypes.get(name, "?"),
                                                      float(np.sqrt((a.astype(np.float64) ** 2).sum()))))
        return 0
    if len(argv) == 3 and argv[1] == "reseal":
        reseal(argv[2])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
