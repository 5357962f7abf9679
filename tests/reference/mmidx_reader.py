#!/usr/bin/python3
"""Independent reader/writer of Megatron-LM's MMIDIDX indexed dataset
(megatron/core/datasets/indexed_dataset.py layout), numpy only.

.idx: b"MMIDIDX\\x00\\x00", <Q version=1, <B dtype code, <Q sequence count,
<Q document count, int32 sequence_lengths, int64 sequence_pointers (bytes),
int64 document_indices. .bin: tokens in that dtype.

Usage:
  mmidx_reader.py read PREFIX                 print a summary
  mmidx_reader.py write PREFIX DTYPE          write a test dataset the way
                                              Megatron's builder does
  mmidx_reader.py compare PREFIX DUMP TOKENS  compare with tests/tools/mmidx_dump
  mmidx_reader.py check-preprocessed PREFIX EOD   layout of a preprocess output
"""
import struct
import sys

import numpy as np

HDR = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
          6: np.float64, 7: np.float32, 8: np.uint16}
CODES = {np.dtype(v): k for k, v in DTYPES.items()}


def read_index(prefix):
    with open(prefix + ".idx", "rb") as f:
        assert f.read(9) == HDR, "bad magic"
        (version,) = struct.unpack("<Q", f.read(8))
        assert version == 1, version
        (code,) = struct.unpack("<B", f.read(1))
        (nseq,) = struct.unpack("<Q", f.read(8))
        (ndoc,) = struct.unpack("<Q", f.read(8))
        off = f.tell()
    buf = np.memmap(prefix + ".idx", mode="r", order="C")
    lens = np.frombuffer(buf, dtype=np.int32, count=nseq, offset=off)
    ptrs = np.frombuffer(buf, dtype=np.int64, count=nseq, offset=off + lens.nbytes)
    docs = np.frombuffer(buf, dtype=np.int64, count=ndoc, offset=off + lens.nbytes + ptrs.nbytes)
    assert off + lens.nbytes + ptrs.nbytes + docs.nbytes == buf.size, "idx size"
    dtype = DTYPES[code]
    bin_ = np.memmap(prefix + ".bin", mode="r", order="C")
    seqs = [np.frombuffer(bin_, dtype=dtype, count=int(l), offset=int(p)) for l, p in zip(lens, ptrs)]
    return dict(code=code, dtype=dtype, lens=lens, ptrs=ptrs, docs=docs, seqs=seqs)


def write_dataset(prefix, dtype, documents):
    """documents: list of documents; each a list of sequences (lists of ids)."""
    dtype = np.dtype(dtype)
    lens, docs = [], [0]
    with open(prefix + ".bin", "wb") as f:
        for doc in documents:
            for seq in doc:
                f.write(np.array(seq, dtype=dtype).tobytes(order="C"))
                lens.append(len(seq))
            docs.append(len(lens))
    ptrs = np.zeros(len(lens), dtype=np.int64)
    if lens:
        ptrs[1:] = np.cumsum(np.array(lens[:-1], dtype=np.int64)) * dtype.itemsize
    with open(prefix + ".idx", "wb") as f:
        f.write(HDR)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[dtype]))
        f.write(struct.pack("<Q", len(lens)))
        f.write(struct.pack("<Q", len(docs)))
        f.write(np.array(lens, dtype=np.int32).tobytes(order="C"))
        f.write(ptrs.tobytes(order="C"))
        f.write(np.array(docs, dtype=np.int64).tobytes(order="C"))


def compare(prefix, dump_txt, tokens_file):
    ix = read_index(prefix)
    lines = open(dump_txt).read().split("\n")
    head = lines[0].split()
    assert int(head[3]) == CODES[np.dtype(ix["dtype"])], "dtype"
    assert int(head[5]) == len(ix["lens"]), "sequence count"
    assert int(head[7]) == len(ix["docs"]), "document count"
    lp = [l.split() for l in lines[1:] if l.startswith("len ")]
    dl = [int(l.split()[1]) for l in lines[1:] if l.startswith("doc ")]
    assert [int(x[1]) for x in lp] == ix["lens"].tolist(), "sizes"
    assert [int(x[3]) for x in lp] == ix["ptrs"].tolist(), "pointers"
    assert dl == ix["docs"].tolist(), "document indices"
    toks = np.fromfile(tokens_file, dtype=np.int32)
    ref = np.concatenate([s.astype(np.int64) for s in ix["seqs"]]) if ix["seqs"] else np.zeros(0)
    assert toks.shape == ref.shape and (toks == ref).all(), "tokens"
    print(f"compare OK: {len(ix['lens'])} sequences, {len(ix['docs'])} document indices, "
          f"{toks.size} tokens")


def check_preprocessed(prefix, eod):
    ix = read_index(prefix)
    n = len(ix["lens"])
    isz = np.dtype(ix["dtype"]).itemsize
    assert ix["code"] == 8, "uint16 expected for GPT-2"
    expect_ptrs = np.concatenate([[0], np.cumsum(ix["lens"][:-1].astype(np.int64)) * isz])
    assert (ix["ptrs"] == expect_ptrs).all(), "pointers are not the byte cumsum"
    assert (ix["docs"] == np.arange(n + 1)).all(), "document_indices != 0..n"
    assert (ix["lens"] > 0).all(), "empty sequence"
    if eod >= 0:
        assert all(int(s[-1]) == eod for s in ix["seqs"]), "missing EOD"
    import os
    assert os.path.getsize(prefix + ".bin") == int(ix["lens"].sum()) * isz, ".bin size"
    print(f"check OK: {n} documents, {int(ix['lens'].sum())} tokens")


def main():
    cmd = sys.argv[1]
    if cmd == "read":
        ix = read_index(sys.argv[2])
        print(f"dtype {ix['dtype'].__name__} sequences {len(ix['lens'])} "
              f"documents {len(ix['docs']) - 1} tokens {int(ix['lens'].sum())}")
    elif cmd == "write":
        dtype = {"uint16": np.uint16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}[sys.argv[3]]
        rng = np.random.RandomState(0)
        hi = 250 if dtype == np.uint8 else 50000
        documents = []
        for d in range(40):
            nseq = 1 + d % 3  # several sequences per document, as with sentence splitting
            documents.append([rng.randint(0, hi, size=1 + rng.randint(0, 60)).tolist() for _ in range(nseq)])
        write_dataset(sys.argv[2], dtype, documents)
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "check-preprocessed":
        check_preprocessed(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
