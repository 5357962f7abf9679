#!/usr/bin/env python3
"""tests/reference/megatron_order.py — run Megatron-core's own dataset code
(BlendedMegatronDatasetBuilder, GPTDataset, BlendedDataset and its C++
helpers) from a Megatron-LM checkout on .bin/.idx files and write the token
ids of the samples in tests/tools/gpt_samples.c's format:
    for train, valid, test: int64 n, then n samples of seq + 1 int32 ids.

Usage:
  megatron_order.py --megatron DIR --seq N --seed S --split "969,30,1" \
      --num-samples T V X [--first-train K] [--surplus F] [--no-extra-token] \
      --out FILE PREFIX... | W1 PREFIX1 W2 PREFIX2 ...

DIR is a Megatron-LM checkout whose megatron/core/datasets holds a built
helpers_cpp extension (make -C DIR/megatron/core/datasets, pybind11). The
modules of megatron.core that the dataset code imports but does not need here
(logging utilities, the tokenizer base class, object storage, safe loading)
are replaced by small stand-ins below; the dataset code itself runs unchanged.
No Megatron code is part of this file. Needs numpy and torch
(/usr/bin/python3 with python3-numpy, python3-torch).
"""
import argparse
import logging
import os
import struct
import sys
import tempfile
import types

import numpy


def install_stubs(megatron_dir):
    """Packages megatron and megatron.core point at the checkout (their
    __init__ files, which import the whole framework, are skipped); the
    helper modules the dataset code imports get minimal stand-ins."""
    def package(name, path):
        m = types.ModuleType(name)
        m.__path__ = [path]
        sys.modules[name] = m
        return m

    package("megatron", os.path.join(megatron_dir, "megatron"))
    core = package("megatron.core", os.path.join(megatron_dir, "megatron", "core"))

    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda logger, level, *args, **kw: logger.log(level, *args, **kw)
    sys.modules["megatron.core.utils"] = utils
    core.utils = utils

    tok = types.ModuleType("megatron.core.tokenizers")

    class MegatronTokenizerBase:  # only a type annotation in the dataset code
        pass

    tok.MegatronTokenizerBase = MegatronTokenizerBase
    sys.modules["megatron.core.tokenizers"] = tok

    sg = types.ModuleType("megatron.core.safe_globals")
    sg.safe_numpy_load = numpy.load
    sys.modules["megatron.core.safe_globals"] = sg

    msc = types.ModuleType("megatron.core.msc_utils")

    class MultiStorageClientFeature:
        @staticmethod
        def is_enabled():
            return False

    class _Open:
        open = staticmethod(open)

    msc.MultiStorageClientFeature = MultiStorageClientFeature
    msc.maybe_msc = _Open
    sys.modules["megatron.core.msc_utils"] = msc


class StubTokenizer:
    """What GPTDatasetConfig and MegatronDataset read from a tokenizer."""
    vocab_size = None  # token dtype taken from the .idx file
    unique_identifiers = {"class": "StubTokenizer"}  # part of the cache key
    eod = 0

    @property
    def pad(self):
        raise NotImplementedError  # -> Megatron's _PAD_TOKEN_ID (-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
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
    logging.basicConfig(level=logging.WARNING)
    install_stubs(os.path.abspath(a.megatron))
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    blend = get_blend_from_list(a.paths)  # Megatron's --data-path parsing
    with tempfile.TemporaryDirectory() as cache:
        cfg = GPTDatasetConfig(
            random_seed=a.seed, sequence_length=a.seq, blend=blend, split=a.split,
            path_to_cache=cache, tokenizer=StubTokenizer(), reset_position_ids=False,
            reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False,
            mid_level_dataset_surplus=a.surplus,
            add_extra_token_to_sequence=not a.no_extra_token)
        sizes = [n if n > 0 else None for n in a.num_samples]
        sizes = [n for n in a.num_samples]
        datasets = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, cfg).build()
        with open(a.out, "wb") as f:
            for s, ds in enumerate(datasets):
                n = len(ds) if ds is not None and a.num_samples[s] > 0 else 0
                if s == 0 and 0 <= a.first_train < n:
                    n = a.first_train
                f.write(struct.pack("<q", n))
                for i in range(n):
                    item = ds[i]
                    if a.no_extra_token:
                        text = item["tokens"].numpy()
                    else:  # tokens = text[:-1], labels = text[1:]
                        text = numpy.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]])
                    f.write(text.astype("<i4").tobytes())
                print("%s: %d samples" % (("train", "valid", "test")[s], n))


if __name__ == "__main__":
    main()
